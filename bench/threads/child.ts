/**
 * One workload of bench/threads.ts for one contender, in a fresh process
 * (`node --expose-gc child.mjs '<json>'`, this file bundled by bench/threads.ts;
 * `node --expose-gc --import tsx bench/threads/child.ts '<json>'` runs the same), so no
 * contender inherits another's threads, heap or JIT state. Prints one JSON
 * line with its figures.
 *
 * - `cpu`: `tasks` CPU-bound tasks (`spin` of `rounds`) on a warm pool of
 *   `size` threads, all submitted at once: wall ms; beside them a stream of
 *   10 ms timers on the main thread for as long as they run (and the one
 *   pending when they end): each timer's lateness; and the peak RSS over the RSS before the run.
 * - `trivial`: `trivial` tasks that return their payload, all submitted at
 *   once on a warm pool: tasks a second, and the CPU time each task cost
 *   the main thread (Linux, /proc) and the whole process, µs.
 * - `memory`: RSS of the process with `size` warm idle threads, over the
 *   process before the pool (after a GC each time).
 * - `grow`: a pool of one warm thread that may hold `size` (taskheap: resized
 *   to `size` at that moment; piscina and tinypool: `minThreads` 1,
 *   `maxThreads` `size`); while its thread runs a CPU-bound task, a trivial
 *   task's latency (a thread started for it); the median of `reps` fresh pools.
 * - `shrink` (taskheap only): a pool of `size` warm idle threads resized to
 *   1: ms until the process has `size - 1` fewer threads (Linux, /proc).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Work } from '../workloads/threads-work.js';
import { type Contender, open, type Pool } from './pools.js';

export interface Order {
  contender: Contender;
  workload: 'cpu' | 'trivial' | 'memory' | 'grow' | 'shrink';
  size: number;
  tasks: number;
  rounds: number;
  trivial: number;
  reps: number;
}

const order = JSON.parse(process.argv[2] ?? '{}') as Order;
const MB = 2 ** 20;
const spin: Work = { kind: 'spin', rounds: order.rounds };
const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

/** `size` tasks at once, so every thread of the pool has started and run once. */
async function warm(pool: Pool, size: number): Promise<void> {
  await Promise.all(Array.from({ length: size }, (_, value) => pool.run({ kind: 'trivial', value })));
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

async function cpu(): Promise<object> {
  const pool = await open(order.contender, order.size);
  await warm(pool, order.size);
  gc();
  const before = process.memoryUsage.rss();
  let peak = before;
  const lateness: number[] = [];
  // The stream stops starting timers when the work ends; the one pending then
  // still counts (on the main thread it is the one the work held up).
  let running = true;
  let stopped!: () => void;
  const stream = new Promise<void>((resolve) => (stopped = resolve));
  const tick = (due: number): void => {
    setTimeout(() => {
      // libuv counts timers in whole milliseconds of a cached loop time, so a
      // timer can fire a fraction of a millisecond before `due`: that is on
      // time, not negative lateness (a lone negative sample broke the table).
      lateness.push(Math.max(0, performance.now() - due));
      peak = Math.max(peak, process.memoryUsage.rss());
      if (running) tick(performance.now() + 10);
      else stopped();
    }, 10);
  };
  tick(performance.now() + 10);
  const start = performance.now();
  await Promise.all(Array.from({ length: order.tasks }, () => pool.run(spin)));
  const wall = performance.now() - start;
  running = false;
  peak = Math.max(peak, process.memoryUsage.rss());
  await stream;
  await pool.close();
  const sorted = lateness.sort((a, b) => a - b);
  return {
    wall,
    timers: sorted.length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? Number.NaN,
    peakMb: (peak - before) / MB,
  };
}

/** CPU time the main thread has used, ns (Linux: /proc schedstat); undefined elsewhere. */
function mainCpuNs(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
}

async function trivial(): Promise<object> {
  const pool = await open(order.contender, order.size);
  await warm(pool, order.size);
  const main = mainCpuNs();
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(Array.from({ length: order.trivial }, (_, value) => pool.run({ kind: 'trivial', value })));
  const rate = order.trivial / ((performance.now() - start) / 1_000);
  const used = process.cpuUsage(cpu);
  const mainEnd = mainCpuNs();
  await pool.close();
  return {
    rate,
    // CPU per task (µs), of the main thread and of the whole process (its threads included): what a loaded machine disturbs least.
    mainUs: main === undefined || mainEnd === undefined ? undefined : (mainEnd - main) / 1_000 / order.trivial,
    cpuUs: (used.user + used.system) / order.trivial,
  };
}

async function memory(): Promise<object> {
  gc();
  await sleep(100);
  const before = process.memoryUsage.rss();
  const pool = await open(order.contender, order.size);
  await warm(pool, order.size);
  await sleep(300);
  gc();
  await sleep(100);
  const warmMb = (process.memoryUsage.rss() - before) / MB;
  await pool.close();
  return { warmMb };
}

async function grow(): Promise<object> {
  if (order.contender === 'main thread') return { note: 'no threads' };
  const samples: number[] = [];
  for (let rep = 0; rep < order.reps; rep++) {
    const pool = await open(order.contender, order.contender === 'taskheap' ? 1 : order.size, 1);
    await pool.run({ kind: 'trivial', value: 0 });
    const busy = pool.run(spin);
    await sleep(20); // the CPU-bound task holds the one thread (or, on the main thread, the event loop)
    const start = performance.now();
    pool.resize?.(order.size);
    await pool.run({ kind: 'trivial', value: 1 });
    samples.push(performance.now() - start);
    await busy;
    await pool.close();
  }
  return {
    grow: percentile(
      samples.sort((a, b) => a - b),
      0.5,
    ),
  };
}

/** Threads of this process, from /proc (Linux). */
const osThreads = (): number => readdirSync('/proc/self/task').length;

async function shrink(): Promise<object> {
  if (order.contender !== 'taskheap') return { note: 'no run-time resize' };
  const pool = await open(order.contender, order.size);
  await warm(pool, order.size);
  await sleep(100);
  const before = osThreads();
  const start = performance.now();
  pool.resize!(1);
  const deadline = start + 10_000;
  while (osThreads() > before - (order.size - 1) && performance.now() < deadline) await sleep(1);
  const shrinkMs = performance.now() - start;
  await pool.close();
  return { shrink: shrinkMs };
}

const workloads = { cpu, trivial, memory, grow, shrink };
console.log(JSON.stringify(await workloads[order.workload]()));
