/**
 * `npm run bench:steps [-- --tasks=100000 --pg-tasks=100000 --overhead=5000]`
 *
 * Steps (docs/steps.md):
 * - in memory, `--tasks` tasks that each run a step, then sleep until one
 *   wake-up time: the heap they hold while they sleep (after a GC) against
 *   as many plain waiting tasks, the timers the process holds, and how late
 *   the runs after the sleep start (p50 / p99 / max);
 * - on PostgreSQL (a throwaway server, 16 workers), `--pg-tasks` stored
 *   tasks that do the same: how fast they reach their sleep, the waiting
 *   rows, the statements the server runs in 10 s while they all sleep, and
 *   how late their runs after the sleep start;
 * - a step's overhead on PostgreSQL: `--overhead` no-op tasks, plain, with
 *   one step and with three; per task, the statements the server ran and
 *   its time on them (pg_stat_statements: top-level, planning and execution).
 * Prints markdown tables.
 */
import { Scheduler, type TaskContext } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { MINE, profiledPg } from './lib/profiled-pg.js';

function flag(name: string, fallback: number): number {
  const prefix = `--${name}=`;
  const value = process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);
  return value === undefined ? fallback : Number(value);
}

const TASKS = flag('tasks', 100_000);
const PG_TASKS = flag('pg-tasks', 100_000);
const OVERHEAD = flag('overhead', 5_000);
const count = (n: number) => Math.round(n).toLocaleString('en-US');
const gc = (globalThis as { gc?: () => void }).gc;

function percentiles(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `${at(0.5).toFixed(0)} / ${at(0.99).toFixed(0)} / ${sorted.at(-1)!.toFixed(0)}`;
}

async function heapMB(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed / 1e6;
}

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

async function memory(): Promise<string[]> {
  const base = await heapMB();
  const plain = new Scheduler({ workers: 16 });
  for (let i = 0; i < TASKS; i++) plain.after(3_600_000, () => {});
  const plainMB = (await heapMB()) - base;
  await plain.close();

  const before = timers();
  const scheduler = new Scheduler({ workers: 16 });
  const wake = Date.now() + Math.max(3_000, TASKS / 20);
  const late: number[] = [];
  let asleep = 0;
  const started = performance.now();
  for (let i = 0; i < TASKS; i++) {
    scheduler.after(0, async (ctx: TaskContext) => {
      await ctx.step('a', () => i);
      if (ctx.attempt === 1 && Date.now() < wake) asleep++;
      await ctx.sleep({ until: wake });
      late.push(Date.now() - wake);
    });
  }
  while (asleep < TASKS && Date.now() < wake) await new Promise((resolve) => setTimeout(resolve, 10));
  const toSleep = (performance.now() - started) / 1000;
  const sleepingMB = (await heapMB()) - base;
  const held = timers() - before;
  await scheduler.onIdle();
  await scheduler.close();
  return [
    `| ${count(TASKS)} tasks: a step, then asleep until one time | ${(TASKS / toSleep / 1000).toFixed(0)} k/s | ${sleepingMB.toFixed(1)} MB (${((sleepingMB * 1e6) / TASKS).toFixed(0)} B each; plain waiting tasks: ${((plainMB * 1e6) / TASKS).toFixed(0)} B) | ${held} | ${percentiles(late)} |`,
  ];
}

const { server, admin, serverWork, resetWork, close } = await profiledPg('taskheap_steps_bench');
let schemas = 0;

function pgScheduler(schema: string): Scheduler {
  return new Scheduler({ store: postgresStore({ connectionString: server.url, schema }), workers: 16 });
}

async function sleepers(): Promise<string[]> {
  const schema = `sleep_${++schemas}`;
  const scheduler = pgScheduler(schema);
  let asleep = 0;
  const late: number[] = [];
  // Time to reach the sleep at ~2k a second, then 10 s of sleep to count statements in.
  const wake = Date.now() + 25_000 + PG_TASKS / 2;
  scheduler.define('sleeper', async (ctx, { n }: { n: number }) => {
    await ctx.step('a', () => n);
    if (ctx.attempt === 1 && Date.now() < wake) asleep++;
    await ctx.sleep({ until: wake });
    late.push(Date.now() - wake);
  });
  await scheduler.migrate();
  const items = Array.from({ length: PG_TASKS }, (_, n) => ({ when: Date.now(), name: 'sleeper', payload: { n } }));
  for (let i = 0; i < items.length; i += 5_000) await scheduler.scheduleMany(items.slice(i, i + 5_000));
  const started = performance.now();
  await scheduler.start();
  while (asleep < PG_TASKS && Date.now() < wake) await new Promise((resolve) => setTimeout(resolve, 20));
  const toSleep = (performance.now() - started) / 1000;
  // Every suspension written (a run reaches its sleep before its outcome is): then the quiet is measured.
  const waitingRows = async () =>
    (await admin.query<{ n: number }>(`${MINE} SELECT count(*)::int AS n FROM ${schema}.taskheap_tasks WHERE state = 'waiting'`)).rows[0]!
      .n;
  let waiting = await waitingRows();
  while (waiting < PG_TASKS && Date.now() < wake - 11_000) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    waiting = await waitingRows();
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  await resetWork();
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const quiet = await serverWork();
  while (late.length < PG_TASKS && Date.now() < wake + 120_000) await new Promise((resolve) => setTimeout(resolve, 50));
  await scheduler.close();
  return [
    `| ${count(PG_TASKS)} stored tasks: a step, then asleep until one time | ${(PG_TASKS / toSleep / 1000).toFixed(1)} k/s | ${count(waiting)} waiting rows; ${quiet.calls} statements in 10 s while they sleep | — | ${percentiles(late)} |`,
  ];
}

async function overhead(steps: number): Promise<{ calls: number; ms: number }> {
  const schema = `overhead_${++schemas}`;
  const scheduler = pgScheduler(schema);
  let done = 0;
  scheduler.define('work', async (ctx) => {
    for (let i = 0; i < steps; i++) await ctx.step('s', () => i);
    done++;
  });
  await scheduler.migrate();
  const items = Array.from({ length: OVERHEAD }, () => ({ when: Date.now(), name: 'work' }));
  await scheduler.scheduleMany(items);
  await resetWork();
  await scheduler.start();
  while (done < OVERHEAD) await new Promise((resolve) => setTimeout(resolve, 20));
  await scheduler.close();
  const work = await serverWork();
  return { calls: work.calls / OVERHEAD, ms: work.ms / OVERHEAD };
}

console.log(
  `## Steps (${new Date().toISOString().slice(0, 10)}, Node ${process.versions.node}${gc === undefined ? ', no --expose-gc' : ''})\n`,
);
console.log('| workload | reaching the sleep | held while asleep | timers it adds | runs after the sleep, ms late (p50 / p99 / max) |');
console.log('| --- | --- | --- | --- | --- |');
for (const line of await memory()) console.log(line);
for (const line of await sleepers()) console.log(line);
const plain = await overhead(0);
const one = await overhead(1);
const three = await overhead(3);
console.log(
  `\n**A step's cost on PostgreSQL** (${count(OVERHEAD)} no-op tasks, 16 workers; per task: the server's top-level statements and ms on them)\n`,
);
console.log('| | statements | server ms | per step over plain |');
console.log('| --- | --- | --- | --- |');
const row = (label: string, w: { calls: number; ms: number }, steps: number) =>
  `| ${label} | ${w.calls.toFixed(2)} | ${w.ms.toFixed(3)} | ${steps === 0 ? '—' : `${((w.calls - plain.calls) / steps).toFixed(2)} statements, ${((w.ms - plain.ms) / steps).toFixed(3)} ms`} |`;
console.log(row('plain', plain, 0));
console.log(row('one step', one, 1));
console.log(row('three steps', three, 3));
await close();
