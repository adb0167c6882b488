// Every statement the PostgreSQL store runs, in one place (the schema they
// run on is in migrations.ts). Tables may live in a schema of the user's
// choice, so the statements are built once per store from its qualified
// table names (see `statements()`). Times are `timestamptz`; the store
// speaks epoch milliseconds, converted here.

import { inSchema, META, MIGRATIONS, quote } from './migrations.js';
import { plainClaimSql } from './plain-claim-sql.js';
import {
  claimSql,
  freeSlots,
  letGo,
  millis,
  ms,
  nextDueSql,
  QUEUE_OF,
  RATE_KEY_OF,
  SERIAL_OF,
  setLimits,
  ts,
  upsertLimits,
} from './claim-sql.js';

/** The channels every store listens on; payloads are `<ms>` / `<id>`, or `<schema>:<ms>` with a schema. */
export const WAKE = 'taskheap_wake';
export const CANCEL = 'taskheap_cancel';
/**
 * Tasks reached a final state (payload `<id>` or `<id>,<id>,...`); only
 * processes waiting for a task (`waitFor`) listen.
 */
export const DONE = 'taskheap_done';
/**
 * Ids in one DONE notification at most: 300 ids of up to 19 digits and a
 * schema prefix stay under the 8,000 bytes a payload may hold.
 */
const DONE_IDS = 300;
/** How many attempts' errors a task keeps (the latest). */
const MAX_ERRORS = 10;
/**
 * A queue was paused (payload \`<name>\`, or \`<schema>:<name>\`): processes
 * hand back the tasks of that queue they claimed but have not started.
 */
export const QUEUES = 'taskheap_queue';

/**
 * SQL twin of `sameSchedule`: the stored job `j` and the new one have the
 * same rule but for its start point. The job then keeps its state: a pause
 * survives the re-registration of every deploy, and so do the end of a
 * finished job (`done`: its times or its until are used up) and a cancel.
 */
const SAME = `((j.rule::jsonb - 'start' - 'anchor') = (EXCLUDED.rule::jsonb - 'start' - 'anchor'))`;

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

/** The columns a task row is read with; `a` is the table alias. */
export function taskColumns(a: string): string {
  return `${a}.id, ${a}.name, ${a}.key, ${a}.payload, ${a}.state, ${ms(`${a}.run_at`)} AS run_at, ${a}.attempts, ${a}.max_attempts,
    ${a}.options, ${a}.last_error, ${a}.job_key, ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at,
    ${a}.result, ${a}.errors, ${a}.serial, ${a}.priority, ${a}.queue, ${a}.rate_key, ${ms(`${a}.started_at`)} AS started_at,
    ${a}.progress, ${a}.logs, ${a}.locked_by, ${ms(`${a}.locked_until`)} AS locked_until`;
}

/** The columns \`taskColumns\` names, read from \`a\` (a CTE that returned them). */
const TASK_COLUMNS = (a: string) =>
  [
    'id',
    'name',
    'key',
    'payload',
    'state',
    'run_at',
    'attempts',
    'max_attempts',
    'options',
    'last_error',
    'job_key',
    'created_at',
    'updated_at',
    'result',
    'errors',
    'serial',
    'priority',
    'queue',
  ]
    .map((column) => `${a}.${column}`)
    .join(', ');

/**
 * The due time cut to ms, as listings order by it (the cursor is in ms): in
 * UTC, so it is immutable and the index taskheap_tasks_listing (migrations.ts)
 * serves it; the first page of 100,000 tasks reads 50 index entries.
 */
const LISTING = (a: string) => `date_trunc('milliseconds', ${a}.run_at AT TIME ZONE 'UTC')`;

/** The columns a job row is read with; `a` is the table alias. */
function jobColumns(a: string): string {
  return `${a}.key, ${a}.name, ${a}.payload, ${a}.state, ${ms(`${a}.next_run_at`)} AS next_run_at, ${a}.runs, ${a}.rule,
    ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at`;
}

/** SQL: the priority a stored job's options (JSON text) give its occurrences. */
const PRIORITY_OF = (options: string) => `COALESCE((${options}::jsonb ->> 'priority')::int, 0)`;

/** The statements of a store whose tables live in `schema` (undefined: the search_path). */
export function statements(schema: string | undefined) {
  const t = (name: string) => (schema === undefined ? name : `${quote(schema)}.${name}`);
  const T = t('taskheap_tasks');
  const J = t('taskheap_jobs');
  const M = t('taskheap_meta');
  const L = t('taskheap_limits');
  const Q = t('taskheap_queues');
  // A replaced keyed task starts over: it lets go of any slot it held (waiting for a retry), under
  // whichever key (its new one may differ). Only replaced rows look (xmax: the row was updated).
  const REPLACED_LET_GO = `released AS (UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h WHERE h <> ALL (r.ids))
        FROM (SELECT array_agg(id) AS ids FROM saved WHERE replaced) AS r
        WHERE l.kind = 'concurrency' AND r.ids IS NOT NULL AND l.holders && r.ids),
      ${upsertLimits(L, 'limits', 'saved')}`;
  return {
    /** Entry \`v\` upgrades version \`v\` to \`v + 1\` (see migrations.ts). */
    migrations: MIGRATIONS.map((migration) => inSchema(migration.sql, schema)),
    /** Processes starting together migrate one at a time. */
    migrationLock: `SELECT pg_advisory_xact_lock(hashtext('taskheap:' || $1::text))`,
    createSchema: schema === undefined ? undefined : `CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`,
    createMeta: inSchema(META, schema),
    readVersion: `SELECT version FROM ${M}`,
    insertVersion: `INSERT INTO ${M} (version) VALUES ($1)`,
    updateVersion: `UPDATE ${M} SET version = $1`,

    /**
     * A task without a key (keyed ones go through addKeyed, which decides by
     * their dedupe mode and says what it did; the conflict clause here only
     * keeps the statement safe should a key come this way).
     */
    addTask: `WITH saved AS (
        INSERT INTO ${T} AS t (name, key, payload, run_at, max_attempts, options, serial, priority, queue, rate_key)
        VALUES ($1, $2, $3, ${ts('$4')}, $5, $6, $8, $9, $10, $11)
        ON CONFLICT (key) WHERE key IS NOT NULL DO UPDATE SET name = EXCLUDED.name, payload = EXCLUDED.payload, state = 'waiting', run_at = EXCLUDED.run_at,
          attempts = 0, max_attempts = EXCLUDED.max_attempts, options = EXCLUDED.options, locked_by = NULL, locked_until = NULL,
          last_error = NULL, expiries = 0, result = NULL, errors = NULL, started_at = NULL, progress = NULL, logs = NULL,
          serial = EXCLUDED.serial, priority = EXCLUDED.priority, queue = EXCLUDED.queue, rate_key = EXCLUDED.rate_key,
          updated_at = now()
        WHERE t.state <> 'running'
        RETURNING ${taskColumns('t')}, (t.xmax <> 0) AS replaced),
      ${REPLACED_LET_GO}
      SELECT saved.*, pg_notify('${WAKE}', $7) FROM saved`,
    /**
     * Many tasks without keys in one statement (keyed batches go through
     * addKeyed, which decides each key's dedupe); one wake for the earliest.
     * Nothing to meet, so a plain insert: no ON CONFLICT (its speculative
     * insertion costs each row), no replaced task to let go of. Each comes
     * back as its id, due time and creation time (the statement's now()):
     * everything else of a row just inserted is what the caller gave or a
     * default, and reading every column of every row back cost a quarter of
     * a bulk enqueue (1,000 per call, 73,000-82,000 tasks/s against
     * 103,000-107,000).
     */
    addTasks: `WITH saved AS (
        INSERT INTO ${T} AS t (name, key, payload, run_at, max_attempts, options, serial, priority, queue, rate_key)
        SELECT u.name, u.key, u.payload, ${ts('u.at')}, u.max_attempts, u.options, u.serial, u.priority, u.queue, u.rate_key
        FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[], $5::int[], $6::text[], $8::text[], $9::int[], $10::text[], $11::text[])
          WITH ORDINALITY AS u(name, key, payload, at, max_attempts, options, serial, priority, queue, rate_key, ord)
        ORDER BY u.ord
        RETURNING t.id, ${ms('t.run_at')} AS run_at, t.serial, t.rate_key, t.options),
      ${upsertLimits(L, 'limits', 'saved')},
      wake AS (SELECT pg_notify('${WAKE}', $7 || MIN(run_at)::bigint::text) FROM saved HAVING count(*) > 0)
      SELECT saved.id, saved.run_at, ${ms('now()')} AS created_at FROM saved LEFT JOIN wake ON true ORDER BY saved.id`,
    /**
     * Keyed tasks (and keyless ones alongside), given as parallel arrays with
     * distinct keys, each meeting the task stored with its key as its dedupe
     * mode ($10: replace, keep, throttle, debounce; $11 the period in ms)
     * says (each row written takes its item's queue, $12), by the rules of \`decide\` in durable/dedupe.ts, under the key's
     * row lock ($4, the due time, is already a debounce's). \`locked\` locks the key's row (in key order,
     * so two adds cannot deadlock on keys) and reads its latest version,
     * whatever the snapshot held, unless it is running: a running task is
     * only ever answered (\`existing\`), so \`old\` reads it without a lock,
     * which a caller's transaction would hold to its end while the worker
     * running the task waited on it to renew its lease. A finished task that
     * other tasks depend on stays as it ended (\`detach\`): its key goes to
     * a new row (\`detached\` runs before the insert meets the key); an add whose key is
     * not in the snapshot inserts, and if a concurrent add inserted it first,
     * DO NOTHING returns no row for it: the store runs those again (the next
     * statement's snapshot sees the row, and locks it). A throttle's period
     * is on the server's clock, at the statement's start; a throttled add
     * that writes the task sets its created_at, where the next period
     * starts. Each row comes back with its item's ordinal (NULL for inserted
     * rows: matched by key, keyless ones by id order) and the action taken;
     * one wake for the earliest written.
     */
    addKeyed: `WITH
      u AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[], $5::int[], $6::text[], $8::text[], $9::int[], $10::text[], $11::float8[], $12::text[],
          $13::text[]) WITH ORDINALITY AS u(name, key, payload, at, max_attempts, options, serial, priority, mode, period, queue, rate_key, ord)),
      locked AS (SELECT ${taskColumns('t')}, t.created_at AS created_ts, t.has_dependents FROM ${T} AS t
        WHERE t.key = ANY($2::text[]) AND t.state <> 'running' ORDER BY t.key FOR UPDATE),
      old AS (SELECT * FROM locked UNION ALL
        SELECT ${taskColumns('t')}, t.created_at AS created_ts, t.has_dependents FROM ${T} AS t WHERE t.key = ANY($2::text[]) AND t.state = 'running'),
      plan AS (SELECT u.*, o.id AS old_id,
          CASE WHEN o.id IS NULL THEN 'insert'
            WHEN u.mode = 'throttle' AND o.created_ts > statement_timestamp() - ${millis('u.period')} THEN 'existing'
            WHEN o.state = 'running' THEN 'existing'
            WHEN o.state = 'waiting' THEN CASE WHEN u.mode = 'keep' THEN 'existing' ELSE 'replace' END
            WHEN o.has_dependents THEN 'detach'
            ELSE 'renew' END AS action,
          ${ts('u.at')} AS due
        FROM u LEFT JOIN old AS o ON o.key = u.key),
      detached AS (UPDATE ${T} AS t SET key = NULL FROM plan AS p WHERE t.id = p.old_id AND p.action = 'detach' RETURNING t.id),
      upd AS (UPDATE ${T} AS t SET name = p.name, payload = p.payload, state = 'waiting', run_at = p.due, attempts = 0, max_attempts = p.max_attempts,
          options = p.options, locked_by = NULL, locked_until = NULL, last_error = NULL,
          expiries = 0, result = NULL, errors = NULL, started_at = NULL, progress = NULL, logs = NULL, serial = p.serial, priority = p.priority, queue = p.queue, rate_key = p.rate_key,
          updated_at = now(),
          created_at = CASE WHEN p.mode = 'throttle' THEN statement_timestamp() ELSE t.created_at END
        FROM plan AS p WHERE t.id = p.old_id AND p.action IN ('replace', 'renew')
        RETURNING ${taskColumns('t')}, p.ord, p.action),
      ins AS (INSERT INTO ${T} AS t (name, key, payload, run_at, max_attempts, options, serial, priority, queue, rate_key, created_at)
        SELECT p.name, p.key, p.payload, p.due, p.max_attempts, p.options, p.serial, p.priority, p.queue, p.rate_key,
          CASE WHEN p.mode = 'throttle' THEN statement_timestamp() ELSE now() END
        FROM plan AS p WHERE p.action IN ('insert', 'detach') AND (SELECT count(*) FROM detached) >= 0 ORDER BY p.ord
        ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING
        RETURNING ${taskColumns('t')}),
      released AS (UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h WHERE h <> ALL (r.ids))
        FROM (SELECT array_agg(id) AS ids FROM upd) AS r
        WHERE l.kind = 'concurrency' AND r.ids IS NOT NULL AND l.holders && r.ids),
      written AS (SELECT id, serial, rate_key, options FROM upd UNION ALL SELECT id, serial, rate_key, options FROM ins),
      ${upsertLimits(L, 'limits', 'written')},
      wake AS (SELECT pg_notify('${WAKE}', $7 || MIN(w.run_at)::bigint::text) FROM (SELECT run_at FROM upd UNION ALL SELECT run_at FROM ins) AS w
        HAVING count(*) > 0)
      SELECT r.* FROM (SELECT ${TASK_COLUMNS('upd')}, upd.ord, upd.action FROM upd
        UNION ALL SELECT ${TASK_COLUMNS('ins')}, NULL::bigint, 'insert' FROM ins
        UNION ALL SELECT ${TASK_COLUMNS('o')}, p.ord, 'existing' FROM plan AS p JOIN old AS o ON o.id = p.old_id WHERE p.action = 'existing') AS r
      LEFT JOIN wake ON true`,
    /** Limit changes an add in a caller's transaction makes, applied first on the store's own connection (claim-sql.ts). */
    setLimits: setLimits(L),
    taskById: `SELECT ${taskColumns('t')} FROM ${T} AS t WHERE t.id = $1`,
    /** Of the ids $1, the tasks over, and those gone (no columns but \`asked\`): one probe of the primary key each, nothing read of the others. */
    endedTasks: `SELECT i::float8 AS asked, ${taskColumns('t')} FROM unnest($1::bigint[]) AS i LEFT JOIN ${T} AS t ON t.id = i
      WHERE t.id IS NULL OR t.state NOT IN ('blocked', 'waiting', 'running')`,
    /**
     * Every filter is optional (NULL). The cursor ($8, $9) is the last row of
     * the previous page as the caller saw it, in ms: rows are ordered by
     * their due time cut to ms, then id, so a cursor never skips a row.
     */
    listTasks: `SELECT ${taskColumns('t')} FROM ${T} AS t
      WHERE ($1::text IS NULL OR t.state = $1) AND ($2::text IS NULL OR t.name = $2) AND ($3::text IS NULL OR t.job_key = $3)
        AND ($5::text IS NULL OR left(t.key, length($5)) = $5) AND ($10::text IS NULL OR t.queue = $10)
        AND ($6::float8 IS NULL OR t.run_at >= ${ts('$6')}) AND ($7::float8 IS NULL OR t.run_at < ${ts('$7')})
        AND ($8::float8 IS NULL OR (${LISTING('t')}, t.id) > (${ts('$8')} AT TIME ZONE 'UTC', $9::bigint))
      ORDER BY ${LISTING('t')}, t.id LIMIT $4`,
    jobByKey: `SELECT ${jobColumns('j')} FROM ${J} AS j WHERE j.key = $1`,
    listJobs: `SELECT ${jobColumns('j')} FROM ${J} AS j
      WHERE ($1::text IS NULL OR j.state = $1) AND ($2::text IS NULL OR j.name = $2)
        AND ($3::text IS NULL OR left(j.key, length($3)) = $3) AND ($4::text IS NULL OR j.key > $4)
      ORDER BY j.key LIMIT $5`,
    /** Occurrences of the jobs $1 by state, and the latest due time of those that started. */
    jobStats: `SELECT job_key, state, count(*) AS n, max(${ms('COALESCE(scheduled_at, run_at)')}) FILTER (WHERE state <> 'waiting') AS last
      FROM ${T} WHERE job_key = ANY($1::text[]) GROUP BY job_key, state`,
    /** Pause or resume; a resumed job wakes the workers. */
    setJobState: `WITH changed AS (UPDATE ${J} SET state = $3, updated_at = now() WHERE key = $1 AND state = $2 RETURNING next_run_at)
      SELECT CASE WHEN $3 = 'scheduled' AND next_run_at IS NOT NULL
        THEN pg_notify('${WAKE}', $4 || (extract(epoch from next_run_at) * 1000)::bigint::text) END FROM changed`,
    /** A paused job, locked, as the claim reads a due one (resumedAt decides its next time), with the server's now. */
    pausedJob: `SELECT key, name, payload, rule, ${ms('next_run_at')} AS next_run_at, remaining, ${ms('until')} AS until, options,
        ${ms('now()')} AS now
      FROM ${J} WHERE key = $1 AND state = 'paused' FOR UPDATE`,
    /** Resumes a paused job due next at $2 (null: none is left, it is done); wakes the workers. */
    resumeJob: `WITH changed AS (UPDATE ${J} SET state = CASE WHEN $2::float8 IS NULL THEN 'done' ELSE 'scheduled' END,
          next_run_at = ${ts('$2')}, updated_at = now()
        WHERE key = $1 AND state = 'paused' RETURNING next_run_at)
      SELECT CASE WHEN next_run_at IS NOT NULL THEN pg_notify('${WAKE}', $3 || (extract(epoch from next_run_at) * 1000)::bigint::text) END
      FROM changed`,
    /**
     * An extra occurrence due now: scheduled_at stays NULL, so it never takes
     * the place of a scheduled occurrence (the unique key ignores NULLs).
     */
    triggerJob: `WITH added AS (
        INSERT INTO ${T} AS t (name, payload, run_at, max_attempts, options, job_key, serial, priority, queue, rate_key)
        SELECT name, payload, now(), COALESCE((options::jsonb #>> '{retry,attempts}')::int, 1), options, key, ${SERIAL_OF('options')}, ${PRIORITY_OF('options')},
          ${QUEUE_OF('options')}, ${RATE_KEY_OF('options')}
        FROM ${J} WHERE key = $1 AND state <> 'cancelled'
        RETURNING ${taskColumns('t')}),
      ${upsertLimits(L, 'limits', 'added')}
      SELECT added.*, pg_notify('${WAKE}', $2 || added.run_at::bigint::text) FROM added`,

    /**
     * Re-registering the same schedule (every start does) keeps the job's
     * place in it: its rule's start point, next occurrence and count left
     * (see sameSchedule in durable/rule-json.ts; start and anchor are the start point).
     */
    addJob: `WITH saved AS (
        INSERT INTO ${J} AS j (key, name, payload, rule, state, next_run_at, remaining, until, options)
        VALUES ($1, $2, $3, $4, $5, ${ts('$6')}, $7, ${ts('$8')}, $9)
        ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, payload = EXCLUDED.payload,
          rule = CASE WHEN ${SAME} THEN j.rule ELSE EXCLUDED.rule END,
          state = CASE WHEN ${SAME} THEN j.state ELSE EXCLUDED.state END,
          next_run_at = CASE WHEN ${SAME} THEN j.next_run_at ELSE EXCLUDED.next_run_at END,
          remaining = CASE WHEN ${SAME} THEN j.remaining ELSE EXCLUDED.remaining END,
          until = EXCLUDED.until, options = EXCLUDED.options, updated_at = now()
        RETURNING j.key, j.name, j.payload, j.state, j.next_run_at, j.runs, j.created_at, j.updated_at)
      SELECT key, name, payload, state, ${ms('next_run_at')} AS next_run_at, runs, ${ms('created_at')} AS created_at, ${ms('updated_at')} AS updated_at,
        CASE WHEN next_run_at IS NOT NULL THEN pg_notify('${WAKE}', $10 || (extract(epoch from next_run_at) * 1000)::bigint::text) END
      FROM saved`,

    /** The common case, no recurring job due: claims in one statement and says whether a job is due. */
    claimUnlessJobsDue: claimSql(T, J, L, Q, M, true),
    claim: claimSql(T, J, L, Q, M, false),
    /** The claim when no limit is in play anywhere; says so (`limited`), claiming nothing, when one is (plain-claim-sql.ts). */
    claimPlain: plainClaimSql(T, J, L, Q, M),
    /** This process's scheduler-wide bucket ($1 per $2 ms): the most recent process to start or set it decides the limit. */
    setSchedulerRate: `INSERT INTO ${L} AS l (kind, key, lim, interval_ms) VALUES ('rate', '', $1, $2)
      ON CONFLICT (kind, key) DO UPDATE SET lim = EXCLUDED.lim, interval_ms = EXCLUDED.interval_ms, updated_at = now()`,
    /** Another process materializing the same job holds its row: skip it, that process does the work. */
    dueJobs: `SELECT key, name, payload, rule, ${ms('next_run_at')} AS next_run_at, remaining, ${ms('until')} AS until, options,
        ${ms('now()')} AS now
      FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()
      ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
    runningJobs: `SELECT DISTINCT job_key FROM ${T}
      WHERE job_key = ANY($1::text[]) AND state = 'running' AND locked_until > now()`,
    /** (job_key, scheduled_at) is unique: an occurrence is inserted once, whichever process gets there first. */
    insertOccurrences: `WITH added AS (INSERT INTO ${T} (name, payload, run_at, scheduled_at, max_attempts, options, job_key, serial, priority, queue, rate_key)
        SELECT u.name, u.payload, ${ts('u.at')}, ${ts('u.at')}, u.max_attempts, u.options, u.job_key, ${SERIAL_OF('u.options')}, ${PRIORITY_OF('u.options')},
          ${QUEUE_OF('u.options')}, ${RATE_KEY_OF('u.options')}
        FROM unnest($1::text[], $2::text[], $3::float8[], $4::int[], $5::text[], $6::text[]) AS u(name, payload, at, max_attempts, options, job_key)
        ON CONFLICT (job_key, scheduled_at) WHERE job_key IS NOT NULL DO NOTHING
        RETURNING id, serial, rate_key, options),
      ${upsertLimits(L, 'limits', 'added')}
      SELECT count(*) FROM added`,
    advanceJobs: `UPDATE ${J} AS j SET next_run_at = ${ts('u.next')}, remaining = u.remaining, state = u.state,
        runs = j.runs + u.added, updated_at = now()
      FROM unnest($1::text[], $2::float8[], $3::int[], $4::text[], $5::int[]) AS u(key, next, remaining, state, added)
      WHERE j.key = u.key`,
    nextDue: nextDueSql(T, J, L, Q, M),

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
     * still holds: per row, kind 'complete' (final state, error, the
     * handler's return value as `result`), 'retry' (waiting again, due delay
     * ms after the server's now, error) or 'release' (waiting again, the
     * claim's attempt not counted). A failure's error (final or retried)
     * joins the bounded `errors` history. A final state lets go of the
     * task's serial key (a retried or released task keeps it: strict order).
     * One wake carries the earliest time a retried or released task, or the
     * next task of a freed serial key, is due (it reaches this process too,
     * whose next claim may already be on its way); the final states are
     * announced on DONE for `waitFor()`, DONE_IDS ids to a notification:
     * every notification takes a database-wide lock at commit and a place in
     * the queue every listener reads, and one per task cost a tenth of the
     * throughput of no-op tasks.
     */
    settle: `WITH
        u AS (SELECT * FROM ${batch('$1::bigint[], $2::text[], $3::text[], $4::float8[], $5::text[], $8::text[]')}
          AS u(id, kind, state, delay, error, result)),
        done AS (UPDATE ${T} AS t SET
            state = CASE u.kind WHEN 'complete' THEN u.state ELSE 'waiting' END,
            run_at = CASE u.kind WHEN 'retry' THEN now() + ${millis('u.delay')} ELSE t.run_at END,
            last_error = CASE u.kind WHEN 'release' THEN t.last_error ELSE u.error END,
            result = CASE u.kind WHEN 'complete' THEN u.result ELSE t.result END,
            errors = CASE WHEN u.kind = 'retry' OR (u.kind = 'complete' AND u.state IN ('failed', 'timed-out'))
              THEN ${appendError('u.error')} ELSE t.errors END,
            attempts = t.attempts - (u.kind = 'release')::int,
            locked_by = NULL, locked_until = NULL, updated_at = now()
          FROM u WHERE t.id = u.id AND t.locked_by = $6 AND (u.kind <> 'release' OR t.state = 'running')
          RETURNING t.id, u.kind, t.run_at, t.serial, t.queue),
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
     * (The trigger of migrations.ts FLOWS revives what they sank.)
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
    /** The job and its waiting occurrences, whose final state is announced on DONE ($2: the payload prefix) as a settle's are. */
    cancelJob: `WITH
        job AS (UPDATE ${J} SET state = 'cancelled', next_run_at = NULL, updated_at = now() WHERE key = $1 AND state <> 'cancelled' RETURNING key),
        occurrences AS (UPDATE ${T} SET state = 'cancelled', updated_at = now() WHERE job_key = $1 AND state = 'waiting' RETURNING id, serial),
        ${letGo(L, 'freed', 'occurrences')}
      SELECT (SELECT count(*) FROM job) AS n,
        (SELECT count(*) FROM (SELECT pg_notify('${DONE}', $2 || string_agg(id::text, ',')) AS sent
          FROM (SELECT id, (row_number() OVER () - 1) / ${DONE_IDS} AS part FROM occurrences) AS ended GROUP BY part) AS announced) AS announced`,
    /**
     * Retention: deletes up to $3 finished tasks older than their age ($1 ms
     * for succeeded ones, $2 for the others; null: kept), oldest first, by
     * the server's clock. Rows another process is deleting are skipped.
     */
    pruneTasks: `WITH doomed AS (SELECT id FROM ${T}
        WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled')
          AND updated_at < now() - ${millis('LEAST($1::float8, $2::float8)')}
          AND updated_at < now() - ${millis(`CASE WHEN state = 'succeeded' THEN $1::float8 ELSE $2::float8 END`)}
        ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED)
      DELETE FROM ${T} AS t USING doomed WHERE t.id = doomed.id`,
    /**
     * A safety net run with retention: key rows whose holder is gone or
     * finished (every path that finishes a task lets go of its key in the
     * same statement, so this should find nothing). A holder mid-claim is
     * waiting in the snapshot, so it is never taken for gone.
     */
    pruneKeys: `UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h
        WHERE EXISTS (SELECT 1 FROM ${T} AS t WHERE t.id = h AND t.state IN ('waiting', 'running')))
      WHERE l.kind = 'concurrency' AND cardinality(l.holders) > 0
        AND EXISTS (SELECT 1 FROM unnest(l.holders) AS h WHERE NOT EXISTS (SELECT 1 FROM ${T} AS t WHERE t.id = h AND t.state IN ('waiting', 'running')))`,
    /**
     * Retention for limit rows: up to $1 rows that limit nothing now (a
     * concurrency key no task holds or waits for, a bucket with no start in
     * its window and no task waiting or running under it) are deleted,
     * oldest first; returns their keys. A task added meanwhile makes its row
     * again (its add upserts it; a row its add has locked is skipped): the
     * rows a claim walks are those of keys in use, not every key ever seen.
     */
    pruneLimits: `WITH idle AS (SELECT l.kind, l.key FROM ${L} AS l
        WHERE l.key <> '' AND cardinality(l.holders) = 0
          AND NOT EXISTS (SELECT 1 FROM unnest(l.starts) AS s WHERE s > now() - ${millis('l.interval_ms')})
          AND NOT (l.kind = 'concurrency' AND EXISTS (SELECT 1 FROM ${T} AS t WHERE t.serial = l.key AND t.state = 'waiting'))
          AND NOT (l.kind = 'rate' AND EXISTS (SELECT 1 FROM ${T} AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running')))
        ORDER BY l.updated_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      DELETE FROM ${L} AS l USING idle WHERE l.kind = idle.kind AND l.key = idle.key RETURNING l.kind, l.key`,
    /**
     * After pruneLimits committed, with a fresh snapshot: the rows of
     * concurrency keys $1 and buckets $2 that a task names after all (one
     * added while the prune decided, from its older snapshot) are made again.
     */
    repairLimits: `WITH named AS (SELECT id, CASE WHEN serial = ANY ($1::text[]) THEN serial END AS serial,
          CASE WHEN rate_key = ANY ($2::text[]) THEN rate_key END AS rate_key, options FROM ${T}
        WHERE (state = 'waiting' AND serial = ANY ($1::text[]))
          OR (state IN ('waiting', 'running') AND rate_key = ANY ($2::text[]))),
      ${upsertLimits(L, 'limits', 'named')}
      SELECT count(*)::int AS n FROM named`,
    /** Retention: recurring jobs that are over (done or cancelled) older than $1 ms. */
    pruneJobs: `WITH doomed AS (SELECT key FROM ${J} WHERE state IN ('done', 'cancelled') AND updated_at < now() - ${millis('$1')}
        LIMIT $2 FOR UPDATE SKIP LOCKED)
      DELETE FROM ${J} AS j USING doomed WHERE j.key = doomed.key`,
    /**
     * Named queues: pauses or resumes queue $1 ($2; null: unchanged), sets
     * its global concurrency ($3 true: set it to $4, null for none) and its
     * rate ($6 true: $7 per $8 ms, null for none; the starts made stay, so a
     * new limit counts them). Setting a global concurrency where there was
     * none counts the queue's running tasks: from then on claims and
     * outcomes keep the count. A resume wakes every process.
     */
    setQueue: `WITH saved AS (INSERT INTO ${Q} AS q (name, paused, global_concurrency, running, rate_limit, rate_interval_ms)
        VALUES ($1, COALESCE($2::boolean, false), CASE WHEN $3::boolean THEN $4::int END,
          (SELECT count(*) FROM ${T} WHERE queue = $1 AND state = 'running'), CASE WHEN $6::boolean THEN $7::int END,
          CASE WHEN $6::boolean THEN $8::float8 END)
        ON CONFLICT (name) DO UPDATE SET paused = COALESCE($2::boolean, q.paused),
          global_concurrency = CASE WHEN $3::boolean THEN $4::int ELSE q.global_concurrency END,
          running = CASE WHEN NOT $3::boolean THEN q.running WHEN $4::int IS NULL THEN 0 WHEN q.global_concurrency IS NULL THEN EXCLUDED.running
            ELSE q.running END,
          rate_limit = CASE WHEN $6::boolean THEN $7::int ELSE q.rate_limit END,
          rate_interval_ms = CASE WHEN $6::boolean THEN $8::float8 ELSE q.rate_interval_ms END,
          updated_at = now()
        RETURNING q.paused)
      SELECT CASE WHEN NOT paused THEN pg_notify('${WAKE}', $5 || (extract(epoch from now()) * 1000)::bigint::text)
        WHEN $2::boolean THEN pg_notify('${QUEUES}', $5 || $1) END FROM saved`,
    /** Every queue ($1 null) or one: its settings and its tasks by state (a queue row without tasks too). */
    // One scan of the tasks: the counts also name the queues that have tasks.
    listQueues: `WITH c AS (SELECT queue, state, count(*) AS n FROM ${T} WHERE $1::text IS NULL OR queue = $1 GROUP BY queue, state)
      SELECT n.name, COALESCE(q.paused, false) AS paused, q.global_concurrency, q.rate_limit, q.rate_interval_ms, c.state,
        COALESCE(c.n, 0) AS n
      FROM (SELECT name FROM ${Q} WHERE $1::text IS NULL OR name = $1 UNION SELECT queue FROM c) AS n
      LEFT JOIN ${Q} AS q ON q.name = n.name
      LEFT JOIN c ON c.queue = n.name
      ORDER BY n.name`,
    listen: `LISTEN ${WAKE}; LISTEN ${CANCEL}; LISTEN ${QUEUES}`,
    listenDone: `LISTEN ${DONE}`,
  };
}

/** The statements of one store. */
export type Statements = ReturnType<typeof statements>;
