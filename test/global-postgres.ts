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
    server = await startPgServer({ database: 'shared', settings: ['-c max_connections=400'] });
    project.provide('sharedPostgres', { port: server.port, database: server.database });
  } catch (error) {
    project.provide('sharedPostgres', { error: error instanceof Error ? error.message : String(error) });
  }
  return async () => {
    await server?.destroy();
  };
}
