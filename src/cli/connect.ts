// The command line's connection: a durable client (no scheduler, no worker:
// it claims and runs nothing) on the store named by --sqlite or
// --database-url / DATABASE_URL, with the checks that turn a bad URL, an
// unreachable server or a schema not migrated into one clear line.
import { existsSync } from 'node:fs';
import { loadPeer } from '../core/peer.js';
import { storeClient, type DurableClient } from '../durable/client.js';
import type { Store } from '../store.js';
import { postgresStore, type PgPoolLike } from '../postgres.js';
import { sqliteStore } from '../sqlite.js';
import type { Invocation } from './args.js';
import { CliError, EXIT } from './errors.js';

/** What a command works with. */
export interface Connection {
  client: DurableClient;
  store: Store;
  /** Closes the store and the pool this opened. */
  close(): Promise<void>;
}

/** The part of `pg` the command line uses. */
type PgPool = PgPoolLike & {
  on(event: 'error', listener: (error: Error) => void): unknown;
  end(): Promise<void>;
};
type PgModule = { Pool: new (config: Record<string, unknown>) => PgPool };

/** Opens the store the options name; with `migrate`, creates or upgrades its schema, else requires it migrated. */
export async function connect(
  options: Invocation['options'],
  env: Record<string, string | undefined>,
  migrate: boolean,
): Promise<Connection> {
  const url = options['database-url'] ?? (options.sqlite === undefined ? env.DATABASE_URL : undefined);
  if (options.sqlite !== undefined && options['database-url'] !== undefined)
    throw new CliError('Pass either --sqlite or --database-url, not both', EXIT.usage);
  if (options.sqlite !== undefined) {
    if (options.schema !== undefined) throw new CliError('--schema is for PostgreSQL; a SQLite file has no schemas', EXIT.usage);
    return openSqlite(options.sqlite, migrate);
  }
  if (url === undefined || url === '')
    throw new CliError('No database: pass --database-url <postgres://...> or --sqlite <file>, or set DATABASE_URL', EXIT.usage);
  return openPostgres(url, options.schema, migrate);
}

async function openSqlite(path: string, migrate: boolean): Promise<Connection> {
  if (path === '') throw new CliError('Expected --sqlite to be a file path, got ""', EXIT.usage);
  if (!migrate && !existsSync(path))
    throw new CliError(`No SQLite database at ${JSON.stringify(path)}: create it with \`taskheap migrate --sqlite ${path}\``);
  let store: Store;
  try {
    store = sqliteStore(path);
  } catch (error) {
    throw new CliError((error as Error).message, EXIT.usage);
  }
  const client = storeClient(store);
  try {
    await client.ready();
  } catch (error) {
    await store.close().catch(() => {});
    throw new CliError(`Cannot open the SQLite database ${JSON.stringify(path)}: ${(error as Error).message}`);
  }
  return { client, store, close: () => store.close() };
}

/** The URL without its password, to print. */
function redact(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  return copy.href;
}

async function openPostgres(text: string, schema: string | undefined, migrate: boolean): Promise<Connection> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(
      `Expected the database URL to be a URL like postgres://user:password@host:5432/db, got ${JSON.stringify(text)}`,
      EXIT.usage,
    );
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')
    throw new CliError(`Expected a postgres:// or postgresql:// database URL, got ${JSON.stringify(redact(url))}`, EXIT.usage);
  if (schema === '') throw new CliError('Expected --schema to be a schema name, got ""', EXIT.usage);
  const loaded = await loadPeer<PgModule | { default: PgModule }>('pg', 'taskheap --database-url');
  const pg = 'default' in loaded ? loaded.default : loaded;
  const pool = new pg.Pool({ connectionString: text, max: 2, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => {}); // an idle connection dropped: the next query says so
  const where = `${url.host}${url.pathname}`;
  let found: boolean;
  try {
    const { rows } = await pool.query({
      text: "SELECT to_regclass(coalesce(quote_ident($1::text) || '.', '') || 'taskheap_tasks') IS NOT NULL AS found",
      values: [schema ?? null],
    });
    found = (rows[0] as { found?: unknown } | undefined)?.found === true;
  } catch (error) {
    await pool.end().catch(() => {});
    const code = (error as { code?: unknown }).code;
    throw new CliError(`Cannot reach PostgreSQL at ${where}${typeof code === 'string' ? ` (${code})` : ''}: ${(error as Error).message}`);
  }
  if (!found && !migrate) {
    await pool.end().catch(() => {});
    const flags = `--database-url <url>${schema === undefined ? '' : ` --schema ${schema}`}`;
    throw new CliError(
      `No taskheap tables in ${schema === undefined ? 'the search_path' : `schema ${JSON.stringify(schema)}`} of ${where}: the schema is not migrated; run \`taskheap migrate ${flags}\``,
    );
  }
  let store: Store;
  try {
    store = postgresStore({ pool, ...(schema === undefined ? {} : { schema }) });
  } catch (error) {
    await pool.end().catch(() => {});
    throw new CliError((error as Error).message, EXIT.usage);
  }
  const client = storeClient(store);
  const close = async () => {
    await store.close().catch(() => {});
    await pool.end().catch(() => {});
  };
  try {
    await client.ready();
  } catch (error) {
    await close();
    throw new CliError(`Cannot ${migrate ? 'migrate' : 'open'} the taskheap schema at ${where}: ${(error as Error).message}`);
  }
  return { client, store, close };
}
