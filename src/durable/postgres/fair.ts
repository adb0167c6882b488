// Fair shares in the PostgreSQL claim (docs/limits.md): start-time fair
// queuing, the stride rule of the in-memory gate (core/lanes.ts) with its
// turns kept by task, so that every process sharing the database takes the
// same turns and a claim reads the next ones from an index, at a cost that
// does not grow with the number of groups.
//
// A shared task gets its turn (`fair_tag`) once it is due, before a claim
// (tagTurns): its group's next turn, or the queue's virtual time if that is
// later (a group with nothing due saves no turns); the group's next turn
// then moves on by 1 / weight. Tasks that come due together take their
// group's turns by priority, then due order. The claim (claim.ts) takes a
// queue's shared tasks by turn within a priority, in the places the queue's
// due order gives them beside other work, clears the turns it took, and
// moves the queue's virtual time up to the latest of them. A task that
// goes back to waiting (a retry, a replace) gets a new turn when it is due
// again: any change of a task but these two clears its turn (the trigger of
// schema version 10).
//
// Lock order: tasks first (SKIP LOCKED), then the group rows in (queue,
// group) order; nothing else takes a group row. The claim takes the queue
// rows of taskheap_fair_queues last, after the limit rows.
import type { Connection } from './connection.js';
import { plainWaiting, tables, untaggedShared, waitingPairs } from './tables.js';

/** How many due tasks one tagging turns at most (in due order); the rest wait for the next claim's. */
const TAG_BATCH = 1_000;

/**
 * Full claims made without tagging after one that left no due task without
 * a turn, unless next-due finds one (its \`untagged\`): a process would
 * otherwise send two statements per claim, where shared tasks, claimed only
 * into free workers, make claims many and small (the tagging, planned
 * anew each time, cost 1.5 ms of server time). A task that comes due
 * meanwhile waits this many claims of this process at most for its turn.
 */
const QUIET_CLAIMS = 8;

/** SQL: a due shared task of task table \`T\` has no turn yet (tagTurns gives it one). */
export const untaggedDue = (T: string) => `EXISTS (SELECT 1 FROM ${T} AS t WHERE ${untaggedShared('t')} AND t.run_at <= now())`;

/** The statements of fair shares for tables in `schema` (undefined: the search_path). */
export function fairStatements(schema: string | undefined) {
  const { T, G, F } = tables(schema);
  return {
    /**
     * Gives up to $1 due shared tasks (in due order; those another statement
     * holds are skipped) their turns, registering their queues, and the due
     * tasks without a share of queues registered before; says how many of
     * each kind, and how many queues it registered.
     */
    tagTurns: `WITH RECURSIVE
      shared AS (SELECT t.id, t.queue, t.fair_group AS grp, 1 / t.fair_weight AS step, t.priority, t.run_at FROM ${T} AS t
        WHERE ${untaggedShared('t')} AND t.run_at <= now()
        ORDER BY t.run_at, t.id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED),
      -- A queue's tasks without a share take turns as one group, '', once the queue has shares.
      ${waitingPairs(T)},
      unshared AS (SELECT w.* FROM pairs CROSS JOIN LATERAL (
          SELECT t.id, t.queue, ''::text AS grp, 1::float8 AS step, t.priority, t.run_at FROM ${T} AS t
          WHERE ${plainWaiting('t')} AND t.queue = pairs.q AND t.priority = pairs.p AND t.run_at <= now()
          ORDER BY t.run_at, t.id LIMIT $1 FOR NO KEY UPDATE OF t SKIP LOCKED) AS w
        WHERE pairs.q IN (SELECT queue FROM ${F}) LIMIT $1),
      due AS (SELECT * FROM shared UNION ALL SELECT * FROM unshared),
      registered AS (INSERT INTO ${F} (queue) SELECT DISTINCT queue FROM shared ON CONFLICT (queue) DO NOTHING RETURNING queue),
      -- Each group's next turn moves on by its batch's steps, from the virtual time if that is later.
      moved AS (INSERT INTO ${G} AS g (queue, grp, next, step)
          SELECT s.queue, s.grp, COALESCE((SELECT f.virtual FROM ${F} AS f WHERE f.queue = s.queue), 0) + s.step, s.step
          FROM (SELECT queue, grp, sum(step) AS step FROM due GROUP BY queue, grp) AS s ORDER BY s.queue, s.grp
        ON CONFLICT (queue, grp) DO UPDATE SET next = GREATEST(g.next + EXCLUDED.step, EXCLUDED.next), step = EXCLUDED.step
        RETURNING g.queue, g.grp, g.next - g.step AS first),
      tagged AS (UPDATE ${T} AS t SET fair_tag = m.first + d.before
        FROM (SELECT id, queue, grp, COALESCE(sum(step) OVER (PARTITION BY queue, grp ORDER BY priority DESC, run_at, id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM due) AS d
          JOIN moved AS m ON m.queue = d.queue AND m.grp = d.grp
        WHERE t.id = d.id RETURNING 1)
      SELECT (SELECT count(*) FROM shared)::int AS shared, (SELECT count(*) FROM unshared)::int AS unshared,
        (SELECT count(*) FROM registered)::int AS registered`,
    /** Forgets the groups whose next turn the virtual time has passed: they would start from it anyway. */
    pruneGroups: `DELETE FROM ${G} AS g USING ${F} AS f WHERE g.queue = f.queue AND g.next <= f.virtual`,
  };
}

/** The statements of fair shares. */
export type FairStatements = ReturnType<typeof fairStatements>;

/** Turns due shared tasks before a full claim, while any shared task is waiting. @internal */
export class FairTurns {
  readonly #db: Connection;
  readonly #sql: FairStatements;
  /** Full claims left to make without tagging (see QUIET_CLAIMS). */
  #quiet = 0;

  constructor(db: Connection, sql: FairStatements) {
    this.#db = db;
    this.#sql = sql;
  }

  /** Gives due tasks their turns, unless a recent tagging left none without one (see QUIET_CLAIMS). */
  async tag(): Promise<void> {
    if (this.#quiet > 0) {
      this.#quiet--;
      return;
    }
    const { rows } = await this.#db.query<{ shared: number; unshared: number; registered: number }>(this.#sql.tagTurns, [TAG_BATCH], true);
    const row = rows[0];
    // Tag again at the next claim if a full batch may have left tasks behind, or a queue registered
    // now has plain tasks this statement could not see as a queue with shares.
    if (row !== undefined && row.shared < TAG_BATCH && row.unshared < TAG_BATCH && row.registered === 0) this.#quiet = QUIET_CLAIMS;
  }

  /** A task is due and has no turn yet (next-due says so): the next claim tags. */
  untagged(): void {
    this.#quiet = 0;
  }
}

/** Forgets the groups whose next turn the virtual time has passed (retention, with the limit rows'). @internal */
export async function pruneGroups(db: Connection, sql: FairStatements): Promise<void> {
  await db.query(sql.pruneGroups, []);
}
