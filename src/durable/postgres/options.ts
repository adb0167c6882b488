// The options of `postgresStore()`: what each means (the documentation users
// read), and their validation, which turns what was given into the settings
// the store runs with or throws a TypeError / RangeError saying what is wrong.
import { DEFAULT_MAX_LEASE_EXPIRIES } from '../expiries.js';
import { toDuration, type Duration } from '../../core/duration.js';
import { describe, keysOf } from '../../core/validate.js';
import { assertCount, assertName, MAX_TIMER } from '../validate.js';
import type { PgPoolLike } from './pg.js';

/** Options of `postgresStore()`. */
export interface PostgresStoreOptions {
  /**
   * Where to connect, e.g. `postgres://user:pass@host:5432/db`. Without it
   * (and without `pool`) `pg` reads the usual `PGHOST`, `PGUSER`... variables.
   */
  connectionString?: string;
  /** A pool of your own; the store uses it and leaves it open on `close()`. */
  pool?: PgPoolLike;
  /**
   * The connection goes through PgBouncer in transaction (or statement)
   * pooling: the store then assumes no session state across transactions.
   * It sends no `statement_timeout` / `idle_in_transaction_session_timeout`
   * at connect time (PgBouncer refuses unknown startup parameters) but sets
   * them with `SET LOCAL` in each of its transactions, and LISTENs only on
   * `listenConnectionString` (LISTEN needs a session of its own): without
   * it, other processes' new work, cancellations and final states reach
   * this one by polling (`poll`, and renewals every `lease / 3`). Every
   * statement is then sent unnamed (otherwise the settle of outcomes is a
   * named prepared statement, parsed once per connection). The store
   * cannot tell PgBouncer from PostgreSQL by itself: say so here. See
   * docs/pgbouncer.md.
   * @default false
   */
  pgbouncer?: boolean;
  /**
   * Where the one connection that LISTENs for notifications connects, when
   * it must not be `connectionString` (or `pool`): a direct connection to
   * PostgreSQL, bypassing PgBouncer, e.g.
   * `postgres://user:pass@db-host:5432/db`. Only LISTEN runs on it.
   * @default the store's own connection settings (none with `pgbouncer: true`: polling)
   */
  listenConnectionString?: string;
  /**
   * How long a claimed task stays claimed without renewal: ms, or a string such as `'30s'`. A live
   * process renews its claims every `lease / 3`; a dead one's work is taken
   * over by another process once its lease has run out.
   * @default 30000
   */
  lease?: Duration;
  /**
   * The longest an idle process that cannot listen (`pgbouncer` without
   * `listenConnectionString`) sleeps between checks for due work: ms, or a
   * string such as `'5s'`. One that listens is woken by whatever makes work
   * due (LISTEN/NOTIFY) and checks only as a safety net, every 60 polls, at
   * most 5 minutes: an idle worker sends nothing in between.
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

const OPTION_KEYS: ReadonlySet<string> = new Set(
  keysOf<PostgresStoreOptions>({
    connectionString: true,
    pool: true,
    pgbouncer: true,
    listenConnectionString: true,
    lease: true,
    poll: true,
    schema: true,
    timeout: true,
    maxLeaseExpiries: true,
    prefetch: true,
  }),
);

/** What a store runs with: durations in ms, defaults applied. */
export interface PostgresSettings {
  connectionString: string | undefined;
  pool: PgPoolLike | undefined;
  /** Behind PgBouncer (transaction pooling): no session state, LISTEN only on `listenConnectionString`. */
  pgbouncer: boolean;
  listenConnectionString: string | undefined;
  lease: number;
  poll: number;
  schema: string | undefined;
  /** The bound on every wait: the option, at most a third of the lease. */
  timeout: number;
  maxLeaseExpiries: number;
  prefetch: number | undefined;
}

/** Reads `postgresStore()`'s argument: a pool, a connection string or options. */
export function readOptions(poolOrOptions: PgPoolLike | PostgresStoreOptions | string): PostgresSettings {
  let options: PostgresStoreOptions;
  if (typeof poolOrOptions === 'string') options = { connectionString: poolOrOptions };
  else if (isPool(poolOrOptions)) options = { pool: poolOrOptions };
  else if (typeof poolOrOptions === 'object' && poolOrOptions !== null) options = poolOrOptions;
  else throw new TypeError(`Expected a pg Pool, a connection string or options, got ${describe(poolOrOptions)}`);
  for (const key in options) {
    if (!OPTION_KEYS.has(key))
      throw new TypeError(`Unknown postgresStore option \`${key}\`; expected one of: ${[...OPTION_KEYS].join(', ')}`);
  }
  const {
    connectionString,
    pool,
    schema,
    maxLeaseExpiries = DEFAULT_MAX_LEASE_EXPIRIES,
    pgbouncer = false,
    listenConnectionString,
  } = options;
  for (const [what, value] of [
    ['connectionString', connectionString],
    ['listenConnectionString', listenConnectionString],
  ] as const) {
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new TypeError(`Expected \`${what}\` to be a non-empty string, got ${describe(value)}`);
    }
  }
  if (typeof pgbouncer !== 'boolean') throw new TypeError(`Expected \`pgbouncer\` to be a boolean, got ${describe(pgbouncer)}`);
  if (pool !== undefined && !isPool(pool)) throw new TypeError(`Expected \`pool\` to be a pg Pool, got ${describe(pool)}`);
  if (pool !== undefined && connectionString !== undefined) throw new TypeError('Give either `pool` or `connectionString`, not both');
  const lease = toDuration(options.lease ?? 30_000, 'lease', 1);
  const poll = toDuration(options.poll ?? 5_000, 'poll', 1);
  const timeout = toDuration(options.timeout ?? 10_000, 'timeout', 1);
  for (const [what, value] of [
    ['lease', lease],
    ['poll', poll],
    ['timeout', timeout],
  ] as const) {
    if (value > MAX_TIMER)
      throw new RangeError(`Expected \`${what}\` to be at most ${MAX_TIMER} ms (the timer limit), got ${describe(value)}`);
  }
  // A lease must outlast a renewal that takes as long as a query may.
  if (lease < 3 * timeout && options.timeout !== undefined) {
    throw new RangeError(
      `Expected \`lease\` (${lease} ms) to be at least 3 × \`timeout\` (${timeout} ms): renewals every lease / 3 must be able to wait for a slow query`,
    );
  }
  assertCount(maxLeaseExpiries, 'maxLeaseExpiries');
  const { prefetch } = options;
  if (prefetch !== undefined && (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 0 || prefetch > MAX_PREFETCH)) {
    throw new RangeError(`Expected \`prefetch\` to be an integer from 0 to ${MAX_PREFETCH}, got ${describe(prefetch)}`);
  }
  if (schema !== undefined) assertSchema(schema);
  return {
    connectionString,
    pool,
    pgbouncer,
    listenConnectionString,
    lease,
    poll,
    schema,
    timeout: Math.min(timeout, Math.floor(lease / 3)),
    maxLeaseExpiries,
    prefetch,
  };
}

function isPool(value: unknown): value is PgPoolLike {
  const candidate = value as Partial<PgPoolLike> | null;
  return (
    typeof candidate === 'object' && candidate !== null && typeof candidate.connect === 'function' && typeof candidate.query === 'function'
  );
}

/** PostgreSQL's identifiers hold 63 bytes (NAMEDATALEN - 1): a longer one is cut, and two schemas would become one. */
const MAX_SCHEMA_BYTES = 63;

/** Throws unless `schema` is a name PostgreSQL keeps whole: at most 63 bytes of UTF-8. */
function assertSchema(schema: unknown): asserts schema is string {
  assertName(schema, 'schema');
  const bytes = new TextEncoder().encode(schema).length;
  if (bytes > MAX_SCHEMA_BYTES) {
    throw new RangeError(
      `Expected \`schema\` to be at most ${MAX_SCHEMA_BYTES} bytes of UTF-8 (PostgreSQL cuts longer names, so two schemas could be one), got ${bytes} bytes: ${JSON.stringify(schema)}`,
    );
  }
}
