// A PostgreSQL database per test file (or describe block), with an admin pool
// for the tests' own queries. By default the database is created on the run's
// shared server (test/global-postgres.ts) and dropped after the file; a file
// that stops, restarts or freezes its server asks for one of its own
// (`own: true`): started before its tests, stopped after them (thawed first,
// should a test have left it frozen).
import pg from 'pg';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';
import { startPgServer, type PgServer } from './pg-server.js';

/** Databases this process created on the shared server, so each file's name is new. */
let databases = 0;

/** Registers the hooks; `assign` receives the server and the admin pool once they are up. */
export function usePostgres(
  assign: (server: PgServer, admin: pg.Pool) => void,
  options: { adminConnections?: number; own?: boolean } = {},
): void {
  let server: PgServer | undefined;
  let admin: pg.Pool | undefined;
  beforeAll(async () => {
    // No skipping: without PostgreSQL this fails with startPgServer's message.
    server = options.own === true ? await startPgServer() : await sharedDatabase();
    admin = new pg.Pool({ connectionString: server.url, max: options.adminConnections ?? 2 });
    admin.on('error', () => {});
    assign(server, admin);
  }, 120_000);
  afterAll(async () => {
    try {
      server?.thaw();
    } catch {
      // not running, or shared
    }
    await admin?.end().catch(() => {});
    await server?.destroy();
  }, 60_000);
}

/** A new database on the run's shared server, as a PgServer whose server-wide controls refuse (ask for `own: true`). */
export async function sharedDatabase(): Promise<PgServer> {
  const shared = inject('sharedPostgres');
  if ('error' in shared) throw new Error(shared.error);
  const host = '127.0.0.1';
  const { port } = shared;
  const database = `file_${process.pid}_${++databases}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ host, port, user: 'postgres', database: shared.database });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${database}`);
  const refuse = (): never => {
    throw new Error(
      'This is a database on the run’s shared PostgreSQL server: usePostgres(..., { own: true }) to stop, start or freeze one',
    );
  };
  return {
    host,
    port,
    database,
    url: `postgres://postgres@${host}:${port}/${database}`,
    dataDir: '',
    stop: async () => refuse(),
    start: async () => refuse(),
    freeze: refuse,
    thaw: refuse,
    pids: refuse,
    log: () => '',
    // Sessions a test left behind (a killed child's) must not keep the database alive.
    destroy: () => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
  };
}

/** Names schemas no other test of the run uses (`<prefix><n>_<pid>`): each test gets one of its own in the one database. */
export function schemaNamer(prefix: string): () => string {
  let count = 0;
  return () => `${prefix}${++count}_${process.pid}`;
}

/** An array of what tests open (stores, schedulers), each closed after its test with `close`; its errors are ignored. */
export function closedAfterEach<T>(close: (item: T) => Promise<unknown>): T[] {
  const opened: T[] = [];
  afterEach(async () => {
    for (const item of opened.splice(0)) await close(item).catch(() => {});
  });
  return opened;
}
