/**
 * `npx tsx bench/waiters.ts [n=10000] [--seconds=60] [--poll=5000]`
 *
 * What waiting costs on PostgreSQL: this process (a producer, not started)
 * adds `n` tasks due in an hour and calls `waitFor()` on every one, on a
 * throwaway server with pg_stat_statements. It measures for `--seconds`
 * twice: before anybody waits (the control: what the process costs idle,
 * its store open), and once every waiter has had its first look, each time
 * after a full garbage collection. Each window: this process's CPU
 * (process.cpuUsage, as a share of one core), the statements it sent per
 * second (those of its own database role in pg_stat_statements, LISTEN
 * included) and the server's CPU (every PostgreSQL process, from /proc;
 * autovacuum off, the table vacuumed once first). The default window of a
 * minute holds one safety sweep. The waiters' first looks are counted
 * apart (statements, and this process's CPU). Then one of the tasks is made
 * due now and a worker scheduler runs it: how long until its waiter
 * resolves (claim, run, settle and announcement included). `--poll` is the
 * waiting store's `poll` option. On a loaded machine read the statements,
 * not the latency.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import pg from 'pg';
import { Scheduler } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { startPgServer } from '../test/durable/pg-server.js';
import { serverCpuMs } from './peers/cpu.js';

const N = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 10_000);
const option = (name: string, fallback: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const SECONDS = option('seconds', 60);
const POLL = option('poll', 5_000);
// A full collection before each window: otherwise V8 collects the first looks' garbage
// (some 50 MB) once, 30-40 s later, inside the window (a third of a second of CPU).
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const server = await startPgServer({
  database: 'waiters',
  // No autovacuum (the table is vacuumed once, below): its workers, started every few seconds, would be most of the server's CPU.
  settings: ['-c shared_preload_libraries=pg_stat_statements', '-c pg_stat_statements.track=all', '-c autovacuum=off'],
});
const admin = new pg.Client({ connectionString: server.url });
await admin.connect();
try {
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  // The waiting process connects as a role of its own: its statements are that role's.
  await admin.query('CREATE ROLE waiter LOGIN SUPERUSER');
  const waiterUrl = `postgres://waiter@${server.host}:${server.port}/${server.database}`;
  const statements = async () =>
    Number(
      (
        await admin.query<{ n: string | null }>(
          `SELECT sum(calls) AS n FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = 'waiter')`,
        )
      ).rows[0]!.n ?? 0,
    );

  const errors: unknown[] = [];
  const waiting = new Scheduler({ store: postgresStore({ connectionString: waiterUrl, poll: POLL }), onError: (e) => errors.push(e) });
  await waiting.migrate();
  const hour = Date.now() + 3_600_000;
  const tasks: { id: number }[] = [];
  for (let i = 0; i < N; i += 1_000) {
    const items = Array.from({ length: Math.min(1_000, N - i) }, (_, k) => ({ when: hour, name: 'later', key: `w:${i + k}` }));
    tasks.push(...(await waiting.scheduleMany(items)));
  }
  await admin.query('VACUUM ANALYZE taskheap_tasks');
  /** This process's CPU, its statements and the server's CPU over the next SECONDS (a share of one core; per second). */
  const measure = async () => {
    // The pool's idle connections beyond its minimum close after 10 s: a backend that ends during the window
    // would count all its CPU there (its parent's reaped-children time), first looks included.
    await sleep(11_000);
    gc();
    await sleep(1_000);
    const s0 = await statements();
    const cpu0 = process.cpuUsage();
    const server0 = serverCpuMs(server.pids());
    const t0 = performance.now();
    await sleep(SECONDS * 1_000);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const serverMs = serverCpuMs(server.pids()) - server0;
    const sent = (await statements()) - s0;
    const percent = (x: number) => `${((100 * x) / ms).toFixed(2)} %`;
    return {
      'this process CPU (of a core)': percent((cpu.user + cpu.system) / 1_000),
      'its statements / s': ((1_000 * sent) / ms).toFixed(2),
      'server CPU (of a core)': percent(serverMs),
    };
  };
  // The control: the same process, its store open, nobody waiting.
  const idle = await measure();
  const before = await statements();
  const looks0 = process.cpuUsage();
  const waits = tasks.map((task) => waiting.waitFor(task.id));
  for (const wait of waits) wait.catch(() => {});
  // The first looks: at least one read per 1,000 waiters (one each, before they were read together);
  // over once the count has stood still for a second.
  let looked = 0;
  for (let still = 0; still < 5; await sleep(200)) {
    const now = (await statements()) - before;
    still = now === looked && now >= Math.ceil(N / 1_000) ? still + 1 : 0;
    looked = now;
  }
  const looks = process.cpuUsage(looks0);
  const waited = await measure();

  // A completion elsewhere: one task made due now (same key: replaced), run by a worker.
  const worker = new Scheduler({ store: postgresStore({ connectionString: server.url }), onError: (e) => errors.push(e) });
  worker.define('later', () => 'done');
  await worker.start();
  const target = N >> 1;
  const started = performance.now();
  await worker.schedule(Date.now(), 'later', { key: `w:${target}` });
  const done = await waits[target]!;
  const latency = performance.now() - started;
  await worker.close();
  await waiting.close();
  await Promise.allSettled(waits);
  if (done.state !== 'succeeded') throw new Error(`expected the task to succeed, got ${done.state}`);
  if (errors.length > 0) throw new AggregateError(errors, 'errors reported');

  console.log(`${N.toLocaleString('en-US')} tasks due in an hour, poll ${POLL} ms, ${SECONDS} s windows:`);
  console.table({ 'nobody waiting': idle, [`${N.toLocaleString('en-US')} waiters`]: waited });
  console.log(
    `The waiters' first looks: ${looked} statements, ${Math.round((looks.user + looks.system) / 1_000)} ms of this process's CPU, once.`,
  );
  console.log(`A completion by another scheduler reached its waiter in ${Math.round(latency)} ms (claim, run, settle, announcement).`);
} finally {
  await admin.end();
  await server.destroy();
}
