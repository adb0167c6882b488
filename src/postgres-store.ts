import type { Client, ClientConfig, Notification, Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';
import {
  SCHEMA_VERSION, SchemaVersionError,
  type ClaimedTask, type DueJob, type JobAdvance, type NewJob, type NewTask, type Store, type StoredJob, type StoredState, type StoredTask, type TaskFilter,
} from './store.js';
import { toClaims, toDueJob, toJob, toTask, type ClaimRow, type DueJobRow, type JobRow, type TaskRow } from './store-rows.js';

/** SQL twin of `sameSchedule`: the stored job `j` and the new one have the same rule but for its start point. */
const SAME = `(j.state = 'scheduled' AND (j.rule::jsonb - 'start' - 'anchor') = (EXCLUDED.rule::jsonb - 'start' - 'anchor'))`;
import { assertDuration, describe } from './validate.js';

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
   * How long a claimed task stays claimed without renewal, in ms. A live
   * process renews its claims every `lease / 3`; a dead one's work is taken
   * over by another process once its lease has run out.
   * @default 30000
   */
  lease?: number;
  /**
   * The longest an idle process sleeps between checks for due work, in ms.
   * New work wakes it earlier through LISTEN/NOTIFY.
   * @default 5000
   */
  poll?: number;
  /** The schema to keep taskheap's tables in (created if missing); default: the connection's search_path. */
  schema?: string;
}

type Pg = typeof import('pg');
type Advance = (job: DueJob, now: number, running: boolean) => JobAdvance;

/** The channels every store listens on; payloads are `<ms>` / `<id>`, or `<schema>:<ms>` with a schema. */
const WAKE = 'taskheap_wake';
const CANCEL = 'taskheap_cancel';
const LISTENER_NAME = 'taskheap-listener';
const RECONNECT_MIN = 100;
const RECONNECT_MAX = 5_000;
const OPTION_KEYS = new Set(['connectionString', 'pool', 'lease', 'poll', 'schema']);

/** SQL: epoch ms (a parameter or expression) to timestamptz, and back. */
const ts = (expression: string) => `to_timestamp((${expression})::float8 / 1000)`;
const ms = (expression: string) => `(extract(epoch from ${expression}) * 1000)::float8`;

/**
 * The schema, one entry per version: entry `v` upgrades version `v` to `v + 1`.
 * `t` qualifies a table name with the store's schema.
 */
const MIGRATIONS: readonly ((t: (name: string) => string) => string)[] = [
  // version 1
  (t) => `
    CREATE TABLE ${t('taskheap_tasks')} (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name text NOT NULL,
      key text UNIQUE,
      payload text NOT NULL,
      state text NOT NULL DEFAULT 'waiting'
        CHECK (state IN ('waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled')),
      run_at timestamptz NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      max_attempts integer NOT NULL DEFAULT 1,
      options text NOT NULL DEFAULT '{}',
      locked_by text,
      locked_until timestamptz,
      last_error text,
      job_key text,
      scheduled_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT taskheap_tasks_occurrence UNIQUE (job_key, scheduled_at)
    );
    CREATE INDEX taskheap_tasks_waiting ON ${t('taskheap_tasks')} (run_at, id) WHERE state = 'waiting';
    CREATE INDEX taskheap_tasks_leased ON ${t('taskheap_tasks')} (locked_until) WHERE state = 'running';
    CREATE TABLE ${t('taskheap_jobs')} (
      key text PRIMARY KEY,
      name text NOT NULL,
      payload text NOT NULL,
      rule text NOT NULL,
      state text NOT NULL DEFAULT 'scheduled' CHECK (state IN ('scheduled', 'paused', 'done', 'cancelled')),
      next_run_at timestamptz,
      remaining integer,
      until timestamptz,
      options text NOT NULL,
      runs integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX taskheap_jobs_due ON ${t('taskheap_jobs')} (next_run_at) WHERE state = 'scheduled';`,
];

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
  const { connectionString, pool, lease = 30_000, poll = 5_000, schema } = options;
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
    throw new TypeError(`Expected \`connectionString\` to be a non-empty string, got ${describe(connectionString)}`);
  }
  if (pool !== undefined && !isPool(pool)) throw new TypeError(`Expected \`pool\` to be a pg Pool, got ${describe(pool)}`);
  if (pool !== undefined && connectionString !== undefined) throw new TypeError('Give either `pool` or `connectionString`, not both');
  assertDuration(lease, 'lease', 1);
  assertDuration(poll, 'poll', 1);
  if (lease === Infinity || poll === Infinity) throw new RangeError('Expected `lease` and `poll` to be finite');
  if (schema !== undefined && (typeof schema !== 'string' || schema === '')) throw new TypeError(`Expected \`schema\` to be a non-empty string, got ${describe(schema)}`);
  return new PostgresStore({ connectionString, pool, lease, poll, schema });
}

function isPool(value: unknown): value is Pool {
  const candidate = value as Partial<Pool> | null;
  return typeof candidate === 'object' && candidate !== null && typeof candidate.connect === 'function' && typeof candidate.query === 'function';
}

function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

function noop(): void {}

class PostgresStore implements Store {
  readonly lease: number;
  readonly poll: number;
  readonly #connectionString: string | undefined;
  readonly #schema: string | undefined;
  /** Qualified table names. */
  readonly #tasks: string;
  readonly #jobs: string;
  readonly #meta: string;
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

  constructor(options: { connectionString: string | undefined; pool: Pool | undefined; lease: number; poll: number; schema: string | undefined }) {
    this.lease = options.lease;
    this.poll = options.poll;
    this.#connectionString = options.connectionString;
    this.#pool = options.pool;
    this.#ownsPool = options.pool === undefined;
    this.#schema = options.schema;
    const t = (name: string) => (options.schema === undefined ? name : `${quote(options.schema)}.${name}`);
    this.#tasks = t('taskheap_tasks');
    this.#jobs = t('taskheap_jobs');
    this.#meta = t('taskheap_meta');
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
      const module = await import('pg');
      // pg >= 8.12 has named ESM exports; older versions only a CommonJS default.
      this.#pg = ((module as unknown as { default?: Pg }).default ?? module) as Pg;
    }
    return this.#pg;
  }

  /** What the listener connects with: the pool's own settings. */
  #clientConfig(): ClientConfig {
    const base: PoolConfig = this.#ownsPool ? this.#poolConfig() : { ...(this.#db.options as PoolConfig) };
    return { ...base, keepAlive: true, connectionTimeoutMillis: base.connectionTimeoutMillis ?? 10_000, application_name: LISTENER_NAME };
  }

  #poolConfig(): PoolConfig {
    return {
      connectionString: this.#connectionString,
      max: 10,
      connectionTimeoutMillis: 10_000,
      keepAlive: true,
      fallback_application_name: 'taskheap',
    };
  }

  #wakePayload(runAt: number): string {
    return `${this.#prefix}${Math.round(runAt)}`;
  }

  async migrate(): Promise<void> {
    const pg = await this.#load();
    this.#closed = false;
    this.#closing = undefined;
    if (this.#pool === undefined) {
      this.#pool = new pg.Pool(this.#poolConfig());
      this.#pool.on('error', noop);
    }
    const t = (name: string) => (this.#schema === undefined ? name : `${quote(this.#schema)}.${name}`);
    await this.#transaction(async (client) => {
      // Processes starting together migrate one at a time.
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('taskheap:' || $1::text))`, [this.#schema ?? '']);
      if (this.#schema !== undefined) await client.query(`CREATE SCHEMA IF NOT EXISTS ${quote(this.#schema)}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#meta} (version integer NOT NULL)`);
      const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${this.#meta}`);
      const found = rows[0] === undefined ? 0 : Number(rows[0].version);
      if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
      for (let version = found; version < SCHEMA_VERSION; version++) {
        const migration = MIGRATIONS[version];
        if (migration === undefined) throw new Error(`taskheap's PostgreSQL store has no migration to schema version ${version + 1}`);
        await client.query(migration(t));
      }
      if (rows[0] === undefined) await client.query(`INSERT INTO ${this.#meta} (version) VALUES ($1)`, [SCHEMA_VERSION]);
      else if (found !== SCHEMA_VERSION) await client.query(`UPDATE ${this.#meta} SET version = $1`, [SCHEMA_VERSION]);
    });
  }

  /** Runs `fn` in one transaction on one pooled connection; a broken connection is discarded. */
  async #transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#db.connect();
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
      if (broken === undefined) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError as Error;
        }
      }
      throw error;
    } finally {
      client.removeListener('error', onError);
      client.release(broken ?? false);
    }
  }

  #query<R extends QueryResultRow = QueryResultRow>(text: string, values: unknown[] = []) {
    return this.#db.query<R>(text, values);
  }

  /** The columns a task row is read with; `a` is the table alias. */
  #taskColumns(a: string): string {
    return `${a}.id, ${a}.name, ${a}.key, ${a}.payload, ${a}.state, ${ms(`${a}.run_at`)} AS run_at, ${a}.attempts, ${a}.max_attempts,
      ${a}.options, ${a}.last_error, ${a}.job_key, ${ms(`${a}.created_at`)} AS created_at, ${ms(`${a}.updated_at`)} AS updated_at`;
  }

  async addTask(task: NewTask): Promise<StoredTask> {
    const T = this.#tasks;
    // A keyed task replaces the one with its key unless that one is running.
    const { rows } = await this.#query<TaskRow>(`WITH saved AS (
        INSERT INTO ${T} AS t (name, key, payload, run_at, max_attempts, options)
        VALUES ($1, $2, $3, ${ts('$4')}, $5, $6)
        ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, payload = EXCLUDED.payload, state = 'waiting', run_at = EXCLUDED.run_at,
          attempts = 0, max_attempts = EXCLUDED.max_attempts, options = EXCLUDED.options, locked_by = NULL, locked_until = NULL,
          last_error = NULL, updated_at = now()
        WHERE t.state <> 'running'
        RETURNING ${this.#taskColumns('t')})
      SELECT saved.*, pg_notify('${WAKE}', $7) FROM saved`,
    [task.name, task.key, task.payload, task.runAt, task.maxAttempts, task.options, this.#wakePayload(task.runAt)]);
    if (rows[0] !== undefined) return toTask(rows[0]);
    const existing = await this.#query<TaskRow>(`SELECT ${this.#taskColumns('t')} FROM ${T} AS t WHERE t.key = $1`, [task.key]);
    if (existing.rows[0] === undefined) throw new Error(`The task with key "${String(task.key)}" vanished while it was being replaced; try again`);
    return toTask(existing.rows[0]);
  }

  async addJob(job: NewJob): Promise<StoredJob> {
    // Re-registering the same schedule (every start does) keeps the job's
    // place in it: its rule's start point, next occurrence and count left
    // (see sameSchedule in store.ts; start and anchor are the start point).
    const { rows } = await this.#query<JobRow>(`WITH saved AS (
        INSERT INTO ${this.#jobs} AS j (key, name, payload, rule, state, next_run_at, remaining, until, options)
        VALUES ($1, $2, $3, $4, $5, ${ts('$6')}, $7, ${ts('$8')}, $9)
        ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, payload = EXCLUDED.payload,
          rule = CASE WHEN ${SAME} THEN j.rule ELSE EXCLUDED.rule END,
          state = CASE WHEN ${SAME} THEN j.state ELSE EXCLUDED.state END,
          next_run_at = CASE WHEN ${SAME} THEN j.next_run_at ELSE EXCLUDED.next_run_at END,
          remaining = CASE WHEN ${SAME} THEN j.remaining ELSE EXCLUDED.remaining END,
          until = EXCLUDED.until, options = EXCLUDED.options, updated_at = now()
        RETURNING j.key, j.name, j.payload, j.state, j.next_run_at, j.runs)
      SELECT key, name, payload, state, ${ms('next_run_at')} AS next_run_at, runs,
        CASE WHEN next_run_at IS NOT NULL THEN pg_notify('${WAKE}', $10 || (extract(epoch from next_run_at) * 1000)::bigint::text) END
      FROM saved`,
    [job.key, job.name, job.payload, job.rule, job.nextRunAt === null ? 'done' : 'scheduled', job.nextRunAt, job.remaining, job.until, job.options, this.#prefix]);
    return toJob(rows[0]!);
  }

  async claim(owner: string, now: number, lease: number, limit: number, advance: Advance): Promise<ClaimedTask[]> {
    // The common case, no recurring job due: one statement claims, and says
    // whether a job is due. If one is, it claims nothing, and the transaction
    // below materializes the due jobs first and then claims.
    // The flag row of an empty claim has a null id.
    const fast = await this.#query<Omit<ClaimRow, 'id'> & { id: ClaimRow['id'] | null; jobs_due: boolean }>(this.#claimSql(true), [now, limit, owner, now + lease]);
    if (fast.rows[0]?.jobs_due !== true) return toClaims(fast.rows.filter((row): row is ClaimRow & { jobs_due: boolean } => row.id !== null));
    return this.#transaction(async (client) => {
      await this.#materialize(client, now, advance);
      const { rows } = await client.query<ClaimRow>(this.#claimSql(false), [now, limit, owner, now + lease]);
      return toClaims(rows);
    });
  }

  /**
   * Claims up to $2 tasks due at $1 for owner $3 until $4: waiting tasks that
   * are due, and running ones whose lease ran out (their process died); each
   * branch walks its own partial index. `unlessJobsDue`: claims only if no
   * recurring job is due, and returns that flag (on a row of its own if nothing was claimed).
   */
  #claimSql(unlessJobsDue: boolean): string {
    const T = this.#tasks;
    const gate = unlessJobsDue ? 'AND NOT (SELECT jobs_due FROM flag)' : '';
    return `WITH
      ${unlessJobsDue ? `flag AS (SELECT EXISTS (SELECT 1 FROM ${this.#jobs} WHERE state = 'scheduled' AND next_run_at <= ${ts('$1')}) AS jobs_due),` : ''}
      expired AS (SELECT id, run_at FROM ${T} WHERE state = 'running' AND locked_until <= ${ts('$1')} ${gate}
        ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
      waiting AS (SELECT id, run_at FROM ${T} WHERE state = 'waiting' AND run_at <= ${ts('$1')} ${gate}
        ORDER BY run_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
      due AS (SELECT id FROM (SELECT * FROM expired UNION ALL SELECT * FROM waiting) d ORDER BY run_at, id LIMIT $2),
      claimed AS (UPDATE ${T} AS t SET state = 'running', locked_by = $3, locked_until = ${ts('$4')}, attempts = t.attempts + 1, updated_at = now()
        FROM due WHERE t.id = due.id
        RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options)
      ${unlessJobsDue ? 'SELECT flag.jobs_due, claimed.* FROM flag LEFT JOIN claimed ON true' : 'SELECT * FROM claimed'}`;
  }

  /** Turns due recurring jobs into occurrence tasks; part of the claim's transaction. */
  async #materialize(client: PoolClient, now: number, advance: Advance): Promise<void> {
    const T = this.#tasks;
    // Another process materializing the same job holds its row: skip it, that process does the work.
    const { rows: due } = await client.query<DueJobRow>(`SELECT key, name, payload, rule, ${ms('next_run_at')} AS next_run_at, remaining,
        ${ms('until')} AS until, options
      FROM ${this.#jobs} WHERE state = 'scheduled' AND next_run_at <= ${ts('$1')}
      ORDER BY next_run_at LIMIT 100 FOR UPDATE SKIP LOCKED`, [now]);
    if (due.length === 0) return;
    const { rows: busy } = await client.query<{ job_key: string }>(`SELECT DISTINCT job_key FROM ${T}
      WHERE job_key = ANY($1::text[]) AND state = 'running' AND locked_until > ${ts('$2')}`, [due.map((job) => job.key), now]);
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
      // (job_key, scheduled_at) is unique: an occurrence is inserted once, whichever process gets there first.
      await client.query(`INSERT INTO ${T} (name, payload, run_at, scheduled_at, max_attempts, options, job_key)
        SELECT u.name, u.payload, ${ts('u.at')}, ${ts('u.at')}, u.max_attempts, u.options, u.job_key
        FROM unnest($1::text[], $2::text[], $3::float8[], $4::int[], $5::text[], $6::text[]) AS u(name, payload, at, max_attempts, options, job_key)
        ON CONFLICT (job_key, scheduled_at) DO NOTHING`,
      [occurrences.name, occurrences.payload, occurrences.at, occurrences.maxAttempts, occurrences.options, occurrences.jobKey]);
    }
    await client.query(`UPDATE ${this.#jobs} AS j SET next_run_at = ${ts('u.next')}, remaining = u.remaining, state = u.state,
        runs = j.runs + u.added, updated_at = now()
      FROM unnest($1::text[], $2::float8[], $3::int[], $4::text[], $5::int[]) AS u(key, next, remaining, state, added)
      WHERE j.key = u.key`, [updates.key, updates.next, updates.remaining, updates.state, updates.added]);
  }

  async nextDue(): Promise<number | undefined> {
    const { rows } = await this.#query<{ t: number | string | null }>(`SELECT ${ms(`LEAST(
        (SELECT MIN(run_at) FROM ${this.#tasks} WHERE state = 'waiting'),
        (SELECT MIN(locked_until) FROM ${this.#tasks} WHERE state = 'running'),
        (SELECT MIN(next_run_at) FROM ${this.#jobs} WHERE state = 'scheduled'))`)} AS t`);
    const t = rows[0]?.t;
    return t === null || t === undefined ? undefined : Number(t);
  }

  async renew(owner: string, ids: number[], until: number): Promise<number[]> {
    if (ids.length === 0) return [];
    const { rows } = await this.#query<{ id: string | number }>(`UPDATE ${this.#tasks} SET locked_until = ${ts('$1')}
      WHERE id = ANY($2::bigint[]) AND locked_by = $3 AND state = 'running' RETURNING id`, [until, ids, owner]);
    const kept = new Set(rows.map((row) => Number(row.id)));
    return ids.filter((id) => !kept.has(id));
  }

  async complete(owner: string, id: number, state: 'succeeded' | 'failed' | 'timed-out' | 'cancelled', error: string | null): Promise<void> {
    await this.#query(`UPDATE ${this.#tasks} SET state = $1, last_error = $2, locked_by = NULL, locked_until = NULL, updated_at = now()
      WHERE id = $3 AND locked_by = $4`, [state, error, id, owner]);
  }

  async retry(owner: string, id: number, runAt: number, error: string): Promise<void> {
    // The wake reaches this process too: its next claim may already be under way without this row.
    await this.#query(`WITH retried AS (
        UPDATE ${this.#tasks} SET state = 'waiting', run_at = ${ts('$1')}, last_error = $2, locked_by = NULL, locked_until = NULL, updated_at = now()
        WHERE id = $3 AND locked_by = $4 RETURNING id)
      SELECT pg_notify('${WAKE}', $5) FROM retried`, [runAt, error, id, owner, this.#wakePayload(runAt)]);
  }

  async release(owner: string, id: number): Promise<void> {
    await this.#query(`WITH released AS (
        UPDATE ${this.#tasks} SET state = 'waiting', attempts = attempts - 1, locked_by = NULL, locked_until = NULL, updated_at = now()
        WHERE id = $1 AND locked_by = $2 AND state = 'running' RETURNING run_at)
      SELECT pg_notify('${WAKE}', $3 || (extract(epoch from run_at) * 1000)::bigint::text) FROM released`, [id, owner, this.#prefix]);
  }

  async cancel(id: number): Promise<boolean> {
    // Locking the row first gives its state as it was, so only a running task is announced.
    const { rows } = await this.#query<{ was: StoredState }>(`WITH
        old AS (SELECT id, state FROM ${this.#tasks} WHERE id = $1 AND state IN ('waiting', 'running') FOR UPDATE),
        cancelled AS (UPDATE ${this.#tasks} AS t SET state = 'cancelled', locked_by = NULL, locked_until = NULL, updated_at = now()
          FROM old WHERE t.id = old.id RETURNING old.state AS was)
      SELECT was, CASE WHEN was = 'running' THEN pg_notify('${CANCEL}', $2) END FROM cancelled`, [id, `${this.#prefix}${id}`]);
    return rows.length > 0;
  }

  async cancelJob(key: string): Promise<boolean> {
    const { rows } = await this.#query<{ n: string | number }>(`WITH
        job AS (UPDATE ${this.#jobs} SET state = 'cancelled', next_run_at = NULL, updated_at = now() WHERE key = $1 AND state <> 'cancelled' RETURNING key),
        occurrences AS (UPDATE ${this.#tasks} SET state = 'cancelled', updated_at = now() WHERE job_key = $1 AND state = 'waiting' RETURNING id)
      SELECT (SELECT count(*) FROM job) AS n`, [key]);
    return Number(rows[0]?.n ?? 0) > 0;
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    const { rows } = await this.#query<TaskRow>(`SELECT ${this.#taskColumns('t')} FROM ${this.#tasks} AS t WHERE t.id = $1`, [id]);
    return rows[0] === undefined ? undefined : toTask(rows[0]);
  }

  async listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    const { rows } = await this.#query<TaskRow>(`SELECT ${this.#taskColumns('t')} FROM ${this.#tasks} AS t
      WHERE ($1::text IS NULL OR t.state = $1) AND ($2::text IS NULL OR t.name = $2) AND ($3::text IS NULL OR t.job_key = $3)
      ORDER BY t.run_at, t.id LIMIT $4`, [filter.state ?? null, filter.name ?? null, filter.jobKey ?? null, filter.limit ?? 100]);
    return rows.map(toTask);
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
      await client.query(`LISTEN ${WAKE}; LISTEN ${CANCEL}`);
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
      }, () => this.#scheduleReconnect());
    }, delay);
    this.#reconnectTimer.unref();
  }

  #notified = (message: Notification): void => {
    const payload = message.payload ?? '';
    if (!payload.startsWith(this.#prefix)) return;
    const rest = payload.slice(this.#prefix.length);
    if (!/^-?\d+$/.test(rest)) return; // another schema's payload ("<schema>:<n>") when we use the default
    const value = Number(rest);
    if (message.channel === WAKE) this.#onWake?.(value);
    else if (message.channel === CANCEL) this.#onCancel?.(value);
  };

  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      if (this.#reconnectTimer !== undefined) clearTimeout(this.#reconnectTimer);
      this.#reconnectTimer = undefined;
      this.#backoff = RECONNECT_MIN;
      const listener = this.#listener;
      this.#listener = undefined;
      await listener?.end().catch(noop);
      const pool = this.#pool;
      if (pool === undefined) return;
      if (this.#ownsPool) {
        this.#pool = undefined;
        await pool.end();
      } else {
        pool.removeListener('error', noop);
      }
    })();
    return this.#closing;
  }
}

