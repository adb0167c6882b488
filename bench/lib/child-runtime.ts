/**
 * Helpers for the child processes that run one contender through one
 * workload. A child prints exactly one `@@result {json}` line and exits.
 */
import { performance } from 'node:perf_hooks';
import type { Contender, OneShot } from '../contenders/types.js';

export const RESULT_PREFIX = '@@result ';

/** Thrown when the contender cannot do this workload; reported as "n/a (message)". */
export class NotAvailable extends Error {}

/** Runs `work` with the JSON parameters from argv, prints its result, and exits. */
export function runChild<P>(work: (params: P) => Promise<Record<string, unknown>>): void {
  const params = JSON.parse(process.argv[2] ?? '{}') as P;
  // If a library drops tasks, the loop empties and Node would exit silently.
  process.once('beforeExit', () => finish({ status: 'error', message: 'the event loop emptied: some tasks never ran' }));
  work(params).then(
    (data) => finish({ status: 'ok', data }),
    (error: unknown) =>
      error instanceof NotAvailable
        ? finish({ status: 'n/a', message: error.message })
        : finish({ status: 'error', message: error instanceof Error ? error.message : String(error) }),
  );
}

function finish(result: object): never {
  // Writes to a pipe are synchronous on Linux, so exiting right after is safe;
  // exiting is needed because most libraries keep timers alive.
  process.stdout.write(`${RESULT_PREFIX + JSON.stringify(result)}\n`);
  process.exit(0);
}

/** Full collection, twice: the second pass picks up what finalizers freed. */
export function collect(): void {
  if (globalThis.gc === undefined) throw new Error('run children with --expose-gc');
  globalThis.gc();
  globalThis.gc();
}

/** Heap and RSS after a full collection. */
export function memory(): { heap: number; rss: number } {
  collect();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, rss: usage.rss };
}

/**
 * Keeps values reachable until the next call. Without it the optimiser may
 * treat a scheduler that is not used after the measured loop as dead, and
 * the GC before the memory reading would collect it (a bare heap then
 * "costs" 0 bytes).
 */
let _kept: unknown[] = [];
export function keepAlive(...values: unknown[]): void {
  _kept = values;
}

/** Live Node timers (each setTimeout/setInterval that has not fired or been cleared). */
export function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

/** Milliseconds, fractional, monotonic. */
export const now = (): number => performance.now();

/** Epoch milliseconds with sub-millisecond resolution (performance-based, as the brief asks). */
export const epochNow = (): number => performance.timeOrigin + performance.now();

/** Lets pending microtasks, timers at 0 and immediates run (deferred library work). */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export function noop(): void {}

/**
 * An array of n small integers, allocated before the baseline measurement so
 * that the handles the harness must keep (to cancel) cost nothing extra:
 * storing objects into it later reuses the same backing store.
 */
export function handleArray(n: number): unknown[] {
  const array: unknown[] = [];
  for (let i = 0; i < n; i++) array.push(0);
  return array;
}

/** A seeded PRNG (mulberry32), so every contender sees the same "random" times. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The contender's one-shot scheduler, or NotAvailable. */
export function oneShotOf(contender: Contender, options: { workers?: number } = {}): OneShot {
  if (contender.oneShot === undefined) throw new NotAvailable('no one-shot tasks');
  return contender.oneShot(options);
}

/**
 * Warms the JIT on a throwaway instance (schedule k tasks far ahead, cancel
 * them) and returns the measured cost per task in ms. Workloads that need a
 * future start time use it to choose how far ahead to put their tasks, so
 * slow schedulers still finish scheduling before the first task is due.
 */
export async function warmUp(contender: Contender, k: number, options: { workers?: number } = {}): Promise<number> {
  const api = oneShotOf(contender, options);
  const handles: unknown[] = [];
  const at = Date.now() + 3_600_000;
  const start = now();
  for (let i = 0; i < k; i++) handles.push(api.schedule(at + i, noop));
  const perTask = (now() - start) / k;
  if (api.runDue === undefined) for (const handle of handles) api.cancel(handle);
  await api.close();
  await settle();
  return perTask;
}

/**
 * Runs `round` once, then again while another round fits in `budgetMs` of
 * wall time, up to `maxRounds`. Single runs are noisy (one badly timed GC
 * can double a figure), so fast contenders get several rounds and report
 * the median; slow ones get one.
 */
export async function rounds<T>(budgetMs: number, maxRounds: number, round: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  const start = now();
  do results.push(await round());
  while (results.length < maxRounds && ((now() - start) * (results.length + 1)) / results.length <= budgetMs);
  return results;
}

/**
 * Every child gets `budgetMs` from the parent: wall time it may spend on
 * repeat rounds (0 in --quick: one round, and smaller warm-ups).
 */
export interface Effort {
  budgetMs: number;
}

/** How many tasks to warm the JIT with. */
export const warmUpSize = ({ budgetMs }: Effort, n: number): number => Math.min(n, budgetMs > 0 ? 2_000 : 500);

/**
 * The median of `key` over the rounds. Not the best round: these workloads
 * are dominated by allocation and GC, and a lucky round says little.
 */
export function median<T>(results: T[], key: (r: T) => number): number {
  const values = results.map(key).sort((a, b) => a - b);
  const middle = values.length >> 1;
  return values.length % 2 === 1 ? values[middle]! : (values[middle - 1]! + values[middle]!) / 2;
}

/** Lead time (ms) that leaves room to schedule `n` tasks at `perTask` ms each, with margin for GC pauses as the heap grows. */
export function leadFor(n: number, perTask: number, minimum: number): number {
  return Math.ceil(Math.max(minimum, perTask * n * 2 + 200));
}

/** The value at quantile q (0..1) of sorted samples (nearest rank). */
export function quantile(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
