/**
 * Flows on PostgreSQL (issue 28): a fan-in of N children and one parent, and
 * a chain of M steps, each against the same number of tasks without
 * dependencies, in one process with 16 workers on a server this script
 * starts. `npx tsx bench/flows.ts [--fan=10000] [--chain=1000]`; prints a
 * Markdown table (copied into docs/performance.md by hand).
 */
import os from 'node:os';
import { Scheduler, type FlowTask } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { startPgServer } from '../test/durable/pg-server.js';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const FAN = arg('fan', 10_000);
const CHAIN = arg('chain', 1_000);

const server = await startPgServer({ database: 'taskheap_flows_bench' });
let schemas = 0;

/** A fresh scheduler on its own schema; `run` gets it started, and its time is measured to the end. */
async function measure(what: string, n: number, run: (scheduler: Scheduler) => Promise<() => Promise<unknown>>): Promise<string> {
  const scheduler = new Scheduler({
    store: postgresStore({ connectionString: server.url, schema: `flows_bench_${++schemas}` }),
    workers: 16,
  });
  scheduler.define('step', () => 'ok');
  const started = performance.now();
  const finish = await run(scheduler);
  const added = performance.now();
  await scheduler.start();
  await finish();
  const done = performance.now();
  await scheduler.close();
  const row = `| ${what} | ${n.toLocaleString('en')} | ${((added - started) / 1000).toFixed(2)} s | ${((done - added) / 1000).toFixed(2)} s | ${((done - added) / n).toFixed(2)} ms |`;
  console.log(row);
  return row;
}

/** Waits until `n` tasks succeeded (independent tasks: no final task to wait for). */
const allDone = (scheduler: Scheduler, n: number) => async () => {
  while (((await scheduler.countTasks()) as Record<string, number>).succeeded! < n) await new Promise((r) => setTimeout(r, 20));
};

const rows: string[] = [];
rows.push(
  await measure('independent tasks', FAN, async (s) => {
    await s.scheduleMany(Array.from({ length: FAN }, () => ({ when: Date.now(), name: 'step' })));
    return allDone(s, FAN);
  }),
);
rows.push(
  await measure(`fan-in: ${FAN.toLocaleString('en')} children, then 1`, FAN + 1, async (s) => {
    const tasks: Record<string, FlowTask> = {};
    for (let i = 0; i < FAN; i++) tasks[`c${i}`] = { handler: 'step' };
    tasks.parent = { handler: 'step', after: Object.keys(tasks) };
    const flow = await s.flows.add({ tasks });
    return () => s.flows.waitFor(flow.tasks.parent!.id);
  }),
);
rows.push(
  await measure('independent tasks', CHAIN, async (s) => {
    await s.scheduleMany(Array.from({ length: CHAIN }, () => ({ when: Date.now(), name: 'step' })));
    return allDone(s, CHAIN);
  }),
);
rows.push(
  await measure(`chain of ${CHAIN.toLocaleString('en')} steps`, CHAIN, async (s) => {
    const tasks: Record<string, FlowTask> = {};
    for (let i = 0; i < CHAIN; i++) tasks[`s${i}`] = { handler: 'step', after: i === 0 ? [] : [`s${i - 1}`] };
    const flow = await s.flows.add({ tasks });
    return () => s.flows.waitFor(flow.tasks[`s${CHAIN - 1}`]!.id);
  }),
);
console.log(`\n${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)}, ${new Date().toISOString()}\n`);
console.log('| workload | tasks | added in | run in | per task |\n| --- | --- | --- | --- | --- |');
for (const row of rows) console.log(row);
await server.stop();
