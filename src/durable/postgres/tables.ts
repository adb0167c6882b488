// What every statement of the PostgreSQL store shares: its tables, named
// in the store's schema (`tables()`), the columns a task row is read with,
// and its times: `timestamptz` in the tables, epoch milliseconds in the
// store, converted in SQL.

/** Quotes an identifier (a schema name). */
export function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/** The store's tables in `schema` (undefined: the search_path), by the letters its statements name them with. */
export function tables(schema: string | undefined) {
  const t = (name: string) => (schema === undefined ? name : `${quote(schema)}.${name}`);
  return {
    t,
    T: t('taskheap_tasks'),
    J: t('taskheap_jobs'),
    M: t('taskheap_meta'),
    L: t('taskheap_limits'),
    Q: t('taskheap_queues'),
    D: t('taskheap_deps'),
  };
}

/** SQL: epoch ms (a parameter or expression) to timestamptz, and back. */
export const ts = (expression: string) => `to_timestamp((${expression})::float8 / 1000)`;
export const ms = (expression: string) => `(extract(epoch from ${expression}) * 1000)::float8`;

/** SQL: $n milliseconds as an interval. */
export const millis = (param: string) => `(${param}::float8 * interval '1 millisecond')`;

/** The columns a task row is read with; `a` is the table alias. */
export function taskColumns(a: string): string {
  return `${a}.id, ${a}.name, ${a}.key, ${a}.payload, ${a}.state, ${ms(`${a}.run_at`)} AS run_at, ${a}.attempts, ${a}.max_attempts,
    ${a}.options, ${a}.last_error, ${a}.job_key, ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at,
    ${a}.result, ${a}.errors, ${a}.serial, ${a}.priority, ${a}.queue, ${a}.rate_key, ${ms(`${a}.started_at`)} AS started_at,
    ${a}.progress, ${a}.logs, ${a}.locked_by, ${ms(`${a}.locked_until`)} AS locked_until`;
}
