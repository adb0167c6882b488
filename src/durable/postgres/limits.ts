// Limits and queues on PostgreSQL (docs/limits.md, docs/queues.md):
// concurrency groups (`serial` is the key of limit 1) and rate buckets that
// hold across every process, kept in `taskheap_limits` (migrations.ts,
// version 6), and named queues (`taskheap_queues`, version 5: pause, global
// slots; version 6: a queue's rate bucket on its row). This file owns the
// limit rows and queue rows: the SQL pieces that make or update the rows the
// tasks name, let go of the slots of the tasks that end, count a bucket's
// starts and lock the queue rows in the one lock order (claim.ts), which
// the adds, the claim, the outcomes and the jobs build their statements
// with; and the scheduler-wide bucket, a queue's settings, and the rows'
// retention.
import type { QueueChange } from '../store.js';
import type { Connection } from './connection.js';
import { QUEUES, WAKE } from './listener.js';
import { millis, tables } from './tables.js';

/**
 * SQL: the limit each limit row named by the tasks of \`source\` (columns id,
 * serial, rate_key, options) should have: the most recently added task's.
 */
const limitsOf = (source: string) => `SELECT DISTINCT ON (kind, key) kind, key, lim, iv FROM (
        SELECT 'concurrency' AS kind, serial AS key, COALESCE((options::jsonb #>> '{concurrency,limit}')::int, 1) AS lim, NULL::float8 AS iv, id
          FROM ${source} WHERE serial IS NOT NULL
        UNION ALL SELECT 'rate', rate_key, (options::jsonb #>> '{rate,limit}')::int, (options::jsonb #>> '{rate,interval}')::float8, id
          FROM ${source} WHERE rate_key IS NOT NULL) AS x
      ORDER BY kind, key, id DESC`;

/**
 * SQL: CTEs \`name\` making the limit rows the tasks of \`source\` (columns
 * id, serial, rate_key, options) name, or setting their limit (the most
 * recently added task's applies). Their past starts and holders stay. A row
 * that already has its limit is not written, only key-share locked
 * (\`name_kept\`): that keeps retention from deleting it before the tasks
 * commit, and conflicts with no claim or outcome, which update it under a
 * no-key lock. So an add in a caller's open transaction holds nothing a
 * worker waits for, unless it changes a limit: the store applies a change
 * first, on its own connection (\`setLimits\`, see add.ts and flows.ts), for that reason.
 */
export const upsertLimits = (L: string, name: string, source: string) => `${name}_wanted AS (${limitsOf(source)}),
    ${name}_kept AS (SELECT l.kind, l.key FROM ${L} AS l JOIN ${name}_wanted AS w ON l.kind = w.kind AND l.key = w.key
      WHERE l.lim = w.lim AND l.interval_ms IS NOT DISTINCT FROM w.iv FOR KEY SHARE OF l),
    ${name} AS (
      INSERT INTO ${L} AS l (kind, key, lim, interval_ms)
      SELECT w.kind, w.key, w.lim, w.iv FROM ${name}_wanted AS w
      WHERE NOT EXISTS (SELECT 1 FROM ${name}_kept AS k WHERE k.kind = w.kind AND k.key = w.key)
      ON CONFLICT (kind, key) DO UPDATE SET lim = EXCLUDED.lim, interval_ms = EXCLUDED.interval_ms, updated_at = now()
      WHERE l.lim <> EXCLUDED.lim OR l.interval_ms IS DISTINCT FROM EXCLUDED.interval_ms)`;

/**
 * SQL: sets the limit of existing limit rows that the tasks given as arrays
 * ($1 concurrency groups, $2 rate groups, $3 options) change; run on the store's
 * own connection before an add in a caller's transaction, so that the add
 * finds its limits set and takes no lock a claim or an outcome waits for.
 */
const setLimits = (L: string) => `WITH src AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
        AS s(serial, rate_key, options, id)),
      wanted AS (${limitsOf('src')})
    UPDATE ${L} AS l SET lim = w.lim, interval_ms = w.iv, updated_at = now() FROM wanted AS w
    WHERE l.kind = w.kind AND l.key = w.key AND (l.lim <> w.lim OR l.interval_ms IS DISTINCT FROM w.iv)`;

/** A task as \`setLimits\` reads it. */
interface Limited {
  readonly options: string;
  readonly serial?: string | null;
  readonly rateGroup?: string | null;
}

/**
 * Runs \`statement\` (\`setLimits\`) for the tasks that name a limit, through
 * \`query\` (the store's own connection: committed at once, whatever the
 * caller's transaction does later). Nothing when none names one.
 */
export async function applyLimits(
  query: (text: string, values: unknown[]) => Promise<unknown>,
  statement: string,
  tasks: readonly Limited[],
): Promise<void> {
  const named = tasks.filter((task) => (task.serial ?? null) !== null || (task.rateGroup ?? null) !== null);
  if (named.length === 0) return;
  await query(statement, [named.map((t) => t.serial ?? null), named.map((t) => t.rateGroup ?? null), named.map((t) => t.options)]);
}

/**
 * SQL: a CTE \`name\` letting the tasks of \`source\` (columns id, serial)
 * that match \`where\` go of the concurrency slots they hold; aggregated per
 * key (one statement updates a row once), the rows locked in key order
 * as the claim does, after the queue rows CTE \`after\` locked (if any), so
 * the two cannot deadlock. Returns the keys freed.
 */
export const letGo = (L: string, name: string, source: string, where = 'true', after?: string) => `${name}_rows AS (
      SELECT k.key FROM ${L} AS k WHERE k.kind = 'concurrency' AND k.key IN (SELECT serial FROM ${source} WHERE ${where})
        ${after === undefined ? '' : `AND (SELECT count(*) FROM ${after}) >= 0`}
      ORDER BY k.key FOR NO KEY UPDATE),
    ${name} AS (
      UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h WHERE h <> ALL (g.ids)), updated_at = now()
      FROM (SELECT serial, array_agg(id) AS ids FROM ${source} WHERE serial IS NOT NULL AND ${where} GROUP BY serial) AS g
        JOIN ${name}_rows AS r ON r.key = g.serial
      WHERE l.kind = 'concurrency' AND l.key = g.serial AND l.holders && g.ids RETURNING l.key)`;

/**
 * SQL: the starts a bucket (its arrays of start times and counts, and its
 * window) counts in its window at now(). A claim records its starts at the
 * time it holds the bucket's lock (\`stamp\` in claimSql), later than its
 * now(): counting from now() counts a little more than the window at that
 * time holds, never less, so the limit holds on the recorded times, which
 * are in order per bucket (each is after the previous writer's commit).
 */
const spentIn = (starts: string, counts: string, interval: string) =>
  `(SELECT COALESCE(sum(c), 0) FROM unnest(${starts}, ${counts}) AS x(s, c) WHERE s > now() - ${millis(interval)})`;

/** SQL: the starts limit row \`l\`'s bucket counts in its window at now() (see spentIn). */
export const spent = (l: string) => spentIn(`${l}.starts`, `${l}.counts`, `${l}.interval_ms`);

/** SQL: the tokens queue row \`q\`'s rate bucket has left at now(), or NULL if the queue has no rate (see spentIn). */
export const queueTokens = (q: string) =>
  `CASE WHEN ${q}.rate_limit IS NOT NULL THEN ${q}.rate_limit - ${spentIn(`${q}.rate_starts`, `${q}.rate_counts`, `${q}.rate_interval_ms`)} END`;

/**
 * SQL: the rows of queues \`names\` (a subquery) with a global concurrency
 * (and with \`metered\`, those with a rate: a claim takes their tokens),
 * locked in name order, so that statements updating several queue rows
 * (claims taking slots and tokens, outcomes giving slots back) cannot
 * deadlock; with the room (global slots left) and the tokens left of each,
 * NULL for none, at the row's latest version.
 */
export const lockQueues = (Q: string, names: string, metered = false) => `SELECT q.name, q.paused, q.global_concurrency - q.running AS room,
      ${metered ? queueTokens('q') : 'NULL::int'} AS tokens
    FROM ${Q} AS q
    WHERE q.name IN (${names}) AND (q.global_concurrency IS NOT NULL${metered ? ' OR q.rate_limit IS NOT NULL' : ''}) ORDER BY q.name FOR UPDATE`;

/**
 * SQL: two CTEs, \`unslotted_locks\` and \`unslotted\`: the queue rows of tasks
 * that stop running (\`cte\` has their \`queue\`) give back their slots;
 * \`was_full\`: the queue had no room left before, so its waiting tasks need
 * a wake-up. Only queues with a global concurrency count (the others have
 * no row to update, or never take the row's lock). Limit rows are locked
 * after these (pass \`unslotted_locks\` as letGo's \`after\`).
 */
export const freeSlots = (Q: string, cte: string) => `unslotted_locks AS (${lockQueues(Q, `SELECT queue FROM ${cte}`)}),
    unslotted AS (UPDATE ${Q} AS q SET running = GREATEST(q.running - f.n, 0)
      FROM (SELECT queue, count(*)::int AS n FROM ${cte} GROUP BY queue) AS f
      WHERE q.name = f.queue AND q.global_concurrency IS NOT NULL AND q.name IN (SELECT name FROM unslotted_locks)
      RETURNING q.running + f.n >= q.global_concurrency AS was_full)`;

/** The statements of limit rows and queue settings for tables in `schema` (undefined: the search_path). */
export function limitStatements(schema: string | undefined) {
  const { T, L, Q } = tables(schema);
  return {
    /** Limit changes an add in a caller's transaction makes, applied first on the store's own connection. */
    setLimits: setLimits(L),
    /** This process's scheduler-wide bucket ($1 per $2 ms): the most recent process to start or set it decides the limit. */
    setSchedulerRate: `INSERT INTO ${L} AS l (kind, key, lim, interval_ms) VALUES ('rate', '', $1, $2)
      ON CONFLICT (kind, key) DO UPDATE SET lim = EXCLUDED.lim, interval_ms = EXCLUDED.interval_ms, updated_at = now()`,
    /**
     * A safety net run with retention: key rows whose holder is gone or
     * finished (every path that finishes a task lets go of its key in the
     * same statement, so this should find nothing). A holder mid-claim is
     * waiting in the snapshot, so it is never taken for gone.
     */
    pruneKeys: `UPDATE ${L} AS l SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h
        WHERE EXISTS (SELECT 1 FROM ${T} AS t WHERE t.id = h AND t.state IN ('waiting', 'running')))
      WHERE l.kind = 'concurrency' AND cardinality(l.holders) > 0
        AND EXISTS (SELECT 1 FROM unnest(l.holders) AS h WHERE NOT EXISTS (SELECT 1 FROM ${T} AS t WHERE t.id = h AND t.state IN ('waiting', 'running')))`,
    /**
     * Retention for limit rows: up to $1 rows that limit nothing now (a
     * concurrency group no task holds or waits for, a bucket with no start in
     * its window and no task waiting or running under it) are deleted,
     * oldest first; returns their keys. A task added meanwhile makes its row
     * again (its add upserts it; a row its add has locked is skipped): the
     * rows a claim walks are those of keys in use, not every key ever seen.
     */
    pruneLimits: `WITH idle AS (SELECT l.kind, l.key FROM ${L} AS l
        WHERE l.key <> '' AND cardinality(l.holders) = 0
          AND NOT EXISTS (SELECT 1 FROM unnest(l.starts) AS s WHERE s > now() - ${millis('l.interval_ms')})
          AND NOT (l.kind = 'concurrency' AND EXISTS (SELECT 1 FROM ${T} AS t WHERE t.serial = l.key AND t.state = 'waiting'))
          AND NOT (l.kind = 'rate' AND EXISTS (SELECT 1 FROM ${T} AS t WHERE t.rate_key = l.key AND t.state IN ('waiting', 'running')))
        ORDER BY l.updated_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      DELETE FROM ${L} AS l USING idle WHERE l.kind = idle.kind AND l.key = idle.key RETURNING l.kind, l.key`,
    /**
     * After pruneLimits committed, with a fresh snapshot: the rows of
     * concurrency groups $1 and buckets $2 that a task names after all (one
     * added while the prune decided, from its older snapshot) are made again.
     */
    repairLimits: `WITH named AS (SELECT id, CASE WHEN serial = ANY ($1::text[]) THEN serial END AS serial,
          CASE WHEN rate_key = ANY ($2::text[]) THEN rate_key END AS rate_key, options FROM ${T}
        WHERE (state = 'waiting' AND serial = ANY ($1::text[]))
          OR (state IN ('waiting', 'running') AND rate_key = ANY ($2::text[]))),
      ${upsertLimits(L, 'limits', 'named')}
      SELECT count(*)::int AS n FROM named`,
    /**
     * Named queues: pauses or resumes queue $1 ($2; null: unchanged), sets
     * its global concurrency ($3 true: set it to $4, null for none) and its
     * rate ($6 true: $7 per $8 ms, null for none; the starts made stay, so a
     * new limit counts them). Setting a global concurrency where there was
     * none counts the queue's running tasks: from then on claims and
     * outcomes keep the count. A resume wakes every process.
     */
    setQueue: `WITH saved AS (INSERT INTO ${Q} AS q (name, paused, global_concurrency, running, rate_limit, rate_interval_ms)
        VALUES ($1, COALESCE($2::boolean, false), CASE WHEN $3::boolean THEN $4::int END,
          (SELECT count(*) FROM ${T} WHERE queue = $1 AND state = 'running'), CASE WHEN $6::boolean THEN $7::int END,
          CASE WHEN $6::boolean THEN $8::float8 END)
        ON CONFLICT (name) DO UPDATE SET paused = COALESCE($2::boolean, q.paused),
          global_concurrency = CASE WHEN $3::boolean THEN $4::int ELSE q.global_concurrency END,
          running = CASE WHEN NOT $3::boolean THEN q.running WHEN $4::int IS NULL THEN 0 WHEN q.global_concurrency IS NULL THEN EXCLUDED.running
            ELSE q.running END,
          rate_limit = CASE WHEN $6::boolean THEN $7::int ELSE q.rate_limit END,
          rate_interval_ms = CASE WHEN $6::boolean THEN $8::float8 ELSE q.rate_interval_ms END,
          updated_at = now()
        RETURNING q.paused)
      SELECT CASE WHEN NOT paused THEN pg_notify('${WAKE}', $5 || (extract(epoch from now()) * 1000)::bigint::text)
        WHEN $2::boolean THEN pg_notify('${QUEUES}', $5 || $1) END FROM saved`,
  };
}

/** The statements of limit rows and queue settings. */
export type LimitStatements = ReturnType<typeof limitStatements>;

/** The scheduler-wide bucket: this process's rate. */
export async function setRate(db: Connection, sql: LimitStatements, rate: { limit: number; interval: number } | undefined): Promise<void> {
  // Removing it is this process's business only: others that set it keep the bucket (and its starts).
  if (rate !== undefined) await db.query(sql.setSchedulerRate, [rate.limit, rate.interval]);
}

/** A queue's settings changed (what `change` leaves out stays); a resume wakes every process, a pause tells them. */
export async function setQueue(db: Connection, sql: LimitStatements, prefix: string, name: string, change: QueueChange): Promise<void> {
  const { globalConcurrency: global, rate } = change;
  await db.query(sql.setQueue, [
    name,
    change.paused ?? null,
    global !== undefined,
    global ?? null,
    prefix,
    rate !== undefined,
    rate?.limit ?? null,
    rate?.interval ?? null,
  ]);
}

/**
 * Retention of limit rows, up to `limit`: holders gone or finished let go
 * (a safety net), rows that limit nothing now deleted, and those a task
 * named meanwhile made again; how many went.
 */
export async function pruneLimits(db: Connection, sql: LimitStatements, limit: number): Promise<number> {
  await db.query(sql.pruneKeys);
  const { rows: idle } = await db.query<{ kind: string; key: string }>(sql.pruneLimits, [limit]);
  if (idle.length > 0) {
    const keys = (kind: string) => idle.filter((row) => row.kind === kind).map((row) => row.key);
    await db.query(sql.repairLimits, [keys('concurrency'), keys('rate')]);
  }
  return idle.length;
}
