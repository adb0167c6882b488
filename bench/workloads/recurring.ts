/**
 * Workload 3: N recurring jobs, either a cron pattern or a fixed interval.
 * Measures time and heap per job, live timers, and the time to stop them all
 * (median of a few rounds when a round is quick; memory from the first round,
 * as in oneshot.ts).
 *
 * argv[2]: {"contender": "croner", "n": 10000, "kind": "cron" | "interval", "budgetMs": 1500}
 */
import { loadContender } from '../contenders/index.js';
import type { Fn, Recurring } from '../contenders/types.js';
import {
  activeTimers,
  handleArray,
  keepAlive,
  median,
  memory,
  NotAvailable,
  noop,
  now,
  rounds,
  runChild,
  settle,
  warmUpSize,
  type Effort,
} from '../lib/child-runtime.js';

interface Params extends Effort {
  contender: string;
  n: number;
  kind: 'cron' | 'interval';
}

const PATTERN = '*/5 * * * *';
const MINUTES = 5;

/** The one method this run uses, or NotAvailable. */
function creator(api: Recurring, kind: Params['kind']): (fn: Fn) => unknown {
  if (kind === 'cron' && api.cron !== undefined) return (fn) => api.cron!(PATTERN, fn);
  if (kind === 'interval' && api.interval !== undefined) return (fn) => api.interval!(MINUTES, fn);
  throw new NotAvailable(`no ${kind} rule`);
}

/** Creates n jobs on a fresh instance, measures, and stops them all. */
async function round(make: () => Recurring, kind: Params['kind'], n: number): Promise<Record<string, number>> {
  const api = make();
  const create = creator(api, kind);
  const jobs = handleArray(n);
  const before = memory();
  const timersBefore = activeTimers();

  const t0 = now();
  for (let i = 0; i < n; i++) jobs[i] = create(noop);
  const createMs = now() - t0;
  await settle();
  keepAlive(api, jobs);
  const after = memory();
  const timers = activeTimers() - timersBefore;

  const t1 = now();
  for (let i = 0; i < n; i++) api.stop(jobs[i]);
  const stopMs = now() - t1;
  await api.close();
  keepAlive();
  await settle();
  return { nsPerJob: (createMs * 1e6) / n, heapPerJob: (after.heap - before.heap) / n, timers, stopMs };
}

runChild<Params>(async (params) => {
  const { contender: name, n, kind, budgetMs } = params;
  const contender = await loadContender(name);
  const make = (): Recurring => {
    const api = contender.recurring?.();
    if (api === undefined) throw new NotAvailable(contender.recurring === undefined ? 'no recurring jobs' : 'not built');
    return api;
  };
  await round(make, kind, warmUpSize(params, n)); // warms the JIT
  const results = await rounds(budgetMs, 5, () => round(make, kind, n));
  return {
    ...results[0]!,
    nsPerJob: median(results, (r) => r.nsPerJob!),
    stopMs: median(results, (r) => r.stopMs!),
    rounds: results.length,
  };
});
