// The SQLite store's reads and writes for callers, operators and handlers
// that are not part of claiming: a task, the tasks of waiters that are over,
// a page of tasks in due order or newest first, tasks counted by state under
// a listing's filters, finished tasks deleted and pruned (retention), the
// queues with their settings and counts, a task's links (durable/links.ts),
// the limit groups in use (durable/limit-list.ts), and the write of handlers'
// progress and log lines (in the caller's transaction, bounded to the
// latest MAX_LOG_LINES lines).
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
import type { Prepare } from './driver.js';
import { toLink, type LinkRow } from '../links.js';
import { toLimitGroup } from '../limit-list.js';
import { spent, type LimitRow } from './limits.js';

/** The statements of this file. */
const INSPECT_SQL = {
  /** Every filter is optional (NULL), as listTasks's. */
  countTasks: `SELECT state, count(*) AS n FROM taskheap_tasks
    WHERE (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
    GROUP BY state`,
  /** Finished tasks under the filters of countTasks (@state: one final state, or any), @limit at most. */
  deleteTasks: `DELETE FROM taskheap_tasks WHERE id IN (SELECT id FROM taskheap_tasks
    WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled') AND (@state IS NULL OR state = @state)
      AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
    ORDER BY id LIMIT @limit)`,
  /** The kept lines of a task still running under an owner (no row: not ours any more). */
  journalRead: `SELECT logs FROM taskheap_tasks WHERE id = ? AND locked_by = ? AND state = 'running'`,
  journalWrite: `UPDATE taskheap_tasks SET progress = COALESCE(@progress, progress), logs = @logs WHERE id = @id`,
  /** Every queue (@name null) or one: its settings and its tasks by state. */
  listQueues: `SELECT n.name, COALESCE(q.paused, 0) AS paused, q.global_concurrency, q.rate_limit, q.rate_interval_ms, c.state,
      COALESCE(c.n, 0) AS n
    FROM (SELECT name FROM taskheap_queues WHERE @name IS NULL OR name = @name
      UNION SELECT DISTINCT queue FROM taskheap_tasks WHERE @name IS NULL OR queue = @name) AS n
    LEFT JOIN taskheap_queues AS q ON q.name = n.name
    LEFT JOIN (SELECT queue, state, count(*) AS n FROM taskheap_tasks WHERE @name IS NULL OR queue = @name GROUP BY queue, state) AS c
      ON c.queue = n.name
    ORDER BY n.name`,
  taskById: `SELECT * FROM taskheap_tasks WHERE id = ?`,
  /** Of the ids ? (a JSON array), the tasks over, and those gone (no columns but \`asked\`). */
  endedTasks: `SELECT j.value AS asked, t.* FROM json_each(?) AS j LEFT JOIN taskheap_tasks AS t ON t.id = j.value
    WHERE t.id IS NULL OR t.state NOT IN ${UNFINISHED_SQL}`,
  /**
   * Retention: up to @limit finished tasks last changed before their cutoff
   * (@succeeded for succeeded ones, @failed for the others), oldest first,
   * walking the partial index of finished rows.
   */
  pruneTasks: `DELETE FROM taskheap_tasks WHERE id IN (SELECT id FROM taskheap_tasks
    WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled') AND updated_at < MAX(@succeeded, @failed)
      AND updated_at < CASE WHEN state = 'succeeded' THEN @succeeded ELSE @failed END
    ORDER BY updated_at LIMIT @limit)`,
  /** Every filter is optional (NULL); the cursor is the last row of the previous page, (run_at, id). */
  listTasks: `SELECT * FROM taskheap_tasks
    WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
      AND (@afterRunAt IS NULL OR run_at > @afterRunAt OR (run_at = @afterRunAt AND id > @afterId))
    ORDER BY run_at, id LIMIT @limit`,
  /** listTasks newest first (`order: 'desc'`): the cursor is the last row of the previous page. */
  listTasksDesc: `SELECT * FROM taskheap_tasks
    WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
      AND (@afterRunAt IS NULL OR run_at < @afterRunAt OR (run_at = @afterRunAt AND id < @afterId))
    ORDER BY run_at DESC, id DESC LIMIT @limit`,
} as const;

/** A filter's time as epoch ms, or null. */
function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
}

/** Task `id`, or undefined. */
export function getTask(prepare: Prepare, id: TaskRow['id'] | bigint): StoredTask | undefined {
  const row = prepare(INSPECT_SQL.taskById).get(id) as TaskRow | undefined;
  return row === undefined ? undefined : toTask(row);
}

/** Of `ids`, the tasks over, and those gone. */
export function endedTasks(prepare: Prepare, ids: readonly number[]): EndedTasks {
  return toEnded(prepare(INSPECT_SQL.endedTasks).all(JSON.stringify(ids)) as (TaskRow & { asked: number })[]);
}

/** A page of tasks under `filter`, in due order or (`order: 'desc'`) newest first. */
export function listTasks(prepare: Prepare, filter: TaskFilter): StoredTask[] {
  const rows = prepare(filter.order === 'desc' ? INSPECT_SQL.listTasksDesc : INSPECT_SQL.listTasks).all({
    ...selection(filter),
    state: filter.state ?? null,
    afterRunAt: epoch(filter.after?.runAt),
    afterId: filter.after?.id ?? null,
    limit: filter.limit ?? 100,
  }) as TaskRow[];
  return rows.map(toTask);
}

/** Every queue (`name` undefined) or one: its settings and its tasks by state. */
export function listQueues(prepare: Prepare, name: string | undefined): StoredQueue[] {
  return toQueues(prepare(INSPECT_SQL.listQueues).all({ name: name ?? null }) as QueueRow[]);
}

/**
 * Retention: up to `limit` finished tasks last changed before their cutoff
 * (`succeeded` for succeeded ones, `failed` for the others); how many went.
 */
export function pruneTasks(prepare: Prepare, succeeded: number, failed: number, limit: number): number {
  return Number(prepare(INSPECT_SQL.pruneTasks).run({ succeeded, failed, limit }).changes);
}

/** Tasks under `filter` (its state, cursor and limit aside) counted by state. @internal */
export function countTasks(statement: Prepare, filter: TaskFilter): Record<StoredState, number> {
  return toCounts(statement(INSPECT_SQL.countTasks).all(selection(filter)) as { state: StoredState; n: number }[]);
}

/** Deletes finished tasks under `filter`, at most its limit (default 10,000). @internal */
export function deleteTasks(statement: Prepare, filter: TaskFilter): number {
  const { changes } = statement(INSPECT_SQL.deleteTasks).run({
    ...selection(filter),
    state: filter.state ?? null,
    limit: filter.limit ?? 10_000,
  });
  return Number(changes);
}

/** The named parameters of a filter's selection: listTasks, countTasks and deleteTasks. */
function selection(filter: TaskFilter): Record<string, string | number | null> {
  return {
    name: filter.name ?? null,
    jobKey: filter.jobKey ?? null,
    keyPrefix: filter.keyPrefix ?? null,
    queue: filter.queue ?? null,
    from: epoch(filter.from),
    to: epoch(filter.to),
  };
}

/**
 * Progress and new log lines of tasks `owner` still runs, in one transaction
 * (`transaction` runs its function in one). Should a task's entry fail for
 * what it holds (`refusedData`), each entry is written in a transaction of
 * its own, so only one that fails again is lost (told to `lost`); any other
 * failure throws, as the batch's did.
 * @internal
 */
export function writeJournal(
  transaction: (fn: () => void) => void,
  statement: Prepare,
  owner: string,
  writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
  lost: (id: number, error: unknown) => void,
): void {
  try {
    transaction(() => writeEntries(statement, owner, writes));
  } catch (error) {
    if (!refusedData(error)) throw error;
    if (writes.length === 1) {
      lost(writes[0]!.id, error);
      return;
    }
    for (const write of writes) {
      try {
        transaction(() => writeEntries(statement, owner, [write]));
      } catch (error) {
        if (!refusedData(error)) throw error;
        lost(write.id, error);
      }
    }
  }
}

function writeEntries(
  statement: Prepare,
  owner: string,
  writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
): void {
  for (const write of writes) {
    const row = statement(INSPECT_SQL.journalRead).get(write.id, owner) as { logs: string | null } | undefined;
    if (row === undefined) continue;
    let logs = row.logs;
    if (write.lines.length > 0) {
      const kept = [...(logs === null ? [] : (JSON.parse(logs) as unknown[])), ...(JSON.parse(logsJson(write.lines)) as unknown[])];
      logs = JSON.stringify(kept.slice(-MAX_LOG_LINES));
    }
    statement(INSPECT_SQL.journalWrite).run({ id: write.id, progress: write.progress, logs });
  }
}

/**
 * Whether a task's entry failed for what it holds rather than for the
 * database: its stored lines are not JSON (a SyntaxError), or SQLite refused
 * a value (too big, a constraint, a type mismatch: better-sqlite3's code,
 * node:sqlite's primary result code 18 to 20). A full disk, an I/O error or
 * a closed database would fail every entry alike.
 */
function refusedData(error: unknown): boolean {
  if (error instanceof SyntaxError) return true;
  const { code, errcode } = (error ?? {}) as { code?: unknown; errcode?: unknown };
  if (typeof code === 'string' && /^SQLITE_(?:TOOBIG|CONSTRAINT|MISMATCH)/.test(code)) return true;
  return typeof errcode === 'number' && (errcode & 0xff) >= 18 && (errcode & 0xff) <= 20;
}

/**
 * A task's links: its flow, the tasks it depends on and those that depend
 * on it, through the taskheap_deps edges and their indexes (the primary key
 * for a dependent's edges, taskheap_deps_dep for a dependency's).
 */
const LINKS_SQL = {
  task: `SELECT state, flow_id FROM taskheap_tasks WHERE id = ?`,
  dependencies: `SELECT t.id, t.name, t.state, d.on_failure, d.counted FROM taskheap_deps AS d
    JOIN taskheap_tasks AS t ON t.id = d.dep_id WHERE d.task_id = ? ORDER BY d.ord LIMIT ?`,
  dependencyCount: `SELECT count(*) AS n FROM taskheap_deps WHERE task_id = ?`,
  dependents: `SELECT t.id, t.name, t.state, d.on_failure, d.counted FROM taskheap_deps AS d
    JOIN taskheap_tasks AS t ON t.id = d.task_id WHERE d.dep_id = ? ORDER BY d.task_id LIMIT ?`,
  dependentCount: `SELECT count(*) AS n FROM taskheap_deps WHERE dep_id = ?`,
} as const;

/** Task `id`'s links (at most `limit` of each kind), or undefined if there is no such task. */
export function getTaskLinks(prepare: Prepare, id: number, limit: number): TaskLinks | undefined {
  const task = prepare(LINKS_SQL.task).get(id) as { state: StoredState; flow_id: number | null } | undefined;
  if (task === undefined) return undefined;
  const count = (sql: string) => Number((prepare(sql).get(id) as { n: number }).n);
  return {
    id,
    state: task.state,
    flowId: task.flow_id === null ? null : Number(task.flow_id),
    dependencies: (prepare(LINKS_SQL.dependencies).all(id, limit) as LinkRow[]).map(toLink),
    dependencyCount: count(LINKS_SQL.dependencyCount),
    dependents: (prepare(LINKS_SQL.dependents).all(id, limit) as LinkRow[]).map(toLink),
    dependentCount: count(LINKS_SQL.dependentCount),
  };
}

/**
 * The limit groups in use: the rows of taskheap_limits but the scheduler-wide
 * bucket (key ''), each with its holders or its starts, and the waiting
 * tasks naming it (through the serial index and taskheap_tasks_rated: the
 * redundant `state IN` lets SQLite see that partial index applies).
 */
const LIST_SQL = `SELECT l.kind, l.key, l.lim, l.interval_ms, l.holders, l.starts,
    CASE l.kind WHEN 'concurrency' THEN (SELECT count(*) FROM taskheap_tasks AS t WHERE t.serial = l.key AND t.state = 'waiting')
      ELSE (SELECT count(*) FROM taskheap_tasks AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running') AND t.state = 'waiting') END AS waiting
  FROM taskheap_limits AS l WHERE l.key <> '' ORDER BY waiting DESC, l.kind, l.key LIMIT ?`;

/** A limit row with the count of waiting tasks that name it. */
type Row = LimitRow & { waiting: number };

/** The `limit` limit groups with the most waiting tasks; a rate group's starts are those after `now` less its interval. */
export function listLimitGroups(prepare: Prepare, limit: number, now: number): LimitGroup[] {
  return (prepare(LIST_SQL).all(limit) as Row[]).map((row) =>
    toLimitGroup({ ...row, in_use: row.kind === 'concurrency' ? (JSON.parse(row.holders) as unknown[]).length : spent(row, now) }),
  );
}
