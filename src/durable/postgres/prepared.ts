// Named (prepared) statements for the hot path (issue 27): the claim and the
// settle are long statements (CTEs over the tasks, queues and limit rows)
// whose parse and plan cost PostgreSQL more CPU than running them with a
// batch of a few hundred rows (pg_stat_statements' total_plan_time, measured:
// about 24 ms per claim and 2 ms per settle under load, as much as their
// execution). Named, each connection parses them once and PostgreSQL may
// keep a generic plan. Not behind PgBouncer in transaction pooling
// (`pgbouncer: true`), where the next statement may reach another server
// connection that never saw the name.
import { createHash } from 'node:crypto';

const names = new Map<string, string>();

/** The name of the prepared statement of `text`: the same text, the same name, in every process. */
export function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `taskheap_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}
