/**
 * One process of the flows bench, run under Node 24: `child.js <json>` with
 * `{ contender, workload, n, url, budget }`. Prepares (untimed), adds the
 * workload (timed), prints `added {json}`, waits for `go` on stdin, works
 * until every task ran or `budget` ms passed, and prints
 * `{ added, run, ran, total, cpuMs }` (seconds, and this process's CPU ms,
 * user and system, from `go` to the last run).
 */
import { createInterface } from 'node:readline';
import { FLOW_CONTENDERS, type Workload } from './contenders.js';

interface Order {
  contender: string;
  workload: Workload;
  n: number;
  url: string;
  budget: number;
}

const order = JSON.parse(process.argv[2]!) as Order;
const contender = await FLOW_CONTENDERS[order.contender]!(order.url);
await contender.prepare();
const t0 = performance.now();
const total = await contender.add(order.workload, order.n);
const added = (performance.now() - t0) / 1000;
process.stdout.write(`added ${JSON.stringify({ added, total })}\n`);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next();
let ran = 0;
let last = 0;
let finished = () => {};
const done = new Promise<void>((resolve) => (finished = resolve));
const cpu = process.cpuUsage();
const started = performance.now();
await contender.work(() => {
  ran++;
  last = performance.now();
  if (ran === total) finished();
});
const budget = setTimeout(finished, order.budget);
await done;
clearTimeout(budget);
const used = process.cpuUsage(cpu);
const result = {
  added,
  run: ((ran === total ? last : performance.now()) - started) / 1000,
  ran,
  total,
  cpuMs: (used.user + used.system) / 1000,
};
await Promise.race([contender.close(), new Promise((resolve) => setTimeout(resolve, 5_000))]);
process.stdout.write(`@@result ${JSON.stringify(result)}\n`);
process.exit(0);
