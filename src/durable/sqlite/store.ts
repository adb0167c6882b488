// The SQLite store (`sqliteStore()`): one process owns a database file at a
// time; claims, outcomes, jobs and management through the statements of
// sql.ts, in transactions of the chosen driver (driver.ts).
import {
  DEFAULT_MAX_LEASE_EXPIRIES,
  SCHEMA_VERSION,
  SchemaVersionError,
  enqueued,
  leaseExpiredText,
  sameSchedule,
  type ClaimedTask,
  type EnqueuedTask,
  type JobFilter,
  type Outcome,
  type QueryClient,
  type DueJob,
  type JobAdvance,
  type NewJob,
  type NewTask,
  type Store,
  type StoredJob,
  type StoredTask,
  type TaskFilter,
  type QueueChange,
  type QueueRooms,
  type StoredQueue,
} from '../store.js';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { toDuration, type Duration } from '../../core/duration.js';
import { TaskheapError } from '../../core/errors.js';
import { assertKnownKeys, describe } from '../../core/validate.js';
import { assertCount, MAX_TIMER } from '../validate.js';
import { openDatabase, type Database, type SqliteDriver, type Statement } from './driver.js';
import { MIGRATIONS, SQL } from './sql.js';
import {
  toClaims,
  toDueJob,
  toJob,
  toQueues,
  toTask,
  type QueueRow,
  type ClaimRow,
  type DueJobRow,
  type JobRow,
  type JobStatsRow,
  type TaskRow,
} from '../rows.js';
import { decide, dueAt } from '../dedupe.js';

/** The default `dedupe`: a keyed task replaces a waiting one. */
const REPLACE = { mode: 'replace', period: 0 } as const;

/** A filter's time as epoch ms, or null. */
function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
}

/** A cutoff no row is older than: retention disabled for that kind. */
const NEVER = -8.64e15;
/** What `client` (schedule() or scheduleMany()) gets on SQLite. */
const NO_CLIENT =
  'The `client` option needs postgresStore(): a SQLite file is held by its store alone, so no other connection can share its transaction';

/** What SQLite returns for an id and due-time query. */
interface IdRow {
  id: number;
  run_at: number;
  /** Expired leases so far (expired running tasks only). */
  expiries?: number;
  /** The serial key (waiting tasks only). */
  serial?: string | null;
  /** The priority level the row was found at (waiting), or its column (expired). */
  priority?: number;
}

/** A whole `taskheap_jobs` row, numbers as SQLite returns them. */
type StoredJobRow = JobRow & DueJobRow & { state: JobRow['state']; next_run_at: number | null; remaining: number | null };

/** Options of `sqliteStore()`. */
export interface SqliteStoreOptions {
  /**
   * How long a claimed task stays claimed without renewal: ms, or a string
   * such as `'30s'`. In one process it only matters for tasks whose run
   * outlives it (a handler that blocks the event loop longer than this is run
   * again). At most 2^31 - 1 ms.
   * @default 30000
   */
  lease?: Duration;
  /**
   * How many times a task's lease may expire (the process died mid-run, or a
   * handler blocked the event loop past the lease) before the task is failed
   * instead of run again, with a `lastError` saying so.
   * @default 1
   */
  maxLeaseExpiries?: number;
  /**
   * The SQLite binding: Node's built-in `node:sqlite` (Node >= 22.13, no
   * native build) or the `better-sqlite3` package. Both read and write the
   * same file format.
   * @default 'node:sqlite' where this Node has it, else 'better-sqlite3'
   */
  driver?: SqliteDriver;
}

const OPTION_KEYS = new Set(['lease', 'maxLeaseExpiries', 'driver']);

/** Another taskheap store (in this process or another) has the SQLite file open. */
export class StoreInUseError extends TaskheapError {
  /** The file. */
  readonly path: string;
  /** Who has it, as its owner file says (pid, host, since), if known. */
  readonly owner: { pid: number; hostname: string; since: string } | undefined;

  constructor(path: string, owner: StoreInUseError['owner']) {
    const who =
      owner === undefined
        ? 'another taskheap store (in this process or another)'
        : `process ${owner.pid} on ${owner.hostname} (since ${owner.since})${owner.pid === process.pid && owner.hostname === hostname() ? ', this very process: another sqliteStore() of the same file' : ''}`;
    super(
      `The SQLite file ${path} is in use by ${who}; one store owns a file at a time. Close that scheduler first, or use postgresStore() to share work between processes`,
      'ERR_STORE_IN_USE',
    );
    this.path = path;
    this.owner = owner;
  }
}

/**
 * A store in one SQLite file, for one process: tasks and jobs survive a
 * crash or a restart. Runs on Node's built-in `node:sqlite` where it exists
 * (Node >= 22.13), else on `better-sqlite3` (an optional peer dependency,
 * loaded on first use); see `driver`. Times are stored as UTC epoch milliseconds.
 *
 * The store holds an exclusive lock on the file from `start()` to `close()`:
 * a second store of the same file, in this process or another, is refused
 * with a `StoreInUseError`. The operating system drops the lock when the
 * owning process dies, so the next store takes over its running work.
 *
 * @example
 * import { sqliteStore } from 'taskheap/sqlite';
 * const scheduler = new Scheduler({ store: sqliteStore('reminders.db') });
 * const pinned = sqliteStore('reminders.db', { driver: 'better-sqlite3', lease: '1m' });
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): Store & { readonly lease: number } {
  if (typeof path !== 'string' || path === '')
    throw new TypeError(`Expected the SQLite path to be a non-empty string, got ${describe(path)}`);
  if (path.includes('\0')) throw new TypeError(`Expected the SQLite path to contain no NUL character, got ${JSON.stringify(path)}`);
  if (path === ':memory:' || /^file:.*(:memory:|[?&]mode=memory)/.test(path)) {
    throw new TypeError(
      `sqliteStore() needs a file: ${JSON.stringify(path)} is an in-memory database, which is gone when the process ends; use a scheduler without a store for work that need not survive`,
    );
  }
  if (typeof options !== 'object' || options === null)
    throw new TypeError(`Expected sqliteStore options to be an object, got ${describe(options)}`);
  assertKnownKeys(options, OPTION_KEYS, 'sqliteStore');
  const { maxLeaseExpiries = DEFAULT_MAX_LEASE_EXPIRIES, driver } = options;
  const lease = toDuration(options.lease ?? 30_000, 'lease', 1);
  if (lease > MAX_TIMER) throw new RangeError(`Expected \`lease\` to be at most ${MAX_TIMER} ms (the timer limit), got ${describe(lease)}`);
  assertCount(maxLeaseExpiries, 'maxLeaseExpiries');
  if (driver !== undefined && driver !== 'node:sqlite' && driver !== 'better-sqlite3') {
    throw new RangeError(`Expected \`driver\` to be 'node:sqlite' or 'better-sqlite3', got ${describe(driver)}`);
  }
  return new SqliteStore(path, lease, maxLeaseExpiries, driver);
}

class SqliteStore implements Store {
  readonly lease: number;
  readonly #path: string;
  readonly #maxExpiries: number;
  readonly #expiredText: string;
  readonly #driver: SqliteDriver | undefined;
  #db: Database | undefined = undefined;

  constructor(path: string, lease: number, maxExpiries: number, driver: SqliteDriver | undefined) {
    this.#path = path;
    this.lease = lease;
    this.#maxExpiries = maxExpiries;
    this.#expiredText = leaseExpiredText(maxExpiries + 1);
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
    if (this.#db === undefined) this.#db = await this.#openFile();
    const db = this.#open;
    try {
      this.#migrate(db);
    } catch (error) {
      // Refused (a newer schema) or broken: let go of the file for whoever fixes it.
      await this.close();
      throw error;
    }
  }

  #migrate(db: Database): void {
    this.#named(() => {
      db.exec(SQL.createMeta);
      const row = this.#statement(SQL.readVersion).get() as { version: number } | undefined;
      const found = row?.version ?? 0;
      if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
      db.transaction(() => {
        for (let version = found; version < SCHEMA_VERSION; version++) db.exec(MIGRATIONS[version]!);
        if (row === undefined) this.#statement(SQL.insertVersion).run(SCHEMA_VERSION);
        else this.#statement(SQL.updateVersion).run(SCHEMA_VERSION);
      })();
    });
  }

  /**
   * Opens the file and takes it for this store alone: EXCLUSIVE locking mode
   * holds SQLite's lock from the first read until close, so a second store
   * (another process, or another sqliteStore() here) cannot read it at all,
   * let alone return our running work to waiting. The OS drops the lock when
   * a process dies, which is what makes taking over a dead owner's file safe.
   * The owner file beside it only serves the error message.
   */
  async #openFile(): Promise<Database> {
    const db = await this.#namedAsync(() => openDatabase(this.#path, this.#driver));
    try {
      this.#named(() => {
        db.exec('PRAGMA busy_timeout = 0');
        db.exec('PRAGMA locking_mode = EXCLUSIVE');
        // WAL keeps readers and the writer out of each other's way; NORMAL
        // sync survives a process crash (not a power cut) at a fraction of FULL's cost.
        db.exec('PRAGMA journal_mode = WAL');
        db.exec('PRAGMA synchronous = NORMAL');
        db.exec('BEGIN EXCLUSIVE; COMMIT');
      });
    } catch (error) {
      db.close();
      if (isBusy(error)) throw new StoreInUseError(this.#path, readOwner(this.#ownerFile));
      throw error;
    }
    try {
      writeFileSync(this.#ownerFile, JSON.stringify({ pid: process.pid, hostname: hostname(), since: new Date().toISOString() }));
    } catch {
      // A read-only directory: the lock still holds; only the error message is poorer.
    }
    return db;
  }

  get #ownerFile(): string {
    return `${this.#path}-taskheap-owner`;
  }

  /** Runs `fn`; a driver error gets the file's name in its message (its class and code stay). */
  #named<T>(fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (error instanceof Error && !(error instanceof TaskheapError) && !error.message.includes(this.#path)) {
        error.message = `SQLite store ${this.#path}: ${error.message}`;
      }
      throw error;
    }
  }

  async #namedAsync<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      return this.#named(() => {
        throw error;
      });
    }
  }

  async recover(): Promise<void> {
    // This store owns the file (it holds the lock), so anything still marked
    // running was running in an owner that died: back to waiting at once,
    // one lease expiry counted, failed past the limit.
    // Those failed let go of their serial keys; the others still hold theirs (they are first in line).
    const db = this.#open;
    this.#named(() =>
      db.transaction(() => {
        this.#statement(SQL.recover).run({ now: Date.now(), limit: this.#maxExpiries, error: this.#expiredText });
        this.#statement(SQL.pruneKeys).run();
      })(),
    );
  }

  async addTask(task: NewTask, via?: QueryClient, now = Date.now()): Promise<EnqueuedTask> {
    // The file has one owner (this store's exclusive lock): no other handle can share a transaction with it.
    if (via !== undefined) throw new TypeError(NO_CLIENT);
    const db = this.#open;
    const at = Date.now();
    return this.#named(() => db.transaction(() => this.#add(task, at, now))());
  }

  /** Many tasks, one transaction: all are written or none. */
  async addTasks(tasks: readonly NewTask[], via?: QueryClient, now = Date.now()): Promise<EnqueuedTask[]> {
    if (via !== undefined) throw new TypeError(NO_CLIENT);
    const db = this.#open;
    const at = Date.now();
    const rows = this.#named(() => db.transaction(() => tasks.map((task) => this.#add(task, at, now)))());
    // A key given twice in one call: the adds meet in order, and every item reports the row as it ends up, with what its own add did.
    const last = new Map<string, StoredTask>();
    for (const row of rows) if (row.key !== null) last.set(row.key, row);
    return rows.map((row) => (row.key === null || last.get(row.key) === row ? row : enqueued({ ...last.get(row.key)! }, row.enqueued)));
  }

  /**
   * One add, in the caller's transaction: the key's row (if any) decides
   * what happens (see dedupe.ts). `at` is what `updated_at` gets (this
   * machine's clock, the one retention reads); `now` is the scheduler's
   * clock, the one due times are on: `created_at` and the dedupe periods.
   */
  #add(task: NewTask, at: number, now: number): EnqueuedTask {
    const { mode, period } = task.dedupe ?? REPLACE;
    const runAt = dueAt(mode, period, task.runAt);
    if (task.key !== null) {
      const existing = this.#statement(SQL.taskByKey).get(task.key) as TaskRow | undefined;
      const action = decide(
        mode,
        period,
        existing === undefined ? undefined : { state: existing.state, createdAt: Number(existing.created_at) },
        now,
      );
      if (action === 'existing') return enqueued(toTask(existing!), 'existing');
      if (action !== 'insert') {
        const id = existing!.id;
        // Replaced, it starts over: a serial key it held (waiting for a retry) is let go of.
        this.#statement(SQL.letGo).run(id);
        this.#statement(SQL.replaceTask).run(
          task.name,
          task.payload,
          runAt,
          task.maxAttempts,
          task.options,
          task.serial ?? null,
          task.priority ?? 0,
          task.queue ?? 'default',
          at,
          id,
        );
        // A throttle's period starts at the add that wrote the task.
        if (mode === 'throttle') this.#statement(SQL.setCreated).run(now, id);
        return enqueued(toTask(this.#statement(SQL.taskById).get(id) as TaskRow), action === 'replace' ? 'replaced' : 'inserted');
      }
    }
    const { lastInsertRowid } = this.#statement(SQL.insertTask).run(
      task.name,
      task.key,
      task.payload,
      runAt,
      task.maxAttempts,
      task.options,
      task.serial ?? null,
      task.priority ?? 0,
      task.queue ?? 'default',
      now,
      at,
    );
    return enqueued(toTask(this.#statement(SQL.taskById).get(lastInsertRowid) as TaskRow), 'inserted');
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const db = this.#open;
    const now = Date.now();
    return this.#named(() =>
      db.transaction(() => {
        const existing = this.#statement(SQL.jobByKey).get(job.key) as StoredJobRow | undefined;
        // Re-registering the same schedule (every start does) keeps the job's
        // place in it: its rule's start point, next occurrence and count left.
        // A paused job stays paused: a pause survives the re-registration of every deploy.
        const keep =
          existing !== undefined &&
          (existing.state === 'scheduled' || existing.state === 'paused') &&
          sameSchedule(existing.rule, job.rule);
        const row = keep ? { ...job, rule: existing.rule, nextRunAt: existing.next_run_at, remaining: existing.remaining } : job;
        this.#statement(SQL.upsertJob).run({ ...row, state: row.nextRunAt === null ? 'done' : keep ? existing.state : 'scheduled', now });
        return toJob(this.#statement(SQL.jobByKey).get(job.key) as StoredJobRow);
      })(),
    );
  }

  async claim(
    owner: string,
    now: number,
    lease: number,
    limit: number,
    advance: (job: DueJob, now: number, running: boolean) => JobAdvance,
    names?: readonly string[],
    rooms?: QueueRooms,
  ): Promise<ClaimedTask[]> {
    const named = names === undefined ? undefined : JSON.stringify(names);
    const db = this.#open;
    return this.#named(() =>
      db.transaction(() => {
        this.#materialize(db, now, advance);
        // Separate selects, each walking the due index, beat one OR that
        // makes SQLite sort every due row on each claim.
        const due = this.#dueWaiting(now, limit, named, rooms);
        const expired = (
          named === undefined
            ? this.#statement(SQL.dueExpired).all(now, owner, limit)
            : this.#statement(SQL.dueExpiredNamed).all(now, owner, named, limit)
        ) as IdRow[];
        const rows =
          expired.length === 0
            ? due
            : [...due, ...expired].sort((a, b) => b.priority! - a.priority! || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
        const take = this.#statement(SQL.claimOne);
        const fail = this.#statement(SQL.failExpired);
        const hold = this.#statement(SQL.take);
        const claimed: TaskRow[] = [];
        for (const row of rows) {
          // Expired too often: a task that kills or stalls its process must not be retried forever.
          if (row.expiries !== undefined && row.expiries >= this.#maxExpiries) {
            fail.run(this.#expiredText, now, row.id);
            this.#statement(SQL.letGo).run(row.id);
            continue;
          }
          // The claim read the key free (or this task's): take it, held until the task is final.
          if (row.serial !== undefined && row.serial !== null) hold.run(row.serial, row.id);
          claimed.push(take.get(owner, now + lease, now, row.id) as TaskRow);
        }
        return toClaims(claimed as unknown as ClaimRow[]);
      })(),
    );
  }

  /**
   * Up to `limit` due waiting tasks by priority (highest first), then due
   * time, then id, at most one per serial key and only where the key is
   * free or already theirs. The index leads with (state, priority): it is
   * walked one priority level at a time, each an exact range of due tasks,
   * so future tasks of a higher level are never read.
   */
  #dueWaiting(now: number, limit: number, named: string | undefined, rooms: QueueRooms | undefined): IdRow[] {
    const rows: IdRow[] = [];
    const statement = this.#statement(named === undefined ? SQL.dueWaiting : SQL.dueWaitingNamed);
    const keys = new Set<string>();
    // Named queues: open ones only, each up to its room (see openQueues); the
    // levels of each queue are walked in its own part of the index.
    for (const [queue, room] of this.#openQueues(rooms, limit)) {
      let taken = 0;
      let level = (this.#statement(SQL.queueTopLevel).get(queue) as { p: number | null }).p;
      while (level !== null && taken < room) {
        const args = { queue, p: level, now, limit: room - taken };
        const found = statement.all(named === undefined ? args : { ...args, names: named }) as IdRow[];
        for (const row of found) {
          // CLAIMABLE lets one task per key through (its holder, or its head);
          // the set only guards that rule: two tasks of a key never leave one claim.
          if (row.serial !== null && row.serial !== undefined) {
            if (keys.has(row.serial)) continue;
            keys.add(row.serial);
          }
          row.priority = level;
          rows.push(row);
          taken++;
        }
        level = (this.#statement(SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
      }
    }
    // Claim order across queues: priority (highest first), then due time, then id.
    return rows.sort((a, b) => b.priority! - a.priority! || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
  }

  /**
   * The queues with waiting tasks that a claim may take from, with their
   * room (at most `limit`): not paused, under their global concurrency (one
   * process owns the file, so the running tasks are counted exactly, in the
   * claim's transaction), and under this process's `rooms`.
   */
  #openQueues(rooms: QueueRooms | undefined, limit: number): Map<string, number> {
    const settings = new Map<string, { paused: number; global_concurrency: number | null }>();
    for (const row of this.#statement(SQL.queueSettings).all() as { name: string; paused: number; global_concurrency: number | null }[]) {
      settings.set(row.name, row);
    }
    const open = new Map<string, number>();
    const after = this.#statement(SQL.queueAfter);
    for (
      let q = (this.#statement(SQL.firstQueue).get() as { q: string | null }).q;
      q !== null;
      q = (after.get(q) as { q: string | null }).q
    ) {
      const setting = settings.get(q);
      let room = Math.min(limit, rooms?.get(q) ?? Infinity);
      if (setting?.paused) room = 0;
      else if (setting?.global_concurrency !== null && setting?.global_concurrency !== undefined && room > 0) {
        room = Math.min(room, setting.global_concurrency - (this.#statement(SQL.queueRunning).get(q) as { n: number }).n);
      }
      if (room > 0) open.set(q, room);
    }
    return open;
  }

  async setQueue(name: string, change: QueueChange): Promise<void> {
    const paused = change.paused === undefined ? null : change.paused ? 1 : 0;
    this.#named(() =>
      this.#statement(SQL.setQueue).run({
        name,
        paused,
        setGlobal: change.globalConcurrency === undefined ? 0 : 1,
        global: change.globalConcurrency ?? null,
        now: Date.now(),
      }),
    );
  }

  async listQueues(name?: string): Promise<StoredQueue[]> {
    return toQueues(this.#named(() => this.#statement(SQL.listQueues).all({ name: name ?? null })) as QueueRow[]);
  }

  #materialize(_db: Database, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
    const due = this.#statement(SQL.dueJobs).all(now) as StoredJobRow[];
    const isRunning = this.#statement(SQL.jobRunning);
    // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
    const insert = this.#statement(SQL.insertOccurrence);
    const update = this.#statement(SQL.advanceJob);
    for (const job of due) {
      const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
      const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
      for (const at of plan.occurrences)
        insert.run(job.name, job.payload, at, at, maxAttempts, job.options, job.key, now, now, job.options, job.options, job.options);
      update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
    }
  }

  async nextDue(now: number, names?: readonly string[], rooms?: QueueRooms): Promise<number | undefined> {
    const named = names === undefined ? undefined : JSON.stringify(names);
    let t = this.#named(
      () =>
        (named === undefined ? this.#statement(SQL.nextDue).get() : this.#statement(SQL.nextDueNamed).get(named)) as { t: number | null },
    ).t;
    // A waiting task that cannot take its serial key does not count: settling its key's holder claims again.
    this.#named(() => {
      const first = this.#statement(named === undefined ? SQL.firstWaiting : SQL.firstWaitingNamed);
      // Nor does a task of a paused or full queue: a resume, or a slot freed, claims again.
      for (const queue of this.#openQueues(rooms, Infinity).keys()) {
        let level = (this.#statement(SQL.queueTopLevel).get(queue) as { p: number | null }).p;
        while (level !== null) {
          const row = first.get(named === undefined ? { queue, p: level } : { queue, p: level, names: named }) as
            | { run_at: number }
            | undefined;
          if (row !== undefined && (t === null || row.run_at < t)) t = row.run_at;
          level = (this.#statement(SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
        }
      }
    });
    return t === null ? undefined : Math.max(0, t - now);
  }

  // One process, one clock: the scheduler's (which a test may drive); the
  // calls are synchronous, so `now` is the time the row is written.
  async renew(owner: string, ids: readonly number[], now: number, lease: number): Promise<number[]> {
    const db = this.#open;
    const stmt = this.#statement(SQL.renew);
    const until = now + lease;
    return this.#named(() => db.transaction(() => ids.filter((id) => stmt.run(until, id, owner).changes === 0))());
  }

  async settle(owner: string, outcomes: readonly Outcome[], now: number): Promise<void> {
    const db = this.#open;
    const at = Date.now();
    this.#named(() =>
      db.transaction(() => {
        for (const outcome of outcomes) {
          if (outcome.kind === 'complete') {
            const { changes } = this.#statement(SQL.complete).run({
              state: outcome.state,
              error: outcome.error,
              result: outcome.result ?? null,
              at,
              id: outcome.id,
              owner,
            });
            // Final: its serial key goes to the next task (a retried or released one keeps it: strict order).
            if (Number(changes) > 0) this.#statement(SQL.letGo).run(outcome.id);
          } else if (outcome.kind === 'retry') {
            this.#statement(SQL.retry).run({ runAt: now + outcome.delay, error: outcome.error, at, id: outcome.id, owner });
          } else this.#statement(SQL.release).run(at, outcome.id, owner);
        }
      })(),
    );
  }

  async cancel(id: number): Promise<boolean> {
    const db = this.#open;
    return this.#named(() =>
      db.transaction(() => {
        const { changes } = this.#statement(SQL.cancel).run(Date.now(), id);
        if (Number(changes) > 0) this.#statement(SQL.letGo).run(id);
        return Number(changes) > 0;
      })(),
    );
  }

  async cancelJob(key: string): Promise<boolean> {
    const db = this.#open;
    return this.#named(() =>
      db.transaction(() => {
        const { changes } = this.#statement(SQL.cancelJob).run(Date.now(), key);
        this.#statement(SQL.letGoOccurrences).run(key);
        this.#statement(SQL.cancelOccurrences).run(Date.now(), key);
        return changes > 0;
      })(),
    );
  }

  async requeue(id: number, now: number): Promise<StoredTask | undefined> {
    const row = this.#named(() => this.#statement(SQL.requeue).get({ runAt: now, at: Date.now(), id }) as TaskRow | undefined);
    return row === undefined ? undefined : toTask(row);
  }

  // One process: the cutoffs are this machine's clock, the one updated_at is written with.
  async prune(succeeded: number | null, failed: number | null, limit: number): Promise<number> {
    const now = Date.now();
    const params = { succeeded: succeeded === null ? NEVER : now - succeeded, failed: failed === null ? NEVER : now - failed, limit };
    return this.#named(() => {
      const { changes } = this.#statement(SQL.pruneTasks).run(params);
      const jobs = failed === null ? 0 : this.#statement(SQL.pruneJobs).run({ failed: params.failed, limit }).changes;
      this.#statement(SQL.pruneKeys).run();
      return Number(changes) + Number(jobs);
    });
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const row = this.#named(() => this.#statement(SQL.taskById).get(id) as TaskRow | undefined);
    return row === undefined ? undefined : toTask(row);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const rows = this.#named(
      () =>
        this.#statement(SQL.listTasks).all({
          state: filter.state ?? null,
          name: filter.name ?? null,
          jobKey: filter.jobKey ?? null,
          keyPrefix: filter.keyPrefix ?? null,
          from: epoch(filter.from),
          to: epoch(filter.to),
          afterRunAt: epoch(filter.after?.runAt),
          afterId: filter.after?.id ?? null,
          limit: filter.limit ?? 100,
        }) as TaskRow[],
    );
    return rows.map(toTask);
  }

  async getJob(key: string): Promise<StoredJob | undefined> {
    const row = this.#named(() => this.#statement(SQL.jobByKey).get(key) as StoredJobRow | undefined);
    return row === undefined ? undefined : this.#withStats([row])[0];
  }

  async listJobs(filter: JobFilter): Promise<StoredJob[]> {
    const rows = this.#named(
      () =>
        this.#statement(SQL.listJobs).all({
          state: filter.state ?? null,
          name: filter.name ?? null,
          keyPrefix: filter.keyPrefix ?? null,
          after: filter.after ?? null,
          limit: filter.limit ?? 100,
        }) as StoredJobRow[],
    );
    return this.#withStats(rows);
  }

  #withStats(rows: StoredJobRow[]): StoredJob[] {
    if (rows.length === 0) return [];
    const stats = this.#named(
      () => this.#statement(SQL.jobStats).all({ keys: JSON.stringify(rows.map((row) => row.key)) }) as JobStatsRow[],
    );
    return rows.map((row) => toJob(row, stats));
  }

  async setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    const { changes } = this.#named(() => this.#statement(SQL.setJobState).run({ key, from, to, now: Date.now() }));
    return Number(changes) > 0;
  }

  async triggerJob(key: string, now: number): Promise<StoredTask | undefined> {
    const row = this.#named(() => this.#statement(SQL.triggerJob).get({ key, now, at: Date.now() }) as TaskRow | undefined);
    return row === undefined ? undefined : toTask(row);
  }

  async subscribe(): Promise<void> {
    // One process: scheduling and cancelling are seen directly, nothing to listen to.
  }

  async close(): Promise<void> {
    this.#statements.clear();
    if (this.#db === undefined) return;
    this.#db.close();
    this.#db = undefined;
    // The lock is gone with the connection; so is our claim on the name.
    if (readOwner(this.#ownerFile)?.pid === process.pid) rmSync(this.#ownerFile, { force: true });
  }
}

/** The owner file's contents, if there is one and it parses. */
function readOwner(file: string): StoreInUseError['owner'] {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown; hostname?: unknown; since?: unknown };
    if (typeof owner.pid !== 'number' || typeof owner.hostname !== 'string' || typeof owner.since !== 'string') return undefined;
    return { pid: owner.pid, hostname: owner.hostname, since: owner.since };
  } catch {
    return undefined;
  }
}

/** SQLITE_BUSY or SQLITE_LOCKED, as better-sqlite3 (`code`) or node:sqlite (`errcode` 5 or 6) reports it. */
function isBusy(error: unknown): boolean {
  const { code, errcode } = (error ?? {}) as { code?: unknown; errcode?: unknown };
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || errcode === 5 || errcode === 6;
}
