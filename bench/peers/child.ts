/**
 * One process of the peer bench, run under Node 24: `child.js <json>` with
 * `{ contender, role, target, n?, bulk?, due? }`. Roles:
 * - `prepare`: migrations and queue creation; prints `ok`.
 * - `enqueue`: adds `n` jobs (one call each, or in calls of 1,000 with
 *   `bulk`), due now or from `due.at` spread over `due.spread` ms; prints
 *   `{ seconds }`, or `{ unsupported: true }` when bulk is asked of a system without it.
 * - `fill`: adds `n` jobs due now as fast as the system allows (bulk, or 16
 *   in flight); untimed, it sets up a processing run.
 * - `worker`: prints `loaded`, starts working on `go`, prints `count N`
 *   every 50 ms while it changes, and on `stop` prints
 *   `{ ids, lastAt, lateness, cpuMs }` and exits (`cpuMs`: the process's CPU,
 *   user and system, from `go` until its scheduler or worker is closed).
 */
import { createInterface } from 'node:readline';
import { CONCURRENCY, CONTENDERS, type BenchJob, type Contender, type Target } from './contenders.js';

interface Order {
  contender: string;
  role: 'prepare' | 'enqueue' | 'fill' | 'worker';
  target: Target;
  n?: number;
  bulk?: boolean;
  due?: { at: number; spread: number };
}

const BULK = 1_000;

function jobs(order: Order): BenchJob[] {
  const n = order.n ?? 0;
  const list: BenchJob[] = new Array(n);
  for (let i = 0; i < n; i++) list[i] = order.due === undefined ? { i } : { i, due: order.due.at + Math.floor((order.due.spread * i) / n) };
  return list;
}

async function enqueue(contender: Contender, order: Order): Promise<object> {
  const list = jobs(order);
  if (order.bulk && contender.addMany === undefined) return { unsupported: true };
  const started = performance.now();
  if (order.bulk) {
    for (let i = 0; i < list.length; i += BULK) await contender.addMany!(list.slice(i, i + BULK));
  } else {
    for (const job of list) await contender.addOne(job);
  }
  return { seconds: (performance.now() - started) / 1000 };
}

async function fill(contender: Contender, order: Order): Promise<void> {
  const list = jobs(order);
  if (contender.addMany !== undefined) {
    for (let i = 0; i < list.length; i += BULK) await contender.addMany(list.slice(i, i + BULK));
    return;
  }
  let next = 0;
  const lane = async () => {
    while (next < list.length) await contender.addOne(list[next++]!);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
}

async function worker(contender: Contender): Promise<void> {
  const ids: number[] = [];
  const lateness: number[] = [];
  let lastAt = 0;
  const onJob = (job: BenchJob) => {
    lastAt = Date.now();
    ids.push(job.i);
    if (job.due !== undefined) lateness.push(lastAt - job.due);
  };
  let reported = -1;
  const progress = setInterval(() => {
    if (ids.length === reported) return;
    reported = ids.length;
    process.stdout.write(`count ${reported}\n`);
  }, 50);
  process.stdout.write('loaded\n');
  let cpuAtGo = process.cpuUsage();
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'go') {
      cpuAtGo = process.cpuUsage();
      await contender.work(CONCURRENCY, onJob);
    }
    if (line === 'stop') break;
  }
  clearInterval(progress);
  await contender.close();
  const cpu = process.cpuUsage(cpuAtGo);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  process.stdout.write(`${JSON.stringify({ ids, lastAt, lateness, cpuMs })}\n`);
}

async function main(): Promise<void> {
  const order = JSON.parse(process.argv[2]!) as Order;
  const make = CONTENDERS[order.contender];
  if (make === undefined) throw new Error(`unknown contender ${order.contender}`);
  const contender = await make(order.target);
  if (order.role === 'prepare') {
    await contender.prepare();
    await contender.close();
    process.stdout.write('ok\n');
  } else if (order.role === 'enqueue') {
    const result = await enqueue(contender, order);
    await contender.close();
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else if (order.role === 'fill') {
    await fill(contender, order);
    await contender.close();
    process.stdout.write('ok\n');
  } else {
    await worker(contender);
  }
  // Once stdout has taken the last line: process.exit() drops what a pipe has not yet
  // (a worker's report of 40,000 ids arrived cut).
  process.stdout.write('', () => process.exit(0));
}

main().catch((error: unknown) => {
  process.stderr.write(`bench child failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
