// listTasks({ order: 'desc' }) on PostgreSQL: the listing of sql.ts's
// listTasks read newest first (a recurring job's latest runs, the console's
// most recent failures), with the same parameters (params.ts listParams)
// and the same index, read backwards.
import { ts } from './claim-sql.js';
import { quote } from './migrations.js';
import { taskColumns } from './sql.js';

/** Due time cut to ms, as the listing index (migrations.ts) and sql.ts's listTasks order by. */
const LISTING = (a: string) => `date_trunc('milliseconds', ${a}.run_at AT TIME ZONE 'UTC')`;

/** The newest-first listing of a store whose tables live in `schema`; the cursor ($8, $9) is the last row of the previous page. */
export function listNewestFirst(schema: string | undefined): string {
  const T = schema === undefined ? 'taskheap_tasks' : `${quote(schema)}.taskheap_tasks`;
  return `SELECT ${taskColumns('t')} FROM ${T} AS t
    WHERE ($1::text IS NULL OR t.state = $1) AND ($2::text IS NULL OR t.name = $2) AND ($3::text IS NULL OR t.job_key = $3)
      AND ($5::text IS NULL OR left(t.key, length($5)) = $5) AND ($10::text IS NULL OR t.queue = $10)
      AND ($6::float8 IS NULL OR t.run_at >= ${ts('$6')}) AND ($7::float8 IS NULL OR t.run_at < ${ts('$7')})
      AND ($8::float8 IS NULL OR (${LISTING('t')}, t.id) < (${ts('$8')} AT TIME ZONE 'UTC', $9::bigint))
    ORDER BY ${LISTING('t')} DESC, t.id DESC LIMIT $4`;
}
