// The limit keys in use on PostgreSQL (durable/limit-list.ts): the
// rows of taskheap_limits but the scheduler-wide bucket (key ''), each with
// its holders or its starts within the window at the database's now() (the
// clock the claims use), and the waiting tasks naming it (through the serial
// index and taskheap_tasks_rated, whose condition the `state IN` repeats).
import { toLimitKey, type LimitKey, type LimitKeyRow, type LimitListStore } from '../limit-list.js';
import type { Connection } from './connection.js';
import { quote } from './migrations.js';

/** The listing statement of a store whose tables live in `schema`. */
function listStatement(schema: string | undefined): string {
  const t = (name: string) => (schema === undefined ? name : `${quote(schema)}.${name}`);
  const T = t('taskheap_tasks');
  return `SELECT l.kind, l.key, l.lim, l.interval_ms,
      CASE WHEN l.kind = 'concurrency' THEN cardinality(l.holders)
        ELSE (SELECT COALESCE(sum(c), 0) FROM unnest(l.starts, l.counts) AS x(s, c)
          WHERE s > now() - l.interval_ms * interval '1 millisecond') END::int AS in_use,
      CASE WHEN l.kind = 'concurrency' THEN (SELECT count(*) FROM ${T} AS t WHERE t.serial = l.key AND t.state = 'waiting')
        ELSE (SELECT count(*) FROM ${T} AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running') AND t.state = 'waiting') END::int AS waiting
    FROM ${t('taskheap_limits')} AS l WHERE l.key <> '' ORDER BY waiting DESC, l.kind, l.key LIMIT $1`;
}

/** The limit-key listing of a PostgreSQL store. */
export function postgresLimitList(db: Connection, schema: string | undefined): LimitListStore {
  const sql = listStatement(schema);
  return {
    async listLimitKeys(limit: number): Promise<LimitKey[]> {
      return (await db.query<LimitKeyRow>(sql, [limit])).rows.map(toLimitKey);
    },
  };
}
