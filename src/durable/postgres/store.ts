// The PostgreSQL store: `postgresStore()` and the Store operations, each a
// statement of sql.ts (or a few in one transaction) turned into rows of
// rows.ts. Its connections (connection.ts), its listener (listener.ts), its
// options (options.ts) and its schema (migrations.ts) live beside it.
import { LeaseLostError, SchemaVersionError } from '../errors.js';
import {
  SCHEMA_VERSION,
  enqueued,
  type ClaimedTask,
  type EndedTasks,
  type EnqueuedTask,
  type ClaimLimits,
  type JobFilter,
  type Outcome,
  type QueryClient,
  type DueJob,
  type NewJob,
  type NewTask,
  type Store,
  type StoredJob,
  type StoredState,
  type StoredTask,
  type TaskFilter,
  type QueueChange,
  type QueueRooms,
  type StoredQueue,
} from '../store.js';
import {
  insertedTask,
  toDueJob,
  toJob,
  toQueues,
  toEnded,
  toTask,
  type InsertedRow,
  type QueueRow,
  type DueJobRow,
  type JobRow,
  type JobStatsRow,
  type TaskRow,
} from '../rows.js';
import { leaseExpiredText } from '../expiries.js';
import { Claims, claimStatements, roomArrays, type Advance } from './claim.js';
import { applyLimits, limitStatements } from './limits.js';
import { Connection, WARM_CONNECTIONS } from './connection.js';
import { Listener, listenStatements } from './listener.js';
import { readOptions, type PostgresSettings, type PostgresStoreOptions } from './options.js';
import type { PgPoolLike } from './pg.js';
import { dueAt } from '../dedupe.js';
import { addStatements } from './add.js';
import { outcomeArrays, settleStatements } from './settle.js';
import { jobStatements } from './jobs.js';
import { migrationsIn, migrationStatements } from './migrations.js';
import {
  countTasks,
  deleteTasks,
  inspectStatements,
  listNewestFirst,
  listParams,
  postgresLimitList,
  postgresLinks,
  writeJournal,
} from './inspect.js';
import type { FlowStore } from '../flow-graph.js';
import type { LinkStore } from '../links.js';
import type { LimitListStore } from '../limit-list.js';
import { postgresFlows } from './flows.js';

/** The statements of a store whose tables live in `schema` (undefined: the search_path), by role. */
export function statements(schema: string | undefined) {
  return {
    ...migrationStatements(schema),
    ...addStatements(schema),
    ...claimStatements(schema),
    ...settleStatements(schema),
    ...limitStatements(schema),
    ...jobStatements(schema),
    ...inspectStatements(schema),
    ...listenStatements(),
  };
}

/** The statements of one store. */
type Statements = ReturnType<typeof statements>;

/** A query through the store's pool or the caller's client. */
type Query = <R = TaskRow>(text: string, values: unknown[]) => Promise<{ rows: R[] }>;

/** How many times an add runs again when its key was added by a concurrent one after its snapshot (see #addKeyed). */
const MAX_ROUNDS = 10;

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

class PostgresStore implements Store, FlowStore, LinkStore, LimitListStore {
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
    this.#claims = new Claims(this.#db, this.#sql, options.maxLeaseExpiries, leaseExpiredText(options.maxLeaseExpiries + 1));
    this.#listener = new Listener(this.#db, this.#sql, this.#prefix, options.timeout);
    const flows = postgresFlows(this.#db, options.schema, this.#prefix);
    [this.addFlow, this.getFlow, this.getDependencies] = [flows.addFlow, flows.getFlow, flows.getDependencies];
    this.getTaskLinks = postgresLinks(this.#db, options.schema).getTaskLinks;
    this.listLimitKeys = postgresLimitList(this.#db, options.schema).listLimitKeys;
    this.#newestFirst = listNewestFirst(options.schema);
  }

  readonly #newestFirst: string;

  readonly getTaskLinks: LinkStore['getTaskLinks'];
  readonly listLimitKeys: LimitListStore['listLimitKeys'];

  readonly addFlow: FlowStore['addFlow'];
  readonly getFlow: FlowStore['getFlow'];
  readonly getDependencies: FlowStore['getDependencies'];

  #wakePayload(runAt: number): string {
    return `${this.#prefix}${Math.round(runAt)}`;
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
    const sql = this.#sql;
    await this.#db.transaction(async (client) => {
      await client.query(sql.migrationLock, [this.#schema ?? '']);
      if (sql.createSchema !== undefined) await client.query(sql.createSchema);
      await client.query(sql.createMeta);
      const { rows } = await client.query<{ version: number }>(sql.readVersion);
      const found = rows[0] === undefined ? 0 : Number(rows[0].version);
      if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
      // Flows: without a schema option, the trigger's function names its tables in the current schema.
      const migrations = await migrationsIn(client, this.#schema, sql.migrations, this.#listener);
      for (let version = found; version < SCHEMA_VERSION; version++) {
        const migration = migrations[version];
        if (migration === undefined) throw new Error(`taskheap's PostgreSQL store has no migration to schema version ${version + 1}`);
        await client.query(migration);
      }
      if (rows[0] === undefined) await client.query(sql.insertVersion, [SCHEMA_VERSION]);
      else if (found !== SCHEMA_VERSION) await client.query(sql.updateVersion, [SCHEMA_VERSION]);
    }, true);
  }

  async addTask(task: NewTask, via?: QueryClient): Promise<EnqueuedTask> {
    // Through the caller's client: their transaction decides, and the NOTIFY goes out at its commit.
    if (via !== undefined) await this.#applyLimits([task]);
    const query = this.#via(via);
    if (task.key !== null) return (await this.#addKeyed(query, [task]))[0]!;
    const { rows } = await query(this.#sql.addTask, [
      task.name,
      task.key,
      task.payload,
      task.runAt,
      task.maxAttempts,
      task.options,
      this.#wakePayload(task.runAt),
      task.serial ?? null,
      task.priority ?? 0,
      task.queue ?? 'default',
      task.rateKey ?? null,
    ]);
    return enqueued(toTask(rows[0]!), 'inserted');
  }

  /**
   * Before an add in a caller's transaction: the limits it changes, set on
   * the store's own connection, so that the caller's transaction holds no
   * limit row a claim or an outcome would wait for (see upsertLimits).
   */
  #applyLimits(tasks: readonly NewTask[]): Promise<void> {
    return applyLimits((text, values) => this.#db.query(text, values), this.#sql.setLimits, tasks);
  }

  /** Queries through the caller's client (in their transaction), or the store's pool. */
  #via(via: QueryClient | undefined): Query {
    return via === undefined
      ? <R>(text: string, values: unknown[]) => this.#db.query<R>(text, values)
      : async <R>(text: string, values: unknown[]) => ({ rows: (await via.query(text, values)).rows as R[] });
  }

  /**
   * Adds tasks with distinct keys (keyless ones may come along), each
   * meeting its key's stored task as its dedupe mode says (see addKeyed in
   * sql.ts). An add that found its key inserted by a concurrent one after
   * the statement's snapshot comes back without a row: it runs again, and
   * the next statement sees that row. Each statement is atomic on its own,
   * so this needs no transaction.
   */
  async #addKeyed(query: Query, tasks: readonly NewTask[]): Promise<EnqueuedTask[]> {
    const results: (EnqueuedTask | undefined)[] = tasks.map(() => undefined);
    let pending = tasks.map((_, i) => i);
    for (let round = 0; pending.length > 0; round++) {
      if (round === MAX_ROUNDS) {
        throw new Error(
          `The tasks with keys ${pending.map((i) => JSON.stringify(tasks[i]!.key)).join(', ')} were added and removed by others ${MAX_ROUNDS} times while this add ran; try again`,
        );
      }
      const batch = pending.map((i) => tasks[i]!);
      const { rows } = await query(this.#sql.addKeyed, [
        batch.map((t) => t.name),
        batch.map((t) => t.key),
        batch.map((t) => t.payload),
        batch.map((t) => dueAt(t.dedupe?.mode ?? 'replace', t.dedupe?.period ?? 0, t.runAt)),
        batch.map((t) => t.maxAttempts),
        batch.map((t) => t.options),
        this.#prefix,
        batch.map((t) => t.serial ?? null),
        batch.map((t) => t.priority ?? 0),
        batch.map((t) => t.dedupe?.mode ?? 'replace'),
        batch.map((t) => t.dedupe?.period ?? 0),
        batch.map((t) => t.queue ?? 'default'),
        batch.map((t) => t.rateKey ?? null),
      ]);
      const byKey = new Map<string, number>();
      const keyless: number[] = [];
      batch.forEach((task, j) => (task.key === null ? keyless.push(j) : byKey.set(task.key, j)));
      const fresh: TaskRow[] = [];
      for (const row of rows as (TaskRow & { ord: string | number | null; action: string })[]) {
        const j = row.ord !== null ? Number(row.ord) - 1 : row.key !== null ? byKey.get(row.key) : undefined;
        if (j === undefined) {
          fresh.push(row);
          continue;
        }
        const what = row.action === 'existing' ? 'existing' : row.action === 'replace' ? 'replaced' : 'inserted';
        results[pending[j]!] = enqueued(toTask(row), what);
      }
      // New keyless rows are numbered in the order given.
      fresh
        .sort((a, b) => Number(a.id) - Number(b.id))
        .forEach((row, n) => {
          results[pending[keyless[n]!]!] = enqueued(toTask(row), 'inserted');
        });
      pending = pending.filter((i) => results[i] === undefined);
    }
    return results as EnqueuedTask[];
  }

  async addTasks(tasks: readonly NewTask[], via?: QueryClient): Promise<EnqueuedTask[]> {
    if (tasks.length === 0) return [];
    if (tasks.every((task) => task.key === null)) {
      if (via !== undefined) await this.#applyLimits(tasks);
      return this.#addUnkeyed(tasks, via);
    }
    // A key given twice in one call: its adds meet in order, the n-th item of each key in the n-th statement.
    const rounds: number[][] = [];
    const seen = new Map<string, number>();
    tasks.forEach((task, i) => {
      const n = task.key === null ? 0 : (seen.get(task.key) ?? 0);
      if (task.key !== null) seen.set(task.key, n + 1);
      (rounds[n] ??= []).push(i);
    });
    const write = async (client: QueryClient): Promise<EnqueuedTask[]> => {
      const query = this.#via(client);
      const results: EnqueuedTask[] = [];
      for (const round of rounds) {
        const rows = await this.#addKeyed(
          query,
          round.map((i) => tasks[i]!),
        );
        round.forEach((i, j) => (results[i] = rows[j]!));
      }
      // Every item of a key reports the row as it ends up, with what its own add did.
      const last = new Map<string, EnqueuedTask>();
      for (const row of results) if (row.key !== null) last.set(row.key, row);
      return results.map((row) =>
        row.key === null || last.get(row.key) === row ? row : enqueued({ ...last.get(row.key)! }, row.enqueued),
      );
    };
    // Through the caller's client: their transaction decides, all or none, and the NOTIFY goes out at its commit.
    if (via === undefined) return this.#db.transaction(write);
    await this.#applyLimits(tasks);
    return write(via);
  }

  /** Tasks without keys: one insert of them all, numbered in the order given. */
  async #addUnkeyed(tasks: readonly NewTask[], via?: QueryClient): Promise<EnqueuedTask[]> {
    const columns = {
      name: [] as string[],
      key: [] as (string | null)[],
      payload: [] as string[],
      at: [] as number[],
      max: [] as number[],
      options: [] as string[],
      serial: [] as (string | null)[],
      priority: [] as number[],
      queue: [] as string[],
      rateKey: [] as (string | null)[],
    };
    for (const task of tasks) {
      columns.name.push(task.name);
      columns.key.push(task.key);
      columns.payload.push(task.payload);
      columns.at.push(task.runAt);
      columns.max.push(task.maxAttempts);
      columns.options.push(task.options);
      columns.serial.push(task.serial ?? null);
      columns.priority.push(task.priority ?? 0);
      columns.queue.push(task.queue ?? 'default');
      columns.rateKey.push(task.rateKey ?? null);
    }
    // One statement: atomic on its own, in the caller's transaction or not.
    const { rows } = await this.#via(via)<InsertedRow>(this.#sql.addTasks, [
      columns.name,
      columns.key,
      columns.payload,
      columns.at,
      columns.max,
      columns.options,
      this.#prefix,
      columns.serial,
      columns.priority,
      columns.queue,
      columns.rateKey,
    ]);
    return rows.map((row, i) => enqueued(insertedTask(tasks[i]!, row), 'inserted'));
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    const { rows } = await this.#db.query<JobRow>(this.#sql.addJob, [
      job.key,
      job.name,
      job.payload,
      job.rule,
      job.nextRunAt === null ? 'done' : 'scheduled',
      job.nextRunAt,
      job.remaining,
      job.until,
      job.options,
      this.#prefix,
    ]);
    return toJob(rows[0]!);
  }

  claim(
    owner: string,
    _now: number,
    lease: number,
    limit: number,
    advance: Advance,
    names?: readonly string[],
    rooms?: QueueRooms,
    limits?: ClaimLimits,
  ): Promise<ClaimedTask[]> {
    const rated = limits?.rate !== undefined;
    const takeoverWait = this.#db.takeoverWait(lease);
    return this.#claims.claim({ owner, lease, limit, names, rooms, rated, free: limits?.free ?? limit, takeoverWait }, advance);
  }

  /** Readies connections for the first claims: a claim of nothing and a next-due question on each (Connection.warm). */
  warm(owner: string, lease: number, names?: readonly string[]): Promise<void> {
    const nextDue = [names ?? null, false, null, null, lease, 0];
    const claims = this.#claims.warmups(owner, lease, names);
    return this.#db.warm([...claims, { text: this.#sql.nextDue, values: nextDue }], WARM_CONNECTIONS);
  }

  async nextDue(_now: number, names?: readonly string[], rooms?: QueueRooms, rated = false): Promise<number | undefined> {
    const { rows } = await this.#db.query<{ t: number | string | null }>(
      this.#sql.nextDue,
      [names ?? null, rated, ...roomArrays(rooms), this.lease, this.#db.takeoverWait(this.lease)],
      true,
    );
    const t = rows[0]?.t;
    return t === null || t === undefined ? undefined : Math.max(0, Number(t));
  }

  async setRate(rate: { limit: number; interval: number } | undefined): Promise<void> {
    // Removing it is this process's business only: others that set it keep the bucket (and its starts).
    if (rate !== undefined) await this.#db.query(this.#sql.setSchedulerRate, [rate.limit, rate.interval]);
  }

  async renew(
    owner: string,
    ids: readonly number[],
    _now: number,
    lease: number,
    handBack = true,
    started: readonly number[] = [],
  ): Promise<number[]> {
    // Runs with no ids too: it also hands back claims whose answer was lost.
    const { rows } = await this.#db.query<{ id: string | number }>(this.#sql.renew, [
      lease,
      ids,
      owner,
      3 * this.#timeout,
      handBack,
      started,
    ]);
    const kept = new Set(rows.map((row) => Number(row.id)));
    return ids.filter((id) => !kept.has(id));
  }

  /** One statement for the whole batch: an outcome costs a row of arrays, not a round trip. */
  async settle(owner: string, outcomes: readonly Outcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const [id, kind, state, delay, error, result] = outcomeArrays(outcomes);
    await this.#db.query(this.#sql.settle, [id, kind, state, delay, error, owner, this.#prefix, result], true);
  }

  async cancel(id: number): Promise<boolean> {
    const { rows } = await this.#db.query<{ was: StoredState }>(this.#sql.cancel, [id, `${this.#prefix}${id}`, this.#prefix]);
    return rows.length > 0;
  }

  async cancelJob(key: string): Promise<boolean> {
    const { rows } = await this.#db.query<{ n: string | number }>(this.#sql.cancelJob, [key, this.#prefix]);
    return Number(rows[0]?.n ?? 0) > 0;
  }

  async requeue(id: number): Promise<StoredTask | undefined> {
    const { rows } = await this.#db.query<TaskRow>(this.#sql.requeue, [id, this.#prefix]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  watch(onDone: (id: number | null) => void): Promise<boolean> {
    return this.#listener.watch(onDone);
  }

  async prune(succeeded: number | null, failed: number | null, limit: number): Promise<number> {
    const kept = succeeded === null && failed === null;
    const tasks = kept ? undefined : await this.#db.query(this.#sql.pruneTasks, [succeeded, failed, limit]);
    const jobs = failed === null ? undefined : await this.#db.query(this.#sql.pruneJobs, [failed, limit]);
    await this.#db.query(this.#sql.pruneKeys);
    const { rows: idle } = await this.#db.query<{ kind: string; key: string }>(this.#sql.pruneLimits, [limit]);
    if (idle.length > 0) {
      const keys = (kind: string) => idle.filter((row) => row.kind === kind).map((row) => row.key);
      await this.#db.query(this.#sql.repairLimits, [keys('concurrency'), keys('rate')]);
    }
    return (tasks?.rowCount ?? 0) + (jobs?.rowCount ?? 0) + idle.length;
  }

  async setQueue(name: string, change: QueueChange): Promise<void> {
    const { globalConcurrency: global, rate } = change;
    await this.#db.query(this.#sql.setQueue, [
      name,
      change.paused ?? null,
      global !== undefined,
      global ?? null,
      this.#prefix,
      rate !== undefined,
      rate?.limit ?? null,
      rate?.interval ?? null,
    ]);
  }

  async listQueues(name?: string): Promise<StoredQueue[]> {
    const { rows } = await this.#db.query<QueueRow>(this.#sql.listQueues, [name ?? null]);
    return toQueues(rows);
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const { rows } = await this.#db.query<TaskRow>(this.#sql.taskById, [id]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async endedTasks(ids: readonly number[]): Promise<EndedTasks> {
    const { rows } = await this.#db.query<TaskRow & { asked: number }>(this.#sql.endedTasks, [ids]);
    return toEnded(rows);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const { rows } = await this.#db.query<TaskRow>(filter.order === 'desc' ? this.#newestFirst : this.#sql.listTasks, listParams(filter));
    return rows.map(toTask);
  }

  countTasks(filter: TaskFilter): Promise<Record<StoredState, number>> {
    return countTasks(this.#db, this.#sql, filter);
  }

  deleteTasks(filter: TaskFilter): Promise<number> {
    return deleteTasks(this.#db, this.#sql, filter);
  }

  journal(owner: string, writes: Parameters<typeof writeJournal>[3], lost: (id: number, error: unknown) => void): Promise<void> {
    return writeJournal(this.#db, this.#sql, owner, writes, lost);
  }

  completeWithin<T>(owner: string, id: number, fn: (client: QueryClient) => Promise<T>, result: (value: T) => string | null): Promise<T> {
    return this.#db.transaction(async (client) => {
      const value = await fn(client);
      const { rows } = await client.query(this.#sql.complete, ['succeeded', null, id, owner, result(value), this.#prefix]);
      // Not ours any more: the handler's writes must not commit without the task.
      if (rows.length === 0) throw new LeaseLostError(id);
      return value;
    });
  }

  async getJob(key: string): Promise<StoredJob | undefined> {
    const { rows } = await this.#db.query<JobRow>(this.#sql.jobByKey, [key]);
    return (await this.#withStats(rows))[0];
  }

  async listJobs(filter: JobFilter): Promise<StoredJob[]> {
    const { rows } = await this.#db.query<JobRow>(this.#sql.listJobs, [
      filter.state ?? null,
      filter.name ?? null,
      filter.keyPrefix ?? null,
      filter.after ?? null,
      filter.limit ?? 100,
    ]);
    return this.#withStats(rows);
  }

  async #withStats(rows: JobRow[]): Promise<StoredJob[]> {
    if (rows.length === 0) return [];
    const stats = await this.#db.query<JobStatsRow>(this.#sql.jobStats, [rows.map((row) => row.key)]);
    return rows.map((row) => toJob(row, stats.rows));
  }

  async setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    const { rows } = await this.#db.query(this.#sql.setJobState, [key, from, to, this.#prefix]);
    return rows.length > 0;
  }

  async resumeJob(key: string, _now: number, resumedAt: (job: DueJob, now: number) => number | null): Promise<boolean> {
    return this.#db.transaction(async (client) => {
      const [job] = (await client.query<DueJobRow & { now: number }>(this.#sql.pausedJob, [key])).rows;
      if (job === undefined) return false;
      // The server's now decides which occurrences fell in the pause: the one clock.
      await client.query(this.#sql.resumeJob, [key, resumedAt(toDueJob(job), Number(job.now)), this.#prefix]);
      return true;
    });
  }

  async triggerJob(key: string): Promise<StoredTask | undefined> {
    const { rows } = await this.#db.query<TaskRow>(this.#sql.triggerJob, [key, this.#prefix]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  subscribe(onWake: (runAt: number) => void, onCancel: (id: number) => void, onPause?: (queue: string) => void): Promise<void> {
    return this.#listener.subscribe(onWake, onCancel, onPause);
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
