import type BetterSqlite3 from 'better-sqlite3';
import {
  SCHEMA_VERSION, SchemaVersionError, sameSchedule,
  type ClaimedTask, type DueJob, type JobAdvance, type NewJob, type NewTask, type Store, type StoredJob, type StoredState, type StoredTask, type TaskFilter,
} from './store.js';
import { toClaims, toDueJob, toJob, toTask, type DueJobRow, type JobRow, type TaskRow } from './store-rows.js';

/** What SQLite returns for an id and due-time query. */
interface IdRow {
  id: number;
  run_at: number;
}

/** A whole `taskheap_jobs` row, numbers as SQLite returns them. */
type StoredJobRow = JobRow & DueJobRow & { state: JobRow['state']; next_run_at: number | null; remaining: number | null };

/** Options of `sqliteStore()`. */
export interface SqliteStoreOptions {
  /**
   * How long a claimed task stays claimed without renewal, in ms. In one
   * process it only matters for tasks whose run outlives it.
   * @default 30000
   */
  lease?: number;
}

type Database = BetterSqlite3.Database;

const MIGRATIONS: readonly string[] = [
  // version 1
  `CREATE TABLE taskheap_tasks (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     name TEXT NOT NULL,
     key TEXT UNIQUE,
     payload TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'waiting',
     run_at INTEGER NOT NULL,
     attempts INTEGER NOT NULL DEFAULT 0,
     max_attempts INTEGER NOT NULL DEFAULT 1,
     options TEXT NOT NULL DEFAULT '{}',
     locked_by TEXT,
     locked_until INTEGER,
     last_error TEXT,
     job_key TEXT,
     scheduled_at INTEGER,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     UNIQUE (job_key, scheduled_at)
   );
   CREATE INDEX taskheap_tasks_due ON taskheap_tasks (state, run_at);
   CREATE TABLE taskheap_jobs (
     key TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     payload TEXT NOT NULL,
     rule TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'scheduled',
     next_run_at INTEGER,
     remaining INTEGER,
     until INTEGER,
     options TEXT NOT NULL,
     runs INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   );
   CREATE INDEX taskheap_jobs_due ON taskheap_jobs (state, next_run_at);`,
];

/**
 * A store in one SQLite file, for one process: tasks and jobs survive a
 * crash or a restart. Uses `better-sqlite3` (an optional peer dependency,
 * loaded on first use). Times are stored as UTC epoch milliseconds.
 *
 * @example
 * import { sqliteStore } from 'taskheap/sqlite';
 * const scheduler = new Scheduler({ store: sqliteStore('reminders.db') });
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): Store & { readonly lease: number } {
  if (typeof path !== 'string' || path === '') throw new TypeError(`Expected the SQLite path to be a non-empty string, got ${String(path)}`);
  return new SqliteStore(path, options.lease ?? 30_000);
}

class SqliteStore implements Store {
  readonly lease: number;
  readonly #path: string;
  #db: Database | undefined = undefined;

  constructor(path: string, lease: number) {
    this.#path = path;
    this.lease = lease;
  }

  get #open(): Database {
    if (this.#db === undefined) throw new Error('The SQLite store is not open: call scheduler.start() first');
    return this.#db;
  }

  async migrate(): Promise<void> {
    if (this.#db === undefined) {
      const { default: Sqlite } = await import('better-sqlite3');
      const db = new Sqlite(this.#path);
      // WAL keeps readers and the writer out of each other's way; NORMAL
      // sync survives a process crash (not a power cut) at a fraction of FULL's cost.
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('busy_timeout = 5000');
      this.#db = db;
    }
    const db = this.#open;
    db.exec('CREATE TABLE IF NOT EXISTS taskheap_meta (version INTEGER NOT NULL)');
    const row = db.prepare('SELECT version FROM taskheap_meta').get() as { version: number } | undefined;
    const found = row?.version ?? 0;
    if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
    db.transaction(() => {
      for (let version = found; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]!);
      if (row === undefined) db.prepare('INSERT INTO taskheap_meta (version) VALUES (?)').run(SCHEMA_VERSION);
      else db.prepare('UPDATE taskheap_meta SET version = ?').run(SCHEMA_VERSION);
    })();
  }

  async recover(): Promise<void> {
    // One process owns this file, so anything still marked running was
    // running in a process that died: it goes back to waiting at once.
    this.#open.prepare(`UPDATE taskheap_tasks SET state = 'waiting', locked_by = NULL, locked_until = NULL WHERE state = 'running'`).run();
  }

  async addTask(task: NewTask): Promise<StoredTask> {
    const db = this.#open;
    const now = Date.now();
    return db.transaction(() => {
      if (task.key !== null) {
        const existing = db.prepare('SELECT * FROM taskheap_tasks WHERE key = ?').get(task.key) as TaskRow | undefined;
        if (existing !== undefined) {
          if (existing.state === 'running') return toTask(existing);
          db.prepare(`UPDATE taskheap_tasks SET name = ?, payload = ?, state = 'waiting', run_at = ?, attempts = 0, max_attempts = ?,
            options = ?, locked_by = NULL, locked_until = NULL, last_error = NULL, updated_at = ? WHERE id = ?`)
            .run(task.name, task.payload, task.runAt, task.maxAttempts, task.options, now, existing.id);
          return toTask(db.prepare('SELECT * FROM taskheap_tasks WHERE id = ?').get(existing.id) as TaskRow);
        }
      }
      const { lastInsertRowid } = db.prepare(`INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(task.name, task.key, task.payload, task.runAt, task.maxAttempts, task.options, now, now);
      return toTask(db.prepare('SELECT * FROM taskheap_tasks WHERE id = ?').get(lastInsertRowid) as TaskRow);
    })();
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const db = this.#open;
    const now = Date.now();
    return db.transaction(() => {
      const existing = db.prepare('SELECT * FROM taskheap_jobs WHERE key = ?').get(job.key) as StoredJobRow | undefined;
      // Re-registering the same schedule (every start does) keeps the job's
      // place in it: its rule's start point, next occurrence and count left.
      const keep = existing !== undefined && existing.state === 'scheduled' && sameSchedule(existing.rule, job.rule);
      const row = keep
        ? { ...job, rule: existing.rule, nextRunAt: existing.next_run_at, remaining: existing.remaining }
        : job;
      db.prepare(`INSERT INTO taskheap_jobs (key, name, payload, rule, state, next_run_at, remaining, until, options, created_at, updated_at)
        VALUES (@key, @name, @payload, @rule, @state, @nextRunAt, @remaining, @until, @options, @now, @now)
        ON CONFLICT (key) DO UPDATE SET name = @name, payload = @payload, rule = @rule, state = @state,
          next_run_at = @nextRunAt, remaining = @remaining, until = @until, options = @options, updated_at = @now`)
        .run({ ...row, state: row.nextRunAt === null ? 'done' : 'scheduled', now });
      return toJob(db.prepare('SELECT * FROM taskheap_jobs WHERE key = ?').get(job.key) as StoredJobRow);
    })();
  }

  async claim(owner: string, now: number, lease: number, limit: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): Promise<ClaimedTask[]> {
    const db = this.#open;
    return db.transaction(() => {
      this.#materialize(db, now, advance);
      // Two selects, each walking the (state, run_at) index, beat one OR
      // that makes SQLite sort every due row on each claim.
      const due = db.prepare(`SELECT id, run_at FROM taskheap_tasks WHERE state = 'waiting' AND run_at <= ? ORDER BY run_at, id LIMIT ?`).all(now, limit) as IdRow[];
      const expired = db.prepare(`SELECT id, run_at FROM taskheap_tasks WHERE state = 'running' AND locked_until <= ? ORDER BY run_at, id LIMIT ?`).all(now, limit) as IdRow[];
      const ids = [...due, ...expired].sort((a, b) => a.run_at - b.run_at || a.id - b.id).slice(0, limit).map((row) => row.id);
      const take = db.prepare(`UPDATE taskheap_tasks SET state = 'running', locked_by = ?, locked_until = ?, attempts = attempts + 1, updated_at = ?
        WHERE id = ? RETURNING *`);
      return toClaims(ids.map((id) => take.get(owner, now + lease, now, id) as TaskRow));
    })();
  }

  #materialize(db: Database, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
    const due = db.prepare(`SELECT * FROM taskheap_jobs WHERE state = 'scheduled' AND next_run_at <= ? ORDER BY next_run_at LIMIT 100`).all(now) as StoredJobRow[];
    const isRunning = db.prepare(`SELECT 1 FROM taskheap_tasks WHERE job_key = ? AND state = 'running' AND locked_until > ? LIMIT 1`);
    // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
    const insert = db.prepare(`INSERT OR IGNORE INTO taskheap_tasks (name, payload, run_at, scheduled_at, max_attempts, options, job_key, created_at, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const update = db.prepare(`UPDATE taskheap_jobs SET next_run_at = ?, remaining = ?, state = ?, runs = runs + ?, updated_at = ? WHERE key = ?`);
    for (const job of due) {
      const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
      const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
      for (const at of plan.occurrences) insert.run(job.name, job.payload, at, at, maxAttempts, job.options, job.key, now, now);
      update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
    }
  }

  async nextDue(): Promise<number | undefined> {
    const row = this.#open.prepare(`SELECT MIN(t) AS t FROM (
        SELECT MIN(run_at) AS t FROM taskheap_tasks WHERE state = 'waiting'
        UNION ALL SELECT MIN(locked_until) FROM taskheap_tasks WHERE state = 'running'
        UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`).get() as { t: number | null };
    return row.t ?? undefined;
  }

  async renew(owner: string, ids: number[], until: number): Promise<number[]> {
    const db = this.#open;
    const stmt = db.prepare(`UPDATE taskheap_tasks SET locked_until = ? WHERE id = ? AND locked_by = ? AND state = 'running'`);
    return db.transaction(() => ids.filter((id) => stmt.run(until, id, owner).changes === 0))();
  }

  async complete(owner: string, id: number, state: 'succeeded' | 'failed' | 'timed-out' | 'cancelled', error: string | null): Promise<void> {
    this.#open.prepare(`UPDATE taskheap_tasks SET state = ?, last_error = ?, locked_by = NULL, locked_until = NULL, updated_at = ?
      WHERE id = ? AND locked_by = ?`).run(state, error, Date.now(), id, owner);
  }

  async retry(owner: string, id: number, runAt: number, error: string): Promise<void> {
    this.#open.prepare(`UPDATE taskheap_tasks SET state = 'waiting', run_at = ?, last_error = ?, locked_by = NULL, locked_until = NULL, updated_at = ?
      WHERE id = ? AND locked_by = ?`).run(runAt, error, Date.now(), id, owner);
  }

  async release(owner: string, id: number): Promise<void> {
    this.#open.prepare(`UPDATE taskheap_tasks SET state = 'waiting', attempts = attempts - 1, locked_by = NULL, locked_until = NULL, updated_at = ?
      WHERE id = ? AND locked_by = ? AND state = 'running'`).run(Date.now(), id, owner);
  }

  async cancel(id: number): Promise<boolean> {
    const { changes } = this.#open.prepare(`UPDATE taskheap_tasks SET state = 'cancelled', locked_by = NULL, locked_until = NULL, updated_at = ?
      WHERE id = ? AND state IN ('waiting', 'running')`).run(Date.now(), id);
    return changes > 0;
  }

  async cancelJob(key: string): Promise<boolean> {
    const db = this.#open;
    return db.transaction(() => {
      const { changes } = db.prepare(`UPDATE taskheap_jobs SET state = 'cancelled', next_run_at = NULL, updated_at = ? WHERE key = ? AND state <> 'cancelled'`).run(Date.now(), key);
      db.prepare(`UPDATE taskheap_tasks SET state = 'cancelled', updated_at = ? WHERE job_key = ? AND state = 'waiting'`).run(Date.now(), key);
      return changes > 0;
    })();
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const row = this.#open.prepare('SELECT * FROM taskheap_tasks WHERE id = ?').get(id) as TaskRow | undefined;
    return row === undefined ? undefined : toTask(row);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const rows = this.#open.prepare(`SELECT * FROM taskheap_tasks
      WHERE (@state IS NULL OR state = @state) AND (@name IS NULL OR name = @name) AND (@jobKey IS NULL OR job_key = @jobKey)
      ORDER BY run_at, id LIMIT @limit`).all({ state: filter.state ?? null, name: filter.name ?? null, jobKey: filter.jobKey ?? null, limit: filter.limit ?? 100 }) as TaskRow[];
    return rows.map(toTask);
  }

  async subscribe(): Promise<void> {
    // One process: scheduling and cancelling are seen directly, nothing to listen to.
  }

  async close(): Promise<void> {
    this.#db?.close();
    this.#db = undefined;
  }
}
