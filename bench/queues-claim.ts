/**
 * `npx tsx bench/queues-claim.ts`: what a PostgreSQL claim costs with 0 and
 * 100,000 due tasks blocked in a paused queue, in a queue at its global
 * concurrency, and in a queue whose rate bucket is empty (issue 22: a claim
 * must cost about the same either way). Each
 * figure is the median of 20 claims of 10 tasks (claimed, then handed back),
 * on a throwaway server; the plan of one claim is printed with EXPLAIN ANALYZE.
 */
import pg from 'pg';
import { advanceJob } from '../src/durable/advance-job.js';
import { statements } from '../src/durable/postgres/store.js';
import { postgresStore } from '../src/postgres.js';
import { startPgServer } from '../test/durable/pg-server.js';

const BLOCKED = 100_000;
const server = await startPgServer();
const admin = new pg.Pool({ connectionString: server.url, max: 2 });
try {
  const rows: string[] = [];
  for (const blocked of ['none', 'paused', 'full', 'rate-spent'] as const) {
    const schema = `bench_${blocked.replace('-', '_')}`;
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    await admin.query(
      `INSERT INTO ${schema}.taskheap_tasks (name, payload, run_at) SELECT 'job', '{}', now() - interval '1 hour' FROM generate_series(1, 1000)`,
    );
    if (blocked !== 'none') {
      await admin.query(
        `INSERT INTO ${schema}.taskheap_tasks (name, payload, run_at, queue)
        SELECT 'job', '{}', now() - interval '2 hours', 'blocked' FROM generate_series(1, $1)`,
        [BLOCKED],
      );
      if (blocked === 'paused') await store.setQueue('blocked', { paused: true });
      else {
        if (blocked === 'full') await store.setQueue('blocked', { globalConcurrency: 1 });
        else await store.setQueue('blocked', { rate: { limit: 1, interval: 3_600_000 } });
        await store.claim({ owner: 'holder', now: Date.now(), lease: 60_000, limit: 1, advance: advanceJob }); // takes its one slot, or its one token
      }
    }
    await admin.query(`ANALYZE ${schema}.taskheap_tasks`);
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      const claimed = await store.claim({ owner: 'bench', now: Date.now(), lease: 60_000, limit: 10, advance: advanceJob });
      times.push(performance.now() - started);
      if (claimed.length !== 10 || claimed.some((c) => JSON.parse(c.options).queue === 'blocked'))
        throw new Error(`claimed ${claimed.length}`);
      await store.settle(
        'bench',
        claimed.map((c) => ({ id: c.id, kind: 'release' as const })),
        Date.now(),
      );
    }
    times.sort((a, b) => a - b);
    rows.push(
      `| ${blocked === 'none' ? 'none blocked' : `${BLOCKED.toLocaleString('en')} due in a ${blocked} queue`} | ${times[10]!.toFixed(2)} ms |`,
    );
    if (process.argv.includes('--explain') && blocked !== 'none') {
      const sql = statements(schema).claimUnlessJobsDue;
      await admin.query('SET jit = off');
      const { rows: plan } = await admin.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, [
        10,
        'explain',
        60_000,
        1,
        'x',
        null,
        false,
        10,
        null,
        null,
        0, // no takeover wait
        null, // no lease announcement
      ]);
      console.log(plan.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n'));
      await admin.query(
        `UPDATE ${schema}.taskheap_tasks SET state = 'waiting', locked_by = NULL, attempts = 0 WHERE locked_by = 'explain'`,
      );
    }
    await store.close();
  }
  console.log('| blocked tasks | claim of 10 (median) |\n|---|---|');
  console.log(rows.join('\n'));
} finally {
  await admin.end();
  await server.destroy();
}
