// The plain claim: the claim of claim-sql.ts for the common case where no
// limit of any kind is in play, as a statement of its own (docs/performance.md).
//
// Why a second statement: the full claim plans and runs everything a claim
// may meet (takeovers of expired leases, keyed tasks and their limit rows,
// queues with a global concurrency or a rate, the scheduler-wide bucket),
// and pays for it when there is none of it: about 3.5 ms to plan each of
// the five custom plans every connection makes, and about 0.7 ms a claim in
// CTEs that find nothing. This one asks first, cheaply, whether any of that
// exists anywhere (`limited`: any limit row, any queue with a global
// concurrency or a rate, any lease that ran out and is not this process's
// own); if it does, it claims nothing and says so, and the store sends the
// full claim. If not, the full claim's candidates are plain waiting tasks
// only and its bookkeeping would pass them all in their order, which is
// what this claims: the same tasks, in the same order, with the same
// columns set. The check is broader than the full claim's own (a limit row
// with no task behind it, a lease the full claim would not take over yet),
// never narrower, so it may send a claim the long way but never claims what
// the full claim would not.

import { levels, markServer, millis, ms, QUEUE_LEVELS, queuesWithWork } from './claim-sql.js';

/**
 * Claims up to $1 plain waiting tasks that are due, by priority (highest
 * first), then due time, then id, for owner $2 for $3 ms; $4 (text[], or
 * null for any): only tasks of these handler names; $5: free workers (the
 * first $5 start at once, the rest are prefetched, as in the full claim).
 * Claims nothing if a recurring job is due (`jobs_due`) or a limit is in
 * play (`limited`): the first row carries both flags (with a null id if
 * nothing was claimed). Used only by a process without queue rooms or the
 * scheduler-wide bucket (the full claim's $9 and $7).
 */
export function plainClaimSql(T: string, J: string, L: string, Q: string, M: string): string {
  return `WITH RECURSIVE
    flag AS (SELECT EXISTS (SELECT 1 FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()) AS jobs_due),
    limited AS (SELECT EXISTS (SELECT 1 FROM ${L})
      OR EXISTS (SELECT 1 FROM ${Q} WHERE global_concurrency IS NOT NULL OR rate_limit IS NOT NULL)
      OR EXISTS (SELECT 1 FROM ${T} WHERE state = 'running' AND locked_until <= now() AND locked_by <> $2) AS yes),
    ${markServer(M)},
    ${levels(T)},
    ${queuesWithWork(T)},
    open AS (SELECT queues.q AS name FROM queues
      WHERE queues.q IS NOT NULL AND NOT COALESCE((SELECT paused FROM ${Q} WHERE name = queues.q), false)),
    plain AS (SELECT w.id, w.run_at, w.priority FROM open CROSS JOIN levels CROSS JOIN LATERAL (
        SELECT t.id, t.run_at, t.priority FROM ${T} AS t
        WHERE t.state = 'waiting' AND t.serial IS NULL AND t.rate_key IS NULL AND t.queue = open.name AND t.priority = levels.p
          AND t.run_at <= now() AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
          AND NOT (SELECT jobs_due FROM flag) AND NOT (SELECT yes FROM limited)
        ORDER BY t.run_at, t.id LIMIT $1 FOR NO KEY UPDATE OF t SKIP LOCKED) AS w
      WHERE levels.p IS NOT NULL LIMIT $1 * ${QUEUE_LEVELS}),
    starting AS (SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) <= $5 AS now FROM plain
      ORDER BY priority DESC, run_at, id LIMIT $1),
    -- Read back as arrays (see claimed in claim-sql.ts): a few rows of unknown number, found by the primary key.
    claimed AS (UPDATE ${T} AS t SET state = 'running', locked_by = $2, locked_until = clock_timestamp() + ${millis('$3')},
        attempts = t.attempts + 1, started_at = (SELECT clock_timestamp()), prefetched = NOT due.now, updated_at = now()
      FROM (SELECT array_agg(id) AS ids, array_agg(now) AS now FROM starting) AS a
        CROSS JOIN LATERAL unnest(a.ids, a.now) AS due(id, now)
      WHERE t.id = due.id AND t.state = 'waiting'
      RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options, t.priority,
        due.now AS started)
    SELECT flag.jobs_due, limited.yes AS limited, c.* FROM flag CROSS JOIN limited LEFT JOIN (
      SELECT id, name, payload, attempts, max_attempts, run_at, options, priority, started, NULL::int AS failed_after FROM claimed
    ) AS c ON true`;
}
