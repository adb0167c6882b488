// The PostgreSQL store's reads and writes for operators and handlers that are
// not part of claiming: tasks counted by state under a listing's filters,
// and the batched write of handlers' progress and log lines (one statement
// for every task of a flush, bounded to the latest MAX_LOG_LINES lines).
import { MAX_LOG_LINES, type TaskLogLine } from '../../core/journal.js';
import { logsJson, toCounts } from '../rows.js';
import type { StoredState, TaskFilter } from '../store.js';
import { ts } from './claim-sql.js';
import type { Connection } from './connection.js';
import { quote } from './migrations.js';
import { epoch } from './params.js';

/** The statements of this file for tables in `schema` (undefined: the search_path). @internal */
export function inspectStatements(schema: string | undefined) {
  const T = schema === undefined ? 'taskheap_tasks' : `${quote(schema)}.taskheap_tasks`;
  return {
    /** Every filter is optional (NULL), as listTasks's. */
    countTasks: `SELECT t.state, count(*) AS n FROM ${T} AS t
      WHERE ($1::text IS NULL OR t.name = $1) AND ($2::text IS NULL OR t.job_key = $2)
        AND ($3::text IS NULL OR left(t.key, length($3)) = $3) AND ($4::text IS NULL OR t.queue = $4)
        AND ($5::float8 IS NULL OR t.run_at >= ${ts('$5')}) AND ($6::float8 IS NULL OR t.run_at < ${ts('$6')})
      GROUP BY t.state`,
    /** Finished tasks under the filters of countTasks ($7: one final state, or any), $8 at most. */
    deleteTasks: `DELETE FROM ${T} WHERE id IN (SELECT t.id FROM ${T} AS t
      WHERE t.state IN ('succeeded', 'failed', 'timed-out', 'cancelled') AND ($7::text IS NULL OR t.state = $7)
        AND ($1::text IS NULL OR t.name = $1) AND ($2::text IS NULL OR t.job_key = $2)
        AND ($3::text IS NULL OR left(t.key, length($3)) = $3) AND ($4::text IS NULL OR t.queue = $4)
        AND ($5::float8 IS NULL OR t.run_at >= ${ts('$5')}) AND ($6::float8 IS NULL OR t.run_at < ${ts('$6')})
      ORDER BY t.id LIMIT $8 FOR UPDATE SKIP LOCKED)`,
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
  };
}

/** @internal */
export type InspectStatements = ReturnType<typeof inspectStatements>;

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
