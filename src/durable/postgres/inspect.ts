// The PostgreSQL store's reads and writes for callers, operators and
// handlers that are not part of claiming: a task, the tasks of waiters that
// are over, a page of tasks in due order or newest first (one index, read
// either way), tasks counted by state under a listing's filters, finished
// tasks deleted and pruned (retention), the queues with their settings and
// counts, a task's links (durable/links.ts) and the limit groups in use
// (durable/limit-list.ts), each in one statement, and the batched write of
// handlers' progress and log lines (one statement for every task of a
// flush, bounded to the latest MAX_LOG_LINES lines).
import { MAX_LOG_LINES, type TaskLogLine } from '../../core/journal.js';
import { logsJson, toCounts, toEnded, toQueues, toTask, type QueueRow, type TaskRow } from '../rows.js';
import {
  UNFINISHED_SQL,
  type EndedTasks,
  type StoredQueue,
  type StoredState,
  type StoredTask,
  type TaskFilter,
  type TaskLinks,
  type LimitGroup,
} from '../store.js';
import { toLink, type LinkRow } from '../links.js';
import { toLimitGroup, type LimitGroupRow } from '../limit-list.js';
import type { Connection } from './connection.js';
import { millis, tables, taskColumns, ts } from './tables.js';

/** ms a finished task a waiter marked is kept at least, whatever the retention: its waiter reads it well within (an announcement, or the sweep's minute). */
const AWAITED_GRACE = 600_000;

/**
 * The due time cut to ms, as listings order by it (the cursor is in ms): in
 * UTC, so it is immutable and the index taskheap_tasks_listing (migrations.ts)
 * serves it; the first page of 100,000 tasks reads 50 index entries.
 */
const LISTING = (a: string) => `date_trunc('milliseconds', ${a}.run_at AT TIME ZONE 'UTC')`;

/** A filter's time as epoch ms, or null. */
function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
}

/** listTasks's parameters $1 to $10. */
function listParams(filter: TaskFilter): unknown[] {
  return [
    filter.state ?? null,
    filter.name ?? null,
    filter.jobKey ?? null,
    filter.limit ?? 100,
    filter.keyPrefix ?? null,
    epoch(filter.from),
    epoch(filter.to),
    epoch(filter.after?.runAt),
    filter.after?.id ?? null,
    filter.queue ?? null,
  ];
}

/** The statements of this file for tables in `schema` (undefined: the search_path). @internal */
export function inspectStatements(schema: string | undefined) {
  const { t, T, Q, D } = tables(schema);
  /** Of the ids $1, the tasks over, and those gone (no columns but `asked`): one probe of the primary key each, nothing read of the others. */
  const endedSql = `SELECT i::float8 AS asked, ${taskColumns('t')} FROM unnest($1::bigint[]) AS i LEFT JOIN ${T} AS t ON t.id = i
      WHERE t.id IS NULL OR t.state NOT IN ${UNFINISHED_SQL}`;
  const link = `json_build_object('id', l.id::float8, 'name', l.name, 'state', l.state, 'on_failure', d.on_failure, 'counted', d.counted)`;
  /** SQL: a CTE deleting the messages (steps.ts) of the tasks in `cte`, deleted with them. */
  const messagesOf = (cte: string) => `messages_gone AS (DELETE FROM ${t('taskheap_messages')} WHERE task_id IN (SELECT id FROM ${cte}))`;
  /**
   * SQL: CTEs deleting the flow edges of the tasks in `cte`, deleted with
   * them (no foreign key: migrations.ts, version 13): as dependent, then as
   * dependency, each by its index (one OR would read every edge).
   */
  const edgesOf = (cte: string) =>
    `edges_out AS (DELETE FROM ${D} WHERE task_id IN (SELECT id FROM ${cte})),
        edges_in AS (DELETE FROM ${D} WHERE dep_id IN (SELECT id FROM ${cte}))`;
  return {
    /** Every filter is optional (NULL), as listTasks's. */
    countTasks: `SELECT t.state, count(*) AS n FROM ${T} AS t
      WHERE ($1::text IS NULL OR t.name = $1) AND ($2::text IS NULL OR t.job_key = $2)
        AND ($3::text IS NULL OR left(t.key, length($3)) = $3) AND ($4::text IS NULL OR t.queue = $4)
        AND ($5::float8 IS NULL OR t.run_at >= ${ts('$5')}) AND ($6::float8 IS NULL OR t.run_at < ${ts('$6')})
      GROUP BY t.state`,
    /** Finished tasks under the filters of countTasks ($7: one final state, or any), $8 at most. */
    deleteTasks: `WITH doomed AS (SELECT t.id FROM ${T} AS t
      WHERE t.state IN ('succeeded', 'failed', 'timed-out', 'cancelled') AND ($7::text IS NULL OR t.state = $7)
        AND ($1::text IS NULL OR t.name = $1) AND ($2::text IS NULL OR t.job_key = $2)
        AND ($3::text IS NULL OR left(t.key, length($3)) = $3) AND ($4::text IS NULL OR t.queue = $4)
        AND ($5::float8 IS NULL OR t.run_at >= ${ts('$5')}) AND ($6::float8 IS NULL OR t.run_at < ${ts('$6')})
      ORDER BY t.id LIMIT $8 FOR UPDATE SKIP LOCKED),
        ${messagesOf('doomed')},
        ${edgesOf('doomed')}
      DELETE FROM ${T} AS t USING doomed WHERE t.id = doomed.id`,
    /**
     * Per task: the latest progress ($3, null: unchanged) and new log lines
     * ($4, a JSON array) appended to the kept ones, the latest MAX_LOG_LINES
     * kept; only tasks still running under owner $1.
     */
    journal: `UPDATE ${T} AS t SET progress = COALESCE(u.progress, t.progress),
        logs = CASE WHEN u.lines = '[]' THEN t.logs ELSE (SELECT jsonb_agg(k.e ORDER BY k.o)::text FROM (
          SELECT x.e, x.o FROM jsonb_array_elements(COALESCE(t.logs, '[]')::jsonb || u.lines::jsonb) WITH ORDINALITY AS x(e, o)
          ORDER BY x.o DESC LIMIT ${MAX_LOG_LINES}) AS k) END
      FROM unnest($2::bigint[], $3::text[], $4::text[]) AS u(id, progress, lines)
      WHERE t.id = u.id AND t.locked_by = $1 AND t.state = 'running'`,
    taskById: `SELECT ${taskColumns('t')} FROM ${T} AS t WHERE t.id = $1`,
    endedTasks: endedSql,
    /**
     * endedTasks, the others marked awaited first: a worker's settle then
     * keeps them whatever its retention (settle.ts). A settle that committed
     * first is not waited for: its announcement wakes the waiter, which reads
     * the row, or learns it is gone. Not a change of the task: updated_at stays.
     */
    awaitTasks: `WITH marked AS (UPDATE ${T} SET awaited = true
          WHERE id = ANY($1::bigint[]) AND state IN ${UNFINISHED_SQL} AND NOT awaited)
      ${endedSql}`,
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
    /** listTasks newest first (`order: 'desc'`), on the same index read backwards; the cursor ($8, $9) is the last row of the previous page. */
    listTasksDesc: `SELECT ${taskColumns('t')} FROM ${T} AS t
    WHERE ($1::text IS NULL OR t.state = $1) AND ($2::text IS NULL OR t.name = $2) AND ($3::text IS NULL OR t.job_key = $3)
      AND ($5::text IS NULL OR left(t.key, length($5)) = $5) AND ($10::text IS NULL OR t.queue = $10)
      AND ($6::float8 IS NULL OR t.run_at >= ${ts('$6')}) AND ($7::float8 IS NULL OR t.run_at < ${ts('$7')})
      AND ($8::float8 IS NULL OR (${LISTING('t')}, t.id) < (${ts('$8')} AT TIME ZONE 'UTC', $9::bigint))
    ORDER BY ${LISTING('t')} DESC, t.id DESC LIMIT $4`,
    /**
     * Retention: deletes up to $3 finished tasks older than their age ($1 ms
     * for succeeded ones, $2 for the others; null: kept), oldest first, by
     * the server's clock. Rows another process is deleting are skipped. A
     * task a waiter marked (awaitTasks) stays AWAITED_GRACE at least, so
     * that a retention of 0 does not take it before its waiter read it.
     * Also up to $3 messages whose task is gone: a send() that committed
     * while a settle deleted its task (retention 0) left its message behind,
     * as the settle's snapshot could not see it.
     */
    pruneTasks: `WITH doomed AS (SELECT id FROM ${T}
        WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled')
          AND updated_at < now() - ${millis('LEAST($1::float8, $2::float8)')}
          AND updated_at < now() - ${millis(`CASE WHEN state = 'succeeded' THEN $1::float8 ELSE $2::float8 END`)}
          AND (NOT awaited OR updated_at < now() - ${millis(String(AWAITED_GRACE))})
        ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED),
        ${messagesOf('doomed')},
        ${edgesOf('doomed')},
        orphans AS (DELETE FROM ${t('taskheap_messages')} WHERE id IN (SELECT m.id FROM ${t('taskheap_messages')} AS m
          WHERE NOT EXISTS (SELECT 1 FROM ${T} AS o WHERE o.id = m.task_id) LIMIT $3))
      DELETE FROM ${T} AS t USING doomed WHERE t.id = doomed.id`,
    /** Every queue ($1 null) or one: its settings and its tasks by state (a queue row without tasks too). */
    // One scan of the tasks: the counts also name the queues that have tasks.
    listQueues: `WITH c AS (SELECT queue, state, count(*) AS n FROM ${T} WHERE $1::text IS NULL OR queue = $1 GROUP BY queue, state)
      SELECT n.name, COALESCE(q.paused, false) AS paused, q.global_concurrency, q.rate_limit, q.rate_interval_ms, c.state,
        COALESCE(c.n, 0) AS n
      FROM (SELECT name FROM ${Q} WHERE $1::text IS NULL OR name = $1 UNION SELECT queue FROM c) AS n
      LEFT JOIN ${Q} AS q ON q.name = n.name
      LEFT JOIN c ON c.queue = n.name
      ORDER BY n.name`,
    /**
     * A task's links (docs/flows.md): its flow, the tasks it depends on and
     * those that depend on it, $2 of each at most, in one statement through
     * the taskheap_deps edges and their indexes (the primary key for a
     * dependent's edges, taskheap_deps_dep for a dependency's); no row: no task $1.
     */
    taskLinks: `SELECT s.state, s.flow_id::float8 AS flow_id,
      (SELECT COALESCE(json_agg(x.j ORDER BY x.ord), '[]') FROM (SELECT ${link} AS j, d.ord FROM ${D} AS d JOIN ${T} AS l ON l.id = d.dep_id
        WHERE d.task_id = s.id ORDER BY d.ord LIMIT $2) AS x) AS dependencies,
      (SELECT count(*)::int FROM ${D} WHERE task_id = s.id) AS dependency_count,
      (SELECT COALESCE(json_agg(x.j ORDER BY x.id), '[]') FROM (SELECT ${link} AS j, d.task_id AS id FROM ${D} AS d JOIN ${T} AS l ON l.id = d.task_id
        WHERE d.dep_id = s.id ORDER BY d.task_id LIMIT $2) AS x) AS dependents,
      (SELECT count(*)::int FROM ${D} WHERE dep_id = s.id) AS dependent_count
    FROM ${T} AS s WHERE s.id = $1`,
    /**
     * The limit groups in use (durable/limit-list.ts), $1 at most: the rows of
     * taskheap_limits but the scheduler-wide bucket (key ''), each with its
     * holders or its starts within the window at the database's now() (the
     * clock the claims use), and the waiting tasks naming it (through the
     * serial index and taskheap_tasks_rated, whose condition the `state IN`
     * repeats).
     */
    limitGroups: `SELECT l.kind, l.key, l.lim, l.interval_ms,
      CASE WHEN l.kind = 'concurrency' THEN cardinality(l.holders)
        ELSE (SELECT COALESCE(sum(c), 0) FROM unnest(l.starts, l.counts) AS x(s, c)
          WHERE s > now() - l.interval_ms * interval '1 millisecond') END::int AS in_use,
      CASE WHEN l.kind = 'concurrency' THEN (SELECT count(*) FROM ${T} AS t WHERE t.serial = l.key AND t.state = 'waiting')
        ELSE (SELECT count(*) FROM ${T} AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running') AND t.state = 'waiting') END::int AS waiting
    FROM ${t('taskheap_limits')} AS l WHERE l.key <> '' ORDER BY waiting DESC, l.kind, l.key LIMIT $1`,
  };
}

/** The statements of the reads and writes of this file. */
type InspectStatements = ReturnType<typeof inspectStatements>;

/** Tasks under `filter` (its state, cursor and limit aside) counted by state. @internal */
export async function countTasks(db: Connection, sql: InspectStatements, filter: TaskFilter): Promise<Record<StoredState, number>> {
  const { rows } = await db.query<{ state: StoredState; n: string }>(sql.countTasks, selection(filter));
  return toCounts(rows);
}

/** Deletes finished tasks under `filter`, at most its limit (default 10,000). @internal */
export async function deleteTasks(db: Connection, sql: InspectStatements, filter: TaskFilter): Promise<number> {
  const result = await db.query(sql.deleteTasks, [...selection(filter), filter.state ?? null, filter.limit ?? 10_000]);
  return Number((result as { rowCount?: number | null }).rowCount ?? 0);
}

/** $1 to $6 of countTasks and deleteTasks. */
function selection(filter: TaskFilter): unknown[] {
  return [filter.name ?? null, filter.jobKey ?? null, filter.keyPrefix ?? null, filter.queue ?? null, epoch(filter.from), epoch(filter.to)];
}

/**
 * One statement for a flush of progress and log lines. Should PostgreSQL
 * refuse what it holds (`refusedData`), each task's entry is written on its
 * own, so only an entry it refuses again is lost (told to `lost`); any other
 * failure (the database unreachable) rejects, as the batch's did.
 * @internal
 */
export async function writeJournal(
  db: Connection,
  sql: InspectStatements,
  owner: string,
  writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
  lost: (id: number, error: unknown) => void,
): Promise<void> {
  try {
    await db.query(sql.journal, journalParams(owner, writes));
  } catch (error) {
    if (!refusedData(error)) throw error;
    if (writes.length === 1) {
      lost(writes[0]!.id, error);
      return;
    }
    for (const write of writes) {
      try {
        await db.query(sql.journal, journalParams(owner, [write]));
      } catch (error) {
        if (!refusedData(error)) throw error;
        lost(write.id, error);
      }
    }
  }
}

function journalParams(
  owner: string,
  writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
): unknown[] {
  return [owner, writes.map((write) => write.id), writes.map((write) => write.progress), writes.map((write) => logsJson(write.lines))];
}

/**
 * Whether PostgreSQL refused what a statement holds rather than the
 * statement itself: a data exception (class 22: a NUL or a lone surrogate
 * jsonb cannot keep, a stored value that is not JSON), an integrity
 * constraint (23) or a program limit (54: a value too large). A lost
 * connection, a timeout or a conflict would fail every task's entry alike.
 */
function refusedData(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(?:22|23|54)[0-9A-Z]{3}$/.test(code);
}

/** Task `id`, or undefined. */
export async function getTask(db: Connection, sql: InspectStatements, id: number): Promise<StoredTask | undefined> {
  const { rows } = await db.query<TaskRow>(sql.taskById, [id]);
  return rows[0] === undefined ? undefined : toTask(rows[0]);
}

/** Of `ids`, the tasks over, and those gone; with `awaited`, the others marked so that a settle keeps them. */
export async function endedTasks(db: Connection, sql: InspectStatements, ids: readonly number[], awaited: boolean): Promise<EndedTasks> {
  const { rows } = await db.query<TaskRow & { asked: number }>(awaited ? sql.awaitTasks : sql.endedTasks, [ids]);
  return toEnded(rows);
}

/** A page of tasks under `filter`, in due order or (`order: 'desc'`) newest first. */
export async function listTasks(db: Connection, sql: InspectStatements, filter: TaskFilter): Promise<StoredTask[]> {
  const { rows } = await db.query<TaskRow>(filter.order === 'desc' ? sql.listTasksDesc : sql.listTasks, listParams(filter));
  return rows.map(toTask);
}

/** Every queue (`name` undefined) or one: its settings and its tasks by state. */
export async function listQueues(db: Connection, sql: InspectStatements, name: string | undefined): Promise<StoredQueue[]> {
  const { rows } = await db.query<QueueRow>(sql.listQueues, [name ?? null]);
  return toQueues(rows);
}

/** Retention: up to `limit` finished tasks older than their age (`succeeded` ms for succeeded ones, `failed` for the others; null: kept); how many went. */
export async function pruneTasks(
  db: Connection,
  sql: InspectStatements,
  succeeded: number | null,
  failed: number | null,
  limit: number,
): Promise<number> {
  return (await db.query(sql.pruneTasks, [succeeded, failed, limit])).rowCount ?? 0;
}

interface LinksRow {
  state: StoredState;
  flow_id: number | null;
  dependencies: LinkRow[];
  dependency_count: number;
  dependents: LinkRow[];
  dependent_count: number;
}

/** Task `id`'s links (at most `limit` of each kind), or undefined if there is no such task. */
export async function getTaskLinks(db: Connection, sql: InspectStatements, id: number, limit: number): Promise<TaskLinks | undefined> {
  const row = (await db.query<LinksRow>(sql.taskLinks, [id, limit])).rows[0];
  if (row === undefined) return undefined;
  return {
    id,
    state: row.state,
    flowId: row.flow_id === null ? null : Number(row.flow_id),
    dependencies: row.dependencies.map(toLink),
    dependencyCount: Number(row.dependency_count),
    dependents: row.dependents.map(toLink),
    dependentCount: Number(row.dependent_count),
  };
}

/** The `limit` limit groups with the most waiting tasks. */
export async function listLimitGroups(db: Connection, sql: InspectStatements, limit: number): Promise<LimitGroup[]> {
  return (await db.query<LimitGroupRow>(sql.limitGroups, [limit])).rows.map(toLimitGroup);
}
