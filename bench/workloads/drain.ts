/**
 * Workload 4: N no-op tasks all due now; how fast does the scheduler run
 * them? Only the drain is timed (scheduling is workload 1): from the moment
 * scheduling ended, or the tasks' due time if that is later, to the last run.
 *
 * argv[2]: {"contender": "taskheap", "n": 100000, "workers": 16, "leadMs": 900}
 *   workers: taskheap's pool; null = unbounded (JSON has no Infinity)
 *   leadMs: for libraries that refuse a past time, how far ahead to put the
 *     tasks so scheduling ends first (the parent derives it from workload 1)
 */
import { loadContender } from '../contenders/index.js';
import type { Contender } from '../contenders/types.js';
import { leadFor, median, now, oneShotOf, rounds, runChild, warmUp, warmUpSize, type Effort } from '../lib/child-runtime.js';

interface Params extends Effort {
  contender: string;
  n: number;
  workers?: number | null;
  leadMs?: number;
}

interface Drain {
  tasksPerSec: number;
  endToEndPerSec: number;
  drainMs: number;
}

async function drainOnce(contender: Contender, n: number, options: { workers?: number }, lead: number): Promise<Drain> {
  const api = oneShotOf(contender, options);
  let ran = 0;
  let resolveDone: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const task = (): void => {
    if (++ran === n) resolveDone();
  };

  const at = Date.now() + lead;
  const dueAt = now() + lead;
  const t0 = now();
  for (let i = 0; i < n; i++) api.schedule(at, task);
  const scheduled = now();
  if (lead > 0 && scheduled >= dueAt) throw new Error(`scheduling took ${Math.round(scheduled - t0)} ms, more than the ${lead} ms lead`);

  if (api.runDue !== undefined)
    api.runDue(Date.now()); // the floor: a synchronous pop-and-call loop
  else if (api.idle !== undefined) await api.idle();
  else await done;
  const end = now();
  if (ran !== n) throw new Error(`only ${ran} of ${n} tasks ran`);
  await api.close();

  const drainMs = end - Math.max(scheduled, dueAt);
  return { tasksPerSec: (n / drainMs) * 1000, endToEndPerSec: (n / (scheduled - t0 + drainMs)) * 1000, drainMs };
}

runChild<Params>(async (params) => {
  const { contender: name, n, workers, leadMs, budgetMs } = params;
  const contender = await loadContender(name);
  const options = workers === undefined ? {} : { workers: workers ?? Infinity };
  const warm = warmUpSize(params, n);
  const perTask = await warmUp(contender, warm, options);
  // Libraries that refuse a past time get a due time just after scheduling ends.
  const lead = contender.acceptsPast ? 0 : (leadMs ?? leadFor(n, perTask, 50));
  await drainOnce(contender, warm, options, contender.acceptsPast ? 0 : leadFor(warm, perTask, 50)); // warms the run path
  const results = await rounds(budgetMs, 5, () => drainOnce(contender, n, options, lead));
  return {
    tasksPerSec: median(results, (r) => r.tasksPerSec),
    endToEndPerSec: median(results, (r) => r.endToEndPerSec),
    lead,
    rounds: results.length,
  };
});
