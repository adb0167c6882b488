/**
 * Workload 5: `count` tasks spread evenly over `spanMs`; how late does each
 * start? Lateness = actual start (performance-based epoch ms) minus the
 * intended time. Optionally with the event loop kept busy by a background
 * interval that burns CPU synchronously, as a real server's request handling does.
 *
 * argv[2]: {"contender": "taskheap", "count": 10000, "spanMs": 1000, "busy": false}
 */
import { loadContender } from '../contenders/index.js';
import type { Contender } from '../contenders/types.js';
import { epochNow, leadFor, now, oneShotOf, quantile, rounds, runChild, warmUp, warmUpSize, type Effort } from '../lib/child-runtime.js';

interface Params extends Effort {
  contender: string;
  count: number;
  spanMs: number;
  busy: boolean;
}

/** Burns `ms` of CPU every millisecond: roughly half the event loop is taken. */
const BUSY_EVERY = 1;
const BUSY_BURN = 0.5;

function startBusyLoop(): () => void {
  const interval = setInterval(() => {
    const until = now() + BUSY_BURN;
    while (now() < until) {
      // spin: synchronous work the scheduler cannot pre-empt
    }
  }, BUSY_EVERY);
  return () => clearInterval(interval);
}

interface Lateness {
  p50: number;
  p99: number;
  max: number;
  min: number;
  overran: boolean;
}

/** One window of `count` tasks on a fresh scheduler; lateness of each, summarised. */
async function measureWindow(contender: Contender, { count, spanMs, busy }: Params, lead: number): Promise<Lateness> {
  const api = oneShotOf(contender);
  const stopBusy = busy ? startBusyLoop() : () => {};
  const base = Date.now() + lead;
  const intended = new Float64Array(count);
  const actual = new Float64Array(count);
  let ran = 0;
  let resolveDone: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));

  for (let i = 0; i < count; i++) {
    const at = base + Math.floor((i * spanMs) / count);
    intended[i] = at;
    api.schedule(at, () => {
      actual[i] = epochNow();
      if (++ran === count) resolveDone();
    });
  }
  const overran = Date.now() > base; // the first tasks were due before scheduling ended
  await done;
  stopBusy();
  await api.close();

  const lateness = new Float64Array(count);
  for (let i = 0; i < count; i++) lateness[i] = actual[i]! - intended[i]!;
  lateness.sort();
  return { p50: quantile(lateness, 0.5), p99: quantile(lateness, 0.99), max: lateness[count - 1]!, min: lateness[0]!, overran };
}

runChild<Params>(async (params) => {
  const contender = await loadContender(params.contender);
  const perTask = await warmUp(contender, warmUpSize(params, params.count));
  // Start far enough ahead that even a slow scheduler is done scheduling.
  const lead = leadFor(params.count, perTask, params.budgetMs > 0 ? 300 : 100);
  // A p99 is easily spoilt by one hiccup of the machine, so full runs repeat
  // the window (up to 3 times, if it is quick) and report the median by p99.
  const budget = params.budgetMs > 0 ? 3 * (lead + params.spanMs + 200) : 0;
  const results = await rounds(budget, 3, () => measureWindow(contender, params, lead));
  results.sort((a, b) => a.p99 - b.p99);
  return { ...results[Math.floor((results.length - 1) / 2)]!, rounds: results.length };
});
