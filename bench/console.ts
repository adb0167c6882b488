/**
 * `npx tsx bench/console.ts`
 *
 * The dashboard's first render with 100,000 stored tasks (issue 24), on a
 * SQLite file and on a throwaway PostgreSQL (test/durable/pg-server.ts):
 * 100,000 tasks over 5 handlers and 3 queues, a tenth of them failed and a
 * fifth succeeded. Prints a markdown table of medians over 5 runs:
 *
 * - the page: the HTML with its first state (50 stored tasks, stored jobs;
 *   no counts), measured at the client;
 * - `api/state`: the data of a refresh (50 stored tasks, the counts per
 *   state from the store, stored jobs, queues), measured at the client;
 * - `countTasks`: the counts alone, unfiltered and filtered by handler;
 * - `first render`: Chromium (the npm package's, test/binaries.ts) from the
 *   navigation's start until the first page of stored tasks is drawn, then
 *   until the counts are (from the page's first api/state request), as the
 *   page marks them (`performance.mark('taskheap:rows')`, `'taskheap:counts'`);
 *   the first row is the same page with no stored task, the machine's baseline.
 */
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { chromiumLaunchOptions } from '../test/binaries.js';
import { chromium } from 'playwright-core';
import { dashboard } from '../src/dashboard.js';
import { Scheduler, type DurableTaskItem } from '../src/index.js';
import type { Store } from '../src/store.js';
import { postgresStore } from '../src/postgres.js';
import { sqliteStore } from '../src/sqlite.js';
import { openDatabase } from '../src/durable/sqlite/driver.js';
import { startPgServer } from '../test/durable/pg-server.js';

const TASKS = 100_000;
const RUNS = 5;
const HANDLERS = ['email', 'sms', 'import', 'report', 'webhook'];
const QUEUES = ['default', 'emails', 'bulk'];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function fill(scheduler: Scheduler): Promise<void> {
  const base = Date.now() - 86_400_000;
  for (let start = 0; start < TASKS; start += 5_000) {
    const items: DurableTaskItem[] = [];
    for (let i = start; i < start + 5_000; i++)
      items.push({ when: base + i * 1_000, name: HANDLERS[i % 5]!, queue: QUEUES[i % 3]!, key: `k:${i}`, payload: { i } });
    await scheduler.scheduleMany(items);
  }
}

/** One store's row: medians of the state call, of counts, and of the first render. */
async function measure(label: string, store: () => Store, finish: () => Promise<void>, tasks = TASKS): Promise<string> {
  let scheduler = new Scheduler({ store: store(), handlers: HANDLERS });
  if (tasks > 0) await fill(scheduler);
  await scheduler.close();
  await finish();
  scheduler = new Scheduler({ store: store(), handlers: HANDLERS });
  await scheduler.migrate();
  const dash = dashboard(scheduler, { authorize: () => true, limit: 50, actions: true });
  const server = createServer(dash.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const state: number[] = [];
  const counts: number[] = [];
  const filtered: number[] = [];
  const render: number[] = [];
  const rows: number[] = [];
  const html: number[] = [];
  const browser = await chromium.launch(await chromiumLaunchOptions());
  try {
    for (let run = 0; run < RUNS; run++) {
      let t = performance.now();
      const body = (await (await fetch(`${origin}/api/state`)).json()) as { storedCounts: Record<string, number> };
      state.push(performance.now() - t);
      const total = Object.values(body.storedCounts).reduce((a, b) => a + b, 0);
      if (total !== tasks) throw new Error(`counted ${total} tasks, expected ${tasks}`);
      t = performance.now();
      await (await fetch(`${origin}/`)).text();
      html.push(performance.now() - t);
      t = performance.now();
      await scheduler.countTasks();
      counts.push(performance.now() - t);
      t = performance.now();
      await scheduler.countTasks({ name: 'import' });
      filtered.push(performance.now() - t);
      const page = await browser.newPage();
      await page.goto(`${origin}/`);
      // The rows come with the page; the counts (a scan of every task) with its first api/state request.
      // The page marks both (performance.mark), in ms since the navigation began: playwright's own polling is not counted.
      await page.waitForFunction(
        () =>
          (globalThis as unknown as { performance: { getEntriesByName(name: string): unknown[] } }).performance.getEntriesByName(
            'taskheap:counts',
          ).length > 0,
        undefined,
        { polling: 10, timeout: 60_000 },
      );
      const marks = await page.evaluate(() => {
        const p = (globalThis as unknown as { performance: { getEntriesByName(name: string): { startTime: number }[] } }).performance;
        return [p.getEntriesByName('taskheap:rows')[0]!.startTime, p.getEntriesByName('taskheap:counts')[0]!.startTime];
      });
      const shown = await page.locator('#stored tr[data-id]').count();
      if (shown !== Math.min(50, tasks)) throw new Error(`${shown} rows drawn, expected ${Math.min(50, tasks)}`);
      rows.push(marks[0]!);
      render.push(marks[1]!);
      await page.close();
    }
  } finally {
    await browser.close();
    server.close();
    await scheduler.close();
  }
  const f = (n: number) => `${n.toFixed(0)} ms`;
  return `| ${label} | ${f(median(html))} | ${f(median(state))} | ${f(median(counts))} | ${f(median(filtered))} | ${f(median(rows))} | ${f(median(render))} |`;
}

const HEADER =
  '| store | the page (first rows, no counts) | api/state (first page + counts) | countTasks() | countTasks({ name }) | first render in Chromium (rows) | with the counts |';
const table: string[] = [];
// The baseline: the same page and machine with no stored task at all.
const empty = join(mkdtempSync(join(tmpdir(), 'taskheap-console-bench-')), 'empty.db');
table.push(
  await measure(
    'SQLite, no task (baseline)',
    () => sqliteStore(empty),
    async () => {},
    0,
  ),
);
console.log(HEADER);
const file = join(mkdtempSync(join(tmpdir(), 'taskheap-console-bench-')), 'bench.db');
table.push(
  await measure(
    'SQLite',
    () => sqliteStore(file),
    async () => {
      const db = await openDatabase(file, undefined);
      db.exec(`UPDATE taskheap_tasks SET state = 'failed', last_error = 'Error: bench' WHERE id % 10 = 0;
        UPDATE taskheap_tasks SET state = 'succeeded' WHERE id % 5 = 1;`);
      db.close();
    },
  ),
);
console.log(table[0]);
console.log(table[1]);
const server = await startPgServer();
try {
  table.push(
    await measure(
      'PostgreSQL',
      () => postgresStore({ connectionString: server.url }),
      async () => {
        const admin = new pg.Client({ connectionString: server.url });
        admin.on('error', () => {});
        await admin.connect();
        await admin.query(`UPDATE taskheap_tasks SET state = 'failed', last_error = 'Error: bench' WHERE id % 10 = 0`);
        await admin.query(`UPDATE taskheap_tasks SET state = 'succeeded' WHERE id % 5 = 1`);
        await admin.query('VACUUM ANALYZE taskheap_tasks');
        await admin.end();
      },
    ),
  );
} finally {
  await server.destroy();
}
console.log(`\n100,000 stored tasks, medians of ${RUNS} runs\n`);
console.log(HEADER);
console.log('|---|---|---|---|---|---|---|');
for (const row of table) console.log(row);
