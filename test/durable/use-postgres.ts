// One throwaway PostgreSQL server per test file (or describe block), with an
// admin pool for the tests' own queries: started before the tests, stopped
// after them (thawed first, should a test have left it frozen).
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { startPgServer, type PgServer } from './pg-server.js';

/** Registers the hooks; `assign` receives the server and the admin pool once they are up. */
export function usePostgres(assign: (server: PgServer, admin: pg.Pool) => void, options: { adminConnections?: number } = {}): void {
  let server: PgServer | undefined;
  let admin: pg.Pool | undefined;
  beforeAll(async () => {
    // No skipping: without PostgreSQL this fails with startPgServer's message (CI installs it).
    server = await startPgServer();
    admin = new pg.Pool({ connectionString: server.url, max: options.adminConnections ?? 2 });
    admin.on('error', () => {});
    assign(server, admin);
  }, 120_000);
  afterAll(async () => {
    try {
      server?.thaw();
    } catch {
      // not running
    }
    await admin?.end().catch(() => {});
    await server?.destroy();
  }, 60_000);
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
