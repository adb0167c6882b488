/**
 * Workload 7: what rate limits, serial keys and priorities cost (issue 16).
 * N no-op tasks due now are scheduled and drained (16 workers) by taskheap
 * alone, once per variant, each in its own process:
 *
 *   none     plain tasks: the path every scheduler takes while no task uses these options
 *   priority every task has a priority (0-9, at random)
 *   serial   every task has one of 1,000 serial keys
 *   rate     every task names one of 1,000 rate-limit keys, with a limit that never binds
 *
 * So the figures are the bookkeeping alone, never a wait for a bucket.
 * Ratios (the report) are against `none`.
 *
 * argv[2]: {"n": 100000, "variant": "serial", "budgetMs": 0}
 */
import { Scheduler, type TaskOptions } from '../../src/index.js';
import { median, now, rounds, runChild, type Effort } from '../lib/child-runtime.js';

export type LimitsVariant = 'none' | 'priority' | 'serial' | 'rate';

interface Params extends Effort {
  n: number;
  variant: LimitsVariant;
}

const KEYS = 1_000;

/** The options of task i, made before timing starts (the options objects are the caller's, not taskheap's cost). */
function optionsOf(variant: LimitsVariant, n: number): (TaskOptions | undefined)[] {
  const serial = Array.from({ length: KEYS }, (_, k) => ({ serial: `chat:${k}` }));
  const rate = Array.from({ length: KEYS }, (_, k) => ({ rate: { group: `chat:${k}`, limit: 1_000_000, interval: 1_000 } }));
  const priority = Array.from({ length: 10 }, (_, p) => ({ priority: p }));
  let seed = 42;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  return Array.from({ length: n }, (_, i) => {
    if (variant === 'priority') return priority[Math.floor(random() * 10)];
    if (variant === 'serial') return serial[i % KEYS];
    if (variant === 'rate') return rate[i % KEYS];
    return undefined;
  });
}

async function once(n: number, options: (TaskOptions | undefined)[]) {
  const scheduler = new Scheduler({ workers: 16 });
  let ran = 0;
  const task = () => void ran++;
  const at = Date.now();
  const t0 = now();
  for (let i = 0; i < n; i++) scheduler.schedule(at, task, options[i]);
  const scheduled = now();
  await scheduler.onIdle();
  const end = now();
  if (ran !== n) throw new Error(`only ${ran} of ${n} tasks ran`);
  await scheduler.close();
  return {
    scheduleNsPerTask: ((scheduled - t0) * 1e6) / n,
    tasksPerSec: (n / (end - scheduled)) * 1000,
    endToEndPerSec: (n / (end - t0)) * 1000,
  };
}

runChild<Params>(async ({ n, variant, budgetMs }) => {
  const options = optionsOf(variant, n);
  await once(Math.min(n, 2_000), options); // warms the JIT on this variant's path
  const results = await rounds(budgetMs, 5, () => once(n, options));
  return {
    scheduleNsPerTask: median(results, (r) => r.scheduleNsPerTask),
    tasksPerSec: median(results, (r) => r.tasksPerSec),
    endToEndPerSec: median(results, (r) => r.endToEndPerSec),
    rounds: results.length,
  };
});
