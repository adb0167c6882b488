// Every statement the SQLite store runs, in one place (the schema they run
// on is in migrations.ts). Times are UTC epoch milliseconds in INTEGER
// columns; payloads and options are JSON text.

import { META, MIGRATIONS as VERSIONS } from './migrations.js';

/** The schema's SQL, one entry per version: entry N-1 migrates version N-1 to N (see migrations.ts). */
export const MIGRATIONS: readonly string[] = VERSIONS.map((migration) => migration.sql);

/** Plain waiting tasks: no concurrency key and no rate key (keyed ones are found from their limit rows, limits.ts). */
const PLAIN = `t.state = 'waiting' AND t.serial IS NULL AND t.rate_key IS NULL`;

/** The concurrency key and the rate key a job's options (JSON, the parameter ?) give its occurrences. */
const SERIAL_OF = `COALESCE(json_extract(?, '$.serial'), json_extract(?, '$.concurrency.key'))`;

/** How many attempts' errors a task keeps (the latest). */
const MAX_ERRORS = 10;

/**
 * The task's \`errors\` with one more entry \`{ attempt, at, error }\` (@error,
 * at @at), the oldest dropped beyond MAX_ERRORS: json_each numbers the
 * entries, the last MAX_ERRORS are kept in order.
 */
const APPEND_ERROR = `(SELECT json_group_array(json(value)) FROM (SELECT key, value FROM (SELECT key, value
    FROM json_each(json_insert(COALESCE(errors, '[]'), '$[#]', json_object('attempt', attempts, 'at', @at, 'error', @error)))
    ORDER BY key DESC LIMIT ${MAX_ERRORS}) ORDER BY key))`;

/** The statements, by what they do. */
export const SQL = {
  createMeta: META,
  readVersion: `SELECT version FROM taskheap_meta`,
  insertVersion: `INSERT INTO taskheap_meta (version) VALUES (?)`,
  updateVersion: `UPDATE taskheap_meta SET version = ?`,
  /**
   * At start-up, whatever is still running was held by a previous owner that
   * died: back to waiting, and if it had started, one lease expiry counted,
   * past the limit failed with `error`. A task it had claimed but not started
   * (prefetched) goes back unrun: neither an attempt nor an expiry.
   */
  recover: `UPDATE taskheap_tasks SET locked_by = NULL, locked_until = NULL, updated_at = @now,
    expiries = expiries + (NOT prefetched), attempts = attempts - prefetched,
    state = CASE WHEN NOT prefetched AND expiries >= @limit THEN 'failed' ELSE 'waiting' END,
    last_error = CASE WHEN NOT prefetched AND expiries >= @limit THEN @error ELSE last_error END
    WHERE state = 'running' RETURNING *, 0 AS started, expiries AS failed_after`,
  taskByKey: `SELECT * FROM taskheap_tasks WHERE key = ?`,
  /** A finished task that others depend on gives its key to a new one and stays as it ended (dedupe.ts, 'detach'). */
  detachKey: `UPDATE taskheap_tasks SET key = NULL WHERE id = ?`,
  replaceTask: `UPDATE taskheap_tasks SET name = @name, payload = @payload, state = 'waiting', run_at = @runAt, attempts = 0,
    max_attempts = @maxAttempts, options = @options, serial = @serial, priority = @priority, rate_key = @rateKey, queue = @queue,
    locked_by = NULL, locked_until = NULL, last_error = NULL, expiries = 0, result = NULL, errors = NULL, started_at = NULL,
    progress = NULL, logs = NULL, updated_at = @at WHERE id = @id`,
  /** A throttled add that wrote the task: its period starts now (the scheduler's clock). */
  setCreated: `UPDATE taskheap_tasks SET created_at = ? WHERE id = ?`,
  /**
   * Named queues: the first queue with plain waiting tasks, then the next
   * after ? (one probe each of the queue-leading plain index), and one
   * queue's priority levels: the claim walks open queues only, level by level.
   */
  firstQueue: `SELECT MIN(queue) AS q FROM taskheap_tasks AS t WHERE ${PLAIN}`,
  queueAfter: `SELECT MIN(queue) AS q FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue > ?`,
  queueTopLevel: `SELECT MAX(priority) AS p FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue = ?`,
  queueLevelBelow: `SELECT MAX(priority) AS p FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue = ? AND priority < ?`,
  /** Every queue row: its settings and its rate bucket's starts (few rows). */
  queueSettings: `SELECT name, paused, global_concurrency, rate_limit, rate_interval_ms, rate_starts FROM taskheap_queues`,
  /** Queue @name's rate bucket after a claim's starts (a JSON array of [ms, count]). */
  queueSpend: `UPDATE taskheap_queues SET rate_starts = @starts WHERE name = @name`,
  /** How many tasks of queue ? run. */
  queueRunning: `SELECT count(*) AS n FROM taskheap_tasks WHERE state = 'running' AND queue = ?`,
  /** A queue's settings: what is not set (@setGlobal, @setRate false; @paused null) stays; a new rate keeps the starts made. */
  setQueue: `INSERT INTO taskheap_queues (name, paused, global_concurrency, rate_limit, rate_interval_ms, updated_at)
    VALUES (@name, COALESCE(@paused, 0), @global, @rateLimit, @rateInterval, @now)
    ON CONFLICT (name) DO UPDATE SET paused = COALESCE(@paused, paused),
      global_concurrency = CASE WHEN @setGlobal THEN @global ELSE global_concurrency END,
      rate_limit = CASE WHEN @setRate THEN @rateLimit ELSE rate_limit END,
      rate_interval_ms = CASE WHEN @setRate THEN @rateInterval ELSE rate_interval_ms END, updated_at = @now`,
  /** Every queue (@name null) or one: its settings and its tasks by state. */
  listQueues: `SELECT n.name, COALESCE(q.paused, 0) AS paused, q.global_concurrency, q.rate_limit, q.rate_interval_ms, c.state,
      COALESCE(c.n, 0) AS n
    FROM (SELECT name FROM taskheap_queues WHERE @name IS NULL OR name = @name
      UNION SELECT DISTINCT queue FROM taskheap_tasks WHERE @name IS NULL OR queue = @name) AS n
    LEFT JOIN taskheap_queues AS q ON q.name = n.name
    LEFT JOIN (SELECT queue, state, count(*) AS n FROM taskheap_tasks WHERE @name IS NULL OR queue = @name GROUP BY queue, state) AS c
      ON c.queue = n.name
    ORDER BY n.name`,
  taskById: `SELECT * FROM taskheap_tasks WHERE id = ?`,
  /** Of the ids ? (a JSON array), the tasks over, and those gone (no columns but \`asked\`). */
  endedTasks: `SELECT j.value AS asked, t.* FROM json_each(?) AS j LEFT JOIN taskheap_tasks AS t ON t.id = j.value
    WHERE t.id IS NULL OR t.state NOT IN ('blocked', 'waiting', 'running')`,
  insertTask: `INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, serial, priority, rate_key, queue, created_at, updated_at)
    VALUES (@name, @key, @payload, @runAt, @maxAttempts, @options, @serial, @priority, @rateKey, @queue, @now, @at)`,
  jobByKey: `SELECT * FROM taskheap_jobs WHERE key = ?`,
  upsertJob: `INSERT INTO taskheap_jobs (key, name, payload, rule, state, next_run_at, remaining, until, options, created_at, updated_at)
    VALUES (@key, @name, @payload, @rule, @state, @nextRunAt, @remaining, @until, @options, @now, @now)
    ON CONFLICT (key) DO UPDATE SET name = @name, payload = @payload, rule = @rule, state = @state,
    next_run_at = @nextRunAt, remaining = @remaining, until = @until, options = @options, updated_at = @now`,
  /** Due plain waiting tasks of queue @queue and priority @p, in due order. */
  dueWaiting: `SELECT t.id, t.run_at, t.queue FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
    ORDER BY t.run_at, t.id LIMIT @limit`,
  /** Only tasks whose handler is among the names of a JSON array: the ones this process has defined. */
  dueWaitingNamed: `SELECT t.id, t.run_at, t.queue FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT @limit`,
  /** The first plain waiting task of queue @queue and priority @p (`nextDue`; keyed ones: limits.ts). */
  firstWaiting: `SELECT t.run_at FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    ORDER BY t.run_at, t.id LIMIT 1`,
  firstWaitingNamed: `SELECT t.run_at FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT 1`,
  /**
   * Expired leases of another owner. One store owns the file (it holds the
   * lock), and recover() hands back a dead owner's work at start-up, so this
   * finds nothing in normal use; our own expired leases (a handler blocking
   * the event loop) are never taken from ourselves: this process is alive.
   */
  dueExpired: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    ORDER BY run_at, id LIMIT ?`,
  dueExpiredNamed: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    AND name IN (SELECT value FROM json_each(?)) ORDER BY run_at, id LIMIT ?`,
  /**
   * A claim; `prefetched` for a task claimed beyond the free workers (until
   * it starts: renewMark). An expired lease taken over counts one expiry if
   * its task had started; one that never started is neither an attempt nor
   * an expiry.
   */
  claimOne: `UPDATE taskheap_tasks SET expiries = expiries + (state = 'running' AND NOT prefetched),
    attempts = attempts + (state = 'waiting' OR NOT prefetched), state = 'running', locked_by = ?, locked_until = ?,
    started_at = ?, prefetched = ?, updated_at = ? WHERE id = ? RETURNING *`,
  /** An expired task past the limit of expiries: failed instead of claimed. */
  failExpired: `UPDATE taskheap_tasks SET state = 'failed', expiries = expiries + 1, last_error = ?, locked_by = NULL, locked_until = NULL,
    updated_at = ? WHERE id = ? RETURNING *, 0 AS started, expiries AS failed_after`,
  dueJobs: `SELECT * FROM taskheap_jobs WHERE state = 'scheduled' AND next_run_at <= ? ORDER BY next_run_at LIMIT 100`,
  jobRunning: `SELECT 1 FROM taskheap_tasks WHERE job_key = ? AND state = 'running' AND locked_until > ? LIMIT 1`,
  insertOccurrence: `INSERT OR IGNORE INTO taskheap_tasks (name, payload, run_at, scheduled_at, max_attempts, options, job_key, created_at, updated_at,
      serial, priority, rate_key, queue)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ${SERIAL_OF}, COALESCE(json_extract(?, '$.priority'), 0), json_extract(?, '$.rate.key'),
      COALESCE(json_extract(?, '$.queue'), 'default'))`,
  advanceJob: `UPDATE taskheap_jobs SET next_run_at = ?, remaining = ?, state = ?, runs = runs + ?, updated_at = ? WHERE key = ?`,
  /** The earliest expiring lease or scheduled job; waiting tasks are looked up level by level (firstWaiting). */
  nextDue: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running'
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
  nextDueNamed: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running' AND name IN (SELECT value FROM json_each(?))
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
  renew: `UPDATE taskheap_tasks SET locked_until = ? WHERE id = ? AND locked_by = ? AND state = 'running'`,
  /** A prefetched task started: from now on a lease that runs out counts against it. */
  renewMark: `UPDATE taskheap_tasks SET prefetched = 0 WHERE id = ? AND locked_by = ? AND state = 'running' AND prefetched = 1`,
  /** A final state; a failure's error joins \`errors\`, a success's return value is \`result\`. */
  complete: `UPDATE taskheap_tasks SET state = @state, last_error = @error, result = @result,
    errors = CASE WHEN @state IN ('failed', 'timed-out') THEN ${APPEND_ERROR} ELSE errors END,
    locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND locked_by = @owner`,
  retry: `UPDATE taskheap_tasks SET state = 'waiting', run_at = @runAt, last_error = @error, errors = ${APPEND_ERROR},
    locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND locked_by = @owner`,
  /** A finished task back to waiting, due @runAt, with all its attempts again; its past errors stay. */
  requeue: `UPDATE taskheap_tasks SET state = CASE WHEN @waits > 0 THEN 'blocked' ELSE 'waiting' END, pending_deps = @waits, run_at = @runAt,
    attempts = 0, expiries = 0, result = NULL, failed_dep = NULL, locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND state IN ('failed', 'timed-out', 'cancelled') RETURNING *`,
  release: `UPDATE taskheap_tasks SET state = 'waiting', attempts = attempts - 1, locked_by = NULL, locked_until = NULL, updated_at = ?
    WHERE id = ? AND locked_by = ? AND state = 'running'`,
  cancel: `UPDATE taskheap_tasks SET state = 'cancelled', locked_by = NULL, locked_until = NULL, updated_at = ?
    WHERE id = ? AND state IN ('blocked', 'waiting', 'running')`,
  cancelJob: `UPDATE taskheap_jobs SET state = 'cancelled', next_run_at = NULL, updated_at = ? WHERE key = ? AND state <> 'cancelled'`,
  cancelOccurrences: `UPDATE taskheap_tasks SET state = 'cancelled', updated_at = ? WHERE job_key = ? AND state = 'waiting'`,
  /**
   * Retention: up to @limit finished tasks last changed before their cutoff
   * (@succeeded for succeeded ones, @failed for the others), oldest first,
   * walking the partial index of finished rows.
   */
  pruneTasks: `DELETE FROM taskheap_tasks WHERE id IN (SELECT id FROM taskheap_tasks
    WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled') AND updated_at < MAX(@succeeded, @failed)
      AND updated_at < CASE WHEN state = 'succeeded' THEN @succeeded ELSE @failed END
    ORDER BY updated_at LIMIT @limit)`,
  /** Retention: recurring jobs that are over (done or cancelled) before @failed. */
  pruneJobs: `DELETE FROM taskheap_jobs WHERE key IN (SELECT key FROM taskheap_jobs
    WHERE state IN ('done', 'cancelled') AND updated_at < @failed LIMIT @limit)`,
  /** Every filter is optional (NULL); the cursor is the last row of the previous page, (run_at, id). */
  listTasks: `SELECT * FROM taskheap_tasks
    WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
      AND (@afterRunAt IS NULL OR run_at > @afterRunAt OR (run_at = @afterRunAt AND id > @afterId))
    ORDER BY run_at, id LIMIT @limit`,
  /** listTasks newest first (`order: 'desc'`): the cursor is the last row of the previous page. */
  listTasksDesc: `SELECT * FROM taskheap_tasks
    WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      AND (@keyPrefix IS NULL OR substr(key, 1, length(@keyPrefix)) = @keyPrefix) AND (@queue IS NULL OR queue = @queue)
      AND (@from IS NULL OR run_at >= @from) AND (@to IS NULL OR run_at < @to)
      AND (@afterRunAt IS NULL OR run_at < @afterRunAt OR (run_at = @afterRunAt AND id < @afterId))
    ORDER BY run_at DESC, id DESC LIMIT @limit`,
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
      rate_key, queue)
    SELECT name, payload, @now, COALESCE(json_extract(options, '$.retry.attempts'), 1), options, key, @at, @at,
      COALESCE(json_extract(options, '$.serial'), json_extract(options, '$.concurrency.key')), COALESCE(json_extract(options, '$.priority'), 0),
      json_extract(options, '$.rate.key'), COALESCE(json_extract(options, '$.queue'), 'default')
    FROM taskheap_jobs WHERE key = @key AND state <> 'cancelled' RETURNING *`,
} as const;
