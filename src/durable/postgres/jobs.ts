// Stored recurring jobs on PostgreSQL: a job written (re-registering the
// same schedule keeps its place, decided in SQL), its due occurrences
// materialised at the start of a claim (one row per job and time, whichever
// process gets there first, by the unique key), and its management: read,
// listed with its occurrences' counts, paused, resumed, triggered,
// cancelled, pruned.
import type { DueJob, JobAdvance, JobFilter, NewJob, StoredJob, StoredTask } from '../store.js';
import { toDueJob, toJob, toTask, type DueJobRow, type JobRow, type JobStatsRow, type TaskRow } from '../rows.js';
import type { Connection } from './connection.js';
import { DONE, DONE_IDS, WAKE } from './listener.js';
import { letGo, upsertLimits } from './limits.js';
import type { PgPoolClient } from './pg.js';
import { millis, ms, tables, taskColumns, ts } from './tables.js';

/**
 * SQL twin of `sameSchedule`: the stored job `j` and the new one have the
 * same rule but for its start point. The job then keeps its state: a pause
 * survives the re-registration of every deploy, and so do the end of a
 * finished job (`done`: its times or its until are used up) and a cancel.
 */
const SAME = `((j.rule::jsonb - 'start' - 'anchor') = (EXCLUDED.rule::jsonb - 'start' - 'anchor'))`;

/** The columns a job row is read with; `a` is the table alias. */
function jobColumns(a: string): string {
  return `${a}.key, ${a}.name, ${a}.payload, ${a}.state, ${ms(`${a}.next_run_at`)} AS next_run_at, ${a}.runs, ${a}.rule,
    ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at`;
}

/** SQL: the priority a stored job's options (JSON text) give its occurrences. */
const PRIORITY_OF = (options: string) => `COALESCE((${options}::jsonb ->> 'priority')::int, 0)`;

/**
 * SQL: the concurrency group and the rate group a stored job's options (JSON text) give its occurrences;
 * `key` is the field of a job written by a process of schema 7 still running during a deploy.
 */
const SERIAL_OF = (options: string) =>
  `COALESCE(${options}::jsonb ->> 'serial', ${options}::jsonb #>> '{concurrency,group}', ${options}::jsonb #>> '{concurrency,key}')`;

const RATE_GROUP_OF = (options: string) => `COALESCE(${options}::jsonb #>> '{rate,group}', ${options}::jsonb #>> '{rate,key}')`;

/** SQL: the queue a stored job's options (JSON text) put its occurrences in. */
const QUEUE_OF = (options: string) => `COALESCE(${options}::jsonb ->> 'queue', 'default')`;

/** The statements of stored jobs for tables in `schema` (undefined: the search_path). */
export function jobStatements(schema: string | undefined) {
  const { T, J, L } = tables(schema);
  return {
    jobByKey: `SELECT ${jobColumns('j')} FROM ${J} AS j WHERE j.key = $1`,
    listJobs: `SELECT ${jobColumns('j')} FROM ${J} AS j
      WHERE ($1::text IS NULL OR j.state = $1) AND ($2::text IS NULL OR j.name = $2)
        AND ($3::text IS NULL OR left(j.key, length($3)) = $3) AND ($4::text IS NULL OR j.key > $4)
      ORDER BY j.key LIMIT $5`,
    /** Occurrences of the jobs $1 by state, and the latest due time of those that started. */
    jobStats: `SELECT job_key, state, count(*) AS n, max(${ms('COALESCE(scheduled_at, run_at)')}) FILTER (WHERE state <> 'waiting') AS last
      FROM ${T} WHERE job_key = ANY($1::text[]) GROUP BY job_key, state`,
    /** Pause or resume; a resumed job wakes the workers. */
    setJobState: `WITH changed AS (UPDATE ${J} SET state = $3, updated_at = now() WHERE key = $1 AND state = $2 RETURNING next_run_at)
      SELECT CASE WHEN $3 = 'scheduled' AND next_run_at IS NOT NULL
        THEN pg_notify('${WAKE}', $4 || (extract(epoch from next_run_at) * 1000)::bigint::text) END FROM changed`,
    /** A paused job, locked, as the claim reads a due one (resumedAt decides its next time), with the server's now. */
    pausedJob: `SELECT key, name, payload, rule, ${ms('next_run_at')} AS next_run_at, remaining, ${ms('until')} AS until, options,
        ${ms('now()')} AS now
      FROM ${J} WHERE key = $1 AND state = 'paused' FOR UPDATE`,
    /** Resumes a paused job due next at $2 (null: none is left, it is done); wakes the workers. */
    resumeJob: `WITH changed AS (UPDATE ${J} SET state = CASE WHEN $2::float8 IS NULL THEN 'done' ELSE 'scheduled' END,
          next_run_at = ${ts('$2')}, updated_at = now()
        WHERE key = $1 AND state = 'paused' RETURNING next_run_at)
      SELECT CASE WHEN next_run_at IS NOT NULL THEN pg_notify('${WAKE}', $3 || (extract(epoch from next_run_at) * 1000)::bigint::text) END
      FROM changed`,
    /**
     * An extra occurrence due now: scheduled_at stays NULL, so it never takes
     * the place of a scheduled occurrence (the unique key ignores NULLs).
     */
    triggerJob: `WITH added AS (
        INSERT INTO ${T} AS t (name, payload, run_at, max_attempts, options, job_key, serial, priority, queue, rate_key)
        SELECT name, payload, now(), COALESCE((options::jsonb #>> '{retry,attempts}')::int, 1), options, key, ${SERIAL_OF('options')}, ${PRIORITY_OF('options')},
          ${QUEUE_OF('options')}, ${RATE_GROUP_OF('options')}
        FROM ${J} WHERE key = $1 AND state <> 'cancelled'
        RETURNING ${taskColumns('t')}),
      ${upsertLimits(L, 'limits', 'added')}
      SELECT added.*, pg_notify('${WAKE}', $2 || added.run_at::bigint::text) FROM added`,
    /**
     * Re-registering the same schedule (every start does) keeps the job's
     * place in it: its rule's start point, next occurrence and count left
     * (see sameSchedule in durable/rule-json.ts; start and anchor are the start point).
     */
    addJob: `WITH saved AS (
        INSERT INTO ${J} AS j (key, name, payload, rule, state, next_run_at, remaining, until, options)
        VALUES ($1, $2, $3, $4, $5, ${ts('$6')}, $7, ${ts('$8')}, $9)
        ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, payload = EXCLUDED.payload,
          rule = CASE WHEN ${SAME} THEN j.rule ELSE EXCLUDED.rule END,
          state = CASE WHEN ${SAME} THEN j.state ELSE EXCLUDED.state END,
          next_run_at = CASE WHEN ${SAME} THEN j.next_run_at ELSE EXCLUDED.next_run_at END,
          remaining = CASE WHEN ${SAME} THEN j.remaining ELSE EXCLUDED.remaining END,
          until = EXCLUDED.until, options = EXCLUDED.options, updated_at = now()
        RETURNING j.key, j.name, j.payload, j.state, j.next_run_at, j.runs, j.created_at, j.updated_at)
      SELECT key, name, payload, state, ${ms('next_run_at')} AS next_run_at, runs, ${ms('created_at')} AS created_at, ${ms('updated_at')} AS updated_at,
        CASE WHEN next_run_at IS NOT NULL THEN pg_notify('${WAKE}', $10 || (extract(epoch from next_run_at) * 1000)::bigint::text) END
      FROM saved`,
    /** Another process materializing the same job holds its row: skip it, that process does the work. */
    dueJobs: `SELECT key, name, payload, rule, ${ms('next_run_at')} AS next_run_at, remaining, ${ms('until')} AS until, options,
        ${ms('now()')} AS now
      FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()
      ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
    runningJobs: `SELECT DISTINCT job_key FROM ${T}
      WHERE job_key = ANY($1::text[]) AND state = 'running' AND locked_until > now()`,
    /** (job_key, scheduled_at) is unique: an occurrence is inserted once, whichever process gets there first. */
    insertOccurrences: `WITH added AS (INSERT INTO ${T} (name, payload, run_at, scheduled_at, max_attempts, options, job_key, serial, priority, queue, rate_key)
        SELECT u.name, u.payload, ${ts('u.at')}, ${ts('u.at')}, u.max_attempts, u.options, u.job_key, ${SERIAL_OF('u.options')}, ${PRIORITY_OF('u.options')},
          ${QUEUE_OF('u.options')}, ${RATE_GROUP_OF('u.options')}
        FROM unnest($1::text[], $2::text[], $3::float8[], $4::int[], $5::text[], $6::text[]) AS u(name, payload, at, max_attempts, options, job_key)
        ON CONFLICT (job_key, scheduled_at) WHERE job_key IS NOT NULL DO NOTHING
        RETURNING id, serial, rate_key, options),
      ${upsertLimits(L, 'limits', 'added')}
      SELECT count(*) FROM added`,
    advanceJobs: `UPDATE ${J} AS j SET next_run_at = ${ts('u.next')}, remaining = u.remaining, state = u.state,
        runs = j.runs + u.added, updated_at = now()
      FROM unnest($1::text[], $2::float8[], $3::int[], $4::text[], $5::int[]) AS u(key, next, remaining, state, added)
      WHERE j.key = u.key`,
    /** The job and its waiting occurrences, whose final state is announced on DONE ($2: the payload prefix) as a settle's are. */
    cancelJob: `WITH
        job AS (UPDATE ${J} SET state = 'cancelled', next_run_at = NULL, updated_at = now() WHERE key = $1 AND state <> 'cancelled' RETURNING key),
        occurrences AS (UPDATE ${T} SET state = 'cancelled', updated_at = now() WHERE job_key = $1 AND state = 'waiting' RETURNING id, serial),
        ${letGo(L, 'freed', 'occurrences')}
      SELECT (SELECT count(*) FROM job) AS n,
        (SELECT count(*) FROM (SELECT pg_notify('${DONE}', $2 || string_agg(id::text, ',')) AS sent
          FROM (SELECT id, (row_number() OVER () - 1) / ${DONE_IDS} AS part FROM occurrences) AS ended GROUP BY part) AS announced) AS announced`,
    /** Retention: recurring jobs that are over (done or cancelled) older than $1 ms. */
    pruneJobs: `WITH doomed AS (SELECT key FROM ${J} WHERE state IN ('done', 'cancelled') AND updated_at < now() - ${millis('$1')}
        LIMIT $2 FOR UPDATE SKIP LOCKED)
      DELETE FROM ${J} AS j USING doomed WHERE j.key = doomed.key`,
  };
}

/** The statements of stored jobs. */
export type JobStatements = ReturnType<typeof jobStatements>;

type Advance = (job: DueJob, now: number, running: boolean) => JobAdvance;

/** Turns due recurring jobs into occurrence tasks; part of the claim's transaction. @internal */
export async function materialize(client: PgPoolClient, sql: JobStatements, advance: Advance): Promise<void> {
  const { rows: due } = await client.query<DueJobRow & { now: number }>(sql.dueJobs);
  if (due.length === 0) return;
  // The server's now: which occurrences were missed is decided by the one shared clock.
  const now = Number(due[0]!.now);
  const { rows: busy } = await client.query<{ job_key: string }>(sql.runningJobs, [due.map((job) => job.key)]);
  const running = new Set(busy.map((row) => row.job_key));
  const occurrences = {
    name: [] as string[],
    payload: [] as string[],
    at: [] as number[],
    maxAttempts: [] as number[],
    options: [] as string[],
    jobKey: [] as string[],
  };
  const updates = {
    key: [] as string[],
    next: [] as (number | null)[],
    remaining: [] as (number | null)[],
    state: [] as string[],
    added: [] as number[],
  };
  for (const row of due) {
    const job = toDueJob(row);
    const plan = advance(job, now, running.has(job.key));
    const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
    for (const at of plan.occurrences) {
      occurrences.name.push(job.name);
      occurrences.payload.push(job.payload);
      occurrences.at.push(at);
      occurrences.maxAttempts.push(maxAttempts);
      occurrences.options.push(job.options);
      occurrences.jobKey.push(job.key);
    }
    updates.key.push(job.key);
    updates.next.push(plan.nextRunAt);
    updates.remaining.push(plan.remaining);
    updates.state.push(plan.nextRunAt === null ? 'done' : 'scheduled');
    updates.added.push(plan.occurrences.length);
  }
  if (occurrences.at.length > 0) {
    await client.query(sql.insertOccurrences, [
      occurrences.name,
      occurrences.payload,
      occurrences.at,
      occurrences.maxAttempts,
      occurrences.options,
      occurrences.jobKey,
    ]);
  }
  await client.query(sql.advanceJobs, [updates.key, updates.next, updates.remaining, updates.state, updates.added]);
}

/** A job written: re-registering the same schedule keeps its place in it (see the statement). */
export async function addJob(db: Connection, sql: JobStatements, prefix: string, job: NewJob): Promise<StoredJob> {
  const { rows } = await db.query<JobRow>(sql.addJob, [
    job.key,
    job.name,
    job.payload,
    job.rule,
    job.nextRunAt === null ? 'done' : 'scheduled',
    job.nextRunAt,
    job.remaining,
    job.until,
    job.options,
    prefix,
  ]);
  return toJob(rows[0]!);
}

/** Job `key`, with its occurrences' counts, or undefined. */
export async function getJob(db: Connection, sql: JobStatements, key: string): Promise<StoredJob | undefined> {
  const { rows } = await db.query<JobRow>(sql.jobByKey, [key]);
  return (await withStats(db, sql, rows))[0];
}

/** The jobs under `filter`, in key order, with their occurrences' counts. */
export async function listJobs(db: Connection, sql: JobStatements, filter: JobFilter): Promise<StoredJob[]> {
  const { rows } = await db.query<JobRow>(sql.listJobs, [
    filter.state ?? null,
    filter.name ?? null,
    filter.keyPrefix ?? null,
    filter.after ?? null,
    filter.limit ?? 100,
  ]);
  return withStats(db, sql, rows);
}

async function withStats(db: Connection, sql: JobStatements, rows: JobRow[]): Promise<StoredJob[]> {
  if (rows.length === 0) return [];
  const stats = await db.query<JobStatsRow>(sql.jobStats, [rows.map((row) => row.key)]);
  return rows.map((row) => toJob(row, stats.rows));
}

/** Pauses or resumes job `key` if it is in state `from` (a resumed job wakes the workers); whether it was. */
export async function setJobState(
  db: Connection,
  sql: JobStatements,
  prefix: string,
  key: string,
  from: 'scheduled' | 'paused',
  to: 'scheduled' | 'paused',
): Promise<boolean> {
  const { rows } = await db.query(sql.setJobState, [key, from, to, prefix]);
  return rows.length > 0;
}

/** Resumes paused job `key`, due next when `resumedAt` says on the server's clock; whether it was paused. */
export async function resumeJob(
  db: Connection,
  sql: JobStatements,
  prefix: string,
  key: string,
  resumedAt: (job: DueJob, now: number) => number | null,
): Promise<boolean> {
  return db.transaction(async (client) => {
    const [job] = (await client.query<DueJobRow & { now: number }>(sql.pausedJob, [key])).rows;
    if (job === undefined) return false;
    // The server's now decides which occurrences fell in the pause: the one clock.
    await client.query(sql.resumeJob, [key, resumedAt(toDueJob(job), Number(job.now)), prefix]);
    return true;
  });
}

/** An extra occurrence of job `key` due now, or undefined if the job is gone or cancelled. */
export async function triggerJob(db: Connection, sql: JobStatements, prefix: string, key: string): Promise<StoredTask | undefined> {
  const { rows } = await db.query<TaskRow>(sql.triggerJob, [key, prefix]);
  return rows[0] === undefined ? undefined : toTask(rows[0]);
}

/** Cancels job `key` and its waiting occurrences; whether the job was not cancelled already. */
export async function cancelJob(db: Connection, sql: JobStatements, prefix: string, key: string): Promise<boolean> {
  const { rows } = await db.query<{ n: string | number }>(sql.cancelJob, [key, prefix]);
  return Number(rows[0]?.n ?? 0) > 0;
}

/** Retention: up to `limit` jobs over (done or cancelled) older than `age` ms; how many went. */
export async function pruneJobs(db: Connection, sql: JobStatements, age: number, limit: number): Promise<number> {
  return (await db.query(sql.pruneJobs, [age, limit])).rowCount ?? 0;
}
