// The PostgreSQL store (`postgresStore()`): the class that implements the
// Store interface by wiring the role files: each operation runs a function
// of add.ts, claim.ts, settle.ts, limits.ts, jobs.ts, flows.ts or
// inspect.ts, beside the statement it sends. `statements()` builds every
// statement of a store once, from its schema's table names (tables.ts). Its
// connections (connection.ts), its listener (listener.ts), its options
// (options.ts) and its schema (migrations.ts) live beside it.
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
  RenewParams,
  WarmParams,
  RecordStepsParams,
  SendParams,
  StepStore,
  Store,
  TakeMessageParams,
  StoreCapabilities,
  StoredFlowGraph,
  StoredJob,
  StoredQueue,
  StoredState,
  StoredTask,
  TaskFilter,
  TaskLinks,
} from '../store.js';
import type { TaskLogLine } from '../../core/journal.js';
import { leaseExpiredText } from '../expiries.js';
import { Connection, WARM_CONNECTIONS } from './connection.js';
import { Listener } from './listener.js';
import { readOptions, type PostgresSettings, type PostgresStoreOptions } from './options.js';
import type { PgPoolLike } from './pg.js';
import { migrate, migrationStatements } from './migrations.js';
import { addStatements, addTask, addTasks } from './add.js';
import { Claims, claimStatements } from './claim.js';
import { fairStatements, pruneGroups } from './fair.js';
import { cancel, completeWithin, renew, requeue, settle, settleStatements } from './settle.js';
import { limitStatements, pruneLimits, setQueue, setRate } from './limits.js';
import { addJob, cancelJob, getJob, jobStatements, listJobs, pruneJobs, resumeJob, setJobState, triggerJob } from './jobs.js';
import { addFlow, flowStatements, getDependencies, getFlow } from './flows.js';
import { recordSteps, recordStepsWithin, send, stepStatements, takeMessage } from './steps.js';
import {
  countTasks,
  deleteTasks,
  endedTasks,
  getTask,
  getTaskLinks,
  inspectStatements,
  listLimitGroups,
  listQueues,
  listTasks,
  pruneTasks,
  writeJournal,
} from './inspect.js';
import { durableRunner } from '../runner.js';

/** The statements of a store whose tables live in `schema` (undefined: the search_path), by role. */
export function statements(schema: string | undefined) {
  return {
    ...migrationStatements(schema),
    ...addStatements(schema),
    ...claimStatements(schema),
    ...fairStatements(schema),
    ...settleStatements(schema),
    ...stepStatements(schema),
    ...limitStatements(schema),
    ...jobStatements(schema),
    ...flowStatements(schema),
    ...inspectStatements(schema),
  };
}

/** The statements of one store. */
type Statements = ReturnType<typeof statements>;

/**
 * A store in PostgreSQL that many processes share: each claims due work with
 * `FOR UPDATE SKIP LOCKED` under a lease it renews while the work runs; a
 * dead process's work is claimed again once its lease expires. Each
 * occurrence of a recurring job is inserted once (unique per job key and
 * time). New work and cancellations reach idle processes through
 * LISTEN/NOTIFY. Survives the database restarting: queries that fail are
 * retried by the scheduler with backoff, and the listener reconnects.
 *
 * Uses `pg` (an optional peer dependency, loaded on first use). Times are
 * `timestamptz` (UTC instants).
 *
 * @example
 * import { postgresStore } from 'taskheap/postgres';
 * const scheduler = new Scheduler({ store: postgresStore({ connectionString: process.env.DATABASE_URL, lease: 30_000 }) });
 */
export function postgresStore(
  poolOrOptions: PgPoolLike | PostgresStoreOptions | string = {},
): Store & { readonly lease: number; readonly poll: number } {
  return new PostgresStore(readOptions(poolOrOptions));
}

/** What a PostgreSQL store can do: many processes, the server's clock, NOTIFY, the caller's transactions. @internal */
export const POSTGRES_CAPABILITIES: StoreCapabilities = {
  clockDriven: false,
  multiProcess: true,
  notify: true,
  transactionsWithClient: true,
  flows: true,
  limitList: true,
  fairShares: true,
  steps: true,
};

class PostgresStore implements Store, FlowStore, LimitListStore, StepStore {
  readonly capabilities = POSTGRES_CAPABILITIES;
  /** What a scheduler given this store runs it with: it comes with the store, so that `taskheap` alone never loads it. */
  readonly runner = durableRunner;
  readonly lease: number;
  readonly poll: number;
  readonly closeTimeout: number;
  readonly prefetch: number | undefined;
  readonly #timeout: number;
  readonly #schema: string | undefined;
  readonly #sql: Statements;
  /** Prefix of NOTIFY payloads, so stores in other schemas of the same database ignore ours. */
  readonly #prefix: string;
  readonly #db: Connection;
  readonly #claims: Claims;
  readonly #listener: Listener;
  #closing: Promise<void> | undefined = undefined;

  constructor(options: PostgresSettings) {
    this.prefetch = options.prefetch;
    this.lease = options.lease;
    this.poll = options.poll;
    this.closeTimeout = options.timeout;
    this.#timeout = options.timeout;
    this.#schema = options.schema;
    this.#sql = statements(options.schema);
    this.#prefix = options.schema === undefined ? '' : `${options.schema}:`;
    this.#db = new Connection(options);
    this.#claims = new Claims(this.#db, this.#sql, {
      prefix: this.#prefix,
      maxExpiries: options.maxLeaseExpiries,
      expiredText: leaseExpiredText(options.maxLeaseExpiries + 1),
    });
    this.#listener = new Listener(this.#db, this.#prefix, options.timeout);
  }

  /**
   * Creates the schema, or upgrades it from the version it is at; processes
   * starting together take turns. Not bound by `timeout`: an upgrade may
   * build an index on a large table, and a process waits for another's.
   */
  async migrate(): Promise<void> {
    await this.#db.open();
    this.#listener.reopen();
    this.#closing = undefined;
    await this.#db.transaction((client) => migrate(client, this.#sql, this.#schema, this.#listener), true);
  }

  addTask(task: NewTask, via?: QueryClient): Promise<EnqueuedTask> {
    return addTask(this.#db, this.#sql, this.#prefix, task, via);
  }

  addTasks(tasks: readonly NewTask[], via?: QueryClient): Promise<EnqueuedTask[]> {
    return addTasks(this.#db, this.#sql, this.#prefix, tasks, via);
  }

  addJob(job: NewJob): Promise<StoredJob> {
    return addJob(this.#db, this.#sql, this.#prefix, job);
  }

  claim({ owner, lease, limit, advance, names, rooms, limits, announceLease = false }: ClaimParams): Promise<ClaimedTask[]> {
    const rated = limits?.rate !== undefined;
    const takeoverWait = this.#db.takeoverWait(lease);
    const free = limits?.free ?? limit;
    return this.#claims.claim({ owner, lease, limit, names, rooms, rated, free, takeoverWait, announceLease }, advance);
  }

  /** Nothing of a previous life to recover: the next claim, of any process, takes an expired lease over. */
  recover(): Promise<ClaimedTask[]> {
    return Promise.resolve([]);
  }

  /** Readies connections for the first claims (Connection.warm): the statements they will send, of nothing, on each. */
  async warm(params: WarmParams): Promise<void> {
    await this.#claims.markServer();
    await this.#db.warm((query) => this.#claims.ready(query, params), WARM_CONNECTIONS);
  }

  nextDue(params: NextDueParams): Promise<number | undefined> {
    return this.#claims.nextDue(params, this.lease);
  }

  setRate(rate: { limit: number; interval: number } | undefined): Promise<void> {
    return setRate(this.#db, this.#sql, rate);
  }

  renew({ owner, ids, lease, handBack = true, started = [] }: RenewParams): Promise<number[]> {
    return renew(this.#db, this.#sql, owner, ids, lease, 3 * this.#timeout, handBack, started);
  }

  recordSteps(params: RecordStepsParams): Promise<boolean> {
    return recordSteps(this.#db, this.#sql, params);
  }

  recordStepsWithin(owner: string, id: number, body: (client: QueryClient) => Promise<void>, steps: () => string): Promise<void> {
    return recordStepsWithin(this.#db, this.#sql, owner, id, body, steps);
  }

  takeMessage(params: TakeMessageParams): Promise<string | undefined> {
    return takeMessage(this.#db, this.#sql, params);
  }

  send(params: SendParams): Promise<boolean> {
    return send(this.#db, this.#sql, this.#prefix, params);
  }

  settle(owner: string, outcomes: readonly Outcome[]): Promise<void> {
    return settle(this.#db, this.#sql, this.#prefix, owner, outcomes);
  }

  cancel(id: number): Promise<boolean> {
    return cancel(this.#db, this.#sql, this.#prefix, id);
  }

  cancelJob(key: string): Promise<boolean> {
    return cancelJob(this.#db, this.#sql, this.#prefix, key);
  }

  requeue(id: number): Promise<StoredTask | undefined> {
    return requeue(this.#db, this.#sql, this.#prefix, id);
  }

  watch(onDone: (id: number | null) => void): Promise<boolean> {
    return this.#listener.watch(onDone);
  }

  async prune(succeeded: number | null, failed: number | null, limit: number): Promise<number> {
    const kept = succeeded === null && failed === null;
    const tasks = kept ? 0 : await pruneTasks(this.#db, this.#sql, succeeded, failed, limit);
    const jobs = failed === null ? 0 : await pruneJobs(this.#db, this.#sql, failed, limit);
    await pruneGroups(this.#db, this.#sql);
    return tasks + jobs + (await pruneLimits(this.#db, this.#sql, limit));
  }

  setQueue(name: string, change: QueueChange): Promise<void> {
    return setQueue(this.#db, this.#sql, this.#prefix, name, change);
  }

  listQueues(name?: string): Promise<StoredQueue[]> {
    return listQueues(this.#db, this.#sql, name);
  }

  getTask(id: number): Promise<StoredTask | undefined> {
    return getTask(this.#db, this.#sql, id);
  }

  endedTasks(ids: readonly number[], awaited = false): Promise<EndedTasks> {
    return endedTasks(this.#db, this.#sql, ids, awaited);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    return listTasks(this.#db, this.#sql, filter);
  }

  countTasks(filter: TaskFilter): Promise<Record<StoredState, number>> {
    return countTasks(this.#db, this.#sql, filter);
  }

  deleteTasks(filter: TaskFilter): Promise<number> {
    return deleteTasks(this.#db, this.#sql, filter);
  }

  journal(
    owner: string,
    writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
    lost: (id: number, error: unknown) => void,
  ): Promise<void> {
    return writeJournal(this.#db, this.#sql, owner, writes, lost);
  }

  completeWithin<T>(owner: string, id: number, fn: (client: QueryClient) => Promise<T>, result: (value: T) => string | null): Promise<T> {
    return completeWithin(this.#db, this.#sql, this.#prefix, owner, id, fn, result);
  }

  getJob(key: string): Promise<StoredJob | undefined> {
    return getJob(this.#db, this.#sql, key);
  }

  listJobs(filter: JobFilter): Promise<StoredJob[]> {
    return listJobs(this.#db, this.#sql, filter);
  }

  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    return setJobState(this.#db, this.#sql, this.#prefix, key, from, to);
  }

  resumeJob(key: string, _now: number, resumedAt: (job: DueJob, now: number) => number | null): Promise<boolean> {
    return resumeJob(this.#db, this.#sql, this.#prefix, key, resumedAt);
  }

  triggerJob(key: string): Promise<StoredTask | undefined> {
    return triggerJob(this.#db, this.#sql, this.#prefix, key);
  }

  addFlow(flow: NewFlow, via?: unknown): Promise<StoredTask[]> {
    return addFlow(this.#db, this.#sql, this.#schema, this.#prefix, flow, via);
  }

  getFlow(id: number): Promise<StoredFlowGraph | undefined> {
    return getFlow(this.#db, this.#sql, id);
  }

  getDependencies(id: number): Promise<DependencyInfo[]> {
    return getDependencies(this.#db, this.#sql, id);
  }

  getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined> {
    return getTaskLinks(this.#db, this.#sql, id, limit);
  }

  listLimitGroups(limit: number): Promise<LimitGroup[]> {
    return listLimitGroups(this.#db, this.#sql, limit);
  }

  subscribe(onWake: (runAt: number) => void, onCancel: (id: number) => void, onPause?: (queue: string) => void): Promise<void> {
    return this.#listener.subscribe(onWake, onCancel, onPause);
  }

  get listening(): boolean {
    return this.#listener.listening;
  }

  close(): Promise<void> {
    // A server that never answers must not hold close() forever: after \`timeout\` the sockets are cut.
    this.#closing ??= (async () => {
      await this.#listener.close();
      await this.#db.close();
    })();
    return this.#closing;
  }
}
