// The PostgreSQL store's connections: loading `pg` on first use, the pool
// (its own, or the caller's), queries and transactions with every wait
// bounded, the settings its listener connects with, and ending it all on
// close, cutting sockets when the server never answers. Behind PgBouncer
// (transaction pooling) it keeps no session state: no settings sent at
// connect time, each transaction's timeouts set with SET LOCAL.
import { loadPeer } from '../../core/peer.js';
import type { PgClient, PgConfig, PgModule, PgPool, PgPoolClient, PgPoolLike, PgResult } from './pg.js';
import { statementName } from './prepared.js';

function noop(): void {}

/** How many pooled connections warm() readies and our own pool keeps open: a claim round or two, a next-due question, a settle. */
export const WARM_CONNECTIONS = 3;

/** Runs a named statement on the connection being warmed (Connection.warm); its rows. */
export type WarmQuery = (text: string, values: unknown[]) => Promise<Record<string, unknown>[]>;

/** The longest a client waits for an answer (the timer limit): pg reads a query_timeout of 0 as "the default". */
const MAX_QUERY_WAIT = 2 ** 31 - 1;

/** Waits for `ending` at most `timeout` ms, then destroys the sockets of `clients`. */
export async function bounded(ending: Promise<unknown>, clients: Iterable<PgClient>, timeout: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeout)));
  const result = await Promise.race([ending, late]);
  clearTimeout(timer);
  if (result !== 'late') return;
  for (const client of clients) {
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }
}

/**
 * PgBouncer refuses the settings our pool sends at connect time: the error
 * says so, and (unless `pgbouncer: true` is set already) what to do about it.
 */
function hinted(error: unknown): unknown {
  if (error instanceof Error && /unsupported startup parameter/.test(error.message) && !error.message.includes('pgbouncer: true')) {
    error.message += ' (behind PgBouncer in transaction pooling, set postgresStore({ pgbouncer: true }): see docs/pgbouncer.md)';
  }
  return error;
}

/**
 * Whether `error` says the database could not be reached (or answered
 * nothing in time), not that a statement failed: no SQLSTATE (a socket or
 * Node error, a timeout), a connection exception (class 08), or the server
 * shutting down (57P).
 */
function unreachable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P');
}

export class Connection {
  readonly #timeout: number;
  readonly #connectionString: string | undefined;
  /** Every connection our pool opened, so close() can cut them when the server never answers. */
  readonly #clients = new Set<PgClient>();
  #pg: PgModule | undefined = undefined;
  #pool: PgPoolLike | undefined;
  readonly #ownsPool: boolean;
  readonly #pgbouncer: boolean;
  readonly #listenConnectionString: string | undefined;
  /** Since when (this process's clock) the database has answered again after it could not be reached; -Infinity: never lost. */
  #reachedAt = Number.NEGATIVE_INFINITY;
  /** The last statement could not reach the database. */
  #lost = false;

  constructor(options: {
    connectionString: string | undefined;
    pool: PgPoolLike | undefined;
    timeout: number;
    pgbouncer: boolean;
    listenConnectionString: string | undefined;
  }) {
    this.#timeout = options.timeout;
    this.#connectionString = options.connectionString;
    this.#pgbouncer = options.pgbouncer;
    this.#listenConnectionString = options.listenConnectionString;
    this.#pool = options.pool;
    this.#ownsPool = options.pool === undefined;
    // A pool of our own, or the caller's, must never crash the process when
    // an idle connection dies (the database restarting): the failed queries
    // reject and the scheduler retries them.
    if (this.#pool !== undefined) this.#pool.on('error', noop);
  }

  get #db(): PgPoolLike {
    if (this.#pool === undefined) throw new Error('The PostgreSQL store is not open: call scheduler.start() first');
    return this.#pool;
  }

  async load(): Promise<PgModule> {
    if (this.#pg === undefined) {
      const module = await loadPeer<PgModule>('pg', 'postgresStore()');
      // pg >= 8.12 has named ESM exports; older versions only a CommonJS default.
      this.#pg = (module as unknown as { default?: PgModule }).default ?? module;
    }
    return this.#pg;
  }

  /** A statement went through: if the database had been lost, it is reached again from now. */
  #answered(): void {
    if (!this.#lost) return;
    this.#lost = false;
    this.#reachedAt = Date.now();
  }

  #failed(error: unknown): unknown {
    if (unreachable(error)) this.#lost = true;
    return hinted(error);
  }

  /**
   * How long (ms) this process must still wait before taking over others'
   * expired leases: a `lease` since it reached the database again after
   * losing it. An outage it saw may have been everyone's (PgBouncer, a
   * proxy or the network down while the server stayed up), and then the
   * owners need that long to renew and report; 0 if it never lost it.
   */
  takeoverWait(lease: number): number {
    if (this.#lost) return lease;
    return Math.max(0, this.#reachedAt + lease - Date.now());
  }

  /** Loads `pg` and, unless the caller gave one, creates the pool (again after close()). */
  async open(): Promise<void> {
    const pg = await this.load();
    this.#pool ??= this.#newPool(pg);
  }

  /**
   * Whether a connection may LISTEN: not through PgBouncer in transaction
   * pooling (a session's LISTEN ends with its transaction there), unless
   * `listenConnectionString` goes around it.
   */
  get canListen(): boolean {
    return !this.#pgbouncer || this.#listenConnectionString !== undefined;
  }

  /** What the listener connects with: `listenConnectionString`, or the pool's own settings. */
  clientConfig(applicationName: string): PgConfig {
    let base: PgConfig;
    if (this.#listenConnectionString !== undefined) base = { connectionString: this.#listenConnectionString };
    else base = this.#ownsPool ? this.#poolConfig() : { ...(this.#db.options as PgConfig) };
    return {
      ...base,
      keepAlive: true,
      connectionTimeoutMillis: base.connectionTimeoutMillis ?? this.#timeout,
      application_name: applicationName,
    };
  }

  /**
   * Every wait on the wire is bounded: the server cancels a statement (or an
   * abandoned transaction) after `timeout`; the client gives up on an answer
   * a little later, which is what notices a server that is frozen or cut off
   * (no TCP reset ever comes). Keepalive finds dead idle connections.
   * PgBouncer refuses these two settings at connect time ("unsupported
   * startup parameter"): behind it, each transaction sets them (SET LOCAL)
   * and a lone statement is bounded by the client's wait alone.
   */
  #poolConfig(): PgConfig {
    const server = this.#pgbouncer ? {} : { statement_timeout: this.#timeout, idle_in_transaction_session_timeout: this.#timeout };
    return {
      connectionString: this.#connectionString,
      max: 10,
      // The connections warm() readied stay open however long the process idles (see there).
      min: WARM_CONNECTIONS,
      connectionTimeoutMillis: this.#timeout,
      query_timeout: this.#timeout + 500,
      ...server,
      keepAlive: true,
      keepAliveInitialDelayMillis: 1_000,
      fallback_application_name: 'taskheap',
    };
  }

  #newPool(pg: PgModule): PgPool {
    const pool = new pg.Pool(this.#poolConfig());
    pool.on('error', noop);
    pool.on('connect', (client) => this.#clients.add(client));
    pool.on('remove', (client) => this.#clients.delete(client));
    return pool;
  }

  /**
   * Runs `fn` in one transaction on one pooled connection; a broken (or
   * timed-out) connection is discarded. `unbounded`: no statement timeout
   * and no idle-in-transaction timeout (migrations: creating an index on a
   * large table, or waiting for another process's migration, takes what it
   * takes).
   */
  async transaction<T>(fn: (client: PgPoolClient) => Promise<T>, unbounded = false): Promise<T> {
    const client = await this.#db.connect().catch((error: unknown) => Promise.reject(this.#failed(error)));
    const query = client.query.bind(client);
    // A pool we were given has no query_timeout of ours: every query gets one.
    const limit = unbounded ? MAX_QUERY_WAIT : this.#timeout + 500;
    (client as { query: unknown }).query = (text: string, values?: unknown[]) => query({ text, values, query_timeout: limit } as never);
    let broken: Error | undefined;
    // A checked-out client has no pool listener: an error between queries must not crash the process.
    const onError = (error: Error) => (broken = error);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      // Unbounded between its statements too: a loaded process slow to send the next one must not
      // have the server end the migration (and the lock other processes wait on) as idle.
      if (unbounded)
        await client.query(
          `SELECT set_config('statement_timeout', '0', true), set_config('idle_in_transaction_session_timeout', '0', true)`,
        );
      else if (this.#pgbouncer && this.#ownsPool) {
        // Local to this transaction: PgBouncer hands the server connection to others after it.
        await client.query(
          `SELECT set_config('statement_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $1, true)`,
          [`${this.#timeout}ms`],
        );
      }
      const result = await fn(client);
      await client.query('COMMIT');
      this.#answered();
      return result;
    } catch (error) {
      this.#failed(error);
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

  /**
   * One statement on any pooled connection; rows are typed by the caller, who knows the statement.
   * `prepared`: a named statement, parsed once per connection (prepared.ts), unless behind PgBouncer.
   */
  query<R = Record<string, unknown>>(text: string, values: unknown[] = [], prepared = false): Promise<PgResult<R>> {
    const name = prepared && !this.#pgbouncer ? statementName(text) : undefined;
    const query = { text, values, query_timeout: this.#timeout + 500, ...(name === undefined ? {} : { name }) };
    return (this.#db.query(query) as Promise<PgResult<R>>).then(
      (result) => {
        this.#answered();
        return result;
      },
      (error: unknown) => Promise.reject(this.#failed(error)),
    );
  }

  /**
   * Readies `count` pooled connections for the hot path: on each, `ready`
   * runs the statements to parse and plan (named, as query() runs them) in a
   * transaction that is rolled back, their generic plan forced so that it
   * counts as none of the five custom plans PostgreSQL weighs it against. A
   * connection's first claim otherwise pays for loading its catalog caches
   * and its first plan, about 30 ms, and work due at once pays that as
   * lateness, once per connection the first burst opens. Our own pool keeps
   * that many connections open (`min`). Only our own pool: a caller's may be
   * smaller than `count` or busy (holding some while waiting for the rest
   * could wait forever), and how long its connections live is the caller's
   * choice. Behind PgBouncer there are no named statements, and its server
   * connections are not ours: nothing to do there either.
   */
  async warm(ready: (query: WarmQuery) => Promise<void>, count: number): Promise<void> {
    if (this.#pgbouncer || !this.#ownsPool) return;
    const clients = await Promise.all(Array.from({ length: count }, () => this.#db.connect().catch(() => undefined)));
    await Promise.all(
      clients.map(async (client) => {
        if (client === undefined) return;
        let broken: Error | undefined;
        // A checked-out client has no pool listener: an error between queries must not crash the process.
        const onError = (error: Error) => (broken = error);
        client.on('error', onError);
        try {
          await client.query('BEGIN');
          await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
          await ready(async (text, values) => {
            const result = (await client.query({
              name: statementName(text),
              text,
              values,
              query_timeout: this.#timeout + 500,
            } as never)) as PgResult;
            return result.rows as Record<string, unknown>[];
          });
          await client.query('ROLLBACK');
        } catch (error) {
          // Best effort: a failed warm-up costs only the first claims' speed. A connection left mid-transaction is dropped.
          broken ??= error as Error;
        } finally {
          client.removeListener('error', onError);
          client.release(broken ?? false);
        }
      }),
    );
  }

  /** Ends our own pool (waiting at most `timeout`); the caller's pool is left open, for them to end. */
  async close(): Promise<void> {
    const pool = this.#pool;
    if (pool === undefined) return;
    if (this.#ownsPool) {
      this.#pool = undefined;
      await bounded((pool as PgPool).end().catch(noop), [...this.#clients], this.#timeout);
      this.#clients.clear();
    } else {
      pool.removeListener('error', noop);
    }
  }
}
