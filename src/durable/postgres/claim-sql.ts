// The claim of the PostgreSQL store as SQL: \`claimSql()\` builds the one
// statement that takes due and expired tasks (serial keys, named queues and
// their slots included), from the fragments it shares with sql.ts (priority
// levels, open queues, slots given back) and the conversions both use.

/** SQL: a timestamptz expression as epoch ms. @internal */
export const ms = (expression: string) => `(extract(epoch from ${expression}) * 1000)::float8`;

/** SQL: $n milliseconds as an interval. @internal */
export const millis = (param: string) => `(${param}::float8 * interval '1 millisecond')`;

/** SQL: only tasks whose handler is among $6 (null: any). */
const NAMED = `AND ($6::text[] IS NULL OR name = ANY($6::text[]))`;

/**
 * SQL: the priority levels of waiting tasks, highest first, one index probe
 * each (then a NULL). The waiting index leads with priority and PostgreSQL 15
 * has no skip scan: walking it level by level finds the due tasks of each
 * level by an exact range (priority = p, run_at <= now) instead of filtering
 * every future task of the level above.
 * @internal
 */
export const levels = (T: string) => `levels(p) AS (
    SELECT max(priority) FROM ${T} WHERE state = 'waiting'
    UNION ALL
    SELECT (SELECT max(priority) FROM ${T} WHERE state = 'waiting' AND priority < levels.p) FROM levels WHERE levels.p IS NOT NULL)`;

/**
 * SQL: waiting task \`a\` may run as far as its serial key goes: it has none,
 * it holds its key (it waits for a retry, or was handed back), or the key is
 * free and \`a\` comes first among the key's waiting tasks (due time, then
 * id). Read from the statement's snapshot, so it may be stale: the claim
 * takes the key under a row lock (\`taken\` in claimSql), which re-checks.
 * @internal
 */
export const claimable = (a: string, T: string, K: string) => `(${a}.serial IS NULL OR COALESCE(
      (SELECT k.held_by = ${a}.id FROM ${K} AS k WHERE k.key = ${a}.serial),
      ${a}.id = (SELECT h.id FROM ${T} AS h WHERE h.serial = ${a}.serial AND h.state = 'waiting' ORDER BY h.run_at, h.id LIMIT 1)))`;

/**
 * Named queues (issue 22), kept apart from the rest of the claim: \`queues\`
 * lists the queues that have waiting tasks, one index probe each (a skip
 * scan of the queue-leading waiting index); \`open\` keeps those a claim
 * may take from, with the room each has: not paused, under their global
 * concurrency (the queue row's running count, read from the snapshot), and
 * under this process's own concurrency for them (rooms $7 names, $8 counts;
 * a queue not named has no limit here). The claim then reads the waiting
 * tasks of open queues only, so tasks of paused or full queues cost nothing.
 * @internal
 */
export const openQueues = (T: string, Q: string, rooms: string, names: string) => `queues(q) AS (
    SELECT min(queue) FROM ${T} WHERE state = 'waiting'
    UNION ALL
    SELECT (SELECT min(queue) FROM ${T} WHERE state = 'waiting' AND queue > queues.q) FROM queues WHERE queues.q IS NOT NULL),
  rooms(name, n) AS (SELECT * FROM unnest(${rooms}::text[], ${names}::int[])),
  open AS (SELECT o.name, o.room FROM (SELECT queues.q AS name,
      LEAST(COALESCE((SELECT n FROM rooms WHERE rooms.name = queues.q), 2147483647),
        COALESCE((SELECT CASE WHEN qr.paused THEN 0 ELSE COALESCE(qr.global_concurrency - qr.running, 2147483647) END
          FROM ${Q} AS qr WHERE qr.name = queues.q), 2147483647)) AS room
    FROM queues WHERE queues.q IS NOT NULL) AS o WHERE o.room > 0)`;

/**
 * How many (open queue, priority level) pairs a claim reads at most, each up
 * to the claim's limit ($1), and so how many rows the claim may lock. A
 * constant bound tells the planner that the walk stops early: without it
 * the estimate of queues times levels (a recursive CTE is guessed at 100
 * rows) made the plan cost a hundred million, and PostgreSQL compiled it
 * with JIT on every claim (1.8 s of compilation for 2 ms of work, measured
 * with EXPLAIN ANALYZE). Beyond this many pairs with due work, the claim
 * takes from the first ones in name and priority order.
 * @internal
 */
export const QUEUE_LEVELS = 64;

/**
 * SQL: the rows of queues \`names\` (a subquery) with a global concurrency,
 * locked in name order, so that statements updating several queue rows
 * (claims taking slots, outcomes giving them back) cannot deadlock.
 */
const lockQueues = (Q: string, names: string) => `SELECT q.name FROM ${Q} AS q
    WHERE q.name IN (${names}) AND q.global_concurrency IS NOT NULL ORDER BY q.name FOR UPDATE`;

/**
 * SQL: two CTEs, \`unslotted_locks\` and \`unslotted\`: the queue rows of tasks
 * that stop running (\`cte\` has their \`queue\`) give back their slots;
 * \`was_full\`: the queue had no room left before, so its waiting tasks need
 * a wake-up. Only queues with a global concurrency count (the others have
 * no row to update, or never take the row's lock).
 * @internal
 */
export const freeSlots = (Q: string, cte: string) => `unslotted_locks AS (${lockQueues(Q, `SELECT queue FROM ${cte}`)}),
    unslotted AS (UPDATE ${Q} AS q SET running = GREATEST(q.running - f.n, 0)
      FROM (SELECT queue, count(*)::int AS n FROM ${cte} GROUP BY queue) AS f
      WHERE q.name = f.queue AND q.global_concurrency IS NOT NULL AND q.name IN (SELECT name FROM unslotted_locks)
      RETURNING q.running + f.n >= q.global_concurrency AS was_full)`;

/**
 * Claims up to $1 tasks for owner $2 for $3 ms: waiting tasks that are due,
 * by priority (highest first), then due time, then id; and running ones
 * whose lease ran out (their process died or stalled). Every time is the
 * server's: process clocks may disagree, the database's is the one clock.
 * An expired task whose lease already expired $4 times is failed with error
 * $5 instead (and lets go of its serial key). Our own expired leases are
 * left alone: this process is alive (it is claiming) and renews them.
 * `unlessJobsDue`: claims only if no recurring job is due, and returns that
 * flag (on a row of its own if nothing was claimed). $6 (text[], or null for
 * any): only tasks of these handler names, the ones this process has
 * defined; others wait for a process that runs them.
 *
 * Serial keys: a task with one is claimed only if it takes the key. A key
 * row exists while a task holds it; \`taken\` inserts it, or, if it exists,
 * keeps it only for the task already holding it. ON CONFLICT locks the row
 * and re-checks it at its latest version (a concurrent claim's uncommitted
 * row is waited for), so of two claims racing for one key exactly one wins,
 * whatever their snapshots said; the loser leaves its task waiting. Keys are
 * taken in key order, so two claims cannot deadlock on them.
 * @internal
 */
export function claimSql(T: string, J: string, K: string, Q: string, unlessJobsDue: boolean): string {
  const gate = unlessJobsDue ? 'AND NOT (SELECT jobs_due FROM flag)' : '';
  return `WITH RECURSIVE
    ${unlessJobsDue ? `flag AS (SELECT EXISTS (SELECT 1 FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()) AS jobs_due),` : ''}
    ${levels(T)},
    ${openQueues(T, Q, '$7', '$8')},
    expired AS (SELECT id, run_at, priority, serial, expiries, queue FROM ${T} WHERE state = 'running' AND locked_until <= now() AND locked_by <> $2 ${gate} ${NAMED}
      ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED),
    failed AS (UPDATE ${T} AS t SET state = 'failed', expiries = t.expiries + 1, last_error = $5, locked_by = NULL, locked_until = NULL,
        updated_at = now()
      FROM expired WHERE t.id = expired.id AND expired.expiries >= $4 RETURNING t.id, t.serial, t.queue),
    unheld AS (DELETE FROM ${K} AS k USING failed WHERE k.key = failed.serial AND k.held_by = failed.id),
    ${freeSlots(Q, 'failed')},
    waiting AS (SELECT w.id, w.run_at, w.priority, w.serial, w.queue FROM open CROSS JOIN levels CROSS JOIN LATERAL (
        SELECT t.id, t.run_at, t.priority, t.serial, t.queue FROM ${T} AS t
        WHERE t.state = 'waiting' AND t.queue = open.name AND t.priority = levels.p AND t.run_at <= now() ${gate} ${NAMED} AND ${claimable('t', T, K)}
        ORDER BY t.run_at, t.id LIMIT $1 FOR UPDATE OF t SKIP LOCKED) AS w
      WHERE levels.p IS NOT NULL LIMIT $1 * ${QUEUE_LEVELS}),
    candidates AS (SELECT d.*, row_number() OVER (PARTITION BY d.queue ORDER BY d.priority DESC, d.run_at, d.id) AS n
      FROM (SELECT id, run_at, priority, queue, serial, true AS expired FROM expired WHERE expiries < $4
        UNION ALL SELECT id, run_at, priority, queue, serial, false FROM waiting) AS d),
    chosen AS (SELECT c.id, c.queue, c.serial, c.expired, c.priority, c.run_at FROM candidates AS c LEFT JOIN open ON open.name = c.queue
      WHERE c.n <= COALESCE((SELECT n FROM rooms WHERE rooms.name = c.queue), 2147483647) AND (c.expired OR c.n <= open.room)
      ORDER BY c.priority DESC, c.run_at, c.id LIMIT $1),
    heads AS (SELECT DISTINCT ON (serial) id, serial FROM chosen WHERE NOT expired AND serial IS NOT NULL ORDER BY serial, priority DESC, run_at, id),
    taken AS (INSERT INTO ${K} AS k (key, held_by) SELECT serial, id FROM heads ORDER BY serial
      ON CONFLICT (key) DO UPDATE SET held_by = k.held_by WHERE k.held_by = EXCLUDED.held_by
      RETURNING k.held_by),
    picked AS (SELECT * FROM chosen WHERE expired OR serial IS NULL OR id IN (SELECT held_by FROM taken)),
    ${grantSlots(Q)},
    due AS (SELECT p.id FROM (SELECT picked.*, row_number() OVER (PARTITION BY queue, expired ORDER BY priority DESC, run_at, id) AS n FROM picked) AS p
      LEFT JOIN granted AS g ON g.name = p.queue WHERE p.expired OR g.name IS NULL OR p.n <= g.granted),
    claimed AS (UPDATE ${T} AS t SET state = 'running', locked_by = $2, locked_until = clock_timestamp() + ${millis('$3')},
        attempts = t.attempts + 1, expiries = t.expiries + (t.state = 'running')::int, updated_at = now()
      FROM due WHERE t.id = due.id
      RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options, t.priority)
    ${unlessJobsDue ? 'SELECT flag.jobs_due, claimed.* FROM flag LEFT JOIN claimed ON true' : 'SELECT * FROM claimed'}`;
}

/**
 * SQL: a claim takes slots of the queues with a global concurrency for the
 * waiting tasks it picked, under the queue row's lock and from its latest
 * version (a concurrent claim's update is waited for and re-read), so
 * claims racing for the last slots never take more than there are: each
 * queue grants what fits (\`granted\`), and the claim keeps that many of the
 * queue's picked tasks, in claim order; the others stay waiting. Taken over
 * expired tasks keep the slot their first claim took (but count against
 * this process's own room for their queue, as any task it holds).
 */
const grantSlots = (Q: string) => `slot_locks AS (${lockQueues(Q, 'SELECT queue FROM picked WHERE NOT expired')}),
    granted AS (UPDATE ${Q} AS q
      SET granted = LEAST(w.n, GREATEST(q.global_concurrency - q.running, 0)),
        running = q.running + LEAST(w.n, GREATEST(q.global_concurrency - q.running, 0))
      FROM (SELECT queue, count(*)::int AS n FROM picked WHERE NOT expired GROUP BY queue) AS w
      WHERE q.name = w.queue AND q.global_concurrency IS NOT NULL AND q.name IN (SELECT name FROM slot_locks)
      RETURNING q.name, q.granted)`;
