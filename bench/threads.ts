/**
 * `npx tsx bench/threads.ts [--tasks=16] [--ms=100] [--trivial=2000] [--timers=200]`
 *
 * Module tasks in worker threads (issue 26) beside the same work on the
 * main thread, in one run, each part on a fresh scheduler:
 *
 * 1. CPU-bound: `--tasks` tasks of about `--ms` ms of arithmetic each
 *    (calibrated here first): wall time, and the speed-up over the main thread.
 * 2. Trivial tasks: `--trivial` tasks that return their payload: tasks a
 *    second (what crossing to a thread and back costs).
 * 3. Timer lateness: a stream of `--timers` 10 ms timers on the main thread
 *    while the CPU-bound tasks of (1) run: p50, p99 and max lateness, with
 *    the tasks in threads and on the main thread.
 *
 * `threads` is `os.availableParallelism()` (print shows it). piscina,
 * tinypool and Bree are not installed in this repository (piscina ships
 * platform-specific optional binaries), so they are not in the table.
 * Prints one markdown table. A tiny run (`--tasks=2 --ms=5 --trivial=20
 * --timers=5`) is what test/threads/bench.test.ts runs: it checks the script,
 * not the figures.
 */
import { availableParallelism } from 'node:os';
import { Scheduler } from '../src/index.js';
import { spin } from './workloads/threads-work.js';

const WORK = new URL('./workloads/threads-work.js', import.meta.url);

function flag(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (arg === undefined) return fallback;
  const value = Number(arg.slice(name.length + 3));
  if (!Number.isInteger(value) || value < 1) {
    console.error(`usage: npx tsx bench/threads.ts [--tasks=16] [--ms=100] [--trivial=2000] [--timers=200]: bad --${name}`);
    process.exit(1);
  }
  return value;
}

const tasks = flag('tasks', 16);
const ms = flag('ms', 100);
const trivial = flag('trivial', 2_000);
const timers = flag('timers', 200);
const threads = availableParallelism();

/** Rounds of `spin` that take about `ms` on this machine, now. */
function calibrate(target: number): number {
  let rounds = 10_000;
  for (;;) {
    const start = performance.now();
    spin(rounds);
    const took = performance.now() - start;
    if (took >= 20 || rounds > 2 ** 40) return Math.max(1, Math.round((rounds * target) / Math.max(took, 0.001)));
    rounds *= 2;
  }
}
const rounds = calibrate(ms);

type Where = 'threads' | 'main thread';

function cpuTask(scheduler: Scheduler, where: Where): Promise<unknown> {
  if (where === 'threads') return scheduler.after(0, WORK, { payload: { kind: 'spin', rounds } }).result;
  return scheduler.after(0, () => spin(rounds)).result;
}

/** (1) and (3): the CPU-bound tasks, with a 10 ms timer stream beside them; wall ms and the timers' lateness. */
async function cpuBound(where: Where): Promise<{ wall: number; lateness: number[] }> {
  const scheduler = new Scheduler({ threads, workers: Infinity });
  if (where === 'threads') await scheduler.after(0, WORK, { payload: { kind: 'trivial', value: 0 } }).result; // a warm thread
  const lateness: number[] = [];
  const start = performance.now();
  let fired = 0;
  const stream = new Promise<void>((resolve) => {
    const tick = (due: number): void => {
      setTimeout(() => {
        lateness.push(performance.now() - due);
        if (++fired === timers) resolve();
        else tick(performance.now() + 10);
      }, 10);
    };
    tick(performance.now() + 10);
  });
  await Promise.all(Array.from({ length: tasks }, () => cpuTask(scheduler, where)));
  const wall = performance.now() - start;
  await stream;
  await scheduler.close();
  return { wall, lateness };
}

/** (2): trivial tasks a second. */
async function throughput(where: Where): Promise<number> {
  const scheduler = new Scheduler({ threads, workers: Infinity });
  const run = (value: number) =>
    where === 'threads' ? scheduler.after(0, WORK, { payload: { kind: 'trivial', value } }).result : scheduler.after(0, () => value).result;
  await run(0);
  const start = performance.now();
  await Promise.all(Array.from({ length: trivial }, (_, i) => run(i)));
  const seconds = (performance.now() - start) / 1_000;
  await scheduler.close();
  return trivial / seconds;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

const rows: string[] = [];
const main = await cpuBound('main thread');
const inThreads = await cpuBound('threads');
const mainRate = await throughput('main thread');
const threadRate = await throughput('threads');
const late = (l: number[]) => `${percentile(l, 50).toFixed(1)} / ${percentile(l, 99).toFixed(1)} / ${Math.max(...l).toFixed(1)}`;
rows.push(
  `| taskheap threads (${threads}) | ${inThreads.wall.toFixed(0)} | ${(main.wall / inThreads.wall).toFixed(2)}x | ${threadRate.toFixed(0)} | ${late(inThreads.lateness)} |`,
);
rows.push(`| main thread | ${main.wall.toFixed(0)} | 1.00x | ${mainRate.toFixed(0)} | ${late(main.lateness)} |`);

console.log(
  `${tasks} CPU-bound tasks of ~${ms} ms (${rounds} rounds), ${trivial} trivial tasks, ${timers} timers of 10 ms; Node ${process.version}\n`,
);
console.log('| where | CPU-bound wall (ms) | speed-up | trivial tasks/s | 10 ms timers late p50 / p99 / max (ms) |');
console.log('| --- | --- | --- | --- | --- |');
for (const row of rows) console.log(row);
