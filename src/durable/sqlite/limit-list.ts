// The limit keys in use on SQLite (durable/limit-list.ts): the
// rows of taskheap_limits but the scheduler-wide bucket (key ''), each with
// its holders or its starts within the window at the store's `now`, and the
// waiting tasks naming it (through the serial index and taskheap_tasks_rated:
// the redundant `state IN` lets SQLite see that partial index applies).
import { toLimitKey, type LimitKey } from '../limit-list.js';
import type { Prepare } from './claim.js';
import { spent, type LimitRow } from './limits.js';

const LIST_SQL = `SELECT l.kind, l.key, l.lim, l.interval_ms, l.holders, l.starts,
    CASE l.kind WHEN 'concurrency' THEN (SELECT count(*) FROM taskheap_tasks AS t WHERE t.serial = l.key AND t.state = 'waiting')
      ELSE (SELECT count(*) FROM taskheap_tasks AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running') AND t.state = 'waiting') END AS waiting
  FROM taskheap_limits AS l WHERE l.key <> '' ORDER BY waiting DESC, l.kind, l.key LIMIT ?`;

/** A limit row with the count of waiting tasks that name it. */
type Row = LimitRow & { waiting: number };

/** The `limit` limit keys with the most waiting tasks; a rate key's starts are those after `now` less its interval. */
export function listLimitKeys(prepare: Prepare, limit: number, now: number): LimitKey[] {
  return (prepare(LIST_SQL).all(limit) as Row[]).map((row) =>
    toLimitKey({ ...row, in_use: row.kind === 'concurrency' ? (JSON.parse(row.holders) as unknown[]).length : spent(row, now) }),
  );
}
