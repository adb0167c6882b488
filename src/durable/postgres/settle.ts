// Outcomes on PostgreSQL: lease renewals (and the hand-back of claims whose
// answer was lost), a batch of outcomes in one statement, a final state in
// the handler's own transaction, a cancel, and a retry asked for by a caller
// (requeue: with the failed tasks of its flow above it). Each lets go of the
// slots and queue places its tasks held, in the one lock order (claim.ts).
import { LeaseLostError } from '../errors.js';
import { toTask, type TaskRow } from '../rows.js';
import type { Outcome, QueryClient, StoredState, StoredTask } from '../store.js';
import type { Connection } from './connection.js';
import { CANCEL, DONE, DONE_IDS, WAKE } from './listener.js';
import { freeSlots, letGo } from './limits.js';
import { suspend, type stepStatements } from './steps.js';
import { millis, ms, tables, taskColumns, unlessUsual } from './tables.js';

/** How many attempts' errors a task keeps (the latest). */
const MAX_ERRORS = 10;

/**
 * The row's \`errors\` with one more entry \`{ attempt, at, error }\` (the
 * error \`param\`, at the server's now), the oldest dropped beyond MAX_ERRORS.
 */
const appendError = (param: string) => `(SELECT COALESCE(jsonb_agg(e ORDER BY i), '[]'::jsonb)::text FROM (SELECT e, i
    FROM jsonb_array_elements(COALESCE(errors, '[]')::jsonb
      || jsonb_build_array(jsonb_build_object('attempt', attempts, 'at', ${ms('now()')}, 'error', ${param}::text))) WITH ORDINALITY AS x(e, i)
    ORDER BY i DESC LIMIT ${MAX_ERRORS}) AS kept)`;

/**
 * SQL: the rows of a batch given as parallel arrays (`$1::bigint[], $2::text[]`).
 * Each array is read through a subquery, so the planner sees a batch of
 * unknown (small) size instead of counting the constants: it then drives the
 * update from the batch through the primary key. Counting them, it compared
 * a batch of 256 with a table whose statistics said no row was held by
 * anyone (ANALYZE ran while every row was waiting, as after a bulk enqueue),
 * chose a scan of the whole table with the batch re-read for every row it
 * held, and a settle of 256 took 26 ms instead of 3 (EXPLAIN ANALYZE).
 */
const batch = (arrays: string) =>
  `unnest(${arrays
    .split(', ')
    .map((array) => `(SELECT ${array})`)
    .join(', ')})`;

/** A settle's outcomes as the statement's parallel arrays: id, kind, state, delay, error, result, discard (see unlessUsual). */
function outcomeArrays(
  outcomes: readonly Outcome[],
): [number[], string[], (string | null)[], (number | null)[], (string | null)[], (string | null)[], boolean[]] {
  const id: number[] = [];
  const kind: string[] = [];
  const state: (string | null)[] = [];
  const delay: (number | null)[] = [];
  const error: (string | null)[] = [];
  const result: (string | null)[] = [];
  const discard: boolean[] = [];
  for (const outcome of outcomes) {
    // Suspended runs have a statement of their own (steps.ts).
    if (outcome.kind === 'suspend') continue;
    id.push(outcome.id);
    kind.push(outcome.kind);
    state.push(outcome.kind === 'complete' ? outcome.state : null);
    delay.push(outcome.kind === 'retry' ? outcome.delay : null);
    error.push(outcome.kind === 'release' ? null : outcome.error);
    result.push(outcome.kind === 'complete' ? (outcome.result ?? null) : null);
    discard.push(outcome.kind === 'complete' && outcome.discard === true);
  }
  return [
    id,
    unlessUsual(kind, 'complete'),
    unlessUsual(state, 'succeeded'),
    unlessUsual(delay, null),
    unlessUsual(error, null),
    unlessUsual(result, null),
    unlessUsual(discard, false),
  ];
}

/** The statements of outcomes for tables in `schema` (undefined: the search_path). */
export function settleStatements(schema: string | undefined) {
  const { t, T, L, Q } = tables(schema);
  return {
    /**
     * Extends the leases ($1 ms from now) of the ids $2 owner $3 holds, and
     * returns the running tasks it holds but does not know of: claims whose
     * answer never arrived (a query timeout after the server committed),
     * claimed more than $4 ms ago so that no claim still on its way counts.
     * They go back to waiting, unrun. $6: prefetched claims that started
     * since, marked started (from then on an expiry counts against them).
     */
    renew: `WITH
        renewed AS (UPDATE ${T} SET locked_until = clock_timestamp() + ${millis('$1')},
            prefetched = prefetched AND NOT (id = ANY($6::bigint[]))
          WHERE id = ANY($2::bigint[]) AND locked_by = $3 AND state = 'running' RETURNING id),
        orphans AS (UPDATE ${T} SET state = 'waiting', attempts = attempts - 1, locked_by = NULL, locked_until = NULL, updated_at = now()
          WHERE $5::boolean AND locked_by = $3 AND state = 'running' AND NOT (id = ANY($2::bigint[])) AND updated_at < now() - ${millis('$4')}
          RETURNING id, queue),
        ${freeSlots(Q, 'orphans')}
      SELECT id FROM renewed`,
    /**
     * Records a batch of outcomes in one statement, for the tasks owner $6
     * still holds (an array sent empty holds each row's usual value: see
     * unlessUsual): per row, kind 'complete' (final state, error, the
     * handler's return value as `result`), 'retry' (waiting again, due delay
     * ms after the server's now, error) or 'release' (waiting again, the
     * claim's attempt not counted). A failure's error (final or retried)
     * joins the bounded `errors` history. A final state lets go of the
     * task's serial group (a retried or released task keeps it: strict order).
     * A final state marked `discard` ($9: retention 0 for it) deletes the
     * row instead, with any messages sent to it, unless something still needs
     * it: a key (dedupe reads a key's last task), a flow (dependents read its
     * state), steps, or the mark of a waiter in another process (`awaited`:
     * endedTasks). A waiter's mark committed first is seen here (the delete
     * re-reads the row it waited for), so that row is updated instead.
     * One wake carries the earliest time a retried or released task, or the
     * next task of a freed serial group, is due (it reaches this process too,
     * whose next claim may already be on its way); the final states are
     * announced on DONE for `waitFor()`, DONE_IDS ids to a notification:
     * every notification takes a database-wide lock at commit and a place in
     * the queue every listener reads, and one per task cost a tenth of the
     * throughput of no-op tasks.
     */
    settle: `WITH
        u AS (SELECT id, COALESCE(kind, 'complete') AS kind, COALESCE(state, 'succeeded') AS state, delay, error, result,
            COALESCE(discard, false) AS discard
          FROM ${batch('$1::bigint[], $2::text[], $3::text[], $4::float8[], $5::text[], $8::text[], $9::boolean[]')}
            AS u(id, kind, state, delay, error, result, discard)),
        gone AS (DELETE FROM ${T} AS t USING u
          WHERE t.id = u.id AND u.discard AND u.kind = 'complete' AND t.locked_by = $6
            AND t.key IS NULL AND t.flow_id IS NULL AND NOT t.has_dependents AND t.steps IS NULL AND NOT t.awaited
          RETURNING t.id, u.kind, t.run_at, t.serial, t.queue),
        gone_messages AS (DELETE FROM ${t('taskheap_messages')} WHERE task_id IN (SELECT id FROM gone)),
        kept AS (UPDATE ${T} AS t SET
            state = CASE u.kind WHEN 'complete' THEN u.state ELSE 'waiting' END,
            run_at = CASE u.kind WHEN 'retry' THEN now() + ${millis('u.delay')} ELSE t.run_at END,
            last_error = CASE u.kind WHEN 'release' THEN t.last_error ELSE u.error END,
            result = CASE u.kind WHEN 'complete' THEN u.result ELSE t.result END,
            errors = CASE WHEN u.kind = 'retry' OR (u.kind = 'complete' AND u.state IN ('failed', 'timed-out'))
              THEN ${appendError('u.error')} ELSE t.errors END,
            attempts = t.attempts - (u.kind = 'release')::int,
            locked_by = NULL, locked_until = NULL, updated_at = now()
          FROM u WHERE t.id = u.id AND t.locked_by = $6 AND (u.kind <> 'release' OR t.state = 'running') AND t.id NOT IN (SELECT id FROM gone)
          RETURNING t.id, u.kind, t.run_at, t.serial, t.queue),
        done AS (SELECT * FROM kept UNION ALL SELECT * FROM gone),
        ${freeSlots(Q, 'done')},
        ${letGo(L, 'freed', 'done', "kind = 'complete'", 'unslotted_locks')},
        next AS (SELECT (SELECT h.run_at FROM ${T} AS h WHERE h.serial = freed.key AND h.state = 'waiting' ORDER BY h.run_at, h.id LIMIT 1) AS run_at
          FROM freed)
      SELECT pg_notify('${WAKE}', $7 || (extract(epoch from MIN(run_at)) * 1000)::bigint::text)
      FROM (SELECT run_at FROM done WHERE kind <> 'complete' UNION ALL SELECT run_at FROM next WHERE run_at IS NOT NULL
        UNION ALL SELECT now() FROM unslotted WHERE was_full) AS woken
      HAVING count(*) > 0
      UNION ALL
      SELECT pg_notify('${DONE}', $7 || string_agg(id::text, ',')) FROM (SELECT id, (row_number() OVER () - 1) / ${DONE_IDS} AS part
        FROM done WHERE kind = 'complete') AS finished GROUP BY part`,
    /** One final state ($1), inside the handler's own transaction (`ctx.transaction`); a failure's error ($2) joins \`errors\`, a success's return value ($5) is \`result\`; announced on DONE. */
    complete: `WITH done AS (
        UPDATE ${T} SET state = $1::text, last_error = $2::text, result = $5::text,
          errors = CASE WHEN $1::text IN ('failed', 'timed-out') THEN ${appendError('$2')} ELSE errors END,
          locked_by = NULL, locked_until = NULL, updated_at = now()
        WHERE id = $3 AND locked_by = $4 RETURNING id, serial, queue),
        ${freeSlots(Q, 'done')},
        ${letGo(L, 'freed', 'done', 'true', 'unslotted_locks')}
      SELECT pg_notify('${DONE}', $6 || id::text),
        CASE WHEN EXISTS (SELECT 1 FROM freed) OR EXISTS (SELECT 1 FROM unslotted WHERE was_full) THEN pg_notify('${WAKE}', $6 || (extract(epoch from now()) * 1000)::bigint::text) END
      FROM done`,
    /**
     * A finished task back to waiting, due now, with all its attempts again; its past errors stay.
     * Flows (docs/flows.md): with the failed tasks it depends on by the 'fail' rule, and theirs (\`up\`),
     * so the path to it runs again; one with unfinished dependencies is \`blocked\`, not waiting.
     * (The trigger of migrations.ts, version 6, revives what they sank.)
     */
    requeue: `WITH RECURSIVE up(id) AS (
          SELECT id FROM ${T} WHERE id = $1 AND state IN ('failed', 'timed-out', 'cancelled')
          UNION
          SELECT d.dep_id FROM up JOIN ${t('taskheap_deps')} AS d ON d.task_id = up.id JOIN ${T} AS f ON f.id = d.dep_id
          WHERE d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled')),
        -- Its dependencies counted again: those not final, and those requeued with it, it waits for.
        waits AS (SELECT up.id, (SELECT count(*) FROM ${t('taskheap_deps')} AS d JOIN ${T} AS f ON f.id = d.dep_id
            WHERE d.task_id = up.id AND (f.state NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled') OR d.dep_id IN (SELECT id FROM up)))::int AS n
          FROM up),
        again AS (
        UPDATE ${T} AS t SET state = CASE WHEN w.n > 0 THEN 'blocked' ELSE 'waiting' END, pending_deps = w.n, run_at = now(), attempts = 0,
          expiries = 0, result = NULL, failed_dep = NULL, locked_by = NULL, locked_until = NULL, updated_at = now()
        FROM waits AS w WHERE t.id = w.id AND t.state IN ('failed', 'timed-out', 'cancelled') RETURNING ${taskColumns('t')}),
        uncounted AS (UPDATE ${t('taskheap_deps')} AS d SET counted = false FROM ${T} AS f
          WHERE d.task_id IN (SELECT id FROM again) AND f.id = d.dep_id AND d.counted
            AND (f.state NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled') OR d.dep_id IN (SELECT id FROM up))),
        wake AS (SELECT pg_notify('${WAKE}', $2 || MIN(run_at)::bigint::text) FROM again WHERE state = 'waiting' HAVING count(*) > 0)
      SELECT again.* FROM again LEFT JOIN wake ON true WHERE again.id = $1`,
    cancel: `WITH
        old AS (SELECT id, state FROM ${T} WHERE id = $1 AND state IN ('blocked', 'waiting', 'running') FOR NO KEY UPDATE),
        cancelled AS (UPDATE ${T} AS t SET state = 'cancelled', locked_by = NULL, locked_until = NULL, updated_at = now()
          FROM old WHERE t.id = old.id RETURNING old.state AS was, t.id, t.serial, t.queue),
        stopped AS (SELECT queue FROM cancelled WHERE was = 'running'),
        ${freeSlots(Q, 'stopped')},
        ${letGo(L, 'freed', 'cancelled', 'true', 'unslotted_locks')}
      SELECT was, CASE WHEN was = 'running' THEN pg_notify('${CANCEL}', $2) END, pg_notify('${DONE}', $2),
        CASE WHEN EXISTS (SELECT 1 FROM freed) OR EXISTS (SELECT 1 FROM unslotted WHERE was_full) THEN pg_notify('${WAKE}', $3 || (extract(epoch from now()) * 1000)::bigint::text) END
      FROM cancelled`,
  };
}

/** The statements of outcomes. */
/** The settle's statements, with the suspension's (steps.ts). */
type SettleStatements = ReturnType<typeof settleStatements> & ReturnType<typeof stepStatements>;

/**
 * Renews the leases of `ids` that `owner` holds for `lease` ms, marks
 * `started` as started and (with `handBack`) hands back the running tasks it
 * holds but does not know of, claimed more than `lostAfter` ms ago; returns
 * the ids it no longer holds.
 */
export async function renew(
  db: Connection,
  sql: SettleStatements,
  owner: string,
  ids: readonly number[],
  lease: number,
  lostAfter: number,
  handBack: boolean,
  started: readonly number[],
): Promise<number[]> {
  // Runs with no ids too: it also hands back claims whose answer was lost.
  const { rows } = await db.query<{ id: string | number }>(sql.renew, [lease, ids, owner, lostAfter, handBack, started]);
  const kept = new Set(rows.map((row) => Number(row.id)));
  return ids.filter((id) => !kept.has(id));
}

/** One statement for the whole batch: an outcome costs a row of arrays, not a round trip. */
export async function settle(
  db: Connection,
  sql: SettleStatements,
  prefix: string,
  owner: string,
  outcomes: readonly Outcome[],
): Promise<void> {
  if (outcomes.length === 0) return;
  const [id, kind, state, delay, error, result, discard] = outcomeArrays(outcomes);
  if (id.length > 0) await db.query(sql.settle, [id, kind, state, delay, error, owner, prefix, result, discard], true);
  if (outcomes.some((outcome) => outcome.kind === 'suspend')) await suspend(db, sql, prefix, owner, outcomes);
}

/** Runs `fn` in a transaction that also completes task `id` (succeeded, with `result`), if `owner` still holds it. */
export function completeWithin<T>(
  db: Connection,
  sql: SettleStatements,
  prefix: string,
  owner: string,
  id: number,
  fn: (client: QueryClient) => Promise<T>,
  result: (value: T) => string | null,
): Promise<T> {
  return db.transaction(async (client) => {
    const value = await fn(client);
    const { rows } = await client.query(sql.complete, ['succeeded', null, id, owner, result(value), prefix]);
    // Not ours any more: the handler's writes must not commit without the task.
    if (rows.length === 0) throw new LeaseLostError(id);
    return value;
  });
}

/** Cancels task `id` unless it is over (a running one is told on CANCEL); whether it did. */
export async function cancel(db: Connection, sql: SettleStatements, prefix: string, id: number): Promise<boolean> {
  const { rows } = await db.query<{ was: StoredState }>(sql.cancel, [id, `${prefix}${id}`, prefix]);
  return rows.length > 0;
}

/** retry(id): task `id`, with the failed tasks of its flow above it, back to waiting (see the statement); undefined if it was not over. */
export async function requeue(db: Connection, sql: SettleStatements, prefix: string, id: number): Promise<StoredTask | undefined> {
  const { rows } = await db.query<TaskRow>(sql.requeue, [id, prefix]);
  return rows[0] === undefined ? undefined : toTask(rows[0]);
}
