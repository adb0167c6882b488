/**
 * `npm run bench [-- --quick] [-- --only=oneshot,drain] [-- --contenders=taskheap,croner]`
 *
 * Runs every contender through every workload, each in a fresh child process
 * with a time limit, prints markdown tables (figures with their ratio to
 * taskheap) and SPEC §3's targets, and saves JSON under bench/results/.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { CONTENDERS } from './contenders/index.js';
import { buildForChildren } from './lib/build.js';
import { FULL, plan, QUICK, type Measurement, type Mode, type Workload } from './lib/plan.js';
import { renderTables, renderTargets, targets } from './lib/report.js';
import { HEAP_LIMIT_MB, runChild, type Outcome } from './lib/spawn.js';

const RESULTS = new URL('./results/', import.meta.url);

interface Options {
  mode: Mode;
  only?: Set<string>;
  contenders?: Set<string>;
}

function parseArgs(argv: string[]): Options {
  const value = (name: string): Set<string> | undefined => {
    const arg = argv.find((a) => a.startsWith(`--${name}=`));
    return arg === undefined ? undefined : new Set(arg.slice(name.length + 3).split(','));
  };
  return { mode: argv.includes('--quick') ? QUICK : FULL, only: value('only'), contenders: value('contenders') };
}

function machine(): Record<string, string | number> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    os: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

/** Installed versions of the peers, read from their package.json. */
function versions(): Record<string, string> {
  const out: Record<string, string> = {};
  const own = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  out.taskheap = `${own.version} (src/, via tsx)`;
  for (const c of CONTENDERS) {
    if (c.pkg === undefined) continue;
    try {
      // Read from disk: some packages do not export their package.json.
      const file = new URL(`../node_modules/${c.pkg}/package.json`, import.meta.url);
      out[c.pkg] = (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
    } catch {
      out[c.pkg] = 'not installed';
    }
  }
  return out;
}

/**
 * Decides without a child process when the answer is known: the contender
 * lacks the capability, or a smaller N of the same chain already failed, or
 * the smaller N's time scaled up would exceed the time limit.
 */
function shortcut(m: Measurement, previous: Measurement | undefined, mode: Mode): Outcome | undefined {
  const reason = CONTENDERS.find((c) => c.name === m.contender)?.na[m.needs];
  if (reason !== undefined) return { status: 'n/a', message: reason };
  const before = previous?.outcome;
  if (before === undefined || previous?.n === undefined || m.n === undefined) return undefined;
  const at = previous.n.toLocaleString('en-US');
  if (before.status === 'n/a') return before;
  if (before.status === 'timeout' || before.status === 'OOM') return { status: 'skipped', message: `${before.status} at ${at}` };
  if (before.status === 'skipped') return before;
  // Linear scaling, plus a quarter for the GC work that grows with the heap.
  const projected = (1.25 * (before.wallMs ?? 0) * m.n) / previous.n;
  if (projected > mode.limitMs) {
    return { status: 'skipped', message: `${at} took ${((before.wallMs ?? 0) / 1000).toFixed(1)} s; projected > ${mode.limitMs / 1000} s` };
  }
  return undefined;
}

/**
 * For the drain of a library that refuses past times: put the tasks far
 * enough ahead that scheduling them all ends first, judging by what
 * scheduling cost it in workload 1 at the same N (2.5 times that, plus margin:
 * scheduling many tasks at one instant can cost more than at random times).
 */
function leadHint(m: Measurement, list: Measurement[]): number | undefined {
  const oneShot = list.find((o) => o.workload === 'oneshot' && o.contender === m.contender && o.n === m.n);
  const perTask = oneShot?.outcome?.status === 'ok' ? oneShot.outcome.data?.scheduleNsPerTask : undefined;
  return typeof perTask === 'number' && m.n !== undefined ? Math.ceil((perTask * m.n * 2.5) / 1e6 + 500) : undefined;
}

async function execute(list: Measurement[], mode: Mode): Promise<void> {
  const command = await buildForChildren();
  const lastOfChain = new Map<string, Measurement>();
  let index = 0;
  for (const m of list) {
    index++;
    if (m.workload === 'drain') m.params.leadMs = leadHint(m, list);
    const quickAnswer = shortcut(m, lastOfChain.get(m.chain), mode);
    m.outcome = quickAnswer ?? (await runChild(command, m.workload, m.params, mode.limitMs));
    lastOfChain.set(m.chain, m);
    if (quickAnswer === undefined) {
      const took = ((m.outcome.wallMs ?? 0) / 1000).toFixed(1);
      const detail = m.outcome.status === 'ok' ? '' : ` ${m.outcome.message ?? ''}`;
      process.stderr.write(`[${index}/${list.length}] ${m.workload} ${m.label} ${m.group}: ${m.outcome.status}${detail} (${took} s)\n`);
    }
  }
}

/** The 1-minute load average: other processes on the machine distort every figure. */
const load = (): string => os.loadavg()[0]!.toFixed(2);

function header(mode: Mode, info: Record<string, string | number>, libs: Record<string, string>, loads: string[]): string {
  const lib = Object.entries(libs)
    .map(([name, version]) => `${name} ${version}`)
    .join(', ');
  return [
    `# taskheap benchmarks${mode.quick ? ' (quick)' : ''}`,
    '',
    `- Machine: ${info.cpu}, ${info.cores} cores, ${info.memoryGB} GB, ${info.os}`,
    `- Node ${info.node}; each contender × workload in a fresh \`node --expose-gc --max-old-space-size=${HEAP_LIMIT_MB}\` process, killed after ${mode.limitMs / 1000} s`,
    `- Versions: ${lib}`,
    `- Load average (1 min) at start and end: ${loads.join(' and ')} on ${info.cores} cores (anything near or above the core count means other processes competed for the CPU)`,
    `- Ratios in parentheses are the figure divided by taskheap's in the same group (lower is better, except for rates). Times and rates are the median of up to 5 rounds (of up to 3 windows for precision) where a round is quick; slow contenders get one round.`,
  ].join('\n');
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const { mode } = options;
  const started = new Date();
  const loadAtStart = load();
  const list = plan(mode).filter(
    (m) =>
      (options.only === undefined || options.only.has(m.workload as Workload)) &&
      (options.contenders === undefined || options.contenders.has(m.contender)),
  );
  await execute(list, mode);

  const info = machine();
  const libs = versions();
  const largest = Math.max(...mode.sizes);
  const spec = mode.precision[mode.precision.length - 1]!;
  const precisionGroup = `${spec.count.toLocaleString('en-US')} over ${spec.spanMs / 1000} s`;
  const goals = targets(list, largest, precisionGroup);
  const targetNote = mode.quick
    ? 'Quick run: judged at N = 10,000 and a 0.1 s precision window; SPEC sets the targets at 1,000,000 tasks and 10,000 tasks within one second.'
    : 'Judged at N = 1,000,000; precision with 10,000 tasks due within one second.';
  const loads = [loadAtStart, load()];
  const markdown = `${[header(mode, info, libs, loads), renderTables(list), renderTargets(goals, targetNote)].join('\n\n')}\n`;
  process.stdout.write(markdown);

  const partial = options.only !== undefined || options.contenders !== undefined;
  const json = {
    startedAt: started.toISOString(),
    finishedAt: new Date().toISOString(),
    mode,
    partial,
    machine: { ...info, loadAverage: loads },
    versions: libs,
    measurements: list,
    targets: goals,
  };
  save(json, markdown, mode.quick ? 'quick' : partial ? 'partial' : 'full', started);
}

/** bench/results/<kind>-<timestamp>.json, plus latest.json (full runs) or latest-<kind>.json. */
function save(json: object, markdown: string, kind: string, started: Date): void {
  mkdirSync(RESULTS, { recursive: true });
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const latest = kind === 'full' ? 'latest' : `latest-${kind}`;
  const text = `${JSON.stringify(json, null, 2)}\n`;
  writeFileSync(new URL(`${kind}-${stamp}.json`, RESULTS), text);
  writeFileSync(new URL(`${latest}.json`, RESULTS), text);
  writeFileSync(new URL(`${latest}.md`, RESULTS), markdown);
  process.stderr.write(`results: bench/results/${latest}.json, bench/results/${kind}-${stamp}.json\n`);
}

await main();
