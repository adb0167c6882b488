// The dashboard as a console over stored tasks, in a real Chromium against a
// real node:http server and a real SQLite file: counts per state from the
// store, filters and paging, a task's detail (payload, result, errors by
// attempt, lease, progress, log lines), bulk actions on a filter with a
// confirmation for destructive ones, times in a chosen zone, a narrow
// screen. Screenshots of the main views go to test/artifacts/ (gitignored);
// with UPDATE_SCREENSHOTS=1 (`npm run screenshots`) also to docs/images/,
// whose committed images the docs show.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import { chromiumLaunchOptions } from '../binaries.js';
import { Scheduler } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';

const ARTIFACTS = new URL('../artifacts/', import.meta.url);
const IMAGES = new URL('../../docs/images/', import.meta.url);
/** Refresh the committed images of the docs only when asked: a plain run leaves the work tree clean. */
const UPDATE = process.env.UPDATE_SCREENSHOTS === '1';

/** Saves a screenshot as test/artifacts/<name> and, when updating, as docs/images/<name>. */
async function shoot(target: Page | Locator, name: string): Promise<void> {
  const image = await target.screenshot({ path: new URL(name, ARTIFACTS).pathname });
  if (UPDATE) writeFileSync(new URL(name, IMAGES), image);
}

let browser: Browser;
let dir: string;

beforeAll(async () => {
  browser = await chromium.launch(await chromiumLaunchOptions());
  dir = mkdtempSync(join(tmpdir(), 'taskheap-console-'));
  mkdirSync(ARTIFACTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A store with 130 waiting emails (queue `emails`), 3 failed imports with logs, 2 succeeded reports, served with actions. */
async function serve() {
  const scheduler = new Scheduler({ store: sqliteStore(join(dir, `${Math.random().toString(36).slice(2)}.db`)), onError: () => {} });
  let failing = true;
  scheduler.define('import', async (ctx, payload: { file: string }) => {
    ctx.log(`reading ${payload.file}`);
    ctx.progress(40);
    if (failing) throw new Error(`${payload.file}: the bucket is unreachable`);
    ctx.progress(100);
    return { rows: 42 };
  });
  scheduler.define('report', (ctx) => {
    ctx.progress(100);
    return 'sent';
  });
  scheduler.define('email', () => {});
  await scheduler.start();
  const later = Date.now() + 3_600_000;
  await scheduler.scheduleMany(
    Array.from({ length: 130 }, (_, i) => ({
      when: later + i * 60_000,
      name: 'email',
      key: `email:${i}`,
      queue: 'emails',
      payload: { to: i },
    })),
  );
  const imports = [];
  for (const file of ['a.csv', 'b.csv', 'c.csv'])
    imports.push(
      await scheduler.schedule(Date.now(), 'import', { key: `import:${file}`, payload: { file }, retry: { attempts: 2, delay: 10 } }),
    );
  const reports = [];
  for (let i = 0; i < 2; i++) reports.push(await scheduler.schedule(Date.now(), 'report', { payload: { week: i } }));
  for (const task of [...imports, ...reports]) await scheduler.waitFor(task.id, { timeout: 60_000 });
  await scheduler.cron('0 9 * * MON-FRI', { timezone: 'Europe/Paris' }).run('report', { key: 'report:weekday' });
  await scheduler.queue('emails').setRate({ limit: 10, interval: '1s' });
  await scheduler.queue('emails').pause();
  const dash = dashboard(scheduler, { actions: true, title: 'Operations', limit: 50, authorize: () => true });
  const server: Server = createServer(dash.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    scheduler,
    origin,
    imports,
    heal: () => {
      failing = false;
    },
    close: async () => {
      server.close();
      await scheduler.close();
    },
  };
}

async function open(origin: string, width = 1280): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, timezoneId: 'Asia/Tokyo' });
  const page = await context.newPage();
  page.on('dialog', (dialog) => {
    throw new Error(`a dialog opened: ${dialog.message()}`);
  });
  await page.goto(`${origin}/`);
  return page;
}

/** Polls until the assertion holds: generous, as the machine may be loaded. */
const eventually = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 30_000, interval: 100 });
const storedRows = (page: Page) => page.locator('#stored tr[data-id]');
const countButton = (page: Page, state: string) => page.locator(`#counts button[data-state="${state}"]`);

describe('the dashboard as a console (Chromium)', () => {
  it('counts from the store, filters, pages, shows a task in detail, and acts in bulk with a confirmation', async () => {
    const app = await serve();
    try {
      const page = await open(app.origin);
      // Counts per state come from the store (not from the 50 rows shown).
      await eventually(() => countButton(page, '').textContent()).toBe('all 135');
      expect(await countButton(page, 'waiting').textContent()).toBe('waiting 130');
      expect(await countButton(page, 'failed').textContent()).toBe('failed 3');
      expect(await countButton(page, 'succeeded').textContent()).toBe('succeeded 2');
      expect(await storedRows(page).count()).toBe(50);
      // Relative times beside absolute ones.
      expect(await page.locator('#stored tr[data-id] .rel').first().textContent()).toMatch(/ago|in /);

      // Queues and their limits, and why their tasks wait; stored jobs with their rule, zone and next runs.
      const emails = page.locator('#queues tr', { hasText: 'emails' }).locator('td');
      expect(await emails.nth(1).textContent()).toBe('paused');
      expect(await emails.nth(7).textContent()).toBe('10 per 1 s');
      expect(await emails.nth(8).textContent()).toBe('paused');
      const weekday = page.locator('#stored-jobs tr', { hasText: 'report:weekday' }).locator('td');
      expect(await weekday.nth(3).textContent()).toBe('0 9 * * MON-FRI');
      expect(await weekday.nth(4).textContent()).toBe('Europe/Paris');
      expect(await weekday.nth(5).textContent()).toMatch(/^\d{4}-\d\d-\d\d 0[78]:00:00Zin .+then \d{4}-.+, \d{4}-/);
      await shoot(page.locator('#queues-section'), 'console-queues.png');
      await shoot(page.locator('#stored-jobs-section'), 'console-jobs.png');

      // Paging: the next page continues where this one ended.
      const firstIds = await storedRows(page).evaluateAll((rows) => rows.map((row) => row.getAttribute('data-id')));
      await page.click('#page-next');
      await eventually(async () => (await storedRows(page).first().getAttribute('data-id')) !== firstIds[0]).toBe(true);
      const secondIds = await storedRows(page).evaluateAll((rows) => rows.map((row) => row.getAttribute('data-id')));
      expect(secondIds.filter((id) => firstIds.includes(id))).toEqual([]);
      await page.click('#page-first');
      await eventually(() => storedRows(page).first().getAttribute('data-id')).toBe(firstIds[0]);

      // Filters: a handler and a state (by clicking its count), then a key prefix.
      await page.fill('#f-name', 'import');
      await page.click('#f-apply');
      await eventually(() => storedRows(page).count()).toBe(3);
      expect(await countButton(page, '').textContent()).toBe('all 3');
      await page.fill('#f-name', '');
      await countButton(page, 'succeeded').click();
      await eventually(() => storedRows(page).count()).toBe(2);
      expect(await page.locator('#stored tr[data-id] td:nth-child(2)').allTextContents()).toEqual(['report', 'report']);
      expect(await page.locator('#stored tr[data-id] progress').count()).toBe(2);
      await page.click('#f-clear');
      await page.fill('#f-queue', 'emails');
      await page.fill('#f-key', 'email:12');
      await page.click('#f-apply');
      await eventually(() => page.locator('#stored tr[data-id] td:nth-child(3)').allTextContents()).toEqual([
        'email:12',
        'email:120',
        'email:121',
        'email:122',
        'email:123',
        'email:124',
        'email:125',
        'email:126',
        'email:127',
        'email:128',
        'email:129',
      ]);
      await page.click('#f-clear');
      await eventually(() => storedRows(page).count()).toBe(50);
      await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0));
      await shoot(page, 'console-tasks.png');

      // The detail of a failed import: payload, errors by attempt, progress and log lines of both attempts.
      const failed = app.imports[0]!;
      await page.fill('#f-name', 'import');
      await page.click('#f-apply');
      await eventually(() => storedRows(page).count()).toBe(3);
      await page.click(`#stored tr[data-id="${failed.id}"] a`);
      await eventually(() => page.locator('#detail-title').textContent()).toBe(`Task ${failed.id} · import`);
      const fields = await page.locator('#detail-fields').textContent();
      expect(fields).toContain('"file": "a.csv"');
      expect(fields).toMatch(/Attempts2 of 2/);
      expect(fields).toMatch(/Progress40/);
      expect(await page.locator('#detail-errors tr').count()).toBe(2);
      expect(await page.locator('#detail-errors tr').first().textContent()).toContain('a.csv: the bucket is unreachable');
      expect(await page.locator('#detail-logs tr td:nth-child(3)').allTextContents()).toEqual(['reading a.csv', 'reading a.csv']);
      expect(await page.locator('#detail-logs tr td:nth-child(2)').allTextContents()).toEqual(['1', '2']);
      await shoot(page.locator('#detail'), 'console-detail.png');
      // Times in a chosen zone: the browser's (Asia/Tokyo here) instead of UTC.
      const utc = await page.locator('#stored tr[data-id] td:nth-child(5)').first().textContent();
      expect(utc).toMatch(/Z/);
      await page.selectOption('#zone', 'browser');
      await eventually(() => page.locator('#stored tr[data-id] td:nth-child(5)').first().textContent()).not.toMatch(/Z/);
      await page.click('#detail-close');
      await eventually(() => page.locator('#detail').isVisible()).toBe(false);

      // Bulk retry of the failed imports (the handler works now): asks first, then every one succeeds.
      app.heal();
      await page.click('#bulk button[data-bulk=retry]');
      expect(await page.locator('#confirm-text').textContent()).toBe('Retry 3 failed task(s) matching name=import?');
      await page.click('#confirm-yes');
      await eventually(() => page.locator('#message').textContent()).toBe('retry: 3 task(s)');
      for (const task of app.imports) expect((await app.scheduler.waitFor(task.id, { timeout: 60_000 })).state).toBe('succeeded');

      // Cancel matching: "Keep them" does nothing; Confirm cancels the 11 emails matching the prefix.
      await page.fill('#f-name', '');
      await page.fill('#f-key', 'email:12');
      await page.click('#f-apply');
      await eventually(() => storedRows(page).count()).toBe(11);
      await page.click('#bulk button[data-bulk=cancel]');
      expect(await page.locator('#confirm-text').textContent()).toBe('Cancel 11 waiting or running task(s) matching keyPrefix=email:12?');
      await page.click('#confirm-no');
      expect(await page.locator('#confirm').isVisible()).toBe(false);
      expect((await app.scheduler.countTasks({ keyPrefix: 'email:12' })).waiting).toBe(11);
      await page.click('#bulk button[data-bulk=cancel]');
      await page.click('#confirm-yes');
      await eventually(() => page.locator('#message').textContent()).toBe('cancel: 11 task(s)');
      expect((await app.scheduler.countTasks({ keyPrefix: 'email:12' })).cancelled).toBe(11);

      // Delete finished under the filter: the 11 cancelled emails go, nothing else.
      await page.click('#bulk button[data-bulk=delete]');
      expect(await page.locator('#confirm-text').textContent()).toBe('Delete 11 finished task(s) matching keyPrefix=email:12?');
      await page.click('#confirm-yes');
      await eventually(() => page.locator('#message').textContent()).toBe('delete: 11 task(s)');
      await eventually(() => storedRows(page).count()).toBe(0);
      expect(await app.scheduler.countTasks()).toMatchObject({ waiting: 119, succeeded: 5, cancelled: 0 });
    } finally {
      await app.close();
    }
  }, 180_000);

  it('fits a narrow screen: the filters wrap and the tables scroll within the page', async () => {
    const app = await serve();
    try {
      const page = await open(app.origin, 390);
      await eventually(() => storedRows(page).count()).toBe(50);
      // No horizontal scrolling of the page itself.
      const fits = await page.evaluate(() => {
        const g = globalThis as unknown as { document: { documentElement: { scrollWidth: number } }; innerWidth: number };
        return g.document.documentElement.scrollWidth <= g.innerWidth + 1;
      });
      expect(fits).toBe(true);
      await shoot(page, 'console-narrow.png');
    } finally {
      await app.close();
    }
  }, 120_000);

  it('answers 400 to a bad filter, cursor or task id, and 404 to a task that is not there', async () => {
    const app = await serve();
    try {
      expect((await fetch(`${app.origin}/api/state?state=lost`)).status).toBe(400);
      expect((await fetch(`${app.origin}/api/state?from=yesterday`)).status).toBe(400);
      expect((await fetch(`${app.origin}/api/state?after=x`)).status).toBe(400);
      expect((await fetch(`${app.origin}/api/task?id=abc`)).status).toBe(400);
      expect((await fetch(`${app.origin}/api/task?id=999999`)).status).toBe(404);
      const state = (await (await fetch(`${app.origin}/api/state?name=report`)).json()) as {
        stored: unknown[];
        storedCounts: Record<string, number>;
      };
      expect(state.stored).toHaveLength(2);
      expect(state.storedCounts.succeeded).toBe(2);
      // The page's own first state has the rows but leaves the counts (a scan of every task) to its first api/state request.
      const html = await (await fetch(`${app.origin}/`)).text();
      const first = JSON.parse(/<script type="application\/json" id="initial-state">(.*?)<\/script>/s.exec(html)![1]!) as {
        stored: unknown[];
        storedCounts: unknown;
        queues: unknown;
      };
      expect(first).toMatchObject({ storedCounts: null, queues: null });
      expect(first.stored).toHaveLength(50);
    } finally {
      await app.close();
    }
  }, 120_000);
});
