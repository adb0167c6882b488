/**
 * `npm run bench:peers [-- --quick] [-- --contenders=taskheap,graphile-worker] [-- --workloads=delayed,idle] [-- --n=20000] [-- --no-flows]`
 *
 * taskheap's PostgreSQL store side by side with graphile-worker, pg-boss
 * (same PostgreSQL server, a fresh database per run) and BullMQ (on Redis,
 * and on PostgreSQL through its PostgreSQL backend), on the same machine in
 * one run. Every process, taskheap's included, runs
 * under Node 24, which the peers' current versions need: the binary and the
 * peers are fetched into node_modules/.cache/taskheap-peers on first use
 * (bench/peers/runtime.ts), so `npm ci` stays lean.
 *
 * Workloads (N = 20,000 no-op jobs; quick: 2,000), each the median of
 * interleaved rounds (3; quick: 1), with fsync off and again with fsync on:
 * - enqueue one at a time: sequential single adds from one process (N/4 jobs);
 * - bulk enqueue: calls of 1,000 jobs;
 * - processing with 1 and with 3 worker processes of 16 slots each: from
 *   "go" until the last job ran; every job is checked to have run exactly
 *   once, and `pg_stat_statements` counts the statements per job; CPU per
 *   1,000 jobs is the server's (every PostgreSQL process, or redis-server,
 *   from /proc) and the worker processes' (process.cpuUsage() from "go" to
 *   their close), which a loaded machine disturbs far less than jobs/s;
 * - delayed jobs: 1,000 jobs due 2 to 4 s ahead, one worker process; lateness
 *   is the handler's start minus the due time;
 * - quiet (`quiet`): a quiet app's worker, 300 jobs (quick: 150) due one by one
 *   over 15 s (quick: 7.5 s), each claimed alone: statements and server CPU per
 *   job from the first due time to the last job (the enqueue before it is not
 *   counted), which a quiet app pays for far more than for a flood's, beside
 *   how late the jobs start (a worker that polls runs them late, in batches);
 * - start (`start`): a worker process started with nothing to do: the CPU of
 *   its database's connections and the statements from "go" to a second later;
 * - idle: statements a worker process runs in 30 s (quick: 10 s) with nothing to do;
 * - held snapshot (`snapshot`): processing with 1 process while another
 *   connection to the same database holds a REPEATABLE READ snapshot open
 *   for the whole run (a report, a forgotten BEGIN): jobs/s, and the dead
 *   tuples the queue's tables hold at the end (VACUUM can remove none of
 *   what the run left while the snapshot is held).
 * Writes bench/results/peers-latest.{json,md}; then runs the flows bench
 * (bench/flows.ts, taskheap's flows beside BullMQ's and pg-boss's) unless
 * `--no-flows`.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPgServer, type PgServer } from '../test/durable/pg-server.js';
import { BUILD_DIR, buildForChildren } from './lib/build.js';
import { SETTINGS } from './peers/contenders.js';
import { processesCpuMs, serverCpuMs } from './peers/cpu.js';
import { ensureRuntime, startRedis, type PeerRuntime } from './peers/runtime.js';

const QUICK = process.argv.includes('--quick');
/** `--contenders=a,b`: only these (an A/B run of taskheap alone, say); default every peer. */
const ONLY = process.argv
  .find((arg) => arg.startsWith('--contenders='))
  ?.slice('--contenders='.length)
  .split(',');
/** `--workloads=delayed,idle`: only these of enqueue, bulk, processing, delayed, quiet, start, snapshot and idle (an A/B run of one, say); default all. */
const WORKLOADS = process.argv
  .find((arg) => arg.startsWith('--workloads='))
  ?.slice('--workloads='.length)
  .split(',');
/** `--n=20000`: this many jobs (with --quick: one round at the full run's size, say). */
const N = Number(process.argv.find((arg) => arg.startsWith('--n='))?.slice('--n='.length) ?? (QUICK ? 2_000 : 20_000));
const ROUNDS = QUICK ? 1 : 3;
const DELAYED = 1_000;
/** The quiet workload: jobs due one by one, 20 a second. */
const QUIET = QUICK ? 150 : 300;
const QUIET_SPREAD = QUIET * 50;
const IDLE_SECONDS = QUICK ? 10 : 30;
const STATS = ['-c shared_preload_libraries=pg_stat_statements', '-c pg_stat_statements.track=all', '-c pg_stat_statements.max=10000'];
const FSYNC_ON = ['-c fsync=on', '-c synchronous_commit=on', '-c full_page_writes=on'];

type Fsync = 'off' | 'on';
interface Sample {
  workload: string;
  fsync: Fsync;
  contender: string;
  /** jobs/s, or lateness ms, by workload */
  value?: number;
  p50?: number;
  p99?: number;
  statementsPerJob?: number;
  /** CPU ms per 1,000 jobs of the server's processes (PostgreSQL, or Redis) */
  serverCpu?: number;
  /** CPU ms per 1,000 jobs of the worker processes */
  nodeCpu?: number;
  /** exactly once, or what went wrong */
  check?: string;
  /** dead tuples in the database's tables at the end (the held-snapshot workload) */
  deadTuples?: number;
  note?: string;
}

interface Env {
  runtime: PeerRuntime;
  server: PgServer;
  admin: pg.Pool;
  redisUrl: string | undefined;
  /** redis-server's pid, for its CPU */
  redisPid: number | undefined;
  contenders: string[];
}

let runCounter = 0;

// ------------------------------------------------------------ child processes

interface Child {
  lines: AsyncIterator<string>;
  send(line: string): void;
  exited: Promise<number | null>;
}

function start(env: Env, order: object): Child {
  const proc = spawn(env.runtime.node, [`${BUILD_DIR}bench/peers/child.js`, JSON.stringify(order)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const exited = new Promise<number | null>((resolve) => proc.once('exit', resolve));
  return { lines, send: (line) => proc.stdin!.write(`${line}\n`), exited };
}

async function nextLine(child: Child, what: string): Promise<string> {
  const { value, done } = await child.lines.next();
  if (done) throw new Error(`${what}: the child exited (code ${String(await child.exited)})`);
  return value;
}

/** Runs a child to its single answer. */
async function once(env: Env, order: object, what: string): Promise<string> {
  const child = start(env, order);
  const line = await nextLine(child, what);
  await child.exited;
  return line;
}

/** A fresh database (or Redis queue) for one run, migrated by the contender. */
async function freshTarget(env: Env, contender: string) {
  const name = `bench_${++runCounter}`;
  await env.admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(env.server.url);
  url.pathname = `/${name}`;
  const target = { pgUrl: url.toString(), redisUrl: env.redisUrl, queue: name };
  await once(env, { contender, role: 'prepare', target }, `${contender} prepare`);
  return { name, target };
}

async function statements(env: Env, database: string): Promise<number> {
  const { rows } = await env.admin.query<{ n: string | null }>(
    `SELECT sum(calls) AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`,
    [database],
  );
  return Number(rows[0]?.n ?? 0);
}

// ------------------------------------------------------------------ workloads

async function enqueue(env: Env, contender: string, fsync: Fsync, bulk: boolean): Promise<Sample> {
  const workload = bulk ? 'bulk enqueue (1,000 per call)' : 'enqueue one at a time';
  const { target } = await freshTarget(env, contender);
  const n = bulk ? N : N / 4;
  const answer = JSON.parse(await once(env, { contender, role: 'enqueue', target, n, bulk }, `${contender} enqueue`)) as {
    seconds?: number;
    unsupported?: boolean;
  };
  if (answer.unsupported) return { workload, fsync, contender, note: 'no bulk API' };
  return { workload, fsync, contender, value: n / answer.seconds! };
}

interface WorkerReport {
  ids: number[];
  lastAt: number;
  lateness: number[];
  cpuMs: number;
}

/** Starts `processes` workers, says go, waits for `expected` jobs, stops them and gathers their reports. */
async function work(
  env: Env,
  contender: string,
  target: object,
  processes: number,
  expected: number,
  beforeGo?: () => Promise<void>,
  afterGo?: () => Promise<void>,
) {
  const workers = Array.from({ length: processes }, () => start(env, { contender, role: 'worker', target }));
  for (const w of workers)
    if ((await nextLine(w, `${contender} worker`)) !== 'loaded') throw new Error(`${contender}: worker did not load`);
  await beforeGo?.();
  const goAt = Date.now();
  for (const w of workers) w.send('go');
  await afterGo?.();
  const counts = workers.map(() => 0);
  const reports: (WorkerReport | undefined)[] = workers.map(() => undefined);
  // 10 ms per job, at least a minute: a slow contender on a loaded machine still finishes.
  const deadline = Date.now() + Math.max(60_000, expected * 10);
  // Each worker prints its count as it changes; a report line ends it.
  const readers = workers.map(async (w, k) => {
    for (;;) {
      const line = await nextLine(w, `${contender} worker`);
      if (line.startsWith('count ')) counts[k] = Number(line.slice(6));
      else if (line.startsWith('{')) return (reports[k] = JSON.parse(line) as WorkerReport);
    }
  });
  while (counts.reduce((a, b) => a + b, 0) < expected && Date.now() < deadline) await sleep(20);
  // A little longer, so a job run twice would show up in the counts.
  await sleep(QUICK ? 200 : 500);
  for (const w of workers) w.send('stop');
  await Promise.all(readers);
  await Promise.all(workers.map((w) => w.exited));
  return { goAt, reports: reports as WorkerReport[] };
}

/** The median and 99th percentile of the reports' lateness, ms. */
function lateness(reports: WorkerReport[]): { p50: number; p99: number } {
  const sorted = reports.flatMap((r) => r.lateness).sort((a, b) => a - b);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: pick(0.5), p99: pick(0.99) };
}

/** Whether a contender keeps its jobs in PostgreSQL: every one but BullMQ on Redis. */
function onPostgres(contender: string): boolean {
  return contender !== 'bullmq';
}

/** The server's processes, whose CPU a workload reads: PostgreSQL's, or redis-server for BullMQ on Redis. */
function serverPids(env: Env, contender: string): number[] {
  if (onPostgres(contender)) return env.server.pids();
  return env.redisPid === undefined ? [] : [env.redisPid];
}

/**
 * What a run costs from `start()` on: the statements run in database `name`
 * (PostgreSQL contenders) and the server's CPU, then per job, beside the
 * worker processes' CPU from their reports.
 */
function costMeter(env: Env, contender: string, name: string) {
  let statementsBefore = 0;
  let cpuBefore = 0;
  /** The statements (PostgreSQL contenders) and the server's CPU ms since start(). */
  const spent = async () => ({
    statements: onPostgres(contender) ? (await statements(env, name)) - statementsBefore : undefined,
    serverCpu: serverCpuMs(serverPids(env, contender)) - cpuBefore,
  });
  return {
    async start(): Promise<void> {
      if (onPostgres(contender)) statementsBefore = await statements(env, name);
      cpuBefore = serverCpuMs(serverPids(env, contender));
    },
    spent,
    async perJob(reports: WorkerReport[], n: number): Promise<Pick<Sample, 'statementsPerJob' | 'serverCpu' | 'nodeCpu'>> {
      const { statements: count, serverCpu } = await spent();
      const nodeCpu = (reports.reduce((sum, r) => sum + r.cpuMs, 0) * 1000) / n;
      return { statementsPerJob: count === undefined ? undefined : count / n, serverCpu: (serverCpu * 1000) / n, nodeCpu };
    },
  };
}

function exactlyOnce(reports: WorkerReport[], n: number): string {
  const seen = new Uint32Array(n);
  for (const report of reports) for (const i of report.ids) seen[i]!++;
  let missing = 0;
  let twice = 0;
  for (const count of seen) {
    if (count === 0) missing++;
    else if (count > 1) twice++;
  }
  return missing === 0 && twice === 0 ? 'exactly once' : `${missing} missing, ${twice} more than once`;
}

/** A client of `database` holding a REPEATABLE READ snapshot from now until it is released. */
async function holdSnapshot(env: Env, database: string): Promise<{ deadTuples(): Promise<number>; release(): Promise<void> }> {
  const url = new URL(env.server.url);
  url.pathname = `/${database}`;
  const holder = new pg.Client({ connectionString: url.toString() });
  const reader = new pg.Client({ connectionString: url.toString() });
  await holder.connect();
  await reader.connect();
  await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await holder.query('SELECT count(*) FROM pg_class'); // the snapshot is taken at the first statement
  return {
    async deadTuples() {
      // The workers have exited, so their statistics are flushed; a second later they are visible.
      await sleep(1_500);
      const { rows } = await reader.query<{ n: string | null }>('SELECT sum(n_dead_tup) AS n FROM pg_stat_user_tables');
      return Number(rows[0]?.n ?? 0);
    },
    async release() {
      await holder.query('ROLLBACK');
      await holder.end();
      await reader.end();
    },
  };
}

async function processing(env: Env, contender: string, fsync: Fsync, processes: number, held = false): Promise<Sample> {
  const workload = `processing, ${processes} process${processes > 1 ? 'es' : ''}${held ? ', snapshot held' : ''}`;
  if (held && !onPostgres(contender)) return { workload, fsync, contender, note: 'Redis: no snapshot' };
  const { name, target } = await freshTarget(env, contender);
  await once(env, { contender, role: 'fill', target, n: N }, `${contender} fill`);
  const cost = costMeter(env, contender, name);
  const snapshot = held && onPostgres(contender) ? await holdSnapshot(env, name) : undefined;
  const { goAt, reports } = await work(env, contender, target, processes, N, cost.start);
  const deadTuples = await snapshot?.deadTuples();
  await snapshot?.release();
  const lastAt = Math.max(...reports.map((r) => r.lastAt));
  return {
    workload,
    fsync,
    contender,
    value: N / ((lastAt - goAt) / 1000),
    ...(await cost.perJob(reports, N)),
    check: exactlyOnce(reports, N),
    deadTuples,
  };
}

async function delayed(env: Env, contender: string, fsync: Fsync): Promise<Sample> {
  const { target } = await freshTarget(env, contender);
  const { reports } = await work(env, contender, target, 1, DELAYED, undefined, async () => {
    await sleep(500); // the worker is up and idle
    const at = Date.now() + 2_000;
    await once(
      env,
      { contender, role: 'enqueue', target, n: DELAYED, bulk: false, due: { at, spread: 2_000 } },
      `${contender} delayed enqueue`,
    );
    if (Date.now() > at) process.stderr.write(`bench: ${contender} took longer to enqueue the delayed jobs than their lead\n`);
  });
  return { workload: 'delayed jobs, lateness', fsync, contender, ...lateness(reports), check: exactlyOnce(reports, DELAYED) };
}

/**
 * A quiet app's worker: QUIET jobs due one by one over QUIET_SPREAD ms, each
 * claimed alone. Statements and CPU are read from the first due time (the
 * enqueue before it not counted) to the end.
 */
async function quiet(env: Env, contender: string, fsync: Fsync): Promise<Sample> {
  const workload = `quiet worker (${QUIET} jobs due one by one over ${QUIET_SPREAD / 1000} s)`;
  const { name, target } = await freshTarget(env, contender);
  const cost = costMeter(env, contender, name);
  const { reports } = await work(env, contender, target, 1, QUIET, undefined, async () => {
    await sleep(500); // the worker is up and idle
    const at = Date.now() + 2_000;
    await once(
      env,
      { contender, role: 'enqueue', target, n: QUIET, bulk: false, due: { at, spread: QUIET_SPREAD } },
      `${contender} quiet enqueue`,
    );
    if (Date.now() > at) process.stderr.write(`bench: ${contender} took longer to enqueue the quiet jobs than their lead\n`);
    await sleep(Math.max(0, at - Date.now()));
    await cost.start();
  });
  return { workload, fsync, contender, ...(await cost.perJob(reports, QUIET)), ...lateness(reports), check: exactlyOnce(reports, QUIET) };
}

/**
 * A worker's start with nothing to do: the server's CPU ms (as `value`) and
 * the statements (as `statementsPerJob`) from "go" to a second later, its
 * start-up and its first idle round: what every process start, deploy or
 * scale-out costs the database. On PostgreSQL the CPU is that of the
 * connections open to the run's database a second after "go" (each opened
 * since): the server's whole CPU would count autovacuum's rounds over the
 * databases of the runs before, as large as a start.
 */
async function startup(env: Env, contender: string, fsync: Fsync): Promise<Sample> {
  const { name, target } = await freshTarget(env, contender);
  const cost = costMeter(env, contender, name);
  let spent: Awaited<ReturnType<typeof cost.spent>> | undefined;
  await work(env, contender, target, 1, 0, cost.start, async () => {
    await sleep(1_000);
    spent = await cost.spent();
    if (!onPostgres(contender)) return;
    const { rows } = await env.admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
      [name],
    );
    spent.serverCpu = processesCpuMs(rows.map((row) => row.pid));
  });
  return {
    workload: 'a worker start, nothing due (go + 1 s)',
    fsync,
    contender,
    value: spent!.serverCpu,
    statementsPerJob: spent!.statements,
  };
}

/** Statements each contender's idle worker runs; all at once, each in its own database. */
async function idle(env: Env): Promise<Sample[]> {
  const pgContenders = env.contenders.filter(onPostgres);
  const targets = await Promise.all(pgContenders.map((c) => freshTarget(env, c)));
  const workers = pgContenders.map((contender, k) => start(env, { contender, role: 'worker', target: targets[k]!.target }));
  for (const w of workers) await nextLine(w, 'idle worker');
  for (const w of workers) w.send('go');
  await sleep(3_000); // start-up work is not idling
  const before = await Promise.all(targets.map((t) => statements(env, t.name)));
  await sleep(IDLE_SECONDS * 1_000);
  const after = await Promise.all(targets.map((t) => statements(env, t.name)));
  for (const w of workers) w.send('stop');
  await Promise.all(workers.map((w) => w.exited));
  return pgContenders.map((contender, k) => ({
    workload: `statements while idle, ${IDLE_SECONDS} s`,
    fsync: 'off' as const,
    contender,
    value: after[k]! - before[k]!,
  }));
}

// ------------------------------------------------------------------- the run

/** Whether `--workloads` (if given) asks for the workload `name`. */
function chosen(name: string): boolean {
  return WORKLOADS?.includes(name) ?? true;
}

async function pass(env: Env, fsync: Fsync): Promise<Sample[]> {
  const samples: Sample[] = [];
  const contenders = fsync === 'on' ? env.contenders.filter(onPostgres) : env.contenders;
  const named: [string, (contender: string) => Promise<Sample>][] = [
    ['enqueue', (c) => enqueue(env, c, fsync, false)],
    ['bulk', (c) => enqueue(env, c, fsync, true)],
    ['processing', (c) => processing(env, c, fsync, 1)],
    ['processing', (c) => processing(env, c, fsync, 3)],
  ];
  if (fsync === 'off')
    named.push(
      ['delayed', (c) => delayed(env, c, fsync)],
      ['quiet', (c) => quiet(env, c, fsync)],
      ['start', (c) => startup(env, c, fsync)],
    );
  // A held snapshot costs what it costs whatever the fsync setting: measured once, beside the unheld run.
  if (fsync === 'off') named.push(['snapshot', (c) => processing(env, c, fsync, 1, true)]);
  const workloads = named.filter(([name]) => chosen(name)).map(([, run]) => run);
  for (let round = 0; round < ROUNDS; round++) {
    for (const workload of workloads) {
      // Interleaved, and each round in another order, so drift of the machine spreads evenly.
      for (let k = 0; k < contenders.length; k++) {
        const contender = contenders[(k + round) % contenders.length]!;
        const sample = await workload(contender);
        process.stderr.write(`bench: fsync ${fsync}, round ${round + 1}: ${sample.workload}, ${contender}: ${describe(sample)}\n`);
        samples.push(sample);
      }
    }
  }
  return samples;
}

function describe(s: Sample): string {
  if (s.note !== undefined) return s.note;
  if (s.workload.startsWith('a worker start')) return `${s.value!.toFixed(0)} ms server CPU, ${s.statementsPerJob ?? '—'} statements`;
  if (s.p99 !== undefined && s.serverCpu === undefined) return `p50 ${s.p50} ms, p99 ${s.p99} ms (${s.check})`;
  const extra = [
    s.p99 === undefined ? '' : `late p50 ${s.p50} ms, p99 ${s.p99} ms`,
    s.statementsPerJob === undefined ? '' : `${s.statementsPerJob.toFixed(2)} statements/job`,
    s.serverCpu === undefined ? '' : `CPU/1k jobs: server ${s.serverCpu.toFixed(1)} ms, Node ${s.nodeCpu!.toFixed(1)} ms`,
    s.deadTuples === undefined ? '' : `${s.deadTuples} dead tuples`,
    s.check ?? '',
  ]
    .filter(Boolean)
    .join(', ');
  if (s.value === undefined) return extra;
  return `${Math.round(s.value)}${extra === '' ? '' : ` (${extra})`}`;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

type NumberField = 'value' | 'p99' | 'statementsPerJob' | 'serverCpu' | 'nodeCpu' | 'deadTuples';

/** One row per workload and fsync setting, one column per contender, with ratios to taskheap. */
function table(samples: Sample[], contenders: string[]): string {
  const rows: string[] = [`| | ${contenders.join(' | ')} |`, `| --- | ${contenders.map(() => '---:').join(' | ')} |`];
  const keys = [...new Set(samples.map((s) => `${s.workload}|${s.fsync}`))];
  const cell = (list: Sample[], field: NumberField): number | undefined => {
    const values = list.map((s) => s[field]).filter((v): v is number => v !== undefined && Number.isFinite(v));
    return values.length === 0 ? undefined : median(values);
  };
  const emit = (label: string, field: NumberField, key: string, unit: (v: number) => string, higherIsBetter: boolean) => {
    const [workload, fsync] = key.split('|');
    const of = (c: string) => samples.filter((s) => s.workload === workload && s.fsync === fsync && s.contender === c);
    const own = cell(of('taskheap'), field);
    const cells = contenders.map((c) => {
      const list = of(c);
      if (list.length === 0) return '—';
      if (list[0]!.note !== undefined) return list[0]!.note;
      const value = cell(list, field);
      if (value === undefined) return '—';
      const checks = [...new Set(list.map((s) => s.check).filter((x) => x !== undefined && x !== 'exactly once'))];
      const ratio = c === 'taskheap' || own === undefined || own === 0 ? '' : ` (${(value / own).toFixed(2)}×)`;
      return `${unit(value)}${ratio}${checks.length > 0 ? ` **${checks.join('; ')}**` : ''}`;
    });
    rows.push(`| ${label}${higherIsBetter ? '' : ' (lower is better)'} | ${cells.join(' | ')} |`);
  };
  for (const key of keys) {
    const [workload, fsync] = key.split('|') as [string, Fsync];
    const suffix = /^(statements while idle|delayed|quiet|a worker start)/.test(workload) ? '' : `, fsync ${fsync}`;
    if (workload.startsWith('delayed')) emit(`${workload} p99, ms`, 'p99', key, (v) => v.toFixed(0), false);
    else if (workload.startsWith('a worker start')) {
      emit(`${workload}: server CPU ms`, 'value', key, (v) => v.toFixed(0), false);
      emit(`${workload}: statements`, 'statementsPerJob', key, (v) => v.toFixed(0), false);
    } else if (workload.startsWith('quiet')) {
      emit(`${workload}: late, p99, ms`, 'p99', key, (v) => v.toFixed(0), false);
      emit(`${workload}: statements per job`, 'statementsPerJob', key, (v) => v.toFixed(2), false);
      emit(`${workload}: server CPU ms per 1,000 jobs`, 'serverCpu', key, (v) => v.toFixed(1), false);
      emit(`${workload}: Node CPU ms per 1,000 jobs`, 'nodeCpu', key, (v) => v.toFixed(1), false);
    } else if (workload.startsWith('statements')) emit(workload, 'value', key, (v) => v.toFixed(0), false);
    else {
      emit(`${workload}: jobs/s${suffix}`, 'value', key, (v) => Math.round(v).toLocaleString('en-US'), true);
      if (workload.startsWith('processing')) {
        emit(`${workload}: statements per job${suffix}`, 'statementsPerJob', key, (v) => v.toFixed(2), false);
        emit(`${workload}: server CPU ms per 1,000 jobs${suffix}`, 'serverCpu', key, (v) => v.toFixed(1), false);
        emit(`${workload}: Node CPU ms per 1,000 jobs${suffix}`, 'nodeCpu', key, (v) => v.toFixed(1), false);
        if (workload.endsWith('snapshot held'))
          emit(`${workload}: dead tuples at the end`, 'deadTuples', key, (v) => Math.round(v).toLocaleString('en-US'), false);
      }
    }
  }
  return rows.join('\n');
}

async function withServer<T>(settings: string[], fn: (server: PgServer, admin: pg.Pool) => Promise<T>): Promise<T> {
  const server = await startPgServer({ database: 'bench_admin', settings: [...STATS, ...settings] });
  const admin = new pg.Pool({ connectionString: server.url, max: 4 });
  admin.on('error', () => {});
  try {
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    return await fn(server, admin);
  } finally {
    await admin.end();
    await server.destroy();
  }
}

async function main(): Promise<void> {
  const runtime = ensureRuntime();
  await buildForChildren();
  const redis = runtime.redis === undefined ? undefined : await startRedis(runtime.redis);
  const contenders = ['taskheap', 'graphile-worker', 'pg-boss', 'bullmq-postgres', ...(redis === undefined ? [] : ['bullmq'])].filter(
    (c) => ONLY?.includes(c) ?? true,
  );
  const load = [os.loadavg()[0]!];
  const samples: Sample[] = [];
  let pgVersion = '';
  try {
    for (const fsync of ['off', 'on'] as const) {
      // Only the throughput workloads run again with fsync on.
      if (fsync === 'on' && !['enqueue', 'bulk', 'processing'].some(chosen)) continue;
      await withServer(fsync === 'on' ? FSYNC_ON : [], async (server, admin) => {
        pgVersion = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
        const env: Env = { runtime, server, admin, redisUrl: redis?.url, redisPid: redis?.pid, contenders };
        samples.push(...(await pass(env, fsync)));
        if (fsync === 'off' && chosen('idle')) samples.push(...(await idle(env)));
      });
    }
  } finally {
    await redis?.stop();
    load.push(os.loadavg()[0]!);
  }
  const cpus = os.cpus();
  const lines = [
    `# taskheap against PostgreSQL job queues${QUICK ? ' (quick)' : ''}`,
    '',
    `- Machine: ${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GB; load average (1 min) ${load[0]!.toFixed(2)} at start, ${load[1]!.toFixed(2)} at end`,
    `- Every process on Node ${runtime.nodeVersion}; PostgreSQL ${pgVersion} on loopback (shared_buffers 64MB; fsync off: also synchronous_commit and full_page_writes off); Redis ${redis === undefined ? 'absent' : 'in memory'}`,
    `- Versions: ${Object.entries(runtime.versions)
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}`,
    `- N = ${N.toLocaleString('en-US')} no-op jobs (enqueue one at a time: N/4), ${ROUNDS} interleaved round${ROUNDS > 1 ? 's' : ''} (median), ${DELAYED.toLocaleString('en-US')} delayed jobs`,
    ...Object.entries(SETTINGS)
      .filter(([name]) => contenders.includes(name))
      .map(([name, text]) => `- ${name}: ${text}`),
    "- Ratios in parentheses: the figure divided by taskheap's. A bold note means a job did not run exactly once.",
    '- CPU per 1,000 jobs while processing: server = every PostgreSQL process (or redis-server for bullmq) from /proc; Node = the worker processes, process.cpuUsage() from go to close.',
    '',
    table(samples, contenders),
    '',
  ];
  const markdown = lines.join('\n');
  console.log(markdown);
  // A run of some workloads is an A/B trial, not a result to keep.
  if (WORKLOADS !== undefined) return;
  const results = new URL('./results/', import.meta.url);
  mkdirSync(results, { recursive: true });
  const name = QUICK ? 'peers-latest-quick' : 'peers-latest';
  writeFileSync(new URL(`${name}.md`, results), markdown);
  writeFileSync(
    new URL(`${name}.json`, results),
    `${JSON.stringify({ date: new Date().toISOString(), quick: QUICK, n: N, rounds: ROUNDS, node: runtime.nodeVersion, postgres: pgVersion, versions: runtime.versions, loadAverage: load, samples }, null, 2)}\n`,
  );
  console.log(`Saved bench/results/${name}.{md,json}`);
}

/**
 * Then flows beside BullMQ's and pg-boss's (issue 28), bench/flows.ts in a
 * process of its own with the same `--quick` (its own server and tables:
 * bench/results/flows-latest*), unless `--no-flows` or `--contenders=` names
 * none of its contenders.
 */
function flows(): Promise<void> {
  const names = ['taskheap', 'bullmq-postgres', 'pg-boss'].filter((c) => ONLY?.includes(c) ?? true);
  if (process.argv.includes('--no-flows') || names.length === 0) return Promise.resolve();
  const args = ['--import', 'tsx', fileURLToPath(new URL('./flows.ts', import.meta.url)), `--contenders=${names.join(',')}`];
  if (QUICK) args.push('--quick');
  return new Promise((resolve, reject) => {
    spawn(process.execPath, args, { stdio: 'inherit' }).on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`bench/flows.ts exited with ${code}`)),
    );
  });
}

await main();
await flows();
