// One PostgreSQL server for the whole run (vitest globalSetup): a test file
// gets a database of its own on it (use-postgres.ts), so the run pays for one
// initdb and one start instead of one per file, and the takeover grace (no
// lease is taken over before the server has been up for a lease) is waited
// for at most once per run. Files that stop, restart or freeze their server
// start one of their own (`usePostgres(..., { own: true })`).
// A server that cannot start fails the files that need it (use-postgres.ts
// throws the message), never the run: a run of files without PostgreSQL
// needs none.
import type { TestProject } from 'vitest/node';
import { startPgServer, type PgServer } from './durable/pg-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's shared server on 127.0.0.1 (its port, a database to connect to for CREATE DATABASE), or why it could not start. */
    sharedPostgres: { port: number; database: string } | { error: string };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: PgServer | undefined;
  try {
    // Generic plans for prepared statements from their first run. On the fresh, empty schemas
    // of the tests PostgreSQL never switches the claims to their generic plan (on a table with
    // rows it does after five runs): it plans every claim again, 6 ms for a warm connection and
    // up to 46 ms for a cold one: 175 s of planning in a run (pg_stat_statements, track_planning),
    // and the run's CPU went from 525 to 475 s with this. A plan changes how a statement runs,
    // not what it does; the files with a
    // server of their own (postgres.test.ts, postgres-delivery.test.ts) and the benches keep
    // PostgreSQL's default, so the custom plans are run too.
    server = await startPgServer({ database: 'shared', settings: ['-c max_connections=400', '-c plan_cache_mode=force_generic_plan'] });
    project.provide('sharedPostgres', { port: server.port, database: server.database });
  } catch (error) {
    project.provide('sharedPostgres', { error: error instanceof Error ? error.message : String(error) });
  }
  return async () => {
    await server?.destroy();
  };
}
