/**
 * `npm run bench:threads [-- --tasks=16] [-- --ms=100] [-- --trivial=2000] [-- --rounds=3] [-- --reps=5] [-- --contenders=taskheap,piscina]`
 *
 * Module tasks in taskheap's worker threads (issue 26) side by side with
 * piscina, tinypool, Bree and the same work on the main thread (a taskheap
 * function task), in one run. Every contender gets a pool of
 * `os.availableParallelism()` threads and the same work
 * (bench/workloads/threads-work.js); each workload runs for each contender in
 * a fresh process (bench/threads/child.ts), in interleaved rounds (median of
 * `--rounds`, each round in another order):
 *
 * 1. CPU-bound: `--tasks` tasks of about `--ms` ms of arithmetic each
 *    (calibrated here first, the same rounds for everyone): wall time.
 * 2. Trivial tasks: `--trivial` tasks that return their payload: tasks a
 *    second (what crossing to a thread and back costs), and the CPU time
 *    per task of the main thread and of the whole process (what a machine
 *    loaded by others disturbs least). Bree starts a thread
 *    per job, so it runs a tenth of them (at least 10).
 * 3. Timer lateness: a stream of 10 ms timers on the main thread while the
 *    tasks of (1) run: p50, p99 and max lateness.
 * 4. Pool resize: grow (a trivial task's latency while the pool's one
 *    thread is busy, the pool allowed `threads`: taskheap resized then,
 *    piscina and tinypool with `minThreads` 1; the median of `--reps` fresh
 *    pools) and shrink (taskheap only: ms
 *    until idle threads are gone after `scheduler.threads = 1`).
 * 5. Memory: RSS of `threads` warm idle threads, and the peak RSS during (1),
 *    over the process before.
 *
 * Ratios are the figure divided by taskheap's; a table of the issue's targets
 * follows. Bree has no pool: each task is a job run in a new thread, at most
 * `threads` at once (capped by the bench). A full run with the default
 * flags writes bench/results/threads-latest.{md,json}. A tiny run
 * (`--tasks=2 --ms=5 --trivial=20 --rounds=1 --reps=1`) is what
 * test/threads/bench.test.ts runs: it checks the script, not the figures.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { buildSync } from 'esbuild';
import type { Order } from './threads/child.js';
import { CONTENDERS, type Contender } from './threads/pools.js';
import { spin } from './workloads/threads-work.js';

const USAGE =
  'usage: npm run bench:threads [-- --tasks=16] [-- --ms=100] [-- --trivial=2000] [-- --rounds=3] [-- --reps=5] [-- --contenders=taskheap,piscina,tinypool,bree,main]';

function flag(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (arg === undefined) return fallback;
  const value = Number(arg.slice(name.length + 3));
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${USAGE}: bad --${name}`);
    process.exit(1);
  }
  return value;
}

const tasks = flag('tasks', 16);
const ms = flag('ms', 100);
const trivial = flag('trivial', 2_000);
const rounds = flag('rounds', 3);
const reps = flag('reps', 5);
const size = os.availableParallelism();
const FULL = process.argv.slice(2).length === 0;
const chosen = process.argv
  .find((a) => a.startsWith('--contenders='))
  ?.slice('--contenders='.length)
  .split(',')
  .map((c) => (c === 'main' ? 'main thread' : c));
for (const c of chosen ?? [])
  if (!(CONTENDERS as readonly string[]).includes(c)) {
    console.error(`${USAGE}: unknown contender ${c}`);
    process.exit(1);
  }
const contenders = CONTENDERS.filter((c) => chosen?.includes(c) ?? true);

/**
 * Rounds of `spin` that take about `target` ms on this machine: the fastest
 * of 5 timings, so a busy moment of the machine does not shrink the work.
 */
function calibrate(target: number): number {
  let n = 10_000;
  while (n < 2 ** 40) {
    const start = performance.now();
    spin(n);
    if (performance.now() - start >= 50) break;
    n *= 2;
  }
  let fastest = Infinity;
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    spin(n);
    fastest = Math.min(fastest, performance.now() - start);
  }
  return Math.max(1, Math.round((n * target) / Math.max(fastest, 0.001)));
}
const spinRounds = calibrate(ms);

type Workload = Order['workload'];
type Figures = Record<string, number | string>;
const ROOT = fileURLToPath(new URL('../', import.meta.url));

/**
 * bench/threads/child.ts bundled once (esbuild: its src/ imports inlined,
 * packages left to node_modules) into one ES module that plain `node` runs:
 * the same program as `node --import tsx bench/threads/child.ts`, without
 * tsx's start-up (about a second of CPU) in each of the children, nor its
 * loader thread beside the figures. Under node_modules so its packages
 * resolve; pools.ts finds the workloads by its own `import.meta.url`, which
 * therefore stays its source file's.
 */
const bundleDir = new URL(`node_modules/.cache/taskheap-bench-threads-${process.pid}/`, pathToFileURL(ROOT));
const CHILD = fileURLToPath(new URL('child.mjs', bundleDir));
buildSync({
  entryPoints: [fileURLToPath(new URL('./threads/child.ts', import.meta.url))],
  outfile: CHILD,
  bundle: true,
  packages: 'external',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  define: { 'import.meta.url': JSON.stringify(new URL('./threads/pools.ts', import.meta.url).href) },
});
process.on('exit', () => rmSync(bundleDir, { recursive: true, force: true }));

/** Runs one workload for one contender in a fresh process; its JSON line. */
function child(contender: Contender, workload: Workload): Promise<Figures> {
  const order: Order = { contender, workload, size, tasks, rounds: spinRounds, trivial, reps };
  if (contender === 'bree' && workload === 'trivial') order.trivial = Math.max(10, Math.round(trivial / 10));
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--expose-gc', CHILD, JSON.stringify(order)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    proc.on('error', reject);
    proc.on('close', (code) => {
      const line = stdout.trim().split('\n').at(-1) ?? '';
      if (code === 0 && line.startsWith('{')) resolve(JSON.parse(line) as Figures);
      else resolve({ note: `failed (exit ${String(code)}): ${stderr.trim().split('\n').at(-1) ?? ''}` });
    });
  });
}

const WORKLOADS: Workload[] = ['cpu', 'trivial', 'grow', 'shrink', 'memory'];
const samples: { contender: Contender; workload: Workload; figures: Figures }[] = [];
const load = [os.loadavg()[0]!];
const started = performance.now();
for (let round = 0; round < rounds; round++)
  for (const workload of WORKLOADS)
    for (let k = 0; k < contenders.length; k++) {
      // Interleaved, each round in another order, so drift of the machine spreads evenly.
      const contender = contenders[(k + round) % contenders.length]!;
      const figures = await child(contender, workload);
      process.stderr.write(`bench: round ${round + 1}, ${workload}, ${contender}: ${JSON.stringify(figures)}\n`);
      samples.push({ contender, workload, figures });
    }
load.push(os.loadavg()[0]!);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The median of a figure, or the note that stands in for it. */
function figure(contender: Contender, workload: Workload, field: string): number | string | undefined {
  const list = samples.filter((s) => s.contender === contender && s.workload === workload).map((s) => s.figures);
  const values = list.map((f) => f[field]).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (values.length > 0) return median(values);
  const note = list.find((f) => typeof f.note === 'string')?.note;
  return typeof note === 'string' ? note : undefined;
}

const rows: string[] = [
  `| | ${contenders.map((c) => (c === 'taskheap' ? 'taskheap threads' : c)).join(' | ')} |`,
  `| --- | ${contenders.map(() => '---:').join(' | ')} |`,
];
function row(label: string, workload: Workload, field: string, digits: number, lowerIsBetter: boolean): void {
  const own = figure('taskheap', workload, field);
  const cells = contenders.map((c) => {
    const value = figure(c, workload, field);
    if (value === undefined) return '—';
    if (typeof value === 'string') return value;
    const ratio = c === 'taskheap' || typeof own !== 'number' || own === 0 ? '' : ` (${(value / own).toFixed(2)}×)`;
    return `${value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })}${ratio}`;
  });
  rows.push(`| ${label}${lowerIsBetter ? ' (lower is better)' : ''} | ${cells.join(' | ')} |`);
}
row(`(1) ${tasks} CPU-bound tasks of ~${ms} ms: wall ms`, 'cpu', 'wall', 0, true);
row(`(2) trivial tasks: tasks/s`, 'trivial', 'rate', 0, false);
row('(2) trivial tasks: main-thread CPU per task, µs', 'trivial', 'mainUs', 1, true);
row('(2) trivial tasks: CPU per task, all threads, µs', 'trivial', 'cpuUs', 1, true);
row('(3) 10 ms timers during (1): p50 late, ms', 'cpu', 'p50', 1, true);
row('(3) 10 ms timers during (1): p99 late, ms', 'cpu', 'p99', 1, true);
row('(3) 10 ms timers during (1): max late, ms', 'cpu', 'max', 1, true);
row(`(4) grow 1 → ${size} threads while busy: a trivial task's latency, ms`, 'grow', 'grow', 1, true);
row(`(4) shrink ${size} → 1 idle threads: ms until gone`, 'shrink', 'shrink', 1, true);
row(`(5) ${size} warm idle threads: RSS, MB`, 'memory', 'warmMb', 1, true);
row('(5) peak RSS during (1), MB over before', 'cpu', 'peakMb', 1, true);

/** The issue's targets, where taskheap and the figure they compare with were measured. */
const targets: string[] = ['| target (issue 26) | measured | |', '| --- | --- | --- |'];
const num = (c: Contender, w: Workload, f: string): number | undefined => {
  const v = contenders.includes(c) ? figure(c, w, f) : undefined;
  return typeof v === 'number' ? v : undefined;
};
function target(label: string, measured: number | undefined, text: (v: number) => string, met: (v: number) => boolean): void {
  if (measured === undefined) targets.push(`| ${label} | — | not measured |`);
  else targets.push(`| ${label} | ${text(measured)} | ${met(measured) ? 'met' : 'missed'} |`);
}
const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : a / b);
const wall = (c: Contender) => num(c, 'cpu', 'wall');
target(
  '(1) CPU-bound wall time within 10% of piscina',
  ratio(wall('taskheap'), wall('piscina')),
  (v) => `${v.toFixed(2)}× piscina's`,
  (v) => v <= 1.1,
);
target(
  '(1) about 2× faster than the main thread',
  ratio(wall('main thread'), wall('taskheap')),
  (v) => `${v.toFixed(2)}× (on ${size} cores)`,
  (v) => v >= 1.8,
);
target(
  '(2) trivial tasks at least 0.8× piscina',
  ratio(num('taskheap', 'trivial', 'rate'), num('piscina', 'trivial', 'rate')),
  (v) => `${v.toFixed(2)}× piscina's`,
  (v) => v >= 0.8,
);
const mainP99 = num('main thread', 'cpu', 'p99');
target(
  '(3) 10 ms timers p99 late under 5 ms in threads',
  num('taskheap', 'cpu', 'p99'),
  (v) => `${v.toFixed(1)} ms (main thread: ${mainP99 === undefined ? '—' : `${mainP99.toFixed(1)} ms`})`,
  (v) => v < 5,
);

const version = (name: string): string =>
  (JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string }).version;
const cpus = os.cpus();
const markdown = [
  '# Worker threads: taskheap beside piscina, tinypool, Bree and the main thread',
  '',
  `- Machine: ${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores; load average (1 min) ${load[0]!.toFixed(2)} at start, ${load[1]!.toFixed(2)} at end; Node ${process.version}`,
  `- Versions: piscina ${version('piscina')}, tinypool ${version('tinypool')}, bree ${version('bree')}`,
  `- Pools of ${size} threads (\`os.availableParallelism()\`), no Node flags in threads; ${tasks} CPU-bound tasks of ~${ms} ms (${spinRounds} rounds), ${trivial} trivial tasks (Bree: ${Math.max(10, Math.round(trivial / 10))}); median of ${rounds} interleaved round${rounds > 1 ? 's' : ''}, each workload in a fresh process; ${((performance.now() - started) / 1_000).toFixed(0)} s`,
  `- Ratios in parentheses: the figure divided by taskheap's. Bree runs each task as a job in a new thread, at most ${size} at once.`,
  '',
  ...rows,
  '',
  ...targets,
  '',
].join('\n');
console.log(markdown);
if (FULL) {
  const results = new URL('./results/', import.meta.url);
  mkdirSync(results, { recursive: true });
  writeFileSync(new URL('threads-latest.md', results), markdown);
  writeFileSync(
    new URL('threads-latest.json', results),
    `${JSON.stringify({ date: new Date().toISOString(), node: process.version, size, tasks, ms, spinRounds, trivial, rounds, loadAverage: load, samples }, null, 2)}\n`,
  );
  console.log('Saved bench/results/threads-latest.{md,json}');
}
