// The SQLite store's reads and writes for operators and handlers that are
// not part of claiming: tasks counted by state under a listing's filters,
// and the write of handlers' progress and log lines (in the caller's
// transaction, bounded to the latest MAX_LOG_LINES lines).
import { MAX_LOG_LINES, type TaskLogLine } from '../../core/journal.js';
import { logsJson, toCounts } from '../rows.js';
import type { StoredState, TaskFilter } from '../store.js';
import type { Prepare } from './claim.js';

/** @internal */
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
} as const;

/** A filter's time as epoch ms, or null. */
function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
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

/** The named parameters of countTasks and deleteTasks. */
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
