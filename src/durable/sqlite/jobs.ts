// Stored recurring jobs on SQLite: a job written (re-registering the same
// schedule keeps its place), its due occurrences materialised at the start
// of a claim (advance-job.ts plans them), and its management: read, listed
// with its occurrences' counts, paused, resumed, triggered, cancelled,
// pruned.
import { sameSchedule } from '../rule-json.js';
import type { StoredOptions } from '../options.js';
import type { DueJob, JobAdvance, JobFilter, NewJob, StoredJob } from '../store.js';
import { toDueJob, toJob, type DueJobRow, type JobRow, type JobStatsRow, type TaskRow } from '../rows.js';
import type { Prepare } from './driver.js';
import { letGoOccurrences, upsertLimits } from './limits.js';

/** The concurrency group and the rate group a job's options (JSON, the parameter ?) give its occurrences. */
const SERIAL_OF = `COALESCE(json_extract(?, '$.serial'), json_extract(?, '$.concurrency.group'))`;

/** The statements of stored jobs. */
const JOBS_SQL = {
  jobByKey: `SELECT * FROM taskheap_jobs WHERE key = ?`,
  upsertJob: `INSERT INTO taskheap_jobs (key, name, payload, rule, state, next_run_at, remaining, until, options, created_at, updated_at)
    VALUES (@key, @name, @payload, @rule, @state, @nextRunAt, @remaining, @until, @options, @now, @now)
    ON CONFLICT (key) DO UPDATE SET name = @name, payload = @payload, rule = @rule, state = @state,
    next_run_at = @nextRunAt, remaining = @remaining, until = @until, options = @options, updated_at = @now`,
  dueJobs: `SELECT * FROM taskheap_jobs WHERE state = 'scheduled' AND next_run_at <= ? ORDER BY next_run_at LIMIT 100`,
  jobRunning: `SELECT 1 FROM taskheap_tasks WHERE job_key = ? AND state = 'running' AND locked_until > ? LIMIT 1`,
  insertOccurrence: `INSERT OR IGNORE INTO taskheap_tasks (name, payload, run_at, scheduled_at, max_attempts, options, job_key, created_at, updated_at,
      serial, priority, rate_key, queue, fair_group, fair_weight)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ${SERIAL_OF}, COALESCE(json_extract(?, '$.priority'), 0), json_extract(?, '$.rate.group'),
      COALESCE(json_extract(?, '$.queue'), 'default'), json_extract(?, '$.fair.group'), COALESCE(json_extract(?, '$.fair.weight'), 1))`,
  advanceJob: `UPDATE taskheap_jobs SET next_run_at = ?, remaining = ?, state = ?, runs = runs + ?, updated_at = ? WHERE key = ?`,
  cancelJob: `UPDATE taskheap_jobs SET state = 'cancelled', next_run_at = NULL, updated_at = ? WHERE key = ? AND state <> 'cancelled'`,
  cancelOccurrences: `UPDATE taskheap_tasks SET state = 'cancelled', updated_at = ? WHERE job_key = ? AND state = 'waiting'`,
  /** Retention: recurring jobs that are over (done or cancelled) before @failed. */
  pruneJobs: `DELETE FROM taskheap_jobs WHERE key IN (SELECT key FROM taskheap_jobs
    WHERE state IN ('done', 'cancelled') AND updated_at < @failed LIMIT @limit)`,
  listJobs: `SELECT * FROM taskheap_jobs
    WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@after IS NULL OR key > @after)
    ORDER BY key LIMIT @limit`,
  /** Occurrences of the jobs @keys (a JSON array) by state, and the latest due time of those that started. */
  jobStats: `SELECT job_key, state, count(*) AS n, MAX(CASE WHEN state <> 'waiting' THEN COALESCE(scheduled_at, run_at) END) AS last
    FROM taskheap_tasks WHERE job_key IN (SELECT value FROM json_each(@keys)) GROUP BY job_key, state`,
  setJobState: `UPDATE taskheap_jobs SET state = @to, updated_at = @now WHERE key = @key AND state = @from`,
  pausedJob: `SELECT * FROM taskheap_jobs WHERE key = ? AND state = 'paused'`,
  /** Resumes a paused job due next at @next (null: none is left, it is done). */
  resumeJob: `UPDATE taskheap_jobs SET state = CASE WHEN @next IS NULL THEN 'done' ELSE 'scheduled' END, next_run_at = @next, updated_at = @now
    WHERE key = @key AND state = 'paused'`,
  /**
   * An extra occurrence due @now: scheduled_at stays NULL, so it never takes
   * the place of a scheduled occurrence (the unique key ignores NULLs).
   */
  triggerJob: `INSERT INTO taskheap_tasks (name, payload, run_at, max_attempts, options, job_key, created_at, updated_at, serial, priority,
      rate_key, queue, fair_group, fair_weight)
    SELECT name, payload, @now, COALESCE(json_extract(options, '$.retry.attempts'), 1), options, key, @at, @at,
      COALESCE(json_extract(options, '$.serial'), json_extract(options, '$.concurrency.group')), COALESCE(json_extract(options, '$.priority'), 0),
      json_extract(options, '$.rate.group'), COALESCE(json_extract(options, '$.queue'), 'default'), json_extract(options, '$.fair.group'),
      COALESCE(json_extract(options, '$.fair.weight'), 1)
    FROM taskheap_jobs WHERE key = @key AND state <> 'cancelled' RETURNING *`,
} as const;

/** A whole `taskheap_jobs` row, numbers as SQLite returns them. */
type StoredJobRow = JobRow & DueJobRow & { state: JobRow['state']; next_run_at: number | null; remaining: number | null };

/** A recurring job written (inserted, or updated in place), in the caller's transaction. @internal */
export function upsertJob(statement: Prepare, job: NewJob, now: number): StoredJob {
  const existing = statement(JOBS_SQL.jobByKey).get(job.key) as StoredJobRow | undefined;
  // Re-registering the same schedule (every start does) keeps the job's
  // place in it: its rule's start point, next occurrence and count left.
  // It keeps its state too: a pause survives the re-registration of every
  // deploy, and so do the end of a finished job (done) and a cancel.
  const keep = existing !== undefined && sameSchedule(existing.rule, job.rule);
  const row = keep ? { ...job, rule: existing.rule, nextRunAt: existing.next_run_at, remaining: existing.remaining } : job;
  statement(JOBS_SQL.upsertJob).run({ ...row, state: keep ? existing.state : row.nextRunAt === null ? 'done' : 'scheduled', now });
  return toJob(statement(JOBS_SQL.jobByKey).get(job.key) as StoredJobRow);
}

/** Inserts the occurrences of the due recurring jobs (`advance` plans them) and moves the jobs on. @internal */
export function materialize(prepare: Prepare, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
  const due = prepare(JOBS_SQL.dueJobs).all(now) as DueJobRow[];
  const isRunning = prepare(JOBS_SQL.jobRunning);
  // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
  const insert = prepare(JOBS_SQL.insertOccurrence);
  const update = prepare(JOBS_SQL.advanceJob);
  for (const job of due) {
    const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
    const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
    const o = job.options;
    for (const at of plan.occurrences) insert.run(job.name, job.payload, at, at, maxAttempts, o, job.key, now, now, o, o, o, o, o, o, o);
    if (plan.occurrences.length > 0) {
      const options = JSON.parse(job.options) as StoredOptions;
      upsertLimits(prepare, job.options, options.serial ?? options.concurrency?.group, options.rate?.group);
    }
    update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
  }
}

/** Job `key`, with its occurrences' counts, or undefined. */
export function getJob(prepare: Prepare, key: string): StoredJob | undefined {
  const row = prepare(JOBS_SQL.jobByKey).get(key) as StoredJobRow | undefined;
  return row === undefined ? undefined : withStats(prepare, [row])[0];
}

/** The jobs under `filter`, in key order, with their occurrences' counts. */
export function listJobs(prepare: Prepare, filter: JobFilter): StoredJob[] {
  const rows = prepare(JOBS_SQL.listJobs).all({
    state: filter.state ?? null,
    name: filter.name ?? null,
    keyPrefix: filter.keyPrefix ?? null,
    after: filter.after ?? null,
    limit: filter.limit ?? 100,
  }) as StoredJobRow[];
  return withStats(prepare, rows);
}

function withStats(prepare: Prepare, rows: StoredJobRow[]): StoredJob[] {
  if (rows.length === 0) return [];
  const stats = prepare(JOBS_SQL.jobStats).all({ keys: JSON.stringify(rows.map((row) => row.key)) }) as JobStatsRow[];
  return rows.map((row) => toJob(row, stats));
}

/** Pauses or resumes job `key` if it is in state `from`; whether it was. */
export function setJobState(prepare: Prepare, key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused', at: number): boolean {
  const { changes } = prepare(JOBS_SQL.setJobState).run({ key, from, to, now: at });
  return Number(changes) > 0;
}

/** Resumes paused job `key`, due next when `resumedAt` says, in the caller's transaction; whether it was paused. */
export function resumeJob(
  prepare: Prepare,
  key: string,
  now: number,
  resumedAt: (job: DueJob, now: number) => number | null,
  at: number,
): boolean {
  const row = prepare(JOBS_SQL.pausedJob).get(key) as DueJobRow | undefined;
  if (row === undefined) return false;
  prepare(JOBS_SQL.resumeJob).run({ key, next: resumedAt(toDueJob(row), now), now: at });
  return true;
}

/** An extra occurrence of job `key` due `now` (and the limit rows it names), or undefined if the job is gone or cancelled. */
export function triggerJob(prepare: Prepare, key: string, now: number, at: number): TaskRow | undefined {
  const added = prepare(JOBS_SQL.triggerJob).get({ key, now, at }) as TaskRow | undefined;
  if (added !== undefined) upsertLimits(prepare, added.options, added.serial, added.rate_key);
  return added;
}

/** Cancels job `key` and its waiting occurrences, in the caller's transaction; whether the job was not cancelled already. */
export function cancelJob(prepare: Prepare, key: string): boolean {
  const { changes } = prepare(JOBS_SQL.cancelJob).run(Date.now(), key);
  letGoOccurrences(prepare, key);
  prepare(JOBS_SQL.cancelOccurrences).run(Date.now(), key);
  return changes > 0;
}

/** Retention: up to `limit` jobs over (done or cancelled) last changed before `cutoff`; how many went. */
export function pruneJobs(prepare: Prepare, cutoff: number, limit: number): number {
  return Number(prepare(JOBS_SQL.pruneJobs).run({ failed: cutoff, limit }).changes);
}
