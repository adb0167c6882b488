// A throwaway PostgreSQL server for a bench that counts what the server does
// (pg_stat_statements: top-level statements, planning and execution), with
// an admin pool whose own statements say so (`MINE`) and are left out.
import pg from 'pg';
import { startPgServer, type PgServer } from '../../test/durable/pg-server.js';

/** Marks the bench's own statements, which the counts leave out. */
export const MINE = '/* bench */';

export interface ProfiledPg {
  server: PgServer;
  admin: pg.Pool;
  /** Top-level statements of this database since the last reset, their plans, and ms the server spent planning and executing them. */
  serverWork(): Promise<{ calls: number; ms: number; plans: number }>;
  resetWork(): Promise<unknown>;
  close(): Promise<void>;
}

export async function profiledPg(database: string): Promise<ProfiledPg> {
  const server = await startPgServer({
    database,
    settings: [
      '-c shared_preload_libraries=pg_stat_statements',
      '-c pg_stat_statements.track=top',
      '-c pg_stat_statements.track_planning=on',
    ],
  });
  const admin = new pg.Pool({ connectionString: server.url, max: 2 });
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const dbid = (await admin.query<{ oid: number }>('SELECT oid FROM pg_database WHERE datname = current_database()')).rows[0]!.oid;
  return {
    server,
    admin,
    async serverWork() {
      const { rows } = await admin.query<{ calls: number; ms: number; plans: number }>(
        `${MINE} SELECT COALESCE(sum(calls), 0)::int AS calls, COALESCE(sum(plans), 0)::int AS plans,
          COALESCE(sum(total_exec_time + total_plan_time), 0)::float8 AS ms FROM pg_stat_statements
          WHERE dbid = $1 AND query NOT LIKE '%${MINE}%' AND query NOT LIKE '%pg_stat_statements_reset%'`,
        [dbid],
      );
      return rows[0]!;
    },
    resetWork: () => admin.query(`${MINE} SELECT pg_stat_statements_reset()`),
    async close() {
      await admin.end();
      await server.destroy();
    },
  };
}
