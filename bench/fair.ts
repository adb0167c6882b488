/**
 * `npm run bench:fair [-- --rounds=3]`
 *
 * Fair shares (`fair: { group }`), against the same work without them, in
 * one run:
 * - a flood: one tenant adds 10,000 tasks, then ten others add 10 each; the
 *   position of the small tenants' last start among all 10,100 starts (on a
 *   ManualClock, one worker: exact, whatever the machine);
 * - the cost: 100,000 no-op tasks due at once, drained by 16 workers,
 *   spread over 1, 100 and 10,000 groups (`fair` on every task, or on none):
 *   starts per second, median of `--rounds` interleaved rounds;
 * - the flood on SQLite, 16 workers, real time: tasks per second drained,
 *   and the small tenants' last start; and what a SQLite claim of 16 costs
 *   with 10,000 due tasks in 1, 100 or 10,000 groups (median of 11, once
 *   every due task has its turn). PostgreSQL's: bench/fair-postgres.ts.
 * Prints markdown tables, each figure beside its ratio to the run without.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Scheduler } from '../src/index.js';
import { advanceJob } from '../src/durable/advance-job.js';
import { sqliteStore } from '../src/sqlite.js';
import { ManualClock } from '../src/testing.js';
import { formatValue } from './lib/format.js';

function flag(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);
}

const ROUNDS = Number(flag('rounds') ?? 3);
const N = 100_000;

/** Where the small tenants' last task starts among all starts. */
async function flood(fair: boolean): Promise<number> {
  const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
  const scheduler = new Scheduler({ clock, workers: 1 });
  const order: string[] = [];
  const add = (tenant: string) => scheduler.after(0, () => void order.push(tenant), fair ? { fair: { group: tenant } } : undefined);
  for (let i = 0; i < 10_000; i++) add('big');
  for (let t = 0; t < 10; t++) for (let i = 0; i < 10; i++) add(`small:${t}`);
  await clock.advance(0);
  await scheduler.onIdle();
  await scheduler.close();
  let last = order.length;
  while (last > 0 && order[last - 1] === 'big') last--;
  return last;
}

/** How the drained tasks are scheduled: no option, a priority (so the gate is in use), or a fair share. */
type Kind = 'plain' | 'priority' | 'fair';

/** Starts per second draining N no-op tasks over `groups` groups. */
async function drain(groups: number, kind: Kind): Promise<number> {
  const scheduler = new Scheduler({ workers: 16 });
  const noop = () => {};
  const at = Date.now() + 50;
  for (let i = 0; i < N; i++)
    scheduler.schedule(
      at,
      noop,
      kind === 'plain' ? undefined : kind === 'priority' ? { priority: 1 } : { fair: { group: `g${i % groups}` } },
    );
  while (Date.now() < at) await new Promise((resolve) => setTimeout(resolve, 1));
  const start = performance.now();
  await scheduler.onIdle();
  const rate = N / ((performance.now() - start) / 1000);
  await scheduler.close();
  return rate;
}

const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const [without, withFair] = [await flood(false), await flood(true)];
console.log('| | without `fair` | with `fair` |');
console.log('| --- | ---: | ---: |');
console.log(
  `| small tenants' last start, of 10,100 (1 worker) | ${without.toLocaleString('en-US')} | ${withFair.toLocaleString('en-US')} |`,
);
console.log();
console.log('| drain 100,000 no-op tasks, 16 workers | no option | `priority: 1` | `fair` | `fair` ÷ `priority` |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const groups of [1, 100, 10_000]) {
  const rates: Record<Kind, number[]> = { plain: [], priority: [], fair: [] };
  for (let round = 0; round < ROUNDS; round++)
    for (const kind of ['plain', 'priority', 'fair'] as const) rates[kind].push(await drain(groups, kind));
  const [plain, priority, fair] = [median(rates.plain), median(rates.priority), median(rates.fair)];
  console.log(
    `| ${groups.toLocaleString('en-US')} group${groups === 1 ? '' : 's'} | ${formatValue(plain, 'rate')} | ${formatValue(priority, 'rate')} | ${formatValue(fair, 'rate')} | ${(fair / priority).toFixed(2)}× |`,
  );
}

/** The flood on SQLite with 16 workers: tasks per second drained, and where the small tenants' last task starts. */
async function sqliteFlood(fair: boolean): Promise<{ rate: number; last: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-bench-fair-'));
  const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'fair.db')), workers: 16 });
  const order: string[] = [];
  scheduler.define('send', (_ctx, tenant: string) => void order.push(tenant));
  const item = (tenant: string) => ({ when: Date.now(), name: 'send', payload: tenant, ...(fair ? { fair: { group: tenant } } : {}) });
  const items = Array.from({ length: 10_000 }, () => item('big'));
  for (let t = 0; t < 10; t++) for (let i = 0; i < 10; i++) items.push(item(`small:${t}`));
  await scheduler.scheduleMany(items);
  const start = performance.now();
  await scheduler.start();
  while (order.length < items.length) await new Promise((resolve) => setTimeout(resolve, 10));
  const rate = items.length / ((performance.now() - start) / 1000);
  await scheduler.close();
  rmSync(dir, { recursive: true, force: true });
  let last = order.length;
  while (last > 0 && order[last - 1] === 'big') last--;
  return { rate, last };
}

const runs: Record<'without' | 'with', { rate: number; last: number }[]> = { without: [], with: [] };
for (let round = 0; round < ROUNDS; round++) {
  runs.without.push(await sqliteFlood(false));
  runs.with.push(await sqliteFlood(true));
}
const plainRate = median(runs.without.map((run) => run.rate));
const fairRate = median(runs.with.map((run) => run.rate));
console.log();
console.log('| SQLite: 10,000 + 10 × 10 tasks, 16 workers | without `fair` | with `fair` |');
console.log('| --- | ---: | ---: |');
console.log(`| drained | ${formatValue(plainRate, 'rate')} | ${formatValue(fairRate, 'rate')} (${(fairRate / plainRate).toFixed(2)}×) |`);
console.log(
  `| small tenants' last start, of 10,100 | ${median(runs.without.map((run) => run.last)).toLocaleString('en-US')} | ${median(runs.with.map((run) => run.last)).toLocaleString('en-US')} |`,
);

/** ms a SQLite claim of 16 takes with 10,000 due tasks spread over `groups` groups, past the claims that give them turns (median of 11). */
async function sqliteClaim(groups: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-bench-fair-'));
  const store = sqliteStore(join(dir, 'claim.db'));
  const scheduler = new Scheduler({ store });
  scheduler.define('send', () => {});
  await scheduler.scheduleMany(
    Array.from({ length: 10_400 }, (_, i) => ({ when: Date.now() - 1_000, name: 'send', payload: i, fair: { group: `g${i % groups}` } })),
  );
  const claim = () =>
    store.claim({ owner: 'bench', now: Date.now(), lease: 60_000, limit: 16, advance: advanceJob, limits: { free: 16, rate: undefined } });
  // The first claims give the due tasks their turns (1,000 a claim): measured past them, as on PostgreSQL (bench/fair-postgres.ts).
  for (let k = 0; k < 12; k++) await claim();
  const times: number[] = [];
  for (let k = 0; k < 11; k++) {
    const start = performance.now();
    await claim();
    times.push(performance.now() - start);
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return median(times);
}

console.log();
console.log('| SQLite: a claim of 16, 10,000 due tasks with `fair` | 1 group | 100 groups | 10,000 groups |');
console.log('| --- | ---: | ---: | ---: |');
const claims = [await sqliteClaim(1), await sqliteClaim(100), await sqliteClaim(10_000)];
console.log(`| ms | ${claims.map((ms) => ms.toFixed(1)).join(' | ')} |`);
