// What every statement of the PostgreSQL store shares: its tables, named
// in the store's schema (`tables()`), the columns a task row is read with,
// its times (`timestamptz` in the tables, epoch milliseconds in the store,
// converted in SQL), and the walk of the plain waiting tasks' queues and
// priorities (the claims', next-due's, and the fair shares' tagging).

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
    /** Fair shares: each group's next turn, and each queue's virtual time (fair.ts). */
    G: t('taskheap_fair_groups'),
    F: t('taskheap_fair_queues'),
  };
}

/** SQL: epoch ms (a parameter or expression) to timestamptz, and back. */
export const ts = (expression: string) => `to_timestamp((${expression})::float8 / 1000)`;
export const ms = (expression: string) => `(extract(epoch from ${expression}) * 1000)::float8`;

/**
 * A column of a batch's parallel arrays, or none when each of its values is
 * `usual` or null: unnest pads a shorter array with NULLs, which the
 * statement reads as `usual` (COALESCE). A batch of plain tasks or of no-op
 * successes then sends a few full columns and the rest empty, not a
 * thousand elements each for pg to escape and the server to parse.
 */
export function unlessUsual<T>(values: T[], usual: T | null): T[] {
  for (const value of values) if (value !== null && value !== usual) return values;
  return [];
}

/** SQL: $n milliseconds as an interval. */
export const millis = (param: string) => `(${param}::float8 * interval '1 millisecond')`;

/** The columns a task row is read with; `a` is the table alias. */
export function taskColumns(a: string): string {
  return `${a}.id, ${a}.name, ${a}.key, ${a}.payload, ${a}.state, ${ms(`${a}.run_at`)} AS run_at, ${a}.attempts, ${a}.max_attempts,
    ${a}.options, ${a}.last_error, ${a}.job_key, ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at,
    ${a}.result, ${a}.errors, ${a}.serial, ${a}.priority, ${a}.queue, ${a}.rate_key, ${ms(`${a}.started_at`)} AS started_at,
    ${a}.progress, ${a}.logs, ${a}.locked_by, ${ms(`${a}.locked_until`)} AS locked_until, ${a}.steps`;
}

/** SQL: what the plain waiting indexes hold (migrations.ts, versions 6 and 10). */
const PLAIN_WAITING = `state = 'waiting' AND serial IS NULL AND rate_key IS NULL AND fair_group IS NULL AND fair_tag IS NULL`;

/** SQL: task \`t\` waits for a turn (fair.ts): a shared task without a key that has none yet (the fair_due index, migrations.ts version 10). */
export const untaggedShared = (t: string) =>
  `${t}.state = 'waiting' AND ${t}.fair_group IS NOT NULL AND ${t}.fair_tag IS NULL AND ${t}.serial IS NULL AND ${t}.rate_key IS NULL`;

/** SQL: task \`t\` is a plain waiting one (see PLAIN_WAITING): no key, no fair share, no turn. */
export const plainWaiting = (t: string) =>
  `${t}.state = 'waiting' AND ${t}.serial IS NULL AND ${t}.rate_key IS NULL AND ${t}.fair_group IS NULL AND ${t}.fair_tag IS NULL`;

/**
 * SQL: a recursive CTE \`pairs(q, p)\` of the (queue, priority) pairs that
 * have plain waiting tasks, from the last queue name and its highest priority
 * down, one probe of the queue-leading waiting index each (PostgreSQL 15 has
 * no skip scan; each probe starts where the last one stopped). The claims,
 * next-due and the fair shares' tagging then read each pair's due tasks by an
 * exact range of that index. Backwards: the newest entries of a pair are
 * those of tasks still waiting, where its oldest are the entries of tasks
 * claimed since the last vacuum (3.3 of a claim's 8 ms after 10,000 claims,
 * when the walk went up). Each probe is an ORDER BY ... LIMIT 1, not a
 * max(): on a table not analyzed yet the planner priced max() as an
 * aggregate over every waiting task (next-due: 26 ms at 100,000 waiting,
 * where the probes take 0.3 ms).
 *
 * Why pairs of the one index, and not the queues and the priority levels
 * walked apart on two indexes: on a table not analyzed yet (a bulk add into
 * a new one) the planner takes the waiting tasks for one row and chooses
 * between two indexes of the same rows by their height, and it found each
 * queue by reading the whole priority-leading index and sorting it: 40,000
 * rows read by every claim and next-due at 40,000 waiting, over a third of
 * the server's CPU per job. An index that alone holds these rows leaves it
 * no such choice (migrations.ts, version 12).
 */
export const waitingPairs = (T: string) => `pairs(q, p) AS (
    (SELECT queue, priority FROM ${T} WHERE ${PLAIN_WAITING} ORDER BY queue DESC, priority DESC LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority FROM pairs CROSS JOIN LATERAL (SELECT queue, priority FROM ${T}
      WHERE ${PLAIN_WAITING} AND (queue, priority) < (pairs.q, pairs.p) ORDER BY queue DESC, priority DESC LIMIT 1) AS n)`;
