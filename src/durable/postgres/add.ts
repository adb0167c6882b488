// Adding tasks on PostgreSQL: tasks without keys in one insert, keyed ones
// each meeting its key's stored task as its dedupe mode says (decided in
// SQL, under the key's row lock), the limit rows they name made, and one
// wake for the earliest.
import { WAKE } from './listener.js';
import { upsertLimits } from './limits.js';
import { millis, ms, tables, taskColumns, ts } from './tables.js';

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

/** The statements of an add for tables in `schema` (undefined: the search_path). */
export function addStatements(schema: string | undefined) {
  const { T, L } = tables(schema);
  // A replaced keyed task starts over: it lets go of any slot it held (waiting for a retry), under
  // whichever key (its new one may differ). Only replaced rows look (xmax: the row was updated).
  const REPLACED_LET_GO = `released AS (UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h WHERE h <> ALL (r.ids))
        FROM (SELECT array_agg(id) AS ids FROM saved WHERE replaced) AS r
        WHERE l.kind = 'concurrency' AND r.ids IS NOT NULL AND l.holders && r.ids),
      ${upsertLimits(L, 'limits', 'saved')}`;
  return {
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
  };
}
