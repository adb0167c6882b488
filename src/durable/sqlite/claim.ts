// The SQLite claim, in the store's one transaction (after jobs.ts has
// turned due recurring jobs into occurrences, and fair.ts has given due
// shared tasks their turns): the candidates (expired leases of another
// owner taken over, the due plain tasks of open queues walked queue by
// queue and level by level, the shared tasks of open queues by turn, the
// keyed tasks limits.ts finds from the limit rows with room) are decided by
// limits.ts and claimed, a task that expired too often failed instead; and
// `nextDue`, when the next claim may find work (tasks that cannot start do
// not count).
import type { Prepare } from './driver.js';
import { decide, globalRefill, keyedCandidates, keyedDue, letGo, queueRefill, queueRooms, type Candidate } from './limits.js';
import type { ClaimParams, NextDueParams } from '../store.js';
import type { ClaimRow } from '../rows.js';

/**
 * Plain waiting tasks: no concurrency group, no rate group (keyed ones are
 * found from their limit rows, limits.ts), no fair share and no turn (those
 * are read by turn, fair.ts): what the plain index holds.
 */
export const PLAIN = `t.state = 'waiting' AND t.serial IS NULL AND t.rate_key IS NULL AND t.fair_group IS NULL AND t.fair_tag IS NULL`;

/**
 * The task table as \`t\`, read through the plain index. Named: SQLite's
 * planner, without statistics, prefers an index whose first column is an
 * equality (state) over a partial one, and then walks every shared or keyed
 * waiting task of a queue to find a plain one (11 ms a claim behind a flood
 * of 10,000 shared tasks).
 */
export const PLAIN_TASKS = 'taskheap_tasks AS t INDEXED BY taskheap_tasks_plain';

/** Shared tasks without a key that wait for a turn (fair.ts), read through their index as \`t\` (named, as PLAIN_TASKS is). */
export const UNTAGGED_TASKS = `taskheap_tasks AS t INDEXED BY taskheap_tasks_fair_due
  WHERE t.state = 'waiting' AND t.fair_group IS NOT NULL AND t.fair_tag IS NULL AND t.serial IS NULL AND t.rate_key IS NULL`;

/** Tasks with a turn, read through their index as \`t\`. */
const TURN_TASKS = `taskheap_tasks AS t INDEXED BY taskheap_tasks_fair_turns WHERE t.state = 'waiting' AND t.fair_tag IS NOT NULL`;

/** The statements of the claim and of next-due. */
const CLAIM_SQL = {
  /**
   * Named queues: the first queue with plain waiting tasks, then the next
   * after ? (one probe each of the queue-leading plain index), and one
   * queue's priority levels: the claim walks open queues only, level by level.
   */
  firstQueue: `SELECT MIN(queue) AS q FROM ${PLAIN_TASKS} WHERE ${PLAIN}`,
  queueAfter: `SELECT MIN(queue) AS q FROM ${PLAIN_TASKS} WHERE ${PLAIN} AND queue > ?`,
  queueTopLevel: `SELECT MAX(priority) AS p FROM ${PLAIN_TASKS} WHERE ${PLAIN} AND queue = ?`,
  queueLevelBelow: `SELECT MAX(priority) AS p FROM ${PLAIN_TASKS} WHERE ${PLAIN} AND queue = ? AND priority < ?`,
  /** Due plain waiting tasks of queue @queue and priority @p, in due order. */
  dueWaiting: `SELECT t.id, t.run_at, t.queue FROM ${PLAIN_TASKS}
    WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now ORDER BY t.run_at, t.id LIMIT @limit`,
  /** Only tasks whose handler is among the names of a JSON array: the ones this process has defined. */
  dueWaitingNamed: `SELECT t.id, t.run_at, t.queue FROM ${PLAIN_TASKS}
    WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT @limit`,
  /** The queues with shares (fair.ts), and each one's first @limit tasks with a turn, by priority (highest first), then turn. */
  fairQueues: `SELECT queue FROM taskheap_fair_queues`,
  byTurn: `SELECT t.id, t.run_at, t.queue, t.priority, t.fair_tag FROM ${TURN_TASKS} AND t.queue = @queue
      AND (@names IS NULL OR t.name IN (SELECT value FROM json_each(@names))) ORDER BY t.priority DESC, t.fair_tag, t.id LIMIT @limit`,
  /** A queue's virtual time moves up to the latest turn started. */
  turnStarted: `UPDATE taskheap_fair_queues SET virtual = max(virtual, ?) WHERE queue = ?`,
  /** The first shared task due without a turn (the next claim gives it one), and whether queue ? has a task with a turn (`nextDue`). */
  firstUntagged: `SELECT t.run_at FROM ${UNTAGGED_TASKS} ORDER BY t.run_at, t.id LIMIT 1`,
  hasTurn: `SELECT 1 FROM ${TURN_TASKS} AND t.queue = ? LIMIT 1`,
  /** The first plain waiting task of queue @queue and priority @p (`nextDue`; keyed ones: limits.ts). */
  firstWaiting: `SELECT t.run_at FROM ${PLAIN_TASKS} WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    ORDER BY t.run_at, t.id LIMIT 1`,
  firstWaitingNamed: `SELECT t.run_at FROM ${PLAIN_TASKS} WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT 1`,
  /**
   * Expired leases of another owner. One store owns the file (it holds the
   * lock), and recover() hands back a dead owner's work at start-up, so this
   * finds nothing in normal use; our own expired leases (a handler blocking
   * the event loop) are never taken from ourselves: this process is alive.
   */
  dueExpired: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    ORDER BY run_at, id LIMIT ?`,
  dueExpiredNamed: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    AND name IN (SELECT value FROM json_each(?)) ORDER BY run_at, id LIMIT ?`,
  /**
   * A claim; `prefetched` for a task claimed beyond the free workers (until
   * it starts: renewMark). An expired lease taken over counts one expiry if
   * its task had started; one that never started is neither an attempt nor
   * an expiry.
   */
  claimOne: `UPDATE taskheap_tasks SET expiries = expiries + (state = 'running' AND NOT prefetched),
    attempts = attempts + (state = 'waiting' OR NOT prefetched), state = 'running', locked_by = ?, locked_until = ?,
    started_at = ?, prefetched = ?, fair_tag = NULL, updated_at = ? WHERE id = ? RETURNING *`,
  /** An expired task past the limit of expiries: failed instead of claimed. */
  failExpired: `UPDATE taskheap_tasks SET state = 'failed', expiries = expiries + 1, last_error = ?, locked_by = NULL, locked_until = NULL,
    updated_at = ? WHERE id = ? RETURNING *, 0 AS started, expiries AS failed_after`,
  /** The earliest expiring lease or scheduled job; waiting tasks are looked up level by level (firstWaiting). */
  nextDue: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running'
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
  nextDueNamed: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running' AND name IN (SELECT value FROM json_each(?))
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
} as const;

/** How the claim treats expired leases: failed with `text` once `max` have expired. @internal */
export interface Expiries {
  max: number;
  text: string;
}

/** What SQLite returns for an expired lease. */
interface ExpiredRow {
  id: number;
  run_at: number;
  expiries: number;
  /** Its claim had started it (a prefetched task that never started has not). */
  started: number;
  priority: number;
  serial: string | null;
  rate_key: string | null;
  queue: string;
}

/** Claims the tasks that may start now (see limits.ts for the decision, fair.ts for the turns of fair shares); the rows claimed. @internal */
export function claimDue(prepare: Prepare, ask: ClaimParams, expiries: Expiries): ClaimRow[] {
  const { owner, now, lease, limit, names } = ask;
  const named = names === undefined ? undefined : JSON.stringify(names);
  const queues = queueRooms(prepare, ask.rooms, now);
  const room = queues.room;
  const shared = fairQueues(prepare);
  // Separate selects, each walking the due index, beat one OR that
  // makes SQLite sort every due row on each claim.
  const due = plainDue(prepare, now, limit, named, room, shared);
  const expired = (
    named === undefined
      ? prepare(CLAIM_SQL.dueExpired).all(now, owner, limit)
      : prepare(CLAIM_SQL.dueExpiredNamed).all(now, owner, named, limit)
  ) as ExpiredRow[];
  const fail = prepare(CLAIM_SQL.failExpired);
  const candidates: Candidate[] = [];
  // Returned with the claims (failed_after set): this process reports them.
  const failed: ClaimRow[] = [];
  for (const row of expired) {
    // Expired too often: a task that kills or stalls its process must not be retried forever.
    if (row.started && row.expiries >= expiries.max) {
      failed.push(fail.get(expiries.text, now, row.id) as ClaimRow);
      letGo(prepare, row.id);
      continue;
    }
    candidates.push({ ...row, expired: true, holds: true, usable: true, effective: row.priority, fair_tag: null });
  }
  for (const row of due)
    candidates.push({ ...row, serial: null, rate_key: null, holds: false, usable: true, effective: row.priority, fair_tag: null });
  const byTurn = prepare(CLAIM_SQL.byTurn);
  // A task with a turn is claimed only into a free worker: no more than those are read.
  const free = ask.limits?.free ?? Infinity;
  for (const queue of shared) {
    const open = Math.min(limit, free, room(queue));
    if (open <= 0) continue;
    for (const row of byTurn.all({ queue, limit: open, names: named ?? null }) as TurnRow[])
      candidates.push({ ...row, serial: null, rate_key: null, holds: false, usable: true, effective: row.priority });
  }
  // Keyed tasks of a paused or full queue wait with it.
  for (const keyed of keyedCandidates(prepare, now, limit, names === undefined ? undefined : new Set(names))) {
    if (room(keyed.queue) > 0) candidates.push(keyed);
  }
  const take = prepare(CLAIM_SQL.claimOne);
  // What starts at once (into a free worker): the first `free` in claim order, and every limited
  // task or takeover (claimed only into free workers); the rest is prefetched, marked when it starts.
  const chosen = decide(prepare, candidates, now, limit, ask.limits, queues);
  const started = prepare(CLAIM_SQL.turnStarted);
  for (const row of chosen) if (row.fair_tag !== null) started.run(row.fair_tag, row.queue);
  const claimed: ClaimRow[] = chosen.map((row, i) => {
    const starts = i < free || row.expired === true || row.serial !== null || row.rate_key !== null || row.fair_tag !== null;
    return { ...(take.get(owner, now + lease, now, starts ? 0 : 1, now, row.id) as ClaimRow), started: starts };
  });
  return failed.length === 0 ? claimed : claimed.concat(failed);
}

/**
 * When the next claim may find work (epoch ms, or undefined): an expiring
 * lease, a scheduled job, the first plain task of an open queue, keyed work
 * that may start (limits.ts), the refill of a queue's empty rate bucket
 * (and of the scheduler-wide one, `rated`).
 * @internal
 */
export function nextDueAt(prepare: Prepare, { now, names, rooms, rated }: NextDueParams): number | undefined {
  const named = names === undefined ? undefined : JSON.stringify(names);
  let t = ((named === undefined ? prepare(CLAIM_SQL.nextDue).get() : prepare(CLAIM_SQL.nextDueNamed).get(named)) as { t: number | null }).t;
  // A keyed task that cannot start does not count: settling its key's holder claims again, a bucket refills.
  const queues = queueRooms(prepare, rooms, now);
  const room = queues.room;
  let waiting = keyedDue(prepare, now, names === undefined ? undefined : new Set(names), room);
  // A queue whose rate bucket is empty is closed until it refills: look again then, whatever waits in it.
  const queueRefilled = queueRefill(queues, now);
  if (queueRefilled !== undefined && (waiting === undefined || queueRefilled < waiting)) waiting = queueRefilled;
  const first = prepare(named === undefined ? CLAIM_SQL.firstWaiting : CLAIM_SQL.firstWaitingNamed);
  // Nor does a task of a paused or full queue: a resume, or a slot freed, claims again.
  for (const queue of plainQueues(prepare)) {
    if (room(queue) <= 0) continue;
    for (const p of plainLevels(prepare, queue)) {
      const row = first.get(named === undefined ? { queue, p } : { queue, p, names: named }) as { run_at: number } | undefined;
      if (row !== undefined && (waiting === undefined || row.run_at < waiting)) waiting = row.run_at;
    }
  }
  // Shared tasks: one due without a turn (the next claim gives it one), or one with a turn in a queue with room.
  const untagged = prepare(CLAIM_SQL.firstUntagged).get() as { run_at: number } | undefined;
  if (untagged !== undefined && (waiting === undefined || untagged.run_at < waiting)) waiting = untagged.run_at;
  const hasTurn = prepare(CLAIM_SQL.hasTurn);
  for (const queue of fairQueues(prepare)) if (room(queue) > 0 && hasTurn.get(queue) !== undefined) waiting = Math.min(waiting ?? now, now);
  const refilled = rated && waiting !== undefined ? globalRefill(prepare, now) : undefined;
  if (refilled !== undefined) waiting = Math.max(waiting!, refilled);
  if (waiting !== undefined && (t === null || waiting < t)) t = waiting;
  return t === null ? undefined : t;
}

/** The queues with plain waiting tasks (one probe each of the queue-leading index), in name order. */
function* plainQueues(prepare: Prepare): Generator<string> {
  const after = prepare(CLAIM_SQL.queueAfter);
  for (let q = (prepare(CLAIM_SQL.firstQueue).get() as { q: string | null }).q; q !== null; q = (after.get(q) as { q: string | null }).q)
    yield q;
}

/** The queues with shares (fair.ts): their plain tasks get turns too, and are read by turn. */
function fairQueues(prepare: Prepare): Set<string> {
  return new Set((prepare(CLAIM_SQL.fairQueues).all() as { queue: string }[]).map((row) => row.queue));
}

/**
 * Up to \`limit\` due plain waiting tasks (no key: keyed ones come from their
 * limit rows; no share: those are read by turn) of open queues without
 * shares (\`shared\`), each up to its room, by priority (highest first),
 * then due time, then id. Each queue's levels are walked in its own part of
 * the index, each an exact range of due tasks, so future tasks of a higher
 * level, and the tasks of paused or full queues, are never read.
 */
function plainDue(
  prepare: Prepare,
  now: number,
  limit: number,
  named: string | undefined,
  room: (queue: string) => number,
  shared: ReadonlySet<string>,
): PlainRow[] {
  const rows: PlainRow[] = [];
  const statement = prepare(named === undefined ? CLAIM_SQL.dueWaiting : CLAIM_SQL.dueWaitingNamed);
  for (const queue of plainQueues(prepare)) {
    if (shared.has(queue)) continue;
    const open = Math.min(limit, room(queue));
    let taken = 0;
    for (const p of plainLevels(prepare, queue)) {
      if (taken >= open) break;
      const args = { queue, p, now, limit: open - taken };
      const found = statement.all(named === undefined ? args : { ...args, names: named }) as Omit<PlainRow, 'priority'>[];
      for (const row of found) rows.push({ ...row, priority: p });
      taken += found.length;
    }
  }
  // The first `limit` by priority and due time are all a claim can take of them.
  return rows.sort((a, b) => b.priority - a.priority || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
}

/**
 * A queue's levels with plain waiting tasks, highest first (one probe each of
 * the plain index); fair.ts walks them too, to give the plain tasks of a
 * queue with shares their turns. @internal
 */
export function* plainLevels(prepare: Prepare, queue: string): Generator<number> {
  const below = prepare(CLAIM_SQL.queueLevelBelow);
  for (
    let p = (prepare(CLAIM_SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    p !== null;
    p = (below.get(queue, p) as { p: number | null }).p
  )
    yield p;
}

/** A due plain waiting task as the claim reads it. */
interface PlainRow {
  id: number;
  run_at: number;
  queue: string;
  priority: number;
}

/** A task with a turn as the claim reads it. */
interface TurnRow {
  id: number;
  run_at: number;
  queue: string;
  priority: number;
  fair_tag: number;
}
