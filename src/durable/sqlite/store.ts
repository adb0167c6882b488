// The SQLite store (`sqliteStore()`): its options, and the class that
// implements the Store interface by wiring the role files: each operation
// runs the functions of add.ts, claim.ts, limits.ts, settle.ts, jobs.ts,
// flows.ts or inspect.ts, whose statements sit beside them, in one
// transaction of the chosen driver (driver.ts) through its cache of
// prepared statements. It opens the file for itself alone (owner.ts,
// errors.ts), brings its schema up to date (migrations.ts), and wakes its
// claimer and waiters when an outcome made dependents due.
import { DEFAULT_MAX_LEASE_EXPIRIES, leaseExpiredText } from '../expiries.js';
import type {
  ClaimedTask,
  ClaimParams,
  DependencyInfo,
  DueJob,
  EndedTasks,
  EnqueuedTask,
  FlowStore,
  JobFilter,
  LimitGroup,
  LimitListStore,
  NewFlow,
  NewJob,
  NewTask,
  NextDueParams,
  Outcome,
  QueryClient,
  QueueChange,
  RecordStepsParams,
  RenewParams,
  SendParams,
  StepStore,
  Store,
  StoreCapabilities,
  StoredFlowGraph,
  StoredJob,
  StoredQueue,
  StoredState,
  StoredTask,
  TakeMessageParams,
  TaskFilter,
  TaskLinks,
} from '../store.js';
import { toDuration, type Duration } from '../../core/duration.js';
import { TaskheapError } from '../../core/errors.js';
import type { TaskLogLine } from '../../core/journal.js';
import { assertKnownKeys, describe, keysOf } from '../../core/validate.js';
import { assertCount, MAX_TIMER } from '../validate.js';
import { toClaims, toTask } from '../rows.js';
import { openDatabase, type Database, type Prepare, type SqliteDriver, type Statement } from './driver.js';
import { StoreInUseError } from './errors.js';
import { dropOwner, isBusy, readOwner, writeOwner } from './owner.js';
import { migrate } from './migrations.js';
import { addOne, addTasks } from './add.js';
import { pruneGroups, tagTurns } from './fair.js';
import { claimDue, nextDueAt, type Expiries } from './claim.js';
import { pruneHolders, pruneIdle, setQueue, setRate } from './limits.js';
import { cancel, recover, renew, requeue, settle } from './settle.js';
import { cancelJob, getJob, listJobs, materialize, pruneJobs, resumeJob, setJobState, triggerJob, upsertJob } from './jobs.js';
import { addFlow, anyDependency, getDependencies, getFlow, hadDependents } from './flows.js';
import { recordSteps, send, takeMessage } from './steps.js';
import {
  countTasks,
  deleteTasks,
  endedTasks,
  getTask,
  getTaskLinks,
  listLimitGroups,
  listQueues,
  listTasks,
  pruneTasks,
  writeJournal,
} from './inspect.js';
import { durableRunner } from '../runner.js';

/** A cutoff no row is older than: retention disabled for that kind. */
const NEVER = -8.64e15;
/** What `client` (schedule() or scheduleMany()) gets on SQLite. */
const NO_CLIENT =
  'The `client` option needs postgresStore(): a SQLite file is held by its store alone, so no other connection can share its transaction';

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

const OPTION_KEYS: ReadonlySet<string> = new Set(keysOf<SqliteStoreOptions>({ lease: true, maxLeaseExpiries: true, driver: true }));

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

/** What a SQLite store can do: one process owns the file, and the scheduler's clock decides. @internal */
export const SQLITE_CAPABILITIES: StoreCapabilities = {
  clockDriven: true,
  // One store owns a file at a time (StoreInUseError).
  multiProcess: false,
  notify: false,
  // The store holds its file exclusively: no other handle can share a transaction with it.
  transactionsWithClient: false,
  flows: true,
  limitList: true,
  fairShares: true,
  steps: true,
};

class SqliteStore implements Store, FlowStore, LimitListStore, StepStore {
  readonly capabilities = SQLITE_CAPABILITIES;
  /** What a scheduler given this store runs it with: it comes with the store, so that `taskheap` alone never loads it. */
  readonly runner = durableRunner;
  readonly lease: number;
  /** Flows (docs/flows.md): whether the file holds dependencies (then outcomes look for dependents they made due), and who to wake. */
  #flows = false;
  #onWake: ((runAt: number) => void) | undefined = undefined;
  #onDone: ((id: number | null) => void) | undefined = undefined;
  readonly #path: string;
  readonly #expiries: Expiries;
  readonly #driver: SqliteDriver | undefined;
  #db: Database | undefined = undefined;

  constructor(path: string, lease: number, maxExpiries: number, driver: SqliteDriver | undefined) {
    this.#path = path;
    this.lease = lease;
    this.#expiries = { max: maxExpiries, text: leaseExpiredText(maxExpiries + 1) };
    this.#driver = driver;
  }

  /** Prepared statements by SQL text: each is compiled once per open database. */
  #statements = new Map<string, Statement>();

  /** The role files' hook: their statements through this cache. */
  readonly #prepare: Prepare = (sql) => this.#statement(sql);

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
      this.#flows = false;
      migrate(db, this.#prepare);
      this.#flows = anyDependency(this.#prepare);
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
        // Flows: a sunk task's own trigger fires inside the one that sank it (migrations.ts, version 6: two levels at most).
        db.exec('PRAGMA recursive_triggers = ON');
      });
    } catch (error) {
      db.close();
      if (isBusy(error)) throw new StoreInUseError(this.#path, readOwner(this.#path));
      throw error;
    }
    writeOwner(this.#path);
    return db;
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

  /** Nothing to ready: claims run on the file migrate() opened. */
  async warm(): Promise<void> {}

  async recover(): Promise<ClaimedTask[]> {
    const db = this.#open;
    // Those failed are returned: this process reports them.
    return toClaims(this.#named(() => db.transaction(() => recover(this.#prepare, Date.now(), this.#expiries))()));
  }

  async addTask(task: NewTask, via?: QueryClient, now = Date.now()): Promise<EnqueuedTask> {
    // The file has one owner (this store's exclusive lock): no other handle can share a transaction with it.
    if (via !== undefined) throw new TypeError(NO_CLIENT);
    const db = this.#open;
    const at = Date.now();
    return this.#named(() => db.transaction(() => addOne(this.#prepare, task, at, now))());
  }

  /** Many tasks, one transaction: all are written or none. */
  async addTasks(tasks: readonly NewTask[], via?: QueryClient, now = Date.now()): Promise<EnqueuedTask[]> {
    if (via !== undefined) throw new TypeError(NO_CLIENT);
    const db = this.#open;
    const at = Date.now();
    return this.#named(() => db.transaction(() => addTasks(this.#prepare, tasks, at, now))());
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const db = this.#open;
    const now = Date.now();
    return this.#named(() => db.transaction(() => upsertJob(this.#prepare, job, now))());
  }

  async claim(params: ClaimParams): Promise<ClaimedTask[]> {
    const db = this.#open;
    return this.#named(() =>
      db.transaction(() => {
        materialize(this.#prepare, params.now, params.advance);
        tagTurns(this.#prepare, params.now);
        return toClaims(claimDue(this.#prepare, params, this.#expiries));
      })(),
    );
  }

  async setRate(rate: { limit: number; interval: number } | undefined): Promise<void> {
    if (rate !== undefined) this.#named(() => setRate(this.#prepare, rate));
  }

  async setQueue(name: string, change: QueueChange): Promise<void> {
    this.#named(() => setQueue(this.#prepare, name, change, Date.now()));
  }

  async listQueues(name?: string): Promise<StoredQueue[]> {
    return this.#named(() => listQueues(this.#prepare, name));
  }

  async nextDue(params: NextDueParams): Promise<number | undefined> {
    const t = this.#named(() => nextDueAt(this.#prepare, params));
    return t === undefined ? undefined : Math.max(0, t - params.now);
  }

  // One process, one clock: the scheduler's (which a test may drive); the
  // calls are synchronous, so `now` is the time the row is written.
  async renew({ owner, ids, now, lease, started = [] }: RenewParams): Promise<number[]> {
    const db = this.#open;
    return this.#named(() => db.transaction(() => renew(this.#prepare, owner, ids, now + lease, started))());
  }

  async settle(owner: string, outcomes: readonly Outcome[], now: number): Promise<void> {
    const db = this.#open;
    const at = Date.now();
    this.#named(() => db.transaction(() => settle(this.#prepare, owner, outcomes, now, at))());
    this.#wakeDependents(outcomes.filter((outcome) => outcome.kind === 'complete').map((outcome) => outcome.id));
    // A task that suspended to wait for a message may have got one while it ran: it is due now.
    if (outcomes.some((outcome) => outcome.kind === 'suspend' && outcome.waitingOn !== null)) this.#onWake?.(now);
  }

  async recordSteps(params: RecordStepsParams): Promise<boolean> {
    const db = this.#open;
    return this.#named(() => db.transaction(() => recordSteps(this.#prepare, params, Date.now()))());
  }

  async takeMessage(params: TakeMessageParams): Promise<string | undefined> {
    const db = this.#open;
    return this.#named(() => db.transaction(() => takeMessage(this.#prepare, params))());
  }

  async send(params: SendParams): Promise<boolean> {
    const db = this.#open;
    const { sent, woke } = this.#named(() => db.transaction(() => send(this.#prepare, params, Date.now()))());
    if (woke) this.#onWake?.(params.now);
    return sent;
  }

  /**
   * Flows: the claimer looks again when an outcome made dependents due, and
   * waitFor() looks again for dependents it sank (PostgreSQL's trigger NOTIFYs instead).
   */
  #wakeDependents(ids: readonly number[]): void {
    if (!this.#flows || ids.length === 0 || !this.#named(() => hadDependents(this.#prepare, ids))) return;
    this.#onDone?.(null);
    // Due now or earlier (a dependent keeps its own due time): the claimer looks at once, and finds the earliest.
    this.#onWake?.(0);
  }

  /**
   * Only for flows: a task sunk by its dependency's outcome is final without an outcome of its own (see #wakeDependents).
   * Nothing announces other writers' final states (there are none but this process): false, waiters look every poll.
   */
  async watch(onDone: (id: number | null) => void): Promise<boolean> {
    this.#onDone = onDone;
    return false;
  }

  async addFlow(flow: NewFlow, via?: unknown, now = Date.now()): Promise<StoredTask[]> {
    if (via !== undefined) throw new TypeError(NO_CLIENT);
    const db = this.#open;
    const rows = this.#named(() => db.transaction(() => addFlow(this.#prepare, flow, Date.now(), now))());
    this.#flows = true;
    const due = rows.filter((row) => row.state === 'waiting').map((row) => row.runAt.getTime());
    if (due.length > 0) this.#onWake?.(Math.min(...due));
    return rows;
  }

  async getFlow(id: number): Promise<StoredFlowGraph | undefined> {
    return this.#named(() => getFlow(this.#prepare, id));
  }

  async getDependencies(id: number): Promise<DependencyInfo[]> {
    return this.#named(() => getDependencies(this.#prepare, id));
  }

  async getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined> {
    return this.#named(() => getTaskLinks(this.#prepare, id, limit));
  }

  async listLimitGroups(limit: number, now: number): Promise<LimitGroup[]> {
    return this.#named(() => listLimitGroups(this.#prepare, limit, now));
  }

  async cancel(id: number): Promise<boolean> {
    const db = this.#open;
    const cancelled = this.#named(() => db.transaction(() => cancel(this.#prepare, id, Date.now()))());
    if (cancelled) this.#wakeDependents([id]);
    return cancelled;
  }

  async cancelJob(key: string): Promise<boolean> {
    const db = this.#open;
    return this.#named(() => db.transaction(() => cancelJob(this.#prepare, key))());
  }

  async requeue(id: number, now: number): Promise<StoredTask | undefined> {
    // Flows: the failed tasks it depends on come back too (settle.ts requeue).
    const db = this.#open;
    const row = this.#named(() => db.transaction(() => requeue(this.#prepare, id, now, Date.now()))());
    return row === undefined ? undefined : toTask(row);
  }

  // One process: the cutoffs are this machine's clock, the one updated_at is written with.
  async prune(succeeded: number | null, failed: number | null, limit: number): Promise<number> {
    const now = Date.now();
    const cutoff = (age: number | null) => (age === null ? NEVER : now - age);
    return this.#named(() => {
      const tasks = pruneTasks(this.#prepare, cutoff(succeeded), cutoff(failed), limit);
      const jobs = failed === null ? 0 : pruneJobs(this.#prepare, cutoff(failed), limit);
      pruneHolders(this.#prepare);
      pruneGroups(this.#prepare);
      return tasks + jobs + pruneIdle(this.#prepare, now);
    });
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    return this.#named(() => getTask(this.#prepare, id));
  }

  async endedTasks(ids: readonly number[]): Promise<EndedTasks> {
    return this.#named(() => endedTasks(this.#prepare, ids));
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    return this.#named(() => listTasks(this.#prepare, filter));
  }

  async countTasks(filter: TaskFilter): Promise<Record<StoredState, number>> {
    return this.#named(() => countTasks(this.#prepare, filter));
  }

  async deleteTasks(filter: TaskFilter): Promise<number> {
    return this.#named(() => deleteTasks(this.#prepare, filter));
  }

  async journal(
    owner: string,
    writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
    lost: (id: number, error: unknown) => void,
  ): Promise<void> {
    const db = this.#open;
    this.#named(() => writeJournal((fn) => db.transaction(fn)(), this.#prepare, owner, writes, lost));
  }

  async getJob(key: string): Promise<StoredJob | undefined> {
    return this.#named(() => getJob(this.#prepare, key));
  }

  async listJobs(filter: JobFilter): Promise<StoredJob[]> {
    return this.#named(() => listJobs(this.#prepare, filter));
  }

  async setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    return this.#named(() => setJobState(this.#prepare, key, from, to, Date.now()));
  }

  async resumeJob(key: string, now: number, resumedAt: (job: DueJob, now: number) => number | null): Promise<boolean> {
    const db = this.#open;
    return this.#named(() => db.transaction(() => resumeJob(this.#prepare, key, now, resumedAt, Date.now()))());
  }

  async triggerJob(key: string, now: number): Promise<StoredTask | undefined> {
    const row = this.#named(() => triggerJob(this.#prepare, key, now, Date.now()));
    return row === undefined ? undefined : toTask(row);
  }

  async subscribe(onWake: (runAt: number) => void): Promise<void> {
    // One process: scheduling and cancelling are seen directly; only dependents an outcome made due wake the claimer.
    this.#onWake = onWake;
  }

  /** Nothing announces: an idle process reads the file every poll (a local read costs no server), as it always has. */
  readonly listening = false;

  async close(): Promise<void> {
    this.#statements.clear();
    if (this.#db === undefined) return;
    this.#db.close();
    this.#db = undefined;
    // The lock is gone with the connection; so is our claim on the name.
    dropOwner(this.#path);
  }
}
