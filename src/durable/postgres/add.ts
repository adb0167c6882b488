// Adding tasks on PostgreSQL: tasks without keys in one insert, keyed ones
// each meeting its key's stored task as its dedupe mode says (decided in
// SQL, under the key's row lock, by the rules of durable/dedupe.ts), the
// limit rows they name made, and one wake for the earliest. In the caller's
// transaction (`client`), the limit changes an add makes go first, on the
// store's own connection. (A recurring job's add is jobs.ts's, a flow's
// flows.ts's.)
import { dueAt } from '../dedupe.js';
import { insertedTask, toTask, type InsertedRow, type TaskRow } from '../rows.js';
import { enqueued, type EnqueuedTask, type NewTask, type QueryClient } from '../store.js';
import type { Connection } from './connection.js';
import { WAKE } from './listener.js';
import { applyLimits, upsertLimits, type LimitStatements } from './limits.js';
import { millis, ms, tables, taskColumns, ts, unlessUsual } from './tables.js';

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
  const { T, L, D } = tables(schema);
  return {
    /**
     * A task without a key (keyed ones go through addKeyed, which decides by
     * their dedupe mode and says what it did): a plain insert, as in
     * addTasks, with nothing stored to meet or let go of.
     */
    addTask: `WITH saved AS (
        INSERT INTO ${T} AS t (name, payload, run_at, max_attempts, options, serial, priority, queue, rate_key)
        VALUES ($1, $2, ${ts('$3')}, $4, $5, $7, $8, $9, $10)
        RETURNING ${taskColumns('t')}),
      ${upsertLimits(L, 'limits', 'saved')}
      SELECT saved.*, pg_notify('${WAKE}', $6) FROM saved`,
    /**
     * Many tasks without keys in one statement (keyed batches go through
     * addKeyed, which decides each key's dedupe); one wake for the earliest.
     * A column every task leaves at its usual value comes empty (unlessUsual).
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
        SELECT u.name, u.key, u.payload, ${ts('u.at')}, u.max_attempts, COALESCE(u.options, '{}'), u.serial, COALESCE(u.priority, 0),
          COALESCE(u.queue, 'default'), u.rate_key
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
     * mode ($10: replace, keep, rerun, throttle, debounce; $11 the period in ms)
     * says (each row written takes its item's queue, $12), by the rules of \`decide\` in durable/dedupe.ts, under the key's
     * row lock ($4, the due time, is already a debounce's). \`locked\` locks the key's row (in key order,
     * so two adds cannot deadlock on keys) and reads its latest version,
     * whatever the snapshot held, unless it is running: a running task is
     * answered (\`existing\`), so \`old\` reads it without a lock,
     * which a caller's transaction would hold to its end while the worker
     * running the task waited on it to renew its lease. Only \`'rerun'\`
     * writes a running row (\`follow\`: its key goes to a new row, blocked
     * by an edge to it until it ends; the edge's commit trigger applies an
     * end that slips in between), and it takes no caller's transaction
     * (enqueue.ts refuses the \`client\`). A blocked row, a follower, is
     * written over as a waiting one and stays blocked. A finished task stays
     * as it ended (\`detach\`): its key goes to a new row (\`detached\` runs
     * before the insert meets the key); an add whose key is
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
      locked AS (SELECT ${taskColumns('t')}, t.created_at AS created_ts FROM ${T} AS t
        WHERE t.key = ANY($2::text[]) AND t.state <> 'running' ORDER BY t.key FOR UPDATE),
      old AS (SELECT * FROM locked UNION ALL
        SELECT ${taskColumns('t')}, t.created_at AS created_ts FROM ${T} AS t WHERE t.key = ANY($2::text[]) AND t.state = 'running'),
      plan AS (SELECT u.*, o.id AS old_id,
          CASE WHEN o.id IS NULL THEN 'insert'
            WHEN u.mode = 'throttle' AND o.created_ts > statement_timestamp() - ${millis('u.period')} THEN 'existing'
            WHEN o.state = 'running' THEN CASE WHEN u.mode = 'rerun' THEN 'follow' ELSE 'existing' END
            WHEN o.state IN ('waiting', 'blocked') THEN CASE WHEN u.mode = 'keep' THEN 'existing' ELSE 'replace' END
            ELSE 'detach' END AS action,
          ${ts('u.at')} AS due
        FROM u LEFT JOIN old AS o ON o.key = u.key),
      detached AS (UPDATE ${T} AS t SET key = NULL FROM plan AS p WHERE t.id = p.old_id AND p.action IN ('detach', 'follow') RETURNING t.id),
      upd AS (UPDATE ${T} AS t SET name = p.name, payload = p.payload, state = CASE WHEN t.state = 'blocked' THEN 'blocked' ELSE 'waiting' END,
          run_at = p.due, attempts = 0, max_attempts = p.max_attempts,
          options = p.options, locked_by = NULL, locked_until = NULL, last_error = NULL,
          expiries = 0, result = NULL, errors = NULL, started_at = NULL, progress = NULL, logs = NULL, serial = p.serial, priority = p.priority, queue = p.queue, rate_key = p.rate_key,
          updated_at = now(),
          created_at = CASE WHEN p.mode = 'throttle' THEN statement_timestamp() ELSE t.created_at END
        FROM plan AS p WHERE t.id = p.old_id AND p.action = 'replace'
        RETURNING ${taskColumns('t')}, p.ord, p.action),
      ins AS (INSERT INTO ${T} AS t (name, key, payload, run_at, max_attempts, options, serial, priority, queue, rate_key, created_at, state, pending_deps)
        SELECT p.name, p.key, p.payload, p.due, p.max_attempts, p.options, p.serial, p.priority, p.queue, p.rate_key,
          CASE WHEN p.mode = 'throttle' THEN statement_timestamp() ELSE now() END,
          CASE WHEN p.action = 'follow' THEN 'blocked' ELSE 'waiting' END, (p.action = 'follow')::int
        FROM plan AS p WHERE p.action IN ('insert', 'detach', 'follow') AND (SELECT count(*) FROM detached) >= 0 ORDER BY p.ord
        ON CONFLICT (key) WHERE key IS NOT NULL DO NOTHING
        RETURNING ${taskColumns('t')}),
      followers AS (INSERT INTO ${D} (task_id, dep_id, ord, on_failure, counted, external)
        SELECT ins.id, p.old_id, 0, 'ignore', false, true FROM ins JOIN plan AS p ON p.key = ins.key WHERE p.action = 'follow'),
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

/** The statements of an add. */
type AddStatements = ReturnType<typeof addStatements>;

/** The statements an add runs: its own, and the limit changes made first for a caller's transaction. */
type AddSql = AddStatements & Pick<LimitStatements, 'setLimits'>;

/** A query through the store's pool or the caller's client. */
type Query = <R = TaskRow>(text: string, values: unknown[]) => Promise<{ rows: R[] }>;

/** How many times an add runs again when its key was added by a concurrent one after its snapshot (see addKeyed). */
const MAX_ROUNDS = 10;

/** One task: a keyed one meets its key's stored task (addKeyed); through `via`, in the caller's transaction. */
export async function addTask(
  db: Connection,
  sql: AddSql,
  prefix: string,
  task: NewTask,
  via: QueryClient | undefined,
): Promise<EnqueuedTask> {
  // Through the caller's client: their transaction decides, and the NOTIFY goes out at its commit.
  if (via !== undefined) await setLimitsFirst(db, sql, [task]);
  const query = queryVia(db, via);
  if (task.key !== null) return (await addKeyed(sql, prefix, query, [task]))[0]!;
  const { rows } = await query(sql.addTask, [
    task.name,
    task.payload,
    task.runAt,
    task.maxAttempts,
    task.options,
    `${prefix}${Math.round(task.runAt)}`,
    task.serial ?? null,
    task.priority ?? 0,
    task.queue ?? 'default',
    task.rateGroup ?? null,
  ]);
  return enqueued(toTask(rows[0]!), 'inserted');
}

/**
 * Before an add in a caller's transaction: the limits it changes, set on
 * the store's own connection, so that the caller's transaction holds no
 * limit row a claim or an outcome would wait for (see upsertLimits).
 */
function setLimitsFirst(db: Connection, sql: AddSql, tasks: readonly NewTask[]): Promise<void> {
  return applyLimits((text, values) => db.query(text, values), sql.setLimits, tasks);
}

/** Queries through the caller's client (in their transaction), or the store's pool. */
function queryVia(db: Connection, via: QueryClient | undefined): Query {
  return via === undefined
    ? <R>(text: string, values: unknown[]) => db.query<R>(text, values)
    : async <R>(text: string, values: unknown[]) => ({ rows: (await via.query(text, values)).rows as R[] });
}

/**
 * Adds tasks with distinct keys (keyless ones may come along), each
 * meeting its key's stored task as its dedupe mode says (see the
 * statement addKeyed). An add that found its key inserted by a concurrent one after
 * the statement's snapshot comes back without a row: it runs again, and
 * the next statement sees that row. Each statement is atomic on its own,
 * so this needs no transaction.
 */
async function addKeyed(sql: AddSql, prefix: string, query: Query, tasks: readonly NewTask[]): Promise<EnqueuedTask[]> {
  const results: (EnqueuedTask | undefined)[] = tasks.map(() => undefined);
  let pending = tasks.map((_, i) => i);
  for (let round = 0; pending.length > 0; round++) {
    if (round === MAX_ROUNDS) {
      throw new Error(
        `The tasks with keys ${pending.map((i) => JSON.stringify(tasks[i]!.key)).join(', ')} were added and removed by others ${MAX_ROUNDS} times while this add ran; try again`,
      );
    }
    const batch = pending.map((i) => tasks[i]!);
    const { rows } = await query(sql.addKeyed, [
      batch.map((t) => t.name),
      batch.map((t) => t.key),
      batch.map((t) => t.payload),
      batch.map((t) => dueAt(t.dedupe?.mode ?? 'replace', t.dedupe?.period ?? 0, t.runAt)),
      batch.map((t) => t.maxAttempts),
      batch.map((t) => t.options),
      prefix,
      batch.map((t) => t.serial ?? null),
      batch.map((t) => t.priority ?? 0),
      batch.map((t) => t.dedupe?.mode ?? 'replace'),
      batch.map((t) => t.dedupe?.period ?? 0),
      batch.map((t) => t.queue ?? 'default'),
      batch.map((t) => t.rateGroup ?? null),
    ]);
    const byKey = new Map<string, number>();
    const keyless: number[] = [];
    batch.forEach((task, j) => (task.key === null ? keyless.push(j) : byKey.set(task.key, j)));
    const fresh: TaskRow[] = [];
    for (const row of rows as (TaskRow & { ord: string | number | null; action: string })[]) {
      const j = row.ord !== null ? Number(row.ord) - 1 : row.key !== null ? byKey.get(row.key) : undefined;
      if (j === undefined) {
        fresh.push(row);
        continue;
      }
      const what = row.action === 'existing' ? 'existing' : row.action === 'replace' ? 'replaced' : 'inserted';
      results[pending[j]!] = enqueued(toTask(row), what);
    }
    // New keyless rows are numbered in the order given.
    fresh
      .sort((a, b) => Number(a.id) - Number(b.id))
      .forEach((row, n) => {
        results[pending[keyless[n]!]!] = enqueued(toTask(row), 'inserted');
      });
    pending = pending.filter((i) => results[i] === undefined);
  }
  return results as EnqueuedTask[];
}

/** Many tasks: all are written or none (in one transaction, or the caller's through `via`). */
export async function addTasks(
  db: Connection,
  sql: AddSql,
  prefix: string,
  tasks: readonly NewTask[],
  via: QueryClient | undefined,
): Promise<EnqueuedTask[]> {
  if (tasks.length === 0) return [];
  if (tasks.every((task) => task.key === null)) {
    if (via !== undefined) await setLimitsFirst(db, sql, tasks);
    return addUnkeyed(db, sql, prefix, tasks, via);
  }
  // A key given twice in one call: its adds meet in order, the n-th item of each key in the n-th statement.
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  tasks.forEach((task, i) => {
    const n = task.key === null ? 0 : (seen.get(task.key) ?? 0);
    if (task.key !== null) seen.set(task.key, n + 1);
    (rounds[n] ??= []).push(i);
  });
  const write = async (client: QueryClient): Promise<EnqueuedTask[]> => {
    const query = queryVia(db, client);
    const results: EnqueuedTask[] = [];
    for (const round of rounds) {
      const rows = await addKeyed(
        sql,
        prefix,
        query,
        round.map((i) => tasks[i]!),
      );
      round.forEach((i, j) => (results[i] = rows[j]!));
    }
    // Every item of a key reports the row as it ends up, with what its own add did.
    const last = new Map<string, EnqueuedTask>();
    for (const row of results) if (row.key !== null) last.set(row.key, row);
    return results.map((row) => (row.key === null || last.get(row.key) === row ? row : enqueued({ ...last.get(row.key)! }, row.enqueued)));
  };
  // Through the caller's client: their transaction decides, all or none, and the NOTIFY goes out at its commit.
  if (via === undefined) return db.transaction(write);
  await setLimitsFirst(db, sql, tasks);
  return write(via);
}

/** Tasks without keys: one insert of them all, numbered in the order given. */
async function addUnkeyed(
  db: Connection,
  sql: AddSql,
  prefix: string,
  tasks: readonly NewTask[],
  via?: QueryClient,
): Promise<EnqueuedTask[]> {
  const columns = {
    name: [] as string[],
    key: [] as (string | null)[],
    payload: [] as string[],
    at: [] as number[],
    max: [] as number[],
    options: [] as string[],
    serial: [] as (string | null)[],
    priority: [] as number[],
    queue: [] as string[],
    rateGroup: [] as (string | null)[],
  };
  for (const task of tasks) {
    columns.name.push(task.name);
    columns.key.push(task.key);
    columns.payload.push(task.payload);
    columns.at.push(task.runAt);
    columns.max.push(task.maxAttempts);
    columns.options.push(task.options);
    columns.serial.push(task.serial ?? null);
    columns.priority.push(task.priority ?? 0);
    columns.queue.push(task.queue ?? 'default');
    columns.rateGroup.push(task.rateGroup ?? null);
  }
  // One statement: atomic on its own, in the caller's transaction or not.
  const { rows } = await queryVia(db, via)<InsertedRow>(sql.addTasks, [
    columns.name,
    unlessUsual(columns.key, null),
    columns.payload,
    columns.at,
    columns.max,
    unlessUsual(columns.options, '{}'),
    prefix,
    unlessUsual(columns.serial, null),
    unlessUsual(columns.priority, 0),
    unlessUsual(columns.queue, 'default'),
    unlessUsual(columns.rateGroup, null),
  ]);
  return rows.map((row, i) => enqueued(insertedTask(tasks[i]!, row), 'inserted'));
}
