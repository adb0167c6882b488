// Fair shares in the SQLite claim (docs/limits.md): PostgreSQL's rule
// (postgres/fair.ts), start-time fair queuing with the turns kept by task,
// so that a claim reads the next turns from an index, at a cost that does
// not grow with the number of groups, and a restart keeps them.
//
// Before each claim, `tagTurns` gives the due shared tasks their turns
// (`fair_tag`): its group's next turn, or the queue's virtual time if that
// is later (a group with nothing due saves no turns); the group's next turn
// then moves on by 1 / weight. Tasks that come due together take their
// group's turns by priority, then due order. Once a queue has shares, its
// tasks without one take turns as one group, ''. The claim (claim.ts,
// limits.ts placeTurns) takes a queue's tasks by turn within a priority, in
// the places due order gives them beside the rest, clears the turns it
// took and moves the queue's virtual time up to the latest of them. A task
// that goes back to waiting gets a new turn when it is due again (the
// trigger of schema version 10 clears a turn on any other change).
import { PLAIN, PLAIN_TASKS, plainLevels, UNTAGGED_TASKS } from './claim.js';
import type { Prepare } from './driver.js';

/** How many due tasks one tagging turns at most (in due order); the rest wait for the next claim's. */
const TAG_BATCH = 1_000;

const FAIR_SQL = {
  /** Due shared tasks without a turn (no key: those keep their key's order), in due order. */
  dueShared: `SELECT t.id, t.queue, t.fair_group AS grp, t.fair_weight AS weight, t.priority, t.run_at FROM ${UNTAGGED_TASKS}
    AND t.run_at <= ? ORDER BY t.run_at, t.id LIMIT ?`,
  /** A queue with shares' due plain tasks of priority @p (the group ''), in due order. */
  dueUnshared: `SELECT t.id, t.queue, '' AS grp, 1 AS weight, t.priority, t.run_at FROM ${PLAIN_TASKS}
    WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now ORDER BY t.run_at, t.id LIMIT @limit`,
  queues: `SELECT queue, virtual FROM taskheap_fair_queues`,
  register: `INSERT INTO taskheap_fair_queues (queue) VALUES (?) ON CONFLICT (queue) DO NOTHING`,
  nextTurn: `SELECT next FROM taskheap_fair_groups WHERE queue = ? AND grp = ?`,
  moveTurn: `INSERT INTO taskheap_fair_groups (queue, grp, next) VALUES (@queue, @grp, @next)
    ON CONFLICT (queue, grp) DO UPDATE SET next = excluded.next`,
  tag: `UPDATE taskheap_tasks SET fair_tag = ? WHERE id = ?`,
  /** Forgets the groups whose next turn the virtual time has passed: they would start from it anyway. */
  pruneGroups: `DELETE FROM taskheap_fair_groups
    WHERE next <= (SELECT virtual FROM taskheap_fair_queues AS f WHERE f.queue = taskheap_fair_groups.queue)`,
} as const;

/** A due task to give a turn. */
interface DueRow {
  id: number;
  queue: string;
  grp: string;
  weight: number;
  priority: number;
  run_at: number;
}

/** Gives the tasks due at `now` their turns (up to TAG_BATCH of each kind), in the claim's transaction. @internal */
export function tagTurns(prepare: Prepare, now: number): void {
  const shared = prepare(FAIR_SQL.dueShared).all(now, TAG_BATCH) as DueRow[];
  const register = prepare(FAIR_SQL.register);
  for (const row of shared) register.run(row.queue);
  const queues = prepare(FAIR_SQL.queues).all() as { queue: string; virtual: number }[];
  if (queues.length === 0) return;
  const due = shared.concat(unsharedDue(prepare, now, queues));
  if (due.length === 0) return;
  const groups = new Map<string, DueRow[]>();
  for (const row of due) {
    const id = `${row.queue}\u0000${row.grp}`;
    const group = groups.get(id);
    if (group === undefined) groups.set(id, [row]);
    else group.push(row);
  }
  const virtual = new Map(queues.map((q) => [q.queue, q.virtual]));
  const nextTurn = prepare(FAIR_SQL.nextTurn);
  const tag = prepare(FAIR_SQL.tag);
  for (const rows of groups.values()) {
    const { queue, grp } = rows[0]!;
    const stored = nextTurn.get(queue, grp) as { next: number } | undefined;
    let next = Math.max(stored?.next ?? 0, virtual.get(queue) ?? 0);
    rows.sort((a, b) => b.priority - a.priority || a.run_at - b.run_at || a.id - b.id);
    for (const row of rows) {
      tag.run(next, row.id);
      next += 1 / row.weight;
    }
    prepare(FAIR_SQL.moveTurn).run({ queue, grp, next });
  }
}

/** The due plain tasks of the queues with shares, level by level (TAG_BATCH at most of each). */
function unsharedDue(prepare: Prepare, now: number, queues: readonly { queue: string }[]): DueRow[] {
  const read = prepare(FAIR_SQL.dueUnshared);
  const rows: DueRow[] = [];
  for (const { queue } of queues) {
    let left = TAG_BATCH;
    for (const p of plainLevels(prepare, queue)) {
      if (left <= 0) break;
      const found = read.all({ queue, p, now, limit: left }) as DueRow[];
      rows.push(...found);
      left -= found.length;
    }
  }
  return rows;
}

/** Forgets the groups whose next turn the virtual time has passed (retention, with the limit rows'). @internal */
export function pruneGroups(prepare: Prepare): void {
  prepare(FAIR_SQL.pruneGroups).run();
}
