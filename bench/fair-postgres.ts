/**
 * `npm run bench:fair-pg [-- --rounds=3]`
 *
 * Fair shares (`fair: { group }`) on PostgreSQL (issue 40), against the same
 * work without them, on a throwaway server (test/durable/pg-server.ts), each
 * run in a schema of its own:
 * - the flood across 3 processes (bench/fair-postgres-worker.ts, 4 workers
 *   each): one tenant adds 10,000 no-op tasks, then ten others add 10 each
 *   (a second scheduleMany), all due at once; then the processes start.
 *   Tasks per second drained (the first start to the last finish, by the
 *   server's clock), and the position of the small tenants' last start among
 *   all 10,100 starts: by the claim (`started_at`, the server's clock when a
 *   claim took the task, then id; a task claimed ahead for a busy worker,
 *   which only tasks without `fair` are, counts from its claim), and by the
 *   handler's start (the processes' clocks, one machine's); the claims made,
 *   and per task the statements the server ran and its time on them
 *   (pg_stat_statements: top-level statements, planning and execution).
 *   Median of `--rounds` interleaved rounds.
 * - what a claim costs among 10,000 due tasks in 1, 100 or 10,000 groups,
 *   against the same tasks without `fair`: the claims right after the bulk
 *   add, which also give up to 1,000 due tasks their turns each (fair.ts),
 *   until none is left without one; then, past the custom plans PostgreSQL
 *   makes of a named statement on a connection (10 claims), 11 claims of 16
 *   with 16 free workers, the steady state. Round trip (median of the
 *   rounds' claims), and per claim the server's statements and time. Also
 *   the claim a 4-worker process sends (its room, workers and prefetch: 132,
 *   with 4 free workers).
 * Prints markdown tables, each figure beside its ratio to the run without
 * (the claim's: to 1 group too, so that flatness shows).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Scheduler, type DurableTaskItem } from '../src/index.js';
import { advanceJob } from '../src/durable/advance-job.js';
import { postgresStore } from '../src/postgres.js';
import { MINE, profiledPg } from './lib/profiled-pg.js';
import { formatValue } from './lib/format.js';

function flag(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);
}

const ROUNDS = Number(flag('rounds') ?? 3);
const PROCESSES = 3;
const WORKERS = 4;
const BIG = 10_000;
const SMALL = 10;
const TOTAL = BIG + SMALL * 10;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const count = (n: number) => n.toLocaleString('en-US');
const ratio = (value: number, reference: number) => `${(value / reference).toFixed(2)}×`;

const { server, admin, serverWork, resetWork, close } = await profiledPg('taskheap_fair_bench');
let schemas = 0;

/** Where the small tenants' last start is among all starts (1-based), given the tenants in start order. */
function lastSmall(order: readonly string[]): number {
  let last = order.length;
  while (last > 0 && order[last - 1] === 'big') last--;
  return last;
}

interface Flood {
  /** Tasks per second, the first start to the last finish (the server's clock). */
  rate: number;
  /** The small tenants' last start, ordered by started_at, id. */
  byClaim: number;
  /** The same, ordered by when the handler ran (the processes' clocks). */
  byHandler: number;
  /** Claims that took tasks (distinct started_at). */
  claims: number;
  /** Top-level statements the server ran, and its ms on them, per task. */
  statements: number;
  serverMs: number;
}

const WORKER = fileURLToPath(new URL('./fair-postgres-worker.ts', import.meta.url));

/** A worker process on `schema`: ready once loaded, then `go` starts it and `stop` closes it (it prints its starts). */
function worker(schema: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, server.url, schema, String(WORKERS)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const ready = new Promise<void>((resolve, reject) => {
    const check = () => (out.includes('ready\n') ? resolve() : undefined);
    child.stdout!.on('data', check);
    exited.then((code) => reject(new Error(`worker exited early (${code}): ${out}`)));
  });
  return { child, ready, exited, output: () => out, send: (line: string) => child.stdin!.write(`${line}\n`) };
}

/** The flood across PROCESSES processes, in a fresh schema. */
async function flood(fair: boolean): Promise<Flood> {
  const schema = `flood_${++schemas}`;
  const T = `"${schema}".taskheap_tasks`;
  const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
  await producer.migrate();
  const workers = Array.from({ length: PROCESSES }, () => worker(schema));
  await Promise.all(workers.map((w) => w.ready));
  const item = (tenant: string): DurableTaskItem => ({
    when: Date.now(),
    name: 'send',
    payload: tenant,
    ...(fair ? { fair: { group: tenant } } : {}),
  });
  await producer.scheduleMany(Array.from({ length: BIG }, () => item('big')));
  const small: DurableTaskItem[] = [];
  for (let t = 0; t < 10; t++) for (let i = 0; i < SMALL; i++) small.push(item(`small:${t}`));
  await producer.scheduleMany(small);
  await producer.close();
  await resetWork();
  for (const w of workers) w.send('go');
  const deadline = Date.now() + 300_000;
  for (;;) {
    const { rows } = await admin.query<{ n: number }>(`${MINE} SELECT count(*)::int AS n FROM ${T} WHERE state = 'succeeded'`);
    if (rows[0]!.n >= TOTAL) break;
    if (Date.now() > deadline) throw new Error(`flood: ${rows[0]!.n} of ${TOTAL} succeeded after 300 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const work = await serverWork();
  for (const w of workers) w.send('stop');
  await Promise.all(workers.map((w) => w.exited));
  const handled: [string, number][] = [];
  for (const w of workers) {
    const line = w
      .output()
      .split('\n')
      .find((l) => l.startsWith('{'));
    if (line === undefined) throw new Error(`a worker printed no starts: ${w.output()}`);
    const { starts, errors } = JSON.parse(line) as { starts: [string, number][]; errors: string[] };
    if (errors.length > 0) throw new Error(`a worker reported errors: ${errors.join('; ')}`);
    handled.push(...starts);
  }
  if (handled.length !== TOTAL) throw new Error(`flood: ${handled.length} handler runs for ${TOTAL} tasks`);
  const { rows } = await admin.query<{ payload: string; attempts: number }>(`SELECT payload, attempts FROM ${T} ORDER BY started_at, id`);
  if (rows.some((row) => row.attempts !== 1)) throw new Error('flood: a task ran more than once');
  const {
    rows: [span],
  } = await admin.query<{ ms: number; claims: number }>(
    `SELECT (extract(epoch from max(updated_at) - min(started_at)) * 1000)::float8 AS ms, count(DISTINCT started_at)::int AS claims
      FROM ${T} WHERE state = 'succeeded'`,
  );
  handled.sort((a, b) => a[1] - b[1]);
  return {
    rate: TOTAL / (span!.ms / 1000),
    byClaim: lastSmall(rows.map((row) => JSON.parse(row.payload) as string)),
    byHandler: lastSmall(handled.map(([tenant]) => tenant)),
    claims: span!.claims,
    statements: work.calls / TOTAL,
    serverMs: work.ms / TOTAL,
  };
}

/** Claims made after the tagging ones, before the measure: past a connection's custom plans. */
const WARM = 10;
/** Claims measured in the steady state, per round. */
const MEASURED = 11;
/** Due tasks in a claim's measure: 10,000 and the claims' takings (every one of 10,000 groups still waits at the end). */
const DUE = 10_000 + 16 * (12 + WARM + MEASURED);

interface ClaimCost {
  /** ms, round trips of the claims that gave turns (right after the bulk add). */
  tagging: number[];
  /** ms, round trips of the steady state's claims. */
  steady: number[];
  /** Top-level statements the server ran, its ms on them (planning and execution), and its plans, per steady claim. */
  statements: number;
  serverMs: number;
  plans: number;
  /** Due tasks, and groups, still waiting after the measure. */
  waiting: number;
  groups: number;
}

/**
 * A claim among DUE due tasks, spread over `groups` groups (`fair`), or without `fair` (groups undefined):
 * of `limit`, with `free` free workers.
 */
async function claimCost(groups: number | undefined, limit = 16, free = 16): Promise<ClaimCost> {
  const schema = `claim_${++schemas}`;
  const T = `"${schema}".taskheap_tasks`;
  const store = postgresStore({ connectionString: server.url, schema });
  const scheduler = new Scheduler({ store });
  scheduler.define('send', () => {});
  await scheduler.migrate();
  await scheduler.scheduleMany(
    Array.from({ length: DUE }, (_, i) => ({
      when: Date.now() - 1_000,
      name: 'send',
      payload: i,
      ...(groups === undefined ? {} : { fair: { group: `g${i % groups}` } }),
    })),
  );
  // What autovacuum does after a bulk add, in time: the planner then knows the table.
  await admin.query(`${MINE} ANALYZE ${T}`);
  const claim = async () => {
    const start = performance.now();
    await store.claim({ owner: 'bench', now: Date.now(), lease: 600_000, limit, advance: advanceJob, limits: { free, rate: undefined } });
    return performance.now() - start;
  };
  const untagged = async () =>
    (
      await admin.query<{ n: number }>(
        `${MINE} SELECT count(*)::int AS n FROM ${T} WHERE state = 'waiting' AND fair_group IS NOT NULL AND fair_tag IS NULL AND run_at <= now()`,
      )
    ).rows[0]!.n;
  // Until every due shared task has its turn (without `fair`, as many claims as 1,000 tags take: about as many).
  const tagging: number[] = [];
  do tagging.push(await claim());
  while ((groups === undefined ? tagging.length < Math.ceil(DUE / 1_000) : (await untagged()) > 0) && tagging.length < 100);
  for (let k = 0; k < WARM; k++) await claim();
  await resetWork();
  const steady: number[] = [];
  for (let k = 0; k < MEASURED; k++) steady.push(await claim());
  const work = await serverWork();
  const {
    rows: [left],
  } = await admin.query<{ n: number; groups: number }>(
    `${MINE} SELECT count(*)::int AS n, count(DISTINCT fair_group)::int AS groups FROM ${T} WHERE state = 'waiting'`,
  );
  await scheduler.close();
  return {
    tagging,
    steady,
    statements: work.calls / MEASURED,
    serverMs: work.ms / MEASURED,
    plans: work.plans / MEASURED,
    waiting: left!.n,
    groups: left!.groups,
  };
}

try {
  const began = performance.now();
  const runs: Record<'without' | 'with', Flood[]> = { without: [], with: [] };
  for (let round = 0; round < ROUNDS; round++) {
    runs.without.push(await flood(false));
    runs.with.push(await flood(true));
  }
  const of = (key: keyof Flood) => ({
    without: median(runs.without.map((run) => run[key])),
    with: median(runs.with.map((run) => run[key])),
  });
  const rate = of('rate');
  const claims = of('claims');
  const statements = of('statements');
  const serverMs = of('serverMs');
  console.log(`| PostgreSQL: 10,000 + 10 × 10 tasks, ${PROCESSES} processes × ${WORKERS} workers | without \`fair\` | with \`fair\` |`);
  console.log('| --- | ---: | ---: |');
  console.log(
    `| drained (first start to last finish) | ${formatValue(rate.without, 'rate')} | ${formatValue(rate.with, 'rate')} (${ratio(rate.with, rate.without)}) |`,
  );
  console.log(
    `| small tenants' last start, of 10,100, by the claim (\`started_at\`) | ${count(of('byClaim').without)} | ${count(of('byClaim').with)} |`,
  );
  console.log(`| the same, by the handler's start | ${count(of('byHandler').without)} | ${count(of('byHandler').with)} |`);
  console.log(
    `| claims (tasks a claim) | ${count(claims.without)} (${(TOTAL / claims.without).toFixed(1)}) | ${count(claims.with)} (${(TOTAL / claims.with).toFixed(1)}) |`,
  );
  console.log(
    `| server statements a task | ${statements.without.toFixed(2)} | ${statements.with.toFixed(2)} (${ratio(statements.with, statements.without)}) |`,
  );
  console.log(
    `| server ms a task (planning and execution) | ${serverMs.without.toFixed(2)} | ${serverMs.with.toFixed(2)} (${ratio(serverMs.with, serverMs.without)}) |`,
  );
  if (ROUNDS > 1) {
    const each = (kind: 'without' | 'with') => runs[kind].map((run) => `${count(run.byClaim)}/${count(run.byHandler)}`).join(', ');
    console.log(`\nEach round, by the claim/by the handler: without \`fair\` ${each('without')}; with \`fair\` ${each('with')}.`);
  }

  const columns = [1, 100, 10_000];
  const fair: ClaimCost[][] = columns.map(() => []);
  const plain: ClaimCost[][] = columns.map(() => []);
  const process4: ClaimCost[][] = columns.map(() => []);
  for (let round = 0; round < ROUNDS; round++)
    for (let c = 0; c < columns.length; c++) {
      fair[c]!.push(await claimCost(columns[c]));
      plain[c]!.push(await claimCost(undefined));
      process4[c]!.push(await claimCost(columns[c], 132, 4));
    }
  const pooled = (costs: ClaimCost[], key: 'tagging' | 'steady') => median(costs.flatMap((cost) => cost[key]));
  const per = (costs: ClaimCost[], key: 'statements' | 'serverMs' | 'plans') => median(costs.map((cost) => cost[key]));
  const row = (label: string, values: number[], digits = 2) =>
    console.log(`| ${label} | ${values.map((v, c) => `${v.toFixed(digits)}${c === 0 ? '' : ` (${ratio(v, values[0]!)})`}`).join(' | ')} |`);
  const steadyFair = fair.map((costs) => pooled(costs, 'steady'));
  const steadyPlain = plain.map((costs) => pooled(costs, 'steady'));
  console.log();
  console.log('| PostgreSQL: a claim among 10,000 due tasks | 1 group | 100 groups | 10,000 groups |');
  console.log('| --- | ---: | ---: | ---: |');
  row('with `fair`: ms a claim of 16 (steady state)', steadyFair);
  row('without `fair`: ms a claim of 16', steadyPlain);
  console.log(`| with ÷ without | ${steadyFair.map((v, c) => ratio(v, steadyPlain[c]!)).join(' | ')} |`);
  row(
    'with `fair`: server ms a claim of 16 (planning and execution)',
    fair.map((costs) => per(costs, 'serverMs')),
  );
  row(
    'without `fair`: server ms a claim of 16',
    plain.map((costs) => per(costs, 'serverMs')),
  );
  console.log(
    `| statements (plans) a claim of 16, with / without \`fair\` | ${columns
      .map((_, c) => {
        const [f, p] = [fair[c]!, plain[c]!];
        return `${per(f, 'statements').toFixed(1)} (${per(f, 'plans').toFixed(1)}) / ${per(p, 'statements').toFixed(1)} (${per(p, 'plans').toFixed(1)})`;
      })
      .join(' | ')} |`,
  );
  row(
    'with `fair`: ms a claim of 16 right after the bulk add (giving turns)',
    fair.map((costs) => pooled(costs, 'tagging')),
  );
  console.log(
    `| claims until every due task had its turn | ${fair.map((costs) => costs.map((cost) => cost.tagging.length).join(', ')).join(' | ')} |`,
  );
  console.log(
    `| due tasks (groups) left after the measure | ${fair.map((costs) => `${count(Math.min(...costs.map((cost) => cost.waiting)))} (${count(Math.min(...costs.map((cost) => cost.groups)))})`).join(' | ')} |`,
  );
  row(
    "with `fair`: ms a 4-worker process's claim (132 asked, 4 free)",
    process4.map((costs) => pooled(costs, 'steady')),
  );
  row(
    'with `fair`: its server ms',
    process4.map((costs) => per(costs, 'serverMs')),
  );
  console.log(`\n${ROUNDS} round${ROUNDS === 1 ? '' : 's'}, ${((performance.now() - began) / 1000).toFixed(0)} s.`);
} finally {
  await close();
}
