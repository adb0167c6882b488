// The store conformance suite (test/durable/conformance/) on PostgreSQL, for
// the files that run it (store-postgres.test.ts and
// store-postgres-limits.test.ts, each half of the scenario groups: they run in
// real time, 135 s in one file under a loaded run, the longest file by far).
// One database on the run's shared server per file, a fresh schema per test.
// Due times are the server's, so scenarios run in real time here (short
// delays, bounded waits).
import { POSTGRES_CAPABILITIES } from '../../../src/durable/postgres/store.js';
import type pg from 'pg';
import { postgresStore } from '../../../src/postgres.js';
import { ALL_SCENARIOS, storeConformance, type ScenarioGroup } from './index.js';
import { STORE_CAPS } from './backend.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';

/** The first file's groups; the second runs every other, so a new group runs somewhere. */
const FIRST: readonly ScenarioGroup[] = ['tasks', 'batching', 'claims', 'serial', 'queueRates'];

/** Runs half of the scenario groups on PostgreSQL: the first (FIRST) or the second (every other). */
export function postgresConformance(half: 1 | 2): void {
  const parts = half === 1 ? FIRST : ALL_SCENARIOS.filter((part) => !FIRST.includes(part));
  let server: PgServer;
  let admin: pg.Pool;

  usePostgres((started, pool) => {
    server = started;
    admin = pool;
  });

  const freshSchema = schemaNamer('c');

  storeConformance(
    {
      name: 'postgres',
      caps: {
        ...STORE_CAPS,
        // What the store says it can do (clockDriven, multiProcess, notify, transactionsWithClient), as the scheduler reads it.
        ...POSTGRES_CAPABILITIES,
      },
      async fresh() {
        const schema = freshSchema();
        const q = (sql: string) => sql.replaceAll('{s}', `"${schema}".`);
        return {
          store: (options = {}) => postgresStore({ connectionString: server.url, schema, timeout: 5_000, ...options }),
          async ownerDies(store) {
            await store.close();
            // Its leases run out: the next claim, anywhere, takes them over, once the server has
            // been up for the claim's lease (the scenarios claim with 30 s): no lease ran out in a restart.
            // Up since the first claim on it in this schema (taskheap_meta): as if that was long ago.
            await admin.query(q(`UPDATE {s}taskheap_tasks SET locked_until = now() - interval '1 second' WHERE state = 'running'`));
            await admin.query(q(`UPDATE {s}taskheap_meta SET server_seen = server_seen - interval '1 hour'`));
            await admin.query(`SELECT pg_sleep(GREATEST(0, 31 - extract(epoch from now() - pg_postmaster_start_time())))`);
          },
          async writeNewerSchema(version) {
            await admin.query(
              q(
                `CREATE SCHEMA "${schema}"; CREATE TABLE {s}taskheap_meta (version integer NOT NULL); INSERT INTO {s}taskheap_meta VALUES (${version})`,
              ),
            );
          },
          async tables() {
            const { rows } = await admin.query<{ table_name: string }>(
              `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
              [schema],
            );
            return rows.map((row) => row.table_name);
          },
          async refuseLongPayloads() {
            const store = postgresStore({ connectionString: server.url, schema });
            await store.migrate();
            await store.close();
            await admin.query(q(`ALTER TABLE {s}taskheap_tasks ADD CONSTRAINT short_payload CHECK (length(payload) < 20)`));
          },
          connect: () => admin.connect(),
          peek: async (sql) => (await admin.query(q(sql))).rows as Record<string, unknown>[],
        };
      },
    },
    parts,
  );
}
