// The dashboard's Limits panel (issue 24): the per-key limits stored tasks
// name (a serial group, a concurrency group, a rate group), with what is in use
// and how many wait, over HTTP (api/limits, bounded by `limit`, 4xx for a
// malformed one, none without a store) and in a real headless Chromium, on
// a real SQLite file and a real PostgreSQL server. The handler holds its
// tasks until the test lets go, so what runs is fixed while it looks.
// Screenshots go to test/artifacts/; `npm run screenshots` also refreshes
// docs/images/console-limits.png (from SQLite).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import type { Store } from '../../src/durable/store.js';
import { Scheduler } from '../../src/index.js';
import { browserHarness, shoot } from './harness.js';

const harness = browserHarness('limits');
const BACKENDS = harness.backends();

const eventually = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 30_000, interval: 100 });

/** A dashboard over node:http on `scheduler`. */
async function mount(scheduler: Scheduler) {
  const server: Server = createServer(dashboard(scheduler, { authorize: () => true }).handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    get: async (path: string) => {
      const response = await fetch(`${origin}/${path}`);
      return { status: response.status, body: (await response.json()) as any };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A started scheduler whose 'hold' handler waits for `release()`: a serial
 * key `chat:<b>1</b>` (3 tasks: 1 runs), a concurrency group `api` (limit 2,
 * 5 tasks) and a rate group `mail` (2 an hour, 3 tasks); 5 running once settled.
 */
async function serve(store: () => Store) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const scheduler = new Scheduler({ store: store(), workers: 10, onError: () => {} });
  scheduler.define('hold', () => gate);
  const now = Date.now();
  for (let i = 0; i < 3; i++) await scheduler.schedule(now, 'hold', { serial: 'chat:<b>1</b>' });
  for (let i = 0; i < 5; i++) await scheduler.schedule(now, 'hold', { concurrency: { group: 'api', limit: 2 } });
  for (let i = 0; i < 3; i++) await scheduler.schedule(now, 'hold', { rate: { group: 'mail', limit: 2, interval: '1h' } });
  await scheduler.start();
  await eventually(async () => (await scheduler.countTasks()).running).toBe(5);
  const http = await mount(scheduler);
  return {
    ...http,
    close: async () => {
      release();
      await http.close();
      await scheduler.close();
    },
  };
}

for (const [backend, store] of BACKENDS) {
  describe(`the Limits panel, ${backend}`, () => {
    it('api/limits: each group with kind, limit, in use and waiting, most waiting first, bounded; 400 for a malformed limit', async () => {
      const app = await serve(store);
      try {
        const all = await app.get('api/limits');
        expect(all.status).toBe(200);
        expect(all.body).toEqual({
          limit: 100,
          groups: [
            { kind: 'concurrency', group: 'api', limit: 2, interval: null, inUse: 2, waiting: 3 },
            { kind: 'serial', group: 'chat:<b>1</b>', limit: 1, interval: null, inUse: 1, waiting: 2 },
            { kind: 'rate', group: 'mail', limit: 2, interval: 3_600_000, inUse: 2, waiting: 1 },
          ],
        });
        expect((await app.get('api/limits?limit=1')).body.groups.map((group: { group: string }) => group.group)).toEqual(['api']);
        for (const bad of ['0', '-1', '1.5', 'abc', '', '1001', '99999999999999999999']) {
          const answer = await app.get(`api/limits?limit=${encodeURIComponent(bad)}`);
          expect([bad, answer.status]).toEqual([bad, 400]);
          expect(answer.body.error).toContain('`limit`');
        }
        expect((await fetch(`${app.origin}/api/limits`, { method: 'POST' })).status).toBe(404);
        expect((await app.get('api/limits')).status).toBe(200);
      } finally {
        await app.close();
      }
    }, 120_000);

    it('in Chromium: the panel lists each key with its limit, what is in use, what waits and why', async () => {
      const app = await serve(store);
      try {
        const context = await harness.browser.newContext({ viewport: { width: 1280, height: 900 } });
        const page: Page = await context.newPage();
        await page.goto(app.origin);
        await eventually(() => page.locator('#limits tr[data-limit-group]').count()).toBe(3);
        expect(await page.locator('#limits-section').isVisible()).toBe(true);
        const cells = (key: string) => page.locator(`#limits tr[data-limit-group="${key}"] td`).allTextContents();
        expect(await cells('concurrency:api')).toEqual(['concurrency', 'api', '2 at once', '2 running', '3', 'every slot held (2)']);
        // The key is text, never markup.
        expect(await cells('serial:chat:<b>1</b>')).toEqual([
          'serial',
          'chat:<b>1</b>',
          '1 at once',
          '1 running',
          '2',
          'every slot held (1)',
        ]);
        expect(await page.locator('#limits b').count()).toBe(0);
        expect(await cells('rate:mail')).toEqual(['rate', 'mail', '2 per 3600 s', '2 started', '1', '2 starts in the last 3600 s']);
        await shoot(page.locator('#limits-section'), 'console-limits', backend);
        await context.close();
      } finally {
        await app.close();
      }
    }, 120_000);
  });
}

it('without a store api/limits lists none and the panel stays hidden', async () => {
  const scheduler = new Scheduler();
  const app = await mount(scheduler);
  try {
    expect(await app.get('api/limits')).toEqual({ status: 200, body: { groups: null, limit: 100 } });
    expect((await app.get('api/limits?limit=x')).status).toBe(400);
    const page = await harness.browser.newPage();
    await page.goto(app.origin);
    await eventually(() => page.evaluate('typeof refreshLimits')).toBe('function');
    await page.evaluate('refreshLimits()');
    expect(await page.locator('#limits-section').isVisible()).toBe(false);
    await page.close();
  } finally {
    await app.close();
    await scheduler.close();
  }
}, 60_000);
