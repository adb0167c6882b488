import type { Client, ClientConfig, Notification, Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';
import {
  DEFAULT_MAX_LEASE_EXPIRIES, LeaseLostError, SCHEMA_VERSION, SchemaVersionError, leaseExpiredText,
  type ClaimedTask, type JobFilter, type Outcome, type QueryClient, type DueJob, type JobAdvance, type NewJob, type NewTask, type Store, type StoredJob, type StoredState, type StoredTask, type TaskFilter,
} from '../store.js';
import { toClaims, toDueJob, toJob, toTask, type ClaimRow, type DueJobRow, type JobRow, type JobStatsRow, type TaskRow } from '../rows.js';

/** A filter's time as epoch ms, or null. */
function epoch(time: Date | number | undefined): number | null {
  return time === undefined ? null : typeof time === 'number' ? time : time.getTime();
}
import { CANCEL, DONE, quote, statements, WAKE, type Statements } from './sql.js';
import { toDuration, type Duration } from '../../core/duration.js';
import { loadPeer } from '../../core/peer.js';
import { describe } from '../../core/validate.js';
import { assertCount, assertName, MAX_TIMER } from '../validate.js';

/** Options of `postgresStore()`. */
export interface PostgresStoreOptions {
  /**
   * Where to connect, e.g. `postgres://user:pass@host:5432/db`. Without it
   * (and without `pool`) `pg` reads the usual `PGHOST`, `PGUSER`... variables.
   */
  connectionString?: string;
  /** A pool of your own; the store uses it and leaves it open on `close()`. */
  pool?: Pool;
  /**
   * How long a claimed task stays claimed without renewal: ms, or a string such as `'30s'`. A live
   * process renews its claims every `lease / 3`; a dead one's work is taken
   * over by another process once its lease has run out.
   * @default 30000
   */
  lease?: Duration;
  /**
   * The longest an idle process sleeps between checks for due work: ms, or a string such as `'5s'`.
   * New work wakes it earlier through LISTEN/NOTIFY.
   * @default 5000
   */
  poll?: Duration;
  /** The schema to keep taskheap's tables in (created if missing); default: the connection's search_path. */
  schema?: string;
  /**
   * The longest any query or connection attempt may take, in ms: a hung
   * server or a network partition is reported to `onError` after this and
   * retried with backoff. Sets the pool's `connectionTimeoutMillis` and
   * `query_timeout`, and the server's `statement_timeout` and
   * `idle_in_transaction_session_timeout` (the last two only on a pool the
   * store creates; set them on a pool you pass). `close()` gives up on the
   * database after about three times this.
   * @default 10000
   */
  timeout?: Duration;
  /**
   * How many times a task's lease may expire (its process died, or blocked
   * its event loop past the lease) before the task is failed instead of
   * claimed again, with a `lastError` saying so.
   * @default 1
   */
  maxLeaseExpiries?: number;
  /**
   * How many tasks a process claims beyond its free workers, to run as soon
   * as a worker frees up without waiting for a round trip. Prefetched tasks
   * are leased (and renewed) like running ones and handed back, unrun, on
   * `close()`; while one process holds them, others cannot run them. Without
   * it the prefetch adapts: what the workers get through in two claim round
   * trips (measured), from `workers` (long tasks, or before the first one
   * finished) up to 32 × `workers` and at most 1,000 (short tasks). Set it
   * to pin it: 0 for long tasks spread across processes (fairness), more
   * for throughput.
   * @default adaptive, from the scheduler's `workers` to 32 × `workers` (at most 1,000)
   */
  prefetch?: number;
}

/** The most tasks a process may claim ahead of its workers. */
const MAX_PREFETCH = 10_000;

type Pg = typeof import('pg');
type Advance = (job: DueJob, now: number, running: boolean) => JobAdvance;

const LISTENER_NAME = 'taskheap-listener';
const RECONNECT_MIN = 100;
const RECONNECT_MAX = 5_000;
const OPTION_KEYS = new Set(['connectionString', 'pool', 'lease', 'poll', 'schema', 'timeout', 'maxLeaseExpiries', 'prefetch']);

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
export function postgresStore(poolOrOptions: Pool | PostgresStoreOptions | string = {}): Store & { readonly lease: number; readonly poll: number } {
  let options: PostgresStoreOptions;
  if (typeof poolOrOptions === 'string') options = { connectionString: poolOrOptions };
  else if (isPool(poolOrOptions)) options = { pool: poolOrOptions };
  else if (typeof poolOrOptions === 'object' && poolOrOptions !== null) options = poolOrOptions;
  else throw new TypeError(`Expected a pg Pool, a connection string or options, got ${describe(poolOrOptions)}`);
  for (const key in options) {
    if (!OPTION_KEYS.has(key)) throw new TypeError(`Unknown postgresStore option \`${key}\`; expected one of: ${[...OPTION_KEYS].join(', ')}`);
  }
  const { connectionString, pool, schema, maxLeaseExpiries = DEFAULT_MAX_LEASE_EXPIRIES } = options;
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
    throw new TypeError(`Expected \`connectionString\` to be a non-empty string, got ${describe(connectionString)}`);
  }
  if (pool !== undefined && !isPool(pool)) throw new TypeError(`Expected \`pool\` to be a pg Pool, got ${describe(pool)}`);
  if (pool !== undefined && connectionString !== undefined) throw new TypeError('Give either `pool` or `connectionString`, not both');
  const lease = toDuration(options.lease ?? 30_000, 'lease', 1);
  const poll = toDuration(options.poll ?? 5_000, 'poll', 1);
  const timeout = toDuration(options.timeout ?? 10_000, 'timeout', 1);
  for (const [what, value] of [['lease', lease], ['poll', poll], ['timeout', timeout]] as const) {
    if (value > MAX_TIMER) throw new RangeError(`Expected \`${what}\` to be at most ${MAX_TIMER} ms (the timer limit), got ${describe(value)}`);
  }
  // A lease must outlast a renewal that takes as long as a query may.
  if (lease < 3 * timeout && options.timeout !== undefined) {
    throw new RangeError(`Expected \`lease\` (${lease} ms) to be at least 3 × \`timeout\` (${timeout} ms): renewals every lease / 3 must be able to wait for a slow query`);
  }
  assertCount(maxLeaseExpiries, 'maxLeaseExpiries');
  const { prefetch } = options;
  if (prefetch !== undefined && (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 0 || prefetch > MAX_PREFETCH)) {
    throw new RangeError(`Expected \`prefetch\` to be an integer from 0 to ${MAX_PREFETCH}, got ${describe(prefetch)}`);
  }
  if (schema !== undefined) assertName(schema, 'schema');
  return new PostgresStore({ connectionString, pool, lease, poll, schema, timeout: Math.min(timeout, Math.floor(lease / 3)), maxLeaseExpiries, prefetch });
}

function isPool(value: unknown): value is Pool {
  const candidate = value as Partial<Pool> | null;
  return typeof candidate === 'object' && candidate !== null && typeof candidate.connect === 'function' && typeof candidate.query === 'function';
}

function noop(): void {}

class PostgresStore implements Store {
  readonly lease: number;
  readonly poll: number;
  readonly closeTimeout: number;
  readonly prefetch: number | undefined;
  readonly #timeout: number;
  readonly #maxExpiries: number;
  readonly #expiredText: string;
  /** Every connection our pool opened, so close() can cut them when the server never answers. */
  readonly #clients = new Set<Client>();
  readonly #connectionString: string | undefined;
  readonly #schema: string | undefined;
  readonly #sql: Statements;
  /** Prefix of NOTIFY payloads, so stores in other schemas of the same database ignore ours. */
  readonly #prefix: string;
  #pg: Pg | undefined = undefined;
  #pool: Pool | undefined;
  readonly #ownsPool: boolean;
  #closed = false;
  #closing: Promise<void> | undefined = undefined;
  #listener: Client | undefined = undefined;
  #reconnectTimer: NodeJS.Timeout | undefined = undefined;
  #backoff = RECONNECT_MIN;
  #onWake: ((runAt: number) => void) | undefined = undefined;
  #onCancel: ((id: number) => void) | undefined = undefined;
  /** Set by watch(): told of tasks reaching a final state anywhere (null: notifications may have been lost). */
  #onDone: ((id: number | null) => void) | undefined = undefined;

  constructor(options: {
    connectionString: string | undefined; pool: Pool | undefined; lease: number; poll: number; schema: string | undefined; timeout: number; maxLeaseExpiries: number;
    prefetch: number | undefined;
  }) {
    this.prefetch = options.prefetch;
    this.lease = options.lease;
    this.poll = options.poll;
    this.#timeout = options.timeout;
    this.closeTimeout = options.timeout;
    this.#maxExpiries = options.maxLeaseExpiries;
    this.#expiredText = leaseExpiredText(options.maxLeaseExpiries + 1);
    this.#connectionString = options.connectionString;
    this.#pool = options.pool;
    this.#ownsPool = options.pool === undefined;
    this.#schema = options.schema;
    this.#sql = statements(options.schema);
    this.#prefix = options.schema === undefined ? '' : `${options.schema}:`;
    // A pool of our own, or the caller's, must never crash the process when
    // an idle connection dies (the database restarting): the failed queries
    // reject and the scheduler retries them.
    if (this.#pool !== undefined) this.#pool.on('error', noop);
  }

  get #db(): Pool {
    if (this.#pool === undefined) throw new Error('The PostgreSQL store is not open: call scheduler.start() first');
    return this.#pool;
  }

  async #load(): Promise<Pg> {
    if (this.#pg === undefined) {
      const module = await loadPeer<Pg>('pg', 'postgresStore()');
      // pg >= 8.12 has named ESM exports; older versions only a CommonJS default.
      this.#pg = ((module as unknown as { default?: Pg }).default ?? module) as Pg;
    }
    return this.#pg;
  }

  /** What the listener connects with: the pool's own settings. */
  #clientConfig(): ClientConfig {
    const base: PoolConfig = this.#ownsPool ? this.#poolConfig() : { ...(this.#db.options as PoolConfig) };
    return { ...base, keepAlive: true, connectionTimeoutMillis: base.connectionTimeoutMillis ?? this.#timeout, application_name: LISTENER_NAME };
  }

  /**
   * Every wait on the wire is bounded: the server cancels a statement (or an
   * abandoned transaction) after `timeout`; the client gives up on an answer
   * a little later, which is what notices a server that is frozen or cut off
   * (no TCP reset ever comes). Keepalive finds dead idle connections.
   */
  #poolConfig(): PoolConfig {
    return {
      connectionString: this.#connectionString,
      max: 10,
      connectionTimeoutMillis: this.#timeout,
      query_timeout: this.#timeout + 500,
      statement_timeout: this.#timeout,
      idle_in_transaction_session_timeout: this.#timeout,
      keepAlive: true,
      keepAliveInitialDelayMillis: 1_000,
      fallback_application_name: 'taskheap',
    };
  }

  #newPool(pg: Pg): Pool {
    const pool = new pg.Pool(this.#poolConfig());
    pool.on('error', noop);
    pool.on('connect', (client) => this.#clients.add(client));
    pool.on('remove', (client) => this.#clients.delete(client));
    return pool;
  }

  #wakePayload(runAt: number): string {
    return `${this.#prefix}${Math.round(runAt)}`;
  }

  async migrate(): Promise<void> {
    const pg = await this.#load();
    this.#closed = false;
    this.#closing = undefined;
    this.#pool ??= this.#newPool(pg);
    const sql = this.#sql;
    await this.#transaction(async (client) => {
      await client.query(sql.migrationLock, [this.#schema ?? '']);
      if (sql.createSchema !== undefined) await client.query(sql.createSchema);
      await client.query(sql.createMeta);
      const { rows } = await client.query<{ version: number }>(sql.readVersion);
      const found = rows[0] === undefined ? 0 : Number(rows[0].version);
      if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
      for (let version = found; version < SCHEMA_VERSION; version++) {
        const migration = sql.migrations[version];
        if (migration === undefined) throw new Error(`taskheap's PostgreSQL store has no migration to schema version ${version + 1}`);
        await client.query(migration);
      }
      if (rows[0] === undefined) await client.query(sql.insertVersion, [SCHEMA_VERSION]);
      else if (found !== SCHEMA_VERSION) await client.query(sql.updateVersion, [SCHEMA_VERSION]);
    });
  }

  /** Runs `fn` in one transaction on one pooled connection; a broken (or timed-out) connection is discarded. */
  async #transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#db.connect();
    const query = client.query.bind(client) as PoolClient['query'];
    // A pool we were given has no query_timeout of ours: every query gets one.
    (client as { query: unknown }).query = (text: string, values?: unknown[]) => query({ text, values, query_timeout: this.#timeout + 500 } as never);
    let broken: Error | undefined;
    // A checked-out client has no pool listener: an error between queries must not crash the process.
    const onError = (error: Error) => (broken = error);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      // No SQLSTATE: the connection failed or timed out, not the statement; it cannot be trusted again.
      if (broken === undefined && typeof (error as { code?: unknown }).code !== 'string') broken = error as Error;
      if (broken === undefined) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError as Error;
        }
      }
      throw error;
    } finally {
      (client as { query: unknown }).query = query;
      client.removeListener('error', onError);
      client.release(broken ?? false);
    }
  }

  #query<R extends QueryResultRow = QueryResultRow>(text: string, values: unknown[] = []) {
    return this.#db.query<R>({ text, values, query_timeout: this.#timeout + 500 } as never);
  }

  async addTask(task: NewTask, via?: QueryClient): Promise<StoredTask> {
    // Through the caller's client: their transaction decides, and the NOTIFY goes out at its commit.
    const query = via === undefined
      ? (text: string, values: unknown[]) => this.#query<TaskRow>(text, values)
      : async (text: string, values: unknown[]) => ({ rows: (await via.query(text, values)).rows as TaskRow[] });
    const { rows } = await query(this.#sql.addTask,
      [task.name, task.key, task.payload, task.runAt, task.maxAttempts, task.options, this.#wakePayload(task.runAt), task.serial ?? null, task.priority ?? 0]);
    if (rows[0] !== undefined) return toTask(rows[0]);
    // The key belongs to a running task, which is left alone: report it as it is.
    const existing = await query(this.#sql.taskByKey, [task.key]);
    if (existing.rows[0] === undefined) throw new Error(`The task with key "${String(task.key)}" vanished while it was being replaced; try again`);
    return toTask(existing.rows[0]);
  }

  async addTasks(tasks: readonly NewTask[], via?: QueryClient): Promise<StoredTask[]> {
    if (tasks.length === 0) return [];
    // A key given twice in one call: the last wins, as with one call after another.
    const last = new Map<string, number>();
    tasks.forEach((task, i) => {
      if (task.key !== null) last.set(task.key, i);
    });
    const rows = tasks.filter((task, i) => task.key === null || last.get(task.key) === i);
    const columns = { name: [] as string[], key: [] as (string | null)[], payload: [] as string[], at: [] as number[], max: [] as number[], options: [] as string[],
      serial: [] as (string | null)[], priority: [] as number[] };
    let earliest = Infinity;
    for (const task of rows) {
      columns.name.push(task.name);
      columns.key.push(task.key);
      columns.payload.push(task.payload);
      columns.at.push(task.runAt);
      columns.max.push(task.maxAttempts);
      columns.options.push(task.options);
      columns.serial.push(task.serial ?? null);
      columns.priority.push(task.priority ?? 0);
      earliest = Math.min(earliest, task.runAt);
    }
    const write = async (client: QueryClient): Promise<StoredTask[]> => {
      const saved = await client.query(this.#sql.addTasks,
        [columns.name, columns.key, columns.payload, columns.at, columns.max, columns.options, this.#prefix, columns.serial, columns.priority]);
      const byKey = new Map<string, StoredTask>();
      // New rows are numbered in the order given; keyed rows are found by key.
      const fresh: StoredTask[] = [];
      for (const row of saved.rows as TaskRow[]) {
        const task = toTask(row);
        if (task.key === null) fresh.push(task);
        else byKey.set(task.key, task);
      }
      // Keys of running tasks are left alone: report those as they are.
      const missing = [...last.keys()].filter((key) => !byKey.has(key));
      if (missing.length > 0) {
        const existing = await client.query(this.#sql.tasksByKeys, [missing]);
        for (const row of existing.rows as TaskRow[]) byKey.set(row.key!, toTask(row));
      }
      let next = 0;
      return tasks.map((task) => (task.key === null ? fresh[next++]! : byKey.get(task.key)!));
    };
    // Through the caller's client: their transaction decides, all or none, and the NOTIFY goes out at its commit.
    return via === undefined ? this.#transaction(write) : write(via);
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const { rows } = await this.#query<JobRow>(this.#sql.addJob,
      [job.key, job.name, job.payload, job.rule, job.nextRunAt === null ? 'done' : 'scheduled', job.nextRunAt, job.remaining, job.until, job.options, this.#prefix]);
    return toJob(rows[0]!);
  }

  async claim(owner: string, now: number, lease: number, limit: number, advance: Advance, names?: readonly string[]): Promise<ClaimedTask[]> {
    // The common case, no recurring job due: one statement claims, and says
    // whether a job is due. If one is, it claims nothing, and the transaction
    // below materializes the due jobs first and then claims.
    // The flag row of an empty claim has a null id.
    // Due times and leases are the server's: `now` (this process's clock) is not used.
    const params = [limit, owner, lease, this.#maxExpiries, this.#expiredText, names ?? null];
    const fast = await this.#query<Omit<ClaimRow, 'id'> & { id: ClaimRow['id'] | null; jobs_due: boolean }>(this.#sql.claimUnlessJobsDue, params);
    if (fast.rows[0]?.jobs_due !== true) return toClaims(fast.rows.filter((row): row is ClaimRow & { jobs_due: boolean } => row.id !== null));
    return this.#transaction(async (client) => {
      await this.#materialize(client, advance);
      const { rows } = await client.query<ClaimRow>(this.#sql.claim, params);
      return toClaims(rows);
    });
  }

  /** Turns due recurring jobs into occurrence tasks; part of the claim's transaction. */
  async #materialize(client: PoolClient, advance: Advance): Promise<void> {
    const { rows: due } = await client.query<DueJobRow & { now: number }>(this.#sql.dueJobs);
    if (due.length === 0) return;
    // The server's now: which occurrences were missed is decided by the one shared clock.
    const now = Number(due[0]!.now);
    const { rows: busy } = await client.query<{ job_key: string }>(this.#sql.runningJobs, [due.map((job) => job.key)]);
    const running = new Set(busy.map((row) => row.job_key));
    const occurrences = { name: [] as string[], payload: [] as string[], at: [] as number[], maxAttempts: [] as number[], options: [] as string[], jobKey: [] as string[] };
    const updates = { key: [] as string[], next: [] as (number | null)[], remaining: [] as (number | null)[], state: [] as string[], added: [] as number[] };
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
      await client.query(this.#sql.insertOccurrences,
      [occurrences.name, occurrences.payload, occurrences.at, occurrences.maxAttempts, occurrences.options, occurrences.jobKey]);
    }
    await client.query(this.#sql.advanceJobs, [updates.key, updates.next, updates.remaining, updates.state, updates.added]);
  }

  async nextDue(_now: number, names?: readonly string[]): Promise<number | undefined> {
    const { rows } = await this.#query<{ t: number | string | null }>(this.#sql.nextDue, [names ?? null]);
    const t = rows[0]?.t;
    return t === null || t === undefined ? undefined : Math.max(0, Number(t));
  }

  async renew(owner: string, ids: readonly number[], _now: number, lease: number, handBack = true): Promise<number[]> {
    // Runs with no ids too: it also hands back claims whose answer was lost.
    const { rows } = await this.#query<{ id: string | number }>(this.#sql.renew, [lease, ids, owner, 3 * this.#timeout, handBack]);
    const kept = new Set(rows.map((row) => Number(row.id)));
    return ids.filter((id) => !kept.has(id));
  }

  /** One statement for the whole batch: an outcome costs a row of arrays, not a round trip. */
  async settle(owner: string, outcomes: readonly Outcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const id: number[] = [], kind: string[] = [], state: (string | null)[] = [], delay: (number | null)[] = [], error: (string | null)[] = [];
    const result: (string | null)[] = [];
    for (const outcome of outcomes) {
      id.push(outcome.id);
      kind.push(outcome.kind);
      state.push(outcome.kind === 'complete' ? outcome.state : null);
      delay.push(outcome.kind === 'retry' ? outcome.delay : null);
      error.push(outcome.kind === 'release' ? null : outcome.error);
      result.push(outcome.kind === 'complete' ? outcome.result ?? null : null);
    }
    await this.#query(this.#sql.settle, [id, kind, state, delay, error, owner, this.#prefix, result]);
  }

  async cancel(id: number): Promise<boolean> {
    const { rows } = await this.#query<{ was: StoredState }>(this.#sql.cancel, [id, `${this.#prefix}${id}`, this.#prefix]);
    return rows.length > 0;
  }

  async cancelJob(key: string): Promise<boolean> {
    const { rows } = await this.#query<{ n: string | number }>(this.#sql.cancelJob, [key]);
    return Number(rows[0]?.n ?? 0) > 0;
  }

  async requeue(id: number): Promise<StoredTask | undefined> {
    const { rows } = await this.#query<TaskRow>(this.#sql.requeue, [id, this.#prefix]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async watch(onDone: (id: number | null) => void): Promise<void> {
    const first = this.#onDone === undefined;
    this.#onDone = onDone;
    if (this.#listener !== undefined) {
      if (first) await this.#listener.query(this.#sql.listenDone);
    } else if (this.#reconnectTimer === undefined) {
      await this.#listen();
    }
  }

  async prune(succeeded: number | null, failed: number | null, limit: number): Promise<number> {
    if (succeeded === null && failed === null) return 0;
    const tasks = await this.#query(this.#sql.pruneTasks, [succeeded, failed, limit]);
    const jobs = failed === null ? undefined : await this.#query(this.#sql.pruneJobs, [failed, limit]);
    await this.#query(this.#sql.pruneKeys);
    return (tasks.rowCount ?? 0) + (jobs?.rowCount ?? 0);
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const { rows } = await this.#query<TaskRow>(this.#sql.taskById, [id]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const { rows } = await this.#query<TaskRow>(this.#sql.listTasks, [
      filter.state ?? null, filter.name ?? null, filter.jobKey ?? null, filter.limit ?? 100, filter.keyPrefix ?? null,
      epoch(filter.from), epoch(filter.to), epoch(filter.after?.runAt), filter.after?.id ?? null,
    ]);
    return rows.map(toTask);
  }

  completeWithin<T>(owner: string, id: number, fn: (client: QueryClient) => Promise<T>, result: (value: T) => string | null): Promise<T> {
    return this.#transaction(async (client) => {
      const value = await fn(client);
      const { rows } = await client.query(this.#sql.complete, ['succeeded', null, id, owner, result(value), this.#prefix]);
      // Not ours any more: the handler's writes must not commit without the task.
      if (rows.length === 0) throw new LeaseLostError(id);
      return value;
    });
  }

  async getJob(key: string): Promise<StoredJob | undefined> {
    const { rows } = await this.#query<JobRow>(this.#sql.jobByKey, [key]);
    return (await this.#withStats(rows))[0];
  }

  async listJobs(filter: JobFilter): Promise<StoredJob[]> {
    const { rows } = await this.#query<JobRow>(this.#sql.listJobs,
      [filter.state ?? null, filter.name ?? null, filter.keyPrefix ?? null, filter.after ?? null, filter.limit ?? 100]);
    return this.#withStats(rows);
  }

  async #withStats(rows: JobRow[]): Promise<StoredJob[]> {
    if (rows.length === 0) return [];
    const stats = await this.#query<JobStatsRow>(this.#sql.jobStats, [rows.map((row) => row.key)]);
    return rows.map((row) => toJob(row, stats.rows));
  }

  async setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    const { rows } = await this.#query(this.#sql.setJobState, [key, from, to, this.#prefix]);
    return rows.length > 0;
  }

  async triggerJob(key: string): Promise<StoredTask | undefined> {
    const { rows } = await this.#query<TaskRow>(this.#sql.triggerJob, [key, this.#prefix]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async subscribe(onWake: (runAt: number) => void, onCancel: (id: number) => void): Promise<void> {
    this.#onWake = onWake;
    this.#onCancel = onCancel;
    if (this.#listener === undefined && this.#reconnectTimer === undefined) await this.#listen();
  }

  /** Connects the listening client; rejects if it cannot. Once connected, a drop reconnects with backoff. */
  async #listen(): Promise<void> {
    const pg = await this.#load();
    const client = new pg.Client(this.#clientConfig());
    let live = false;
    const dropped = () => {
      if (!live) return;
      live = false;
      if (this.#listener === client) this.#listener = undefined;
      client.end().catch(noop);
      this.#scheduleReconnect();
    };
    client.on('error', dropped);
    client.on('end', dropped);
    client.on('notification', this.#notified);
    try {
      await client.connect();
      await client.query(this.#sql.listen);
      if (this.#onDone !== undefined) await client.query(this.#sql.listenDone);
    } catch (error) {
      await client.end().catch(noop);
      throw error;
    }
    if (this.#closed) {
      await client.end().catch(noop);
      return;
    }
    live = true;
    this.#listener = client;
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer !== undefined) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(this.#backoff * 2, RECONNECT_MAX);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (this.#closed) return;
      this.#listen().then(() => {
        if (this.#closed) return;
        this.#backoff = RECONNECT_MIN;
        // Whatever was announced while we were away is lost: look again now.
        this.#onWake?.(Date.now());
        this.#onDone?.(null);
      }, () => this.#scheduleReconnect());
    }, delay);
    this.#reconnectTimer.unref();
  }

  #notified = (message: Notification): void => {
    const payload = message.payload ?? '';
    if (!payload.startsWith(this.#prefix)) return;
    const rest = payload.slice(this.#prefix.length);
    // A settle announces its batch's final states in one notification: "<id>,<id>,...".
    if (message.channel === DONE && /^\d+(,\d+)+$/.test(rest)) {
      for (const id of rest.split(',')) this.#onDone?.(Number(id));
      return;
    }
    if (!/^-?\d+$/.test(rest)) return; // another schema's payload ("<schema>:<n>") when we use the default
    const value = Number(rest);
    if (message.channel === WAKE) this.#onWake?.(value);
    else if (message.channel === CANCEL) this.#onCancel?.(value);
    else if (message.channel === DONE) this.#onDone?.(value);
  };

  /** Waits for `ending` at most `timeout` ms, then destroys the sockets of `clients`. */
  async #bounded(ending: Promise<unknown>, clients: Client[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), this.#timeout)));
    const result = await Promise.race([ending, late]);
    clearTimeout(timer);
    if (result !== 'late') return;
    for (const client of clients) {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      if (this.#reconnectTimer !== undefined) clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = undefined;
      this.#backoff = RECONNECT_MIN;
      const listener = this.#listener;
      this.#listener = undefined;
      // A server that never answers must not hold close() forever: after
      // `timeout` the sockets are cut instead of waiting for a goodbye.
      if (listener !== undefined) await this.#bounded(listener.end().catch(noop), [listener]);
      const pool = this.#pool;
      if (pool === undefined) return;
      if (this.#ownsPool) {
        this.#pool = undefined;
        await this.#bounded(pool.end().catch(noop), [...this.#clients]);
        this.#clients.clear();
      } else {
        pool.removeListener('error', noop);
      }
    })();
    return this.#closing;
  }
}

