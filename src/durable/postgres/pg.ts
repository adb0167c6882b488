// The part of the `pg` package taskheap uses, as structural types. They are
// ours on purpose: the published .d.ts files must not import `pg`'s types,
// or every user of taskheap/postgres would need `@types/pg` (TS7016 with
// `skipLibCheck: false`, and the pool option silently becoming `any` with
// `skipLibCheck: true`); see `DateTimeLike` for luxon. A `pg.Pool` matches
// `PgPoolLike` (test/durable/postgres/pg-types.test.ts checks it against @types/pg);
// at run time `pg` is still loaded lazily (connection.ts).

/** What a query resolves to. */
export interface PgResult<R = unknown> {
  /** The rows the statement returned. */
  rows: R[];
  /** How many rows it returned or changed (null for statements that say nothing). */
  rowCount: number | null;
}

/** A query with its own bound on the wait for its answer (pg's `query_timeout`). */
export interface PgQuery {
  /** The SQL, with `$1`, `$2`… for the values. */
  text: string;
  /** The values of `$1`, `$2`… */
  values?: unknown[];
  /** How long to wait for the answer, ms. */
  query_timeout?: number;
  /** A prepared statement's name: parsed once per connection, then run by name. */
  name?: string;
}

/** A connection checked out of a pool. */
export interface PgPoolClient {
  /** `R`: the rows' type, as the caller knows it from the statement. */
  // biome-ignore lint/suspicious/noExplicitAny: as pg types it: the rows are what the caller's statement returns
  query<R = any>(text: string, values?: unknown[]): Promise<PgResult<R>>;
  /** Listens for the connection's errors (a connection lost while checked out). */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** Stops listening. */
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
  /** Back to the pool; an error (or true) discards the connection instead. */
  release(error?: Error | boolean): void;
}

/**
 * The part of a `pg.Pool` taskheap uses: a `pg.Pool` (or anything shaped
 * like one) can be given to `postgresStore()`.
 */
export interface PgPoolLike {
  /** Checks a connection out, for a transaction. */
  connect(): Promise<PgPoolClient>;
  /** Runs one statement on any connection of the pool. */
  query(query: PgQuery): Promise<PgResult>;
  /** Listens for errors of idle connections (a server restart), which would otherwise crash the process. */
  on(event: 'error', listener: (error: Error) => void): unknown;
  /** Stops listening (on `close()`: a caller's pool outlives the store). */
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
  /** The pool's settings, which the listening connection copies. */
  readonly options?: object;
}

/** A pool the store creates, and ends on `close()`. */
export interface PgPool extends PgPoolLike {
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'connect' | 'remove', listener: (client: PgClient) => void): unknown;
  end(): Promise<void>;
}

/** A notification of LISTEN/NOTIFY. */
export interface PgNotification {
  channel: string;
  payload?: string | undefined;
}

/** A connection of its own: the store's listener (and, inside a pool, every pooled one). */
export interface PgClient {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'notification', listener: (message: PgNotification) => void): unknown;
}

/** The settings taskheap gives a pool or a client it creates (pg's PoolConfig / ClientConfig). */
export interface PgConfig {
  connectionString?: string | undefined;
  max?: number;
  /** Connections the pool keeps open however long they idle (pg-pool 3.7+). */
  min?: number;
  connectionTimeoutMillis?: number;
  query_timeout?: number;
  statement_timeout?: number;
  idle_in_transaction_session_timeout?: number;
  keepAlive?: boolean;
  keepAliveInitialDelayMillis?: number;
  application_name?: string;
  fallback_application_name?: string;
}

/** The `pg` module, as far as taskheap uses it. */
export interface PgModule {
  Pool: new (config: PgConfig) => PgPool;
  Client: new (config: PgConfig) => PgClient;
}
