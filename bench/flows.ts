/**
 * `npm run bench:flows [-- --quick] [-- --fan=10000] [-- --chain=1000] [-- --contenders=taskheap,pg-boss]`
 *
 * Flows on PostgreSQL (issue 28), taskheap side by side with BullMQ's
 * FlowProducer on its PostgreSQL backend and pg-boss's flow(), on one
 * server this script starts (a fresh database per run), each in a process
 * of its own under Node 24 with 16 slots (bench/flows/contenders.ts):
 * - independent: FAN tasks without dependencies (the baseline);
 * - fan-in: FAN children, then one task after all of them;
 * - chain: CHAIN steps, each after the one before: every step waits for the
 *   settle of the one before and a claim, so its cost is the latency of a
 *   dependency, where independent tasks share their round trips.
 * "run in" is from "go" (the workload already added) to the last task's
 * start; a run that has not finished after BUDGET seconds stops there and
 * counts what ran. CPU per 1,000 tasks is the server's (every PostgreSQL
 * process, from /proc) and the worker process's: on a machine others load,
 * it moves far less than the times. Defaults FAN 10,000 and CHAIN 1,000
 * (quick: 1,000 and 100). Writes bench/results/flows-latest{-quick}.{md,json}.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { startPgServer } from '../test/durable/pg-server.js';
import { BUILD_DIR, buildForChildren } from './lib/build.js';
import { FLOW_SETTINGS, type Workload } from './flows/contenders.js';
import { serverCpuMs } from './peers/cpu.js';
import { ensureRuntime } from './peers/runtime.js';

const QUICK = process.argv.includes('--quick');
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const FAN = arg('fan', QUICK ? 1_000 : 10_000);
const CHAIN = arg('chain', QUICK ? 100 : 1_000);
const BUDGET = arg('budget', QUICK ? 20 : 60) * 1000;
const ONLY = process.argv
  .find((a) => a.startsWith('--contenders='))
  ?.slice('--contenders='.length)
  .split(',');
const CONTENDERS = ['taskheap', 'bullmq-postgres', 'pg-boss'].filter((c) => ONLY?.includes(c) ?? true);

interface Row {
  workload: Workload;
  contender: string;
  tasks: number;
  ran: number;
  added: number;
  run: number;
  /** ms per task run */
  perTask: number;
  serverCpu: number;
  nodeCpu: number;
  note?: string;
}

const runtime = ensureRuntime();
await buildForChildren();
const server = await startPgServer({ database: 'taskheap_flows_bench' });
const admin = new pg.Pool({ connectionString: server.url, max: 2 });
let databases = 0;
const load = [os.loadavg()[0]!];

async function runOne(contender: string, workload: Workload, n: number): Promise<Row> {
  const name = `flows_${++databases}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const order = { contender, workload, n, url: url.toString(), budget: BUDGET };
  const child = spawn(runtime.node, [`${BUILD_DIR}bench/flows/child.js`, JSON.stringify(order)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${contender} ${workload}: the child exited`);
    return value;
  };
  try {
    const added = await next();
    if (!added.startsWith('added ')) throw new Error(`${contender} ${workload}: ${added}`);
    const before = serverCpuMs(server.pids());
    child.stdin!.write('go\n');
    const line = await next();
    const after = serverCpuMs(server.pids());
    if (!line.startsWith('@@result ')) throw new Error(`${contender} ${workload}: ${line}`);
    const r = JSON.parse(line.slice('@@result '.length)) as { added: number; run: number; ran: number; total: number; cpuMs: number };
    load.push(os.loadavg()[0]!);
    return {
      workload,
      contender,
      tasks: r.total,
      ran: r.ran,
      added: r.added,
      run: r.run,
      perTask: (r.run * 1000) / Math.max(1, r.ran),
      serverCpu: ((after - before) * 1000) / Math.max(1, r.ran),
      nodeCpu: (r.cpuMs * 1000) / Math.max(1, r.ran),
      ...(r.ran < r.total ? { note: `${r.ran.toLocaleString('en')} of ${r.total.toLocaleString('en')} in ${BUDGET / 1000} s` } : {}),
    };
  } catch (error) {
    child.kill();
    return {
      workload,
      contender,
      tasks: n,
      ran: 0,
      added: 0,
      run: 0,
      perTask: NaN,
      serverCpu: NaN,
      nodeCpu: NaN,
      note: String(error).split('\n')[0],
    };
  } finally {
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  }
}

const rows: Row[] = [];
const plan: [Workload, number][] = [
  ['independent', FAN],
  ['fan-in', FAN],
  ['chain', CHAIN],
];
try {
  for (const [workload, n] of plan) {
    for (const contender of CONTENDERS) {
      const row = await runOne(contender, workload, n);
      process.stderr.write(
        `${contender} ${workload}: ${row.perTask.toFixed(2)} ms per task${row.note === undefined ? '' : ` (${row.note})`}\n`,
      );
      rows.push(row);
    }
  }
} finally {
  await admin.end();
  await server.destroy();
}

const ms = (v: number) => (Number.isFinite(v) ? (v < 10 ? v.toFixed(2) : v.toFixed(1)) : 'n/a');
const label: Record<Workload, string> = {
  independent: `independent (${FAN.toLocaleString('en')} tasks)`,
  'fan-in': `fan-in (${FAN.toLocaleString('en')} children, then 1)`,
  chain: `chain (${CHAIN.toLocaleString('en')} steps)`,
};
const find = (workload: Workload, contender: string) => rows.find((r) => r.workload === workload && r.contender === contender);
const lines = [
  `Flows on PostgreSQL (bench/flows.ts${QUICK ? ' --quick' : ''}), ${new Date().toISOString()}: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${Math.min(...load).toFixed(1)} to ${Math.max(...load).toFixed(1)} during the runs, Node ${runtime.nodeVersion}; ${Object.entries(
    runtime.versions,
  )
    .filter(([name]) => name === 'bullmq' || name === 'pg-boss')
    .map(([name, version]) => `${name} ${version}`)
    .join(', ')}.`,
  '',
  '| workload | contender | added in | run in | per task | x taskheap | x its independent | server CPU / 1,000 | worker CPU / 1,000 |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
for (const row of rows) {
  const base = find(row.workload, 'taskheap');
  const own = find('independent', row.contender);
  lines.push(
    `| ${label[row.workload]} | ${row.contender}${row.note === undefined ? '' : ` (${row.note})`} | ${row.added.toFixed(2)} s | ${row.run.toFixed(2)} s | ${ms(row.perTask)} ms | ${
      base === undefined || row.contender === 'taskheap' ? '' : `${(row.perTask / base.perTask).toFixed(1)}x`
    } | ${own === undefined || row.workload === 'independent' ? '' : `${(row.perTask / own.perTask).toFixed(0)}x`} | ${ms(row.serverCpu)} ms | ${ms(row.nodeCpu)} ms |`,
  );
}
lines.push('', ...Object.entries(FLOW_SETTINGS).map(([name, settings]) => `- ${name}: ${settings}`));
const markdown = `${lines.join('\n')}\n`;
console.log(`\n${markdown}`);
const results = new URL('./results/', import.meta.url);
mkdirSync(results, { recursive: true });
const name = QUICK ? 'flows-latest-quick' : 'flows-latest';
writeFileSync(new URL(`${name}.md`, results), markdown);
writeFileSync(
  new URL(`${name}.json`, results),
  `${JSON.stringify({ date: new Date().toISOString(), fan: FAN, chain: CHAIN, budget: BUDGET, load, versions: runtime.versions, rows }, null, 2)}\n`,
);
console.log(`Saved bench/results/${name}.{md,json}`);
