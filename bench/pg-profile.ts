/**
 * `npx tsx bench/pg-profile.ts [n=20000] [--settings='-c x=y,...']`
 *
 * Where taskheap's PostgreSQL CPU per job goes while processing no-op jobs
 * (issue 27): one worker process (this one) with the peer bench's settings
 * (16 workers, prefetch 500) works through `n` jobs added in bulk, on a
 * throwaway server with pg_stat_statements. Prints CPU per 1,000 jobs (every
 * PostgreSQL process from /proc, and this process), the statements by total
 * execution time, the row and index traffic of taskheap_tasks (HOT updates,
 * index entries per job) and WAL per job, then what the retention sweep of
 * the finished rows costs (PostgreSQL CPU per 1,000 rows); `--vacuum` analyzes the table
 * before the run (the bench does not); `--drop-index=a,b` drops those
 * indexes first (what one costs: compare with a run that keeps it); `--schedulers=3` claims with
 * three schedulers (three owners, three pools) in this process; `--log` prints the server's log
 * (with auto_explain in `--settings`, the plans). `--trickle=K`: the `n` jobs are
 * added as finished rows, then K jobs run one at a time, each added once the last
 * has ended (a quiet app's: a claim finds one task); `--limited`: their queue has a
 * concurrency limit (the full claim runs); `--retention=0`: succeeded tasks deleted as
 * they end (the peer bench's setting). On a loaded machine, read the CPU and
 * the counts, not the wall clock.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { Scheduler } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { startPgServer } from '../test/durable/pg-server.js';
import { addNoopTasks } from './lib/noop-tasks.js';
import { serverCpuMs } from './peers/cpu.js';

const N = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 20_000);
const extra =
  process.argv
    .find((a) => a.startsWith('--settings='))
    ?.slice('--settings='.length)
    .split(',') ?? [];
const server = await startPgServer({
  database: 'profile',
  settings: ['-c shared_preload_libraries=pg_stat_statements', '-c pg_stat_statements.track=all', '-c track_io_timing=on', ...extra],
});
const admin = new pg.Client({ connectionString: server.url });
await admin.connect();
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
try {
  const store = postgresStore({ connectionString: server.url, prefetch: 500 });
  await store.migrate();
  await addNoopTasks(store, N);
  const trickle = Number(process.argv.find((a) => a.startsWith('--trickle='))?.slice('--trickle='.length) ?? 0);
  if (trickle > 0) {
    await admin.query(`UPDATE taskheap_tasks SET state = 'succeeded'`);
    await admin.query('VACUUM ANALYZE taskheap_tasks');
  }
  const queues: Record<string, { concurrency: number }> = process.argv.includes('--limited') ? { default: { concurrency: 16 } } : {};
  const jobs = trickle > 0 ? trickle : N;
  // As the peer bench runs it, the table fresh (autovacuum may analyze it meanwhile); `--vacuum`: analyzed first.
  if (process.argv.includes('--vacuum')) await admin.query('VACUUM ANALYZE taskheap_tasks');
  const dropped =
    process.argv
      .find((a) => a.startsWith('--drop-index='))
      ?.slice('--drop-index='.length)
      .split(',') ?? [];
  for (const index of dropped) await admin.query(`DROP INDEX ${pg.escapeIdentifier(index)}`);
  await admin.query('SELECT pg_stat_statements_reset(), pg_stat_reset()');
  const wal0 = (await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn')).rows[0]!.lsn;
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  // `--schedulers=3`: that many schedulers, each with a store (a pool) of its own, in this process:
  // three owners claiming beside each other, as three worker processes do (their Node CPU is summed).
  const count = Number(process.argv.find((a) => a.startsWith('--schedulers='))?.slice('--schedulers='.length) ?? 1);
  // `--retention=0`: succeeded tasks kept that long (0: deleted as they end, as the peer bench runs it).
  const kept = process.argv.find((a) => a.startsWith('--retention='))?.slice('--retention='.length);
  const retention = kept === undefined ? undefined : { succeeded: Number(kept) };
  const schedulers = Array.from({ length: count }, (_, i) => {
    const own = i === 0 ? store : postgresStore({ connectionString: server.url, prefetch: 500 });
    const scheduler = new Scheduler({
      store: own,
      workers: 16,
      queues,
      retention,
      onError: (error) => process.stderr.write(`${String(error)}\n`),
    });
    scheduler.define('noop', () => {
      if (++done === jobs) finish();
    });
    return scheduler;
  });
  const cpu0 = serverCpuMs(server.pids());
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(schedulers.map((scheduler) => scheduler.start()));
  for (let i = 0; i < trickle; i++) await schedulers[0]!.waitFor((await schedulers[0]!.schedule(Date.now(), 'noop')).id);
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(schedulers.map((scheduler) => scheduler.close()));
  const node = process.cpuUsage(node0);
  const pgCpu = serverCpuMs(server.pids()) - cpu0;
  const per1k = (x: number) => ((x * 1000) / jobs).toFixed(1);
  console.log(`${jobs} jobs in ${seconds.toFixed(2)} s (${Math.round(jobs / seconds)} jobs/s under the current load)`);
  console.log(`CPU per 1,000 jobs: PostgreSQL ${per1k(pgCpu)} ms, Node ${per1k((node.user + node.system) / 1000)} ms`);
  const wal = (await admin.query<{ b: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS b`, [wal0])).rows[0]!.b;
  console.log(`WAL per job: ${(Number(wal) / jobs).toFixed(0)} bytes`);
  await new Promise((resolve) => setTimeout(resolve, 700)); // stats reach the views
  const statements =
    await admin.query(`SELECT calls, plans, round(total_exec_time::numeric, 1) AS exec_ms, round(total_plan_time::numeric, 1) AS plan_ms,
      rows, shared_blks_hit + shared_blks_read AS blocks, wal_records, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'profile') ORDER BY total_exec_time DESC LIMIT 8`);
  console.table(statements.rows);
  const table = await admin.query(`SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup, autovacuum_count
    FROM pg_stat_user_tables WHERE relname = 'taskheap_tasks'`);
  console.table(table.rows);
  const indexes = await admin.query(`SELECT indexrelname AS index, idx_scan, idx_tup_read,
      pg_relation_size(indexrelid) / 8192 AS pages FROM pg_stat_user_indexes WHERE relname = 'taskheap_tasks' ORDER BY indexrelname`);
  console.table(indexes.rows);
  // What the retention sweep then pays to delete the finished rows, in its batches (as with retention 0).
  const sweeper = postgresStore({ connectionString: server.url });
  await sweeper.migrate();
  const sweep0 = serverCpuMs(server.pids());
  let swept = 0;
  for (let batch = 500; batch >= 500; swept += batch) batch = await sweeper.prune(0, 0, 500);
  const sweepCpu = serverCpuMs(server.pids()) - sweep0;
  const perRow = swept === 0 ? 'nothing left to sweep' : `PostgreSQL CPU ${((sweepCpu * 1000) / swept).toFixed(1)} ms per 1,000 rows`;
  console.log(`The retention sweep after it: ${swept} rows, ${perRow}`);
  await sweeper.close();
  // With --settings=-c session_preload_libraries=auto_explain,-c auto_explain.log_min_duration=0,...: the plans.
  if (process.argv.includes('--log')) console.log(readFileSync(join(dirname(server.dataDir), 'server.log'), 'utf8'));
} finally {
  await admin.end();
  await server.destroy();
}
