import {
  SCHEMA_VERSION, SchemaVersionError, sameSchedule,
  type ClaimedTask, type DueJob, type JobAdvance, type NewJob, type NewTask, type Store, type StoredJob, type StoredState, type StoredTask, type TaskFilter,
} from '../store.js';
import { toDuration, type Duration } from '../../core/duration.js';
import { describe } from '../../core/validate.js';
import { openDatabase, type Database, type SqliteDriver, type Statement } from './driver.js';
import { MIGRATIONS, SQL } from './sql.js';
import { toClaims, toDueJob, toJob, toTask, type DueJobRow, type JobRow, type TaskRow } from '../rows.js';

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
   * How long a claimed task stays claimed without renewal: ms, or a string
   * such as `'30s'`. In one process it only matters for tasks whose run outlives it.
   * @default 30000
   */
  lease?: Duration;
  /**
   * The SQLite binding: Node's built-in `node:sqlite` (Node >= 22.13, no
   * native build) or the `better-sqlite3` package. Both read and write the
   * same file format.
   * @default 'node:sqlite' where this Node has it, else 'better-sqlite3'
   */
  driver?: SqliteDriver;
}

/**
 * A store in one SQLite file, for one process: tasks and jobs survive a
 * crash or a restart. Runs on Node's built-in `node:sqlite` where it exists
 * (Node >= 22.13), else on `better-sqlite3` (an optional peer dependency,
 * loaded on first use); see `driver`. Times are stored as UTC epoch milliseconds.
 *
 * @example
 * import { sqliteStore } from 'taskheap/sqlite';
 * const scheduler = new Scheduler({ store: sqliteStore('reminders.db') });
 * const pinned = sqliteStore('reminders.db', { driver: 'better-sqlite3', lease: '1m' });
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): Store & { readonly lease: number } {
  if (typeof path !== 'string' || path === '') throw new TypeError(`Expected the SQLite path to be a non-empty string, got ${String(path)}`);
  const { driver } = options;
  if (driver !== undefined && driver !== 'node:sqlite' && driver !== 'better-sqlite3') {
    throw new RangeError(`Expected \`driver\` to be 'node:sqlite' or 'better-sqlite3', got ${describe(driver)}`);
  }
  return new SqliteStore(path, toDuration(options.lease ?? 30_000, 'lease', 1), driver);
}

class SqliteStore implements Store {
  readonly lease: number;
  readonly #path: string;
  readonly #driver: SqliteDriver | undefined;
  #db: Database | undefined = undefined;

  constructor(path: string, lease: number, driver: SqliteDriver | undefined) {
    this.#path = path;
    this.lease = lease;
    this.#driver = driver;
  }

  /** Prepared statements by SQL text: each is compiled once per open database. */
  #statements = new Map<string, Statement>();

  #statement(sql: string): Statement {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#open.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  get #open(): Database {
    if (this.#db === undefined) throw new Error('The SQLite store is not open: call scheduler.start() first');
    return this.#db;
  }

  async migrate(): Promise<void> {
    if (this.#db === undefined) {
      const db = await openDatabase(this.#path, this.#driver);
      // WAL keeps readers and the writer out of each other's way; NORMAL
      // sync survives a process crash (not a power cut) at a fraction of FULL's cost.
      db.exec('PRAGMA journal_mode = WAL');
      db.exec('PRAGMA synchronous = NORMAL');
      db.exec('PRAGMA busy_timeout = 5000');
      this.#db = db;
    }
    const db = this.#open;
    db.exec(SQL.createMeta);
    const row = this.#statement(SQL.readVersion).get() as { version: number } | undefined;
    const found = row?.version ?? 0;
    if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
    db.transaction(() => {
      for (let version = found; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]!);
      if (row === undefined) this.#statement(SQL.insertVersion).run(SCHEMA_VERSION);
      else this.#statement(SQL.updateVersion).run(SCHEMA_VERSION);
    })();
  }

  async recover(): Promise<void> {
    // One process owns this file, so anything still marked running was
    // running in a process that died: it goes back to waiting at once.
    this.#statement(SQL.recover).run();
  }

  async addTask(task: NewTask): Promise<StoredTask> {
    const db = this.#open;
    const now = Date.now();
    return db.transaction(() => {
      if (task.key !== null) {
        const existing = this.#statement(SQL.taskByKey).get(task.key) as TaskRow | undefined;
        if (existing !== undefined) {
          if (existing.state === 'running') return toTask(existing);
          this.#statement(SQL.replaceTask)
            .run(task.name, task.payload, task.runAt, task.maxAttempts, task.options, now, existing.id);
          return toTask(this.#statement(SQL.taskById).get(existing.id) as TaskRow);
        }
      }
      const { lastInsertRowid } = this.#statement(SQL.insertTask).run(task.name, task.key, task.payload, task.runAt, task.maxAttempts, task.options, now, now);
      return toTask(this.#statement(SQL.taskById).get(lastInsertRowid) as TaskRow);
    })();
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const db = this.#open;
    const now = Date.now();
    return db.transaction(() => {
      const existing = this.#statement(SQL.jobByKey).get(job.key) as StoredJobRow | undefined;
      // Re-registering the same schedule (every start does) keeps the job's
      // place in it: its rule's start point, next occurrence and count left.
      const keep = existing !== undefined && existing.state === 'scheduled' && sameSchedule(existing.rule, job.rule);
      const row = keep
        ? { ...job, rule: existing.rule, nextRunAt: existing.next_run_at, remaining: existing.remaining }
        : job;
      this.#statement(SQL.upsertJob)
        .run({ ...row, state: row.nextRunAt === null ? 'done' : 'scheduled', now });
      return toJob(this.#statement(SQL.jobByKey).get(job.key) as StoredJobRow);
    })();
  }

  async claim(owner: string, now: number, lease: number, limit: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): Promise<ClaimedTask[]> {
    const db = this.#open;
    return db.transaction(() => {
      this.#materialize(db, now, advance);
      // Two selects, each walking the (state, run_at) index, beat one OR
      // that makes SQLite sort every due row on each claim.
      const due = this.#statement(SQL.dueWaiting).all(now, limit) as IdRow[];
      const expired = this.#statement(SQL.dueExpired).all(now, limit) as IdRow[];
      const ids = [...due, ...expired].sort((a, b) => a.run_at - b.run_at || a.id - b.id).slice(0, limit).map((row) => row.id);
      const take = this.#statement(SQL.claimOne);
      return toClaims(ids.map((id) => take.get(owner, now + lease, now, id) as TaskRow));
    })();
  }

  #materialize(db: Database, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
    const due = this.#statement(SQL.dueJobs).all(now) as StoredJobRow[];
    const isRunning = this.#statement(SQL.jobRunning);
    // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
    const insert = this.#statement(SQL.insertOccurrence);
    const update = this.#statement(SQL.advanceJob);
    for (const job of due) {
      const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
      const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
      for (const at of plan.occurrences) insert.run(job.name, job.payload, at, at, maxAttempts, job.options, job.key, now, now);
      update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
    }
  }

  async nextDue(): Promise<number | undefined> {
    const row = this.#statement(SQL.nextDue).get() as { t: number | null };
    return row.t ?? undefined;
  }

  async renew(owner: string, ids: number[], until: number): Promise<number[]> {
    const db = this.#open;
    const stmt = this.#statement(SQL.renew);
    return db.transaction(() => ids.filter((id) => stmt.run(until, id, owner).changes === 0))();
  }

  async complete(owner: string, id: number, state: 'succeeded' | 'failed' | 'timed-out' | 'cancelled', error: string | null): Promise<void> {
    this.#statement(SQL.complete).run(state, error, Date.now(), id, owner);
  }

  async retry(owner: string, id: number, runAt: number, error: string): Promise<void> {
    this.#statement(SQL.retry).run(runAt, error, Date.now(), id, owner);
  }

  async release(owner: string, id: number): Promise<void> {
    this.#statement(SQL.release).run(Date.now(), id, owner);
  }

  async cancel(id: number): Promise<boolean> {
    const { changes } = this.#statement(SQL.cancel).run(Date.now(), id);
    return changes > 0;
  }

  async cancelJob(key: string): Promise<boolean> {
    const db = this.#open;
    return db.transaction(() => {
      const { changes } = this.#statement(SQL.cancelJob).run(Date.now(), key);
      this.#statement(SQL.cancelOccurrences).run(Date.now(), key);
      return changes > 0;
    })();
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const row = this.#statement(SQL.taskById).get(id) as TaskRow | undefined;
    return row === undefined ? undefined : toTask(row);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const rows = this.#statement(SQL.listTasks).all({ state: filter.state ?? null, name: filter.name ?? null, jobKey: filter.jobKey ?? null, limit: filter.limit ?? 100 }) as TaskRow[];
    return rows.map(toTask);
  }

  async subscribe(): Promise<void> {
    // One process: scheduling and cancelling are seen directly, nothing to listen to.
  }

  async close(): Promise<void> {
    this.#statements.clear();
    this.#db?.close();
    this.#db = undefined;
  }
}
