// The dashboard in a real browser: a headless Chromium (the npm package
// @sparticuz/chromium, found by test/binaries.ts) driven by playwright-core, against a real node:http server. What a person
// sees is asserted on the rendered page, and a screenshot is saved to
// test/artifacts/ for a human to look at.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import { Scheduler } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { chromiumLaunchOptions } from '../binaries.js';

const ARTIFACTS = new URL('../artifacts/', import.meta.url);
const XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';

let browser: Browser;
let dir: string;

beforeAll(async () => {
  browser = await chromium.launch(await chromiumLaunchOptions());
  dir = mkdtempSync(join(tmpdir(), 'taskheap-dashboard-'));
  mkdirSync(ARTIFACTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A scheduler with a store, some jobs and tasks, served by a dashboard on a real port. */
async function serve(options: { actions: boolean; basePath?: string }) {
  const scheduler = new Scheduler({ store: sqliteStore(join(dir, `${Math.random().toString(36).slice(2)}.db`)), onError: () => {} });
  let reminders = 0;
  scheduler.define('remind', () => {
    reminders++;
  });
  let flaky = 0;
  scheduler.define('flaky', () => {
    if (++flaky === 1) throw new Error('first try fails');
  });
  await scheduler.start();
  await scheduler
    .every()
    .day()
    .at('08:00')
    .run('remind', { key: 'stored:daily', payload: { text: 'digest' } });
  const failing = await scheduler.schedule(Date.now(), 'flaky', { key: 'flaky:1' });
  await scheduler.waitFor(failing.id, { timeout: 10_000 });
  const digest = scheduler
    .every()
    .day()
    .at('09:00')
    .run(() => {}, { name: 'daily digest' });
  const poll = scheduler
    .every(10)
    .minutes()
    .run(() => {}, { name: 'poll feeds' });
  const hostile = scheduler
    .every()
    .hour()
    .run(() => {}, { name: XSS });
  const ping = scheduler.after(3_600_000, () => {}, { name: 'one-off ping' });
  const stored = await scheduler.schedule(Date.now() + 3_600_000, 'remind', { payload: { text: XSS }, key: 'remind:1' });
  await scheduler.queue('emails').pause();
  await scheduler.schedule(Date.now(), 'remind', { queue: 'emails', key: 'email:1' });
  const dash = dashboard(scheduler, {
    actions: options.actions,
    basePath: options.basePath ?? '',
    title: 'Bot jobs',
    authorize: (request) =>
      ('headers' in request && !(request.headers instanceof Headers) ? request.headers.cookie : undefined) === 'session=admin',
  });
  const server: Server = createServer(dash.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = async () => {
    server.close();
    await scheduler.close();
  };
  return { scheduler, origin, close, digest, poll, hostile, ping, stored, failing, reminders: () => reminders };
}

async function openAs(origin: string, path: string, admin: boolean): Promise<Page> {
  const context = await browser.newContext();
  if (admin) await context.addCookies([{ name: 'session', value: 'admin', url: origin }]);
  const page = await context.newPage();
  page.on('dialog', (dialog) => {
    throw new Error(`a dialog opened: ${dialog.message()}`);
  });
  await page.goto(`${origin}${path}`);
  return page;
}

const row = (page: Page, table: string, text: string) => page.locator(`#${table} tr`, { hasText: text });

describe('dashboard in Chromium', () => {
  it('shows jobs, tasks and stored tasks; every action works; a screenshot is saved', async () => {
    const app = await serve({ actions: true, basePath: '/admin/jobs' });
    try {
      const page = await openAs(app.origin, '/admin/jobs', true); // redirected to /admin/jobs/
      expect(new URL(page.url()).pathname).toBe('/admin/jobs/');
      await expect.poll(() => page.locator('#jobs tr').count()).toBe(3);
      await expect.poll(() => page.locator('#stored-jobs tr').count()).toBe(1);
      expect(await page.locator('h1').textContent()).toBe('Bot jobs');
      expect(await row(page, 'jobs', 'daily digest').locator('td').nth(2).textContent()).toBe('scheduled');
      expect(await row(page, 'tasks', 'one-off ping').count()).toBe(1);
      // In-memory rows use the stored state names.
      expect(await row(page, 'tasks', 'one-off ping').locator('td').nth(1).textContent()).toBe('waiting');
      expect(await page.locator('#tasks tr').count()).toBe(1); // job occurrences show in their job's row
      // Its name opens its detail, an in-memory task's (beside a store's tasks).
      await row(page, 'tasks', 'one-off ping').locator('a').click();
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe(`In-memory task ${app.ping.id} · one-off ping`);
      expect(await page.locator('#detail-fields').textContent()).toContain('Statewaiting');
      await page.click('#detail-close');
      expect(await row(page, 'jobs', 'daily digest').locator('td').nth(1).textContent()).toMatch(/^every day at 09:00 \(.+\)$/);
      expect(await row(page, 'jobs', 'poll feeds').locator('td').nth(1).textContent()).toBe('every 10 min');
      expect(await row(page, 'stored', 'remind:1').locator('td').nth(3).textContent()).toBe('waiting');
      expect(await page.locator('#stats').textContent()).toMatch(/waiting 4 · running 0/);
      // Durable named queues: a paused one keeps its due task waiting.
      const emails = row(page, 'queues', 'emails').locator('td');
      expect([await emails.nth(1).textContent(), await emails.nth(2).textContent(), await emails.nth(3).textContent()]).toEqual([
        'paused',
        '∞ / ∞',
        '1',
      ]);
      expect(await row(page, 'queues', 'default').locator('td').nth(1).textContent()).toBe('active');
      await page.screenshot({ path: new URL('dashboard.png', ARTIFACTS).pathname, fullPage: true });

      await row(page, 'jobs', 'daily digest').locator('button[data-action=pause]').click();
      await expect.poll(() => app.digest.state).toBe('paused');
      await expect.poll(() => row(page, 'jobs', 'daily digest').locator('td').nth(2).textContent()).toBe('paused');
      await row(page, 'jobs', 'daily digest').locator('button[data-action=resume]').click();
      await expect.poll(() => app.digest.state).toBe('scheduled');

      await row(page, 'jobs', 'poll feeds').locator('button[data-action=trigger]').click();
      await expect.poll(() => app.poll.runs).toBe(1);
      await row(page, 'jobs', 'poll feeds').locator('button[data-action=cancel]').click();
      await expect.poll(() => app.poll.state).toBe('cancelled');
      await expect.poll(() => row(page, 'jobs', 'poll feeds').count()).toBe(0);

      await row(page, 'tasks', 'one-off ping').locator('button[data-action=cancel]').click();
      await expect.poll(() => app.ping.state).toBe('cancelled');

      // Stored recurring jobs: pause, resume, trigger, cancel, by key.
      const storedJob = () => row(page, 'stored-jobs', 'stored:daily');
      expect(await storedJob().locator('td').nth(2).textContent()).toBe('scheduled');
      await storedJob().locator('button[data-action=pause]').click();
      await expect.poll(async () => (await app.scheduler.getJob('stored:daily'))?.state).toBe('paused');
      await expect.poll(() => storedJob().locator('td').nth(2).textContent()).toBe('paused');
      await storedJob().locator('button[data-action=resume]').click();
      await expect.poll(async () => (await app.scheduler.getJob('stored:daily'))?.state).toBe('scheduled');
      await storedJob().locator('button[data-action=trigger]').click();
      await expect.poll(() => app.reminders()).toBe(1);
      await storedJob().locator('button[data-action=cancel]').click();
      await expect.poll(async () => (await app.scheduler.getJob('stored:daily'))?.state).toBe('cancelled');

      // A failed stored task runs again on retry.
      expect(await row(page, 'stored', 'flaky:1').locator('td').nth(3).textContent()).toBe('failed');
      await row(page, 'stored', 'flaky:1').locator('button[data-action=retry]').click();
      await expect.poll(async () => (await app.scheduler.getTask(app.failing.id))?.state).toBe('succeeded');

      await row(page, 'stored', 'remind:1').locator('button[data-action=cancel]').click();
      await expect.poll(async () => (await app.scheduler.getTask(app.stored.id))?.state).toBe('cancelled');
      await expect.poll(() => row(page, 'stored', 'remind:1').locator('td').nth(3).textContent()).toBe('cancelled');
    } finally {
      await app.close();
    }
  }, 60_000);

  it("a stored task's detail lists its steps: name, kind, state and attempts", async () => {
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'steps.db')), onError: () => {} });
    scheduler.define('follow-up', async (ctx) => {
      await ctx.step('ask', () => 'What time suits you?');
      await ctx.sleep('1h');
    });
    await scheduler.start();
    const server: Server = createServer(dashboard(scheduler, { authorize: () => true }).handle);
    try {
      const task = await scheduler.schedule(Date.now(), 'follow-up', { key: 'chat:42' });
      await expect.poll(async () => (await scheduler.getTask(task.id))?.steps?.length, { timeout: 10_000 }).toBe(2);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const page = await openAs(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, '/', false);
      await row(page, 'stored', 'chat:42').locator('a').click();
      await expect.poll(() => page.locator('#detail-steps tr').count()).toBe(2);
      const cells = async (i: number) => (await page.locator('#detail-steps tr').nth(i).locator('td').allTextContents()).slice(0, 4);
      expect(await cells(0)).toEqual(['ask', 'step', 'done', '1']);
      expect(await cells(1)).toEqual(['sleep', 'sleep', 'sleeping', '1']);
      expect(await page.locator('#detail-steps tr').nth(0).locator('td').last().textContent()).toBe('22');
    } finally {
      server.close();
      await scheduler.close();
    }
  }, 60_000);

  it('renders an injected <script> in a job name and a payload as text, and runs none of it', async () => {
    const app = await serve({ actions: true });
    try {
      const page = await openAs(app.origin, '/', true);
      await expect.poll(() => row(page, 'jobs', '<script>').count()).toBe(1);
      expect(await row(page, 'jobs', '<script>').locator('td').first().textContent()).toBe(XSS);
      expect(await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss)).toBeUndefined();
      expect(await page.locator('img').count()).toBe(0);
    } finally {
      await app.close();
    }
  }, 60_000);

  it('refuses unauthorised requests: the page, the data and the actions', async () => {
    const app = await serve({ actions: true });
    try {
      const page = await openAs(app.origin, '/', false);
      expect(await page.locator('body').textContent()).toContain('Unauthorized');
      expect(await page.locator('#jobs').count()).toBe(0);
      const state = await fetch(`${app.origin}/api/state`);
      expect(state.status).toBe(401);
      const action = await fetch(`${app.origin}/api/action`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'job', id: app.digest.id, action: 'cancel' }),
      });
      expect(action.status).toBe(401);
      expect(app.digest.state).toBe('scheduled');
    } finally {
      await app.close();
    }
  }, 60_000);

  it("refuses actions without the page's CSRF token or from another origin", async () => {
    const app = await serve({ actions: true });
    try {
      const send = (headers: Record<string, string>) =>
        fetch(`${app.origin}/api/action`, {
          method: 'POST',
          headers: { cookie: 'session=admin', 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ kind: 'job', id: app.digest.id, action: 'cancel' }),
        });
      expect((await send({})).status).toBe(403);
      expect((await send({ 'x-taskheap-csrf': 'f'.repeat(64) })).status).toBe(403);
      // A form or script on another site, even with a stolen-looking token, is refused by origin.
      const html = await (await fetch(`${app.origin}/`, { headers: { cookie: 'session=admin' } })).text();
      const token = /name="taskheap-csrf" content="([0-9a-f]+)"/.exec(html)![1]!;
      expect((await send({ 'x-taskheap-csrf': token, origin: 'https://evil.example' })).status).toBe(403);
      expect((await send({ 'x-taskheap-csrf': token, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
      expect(app.digest.state).toBe('scheduled');
      expect((await send({ 'x-taskheap-csrf': token })).status).toBe(200);
      expect(app.digest.state).toBe('cancelled');
    } finally {
      await app.close();
    }
  });

  it('is read-only unless actions are enabled: no buttons, and actions answer 403', async () => {
    const app = await serve({ actions: false });
    try {
      const page = await openAs(app.origin, '/', true);
      await expect.poll(() => page.locator('#jobs tr').count()).toBe(3);
      expect(await page.locator('button[data-action]').count()).toBe(0);
      expect(await page.locator('#bulk').isVisible()).toBe(false);
      expect(await page.locator('#stats').textContent()).toContain('read-only');
      const html = await (await fetch(`${app.origin}/`, { headers: { cookie: 'session=admin' } })).text();
      const token = /name="taskheap-csrf" content="([0-9a-f]+)"/.exec(html)![1]!;
      const action = await fetch(`${app.origin}/api/action`, {
        method: 'POST',
        headers: { cookie: 'session=admin', 'content-type': 'application/json', 'x-taskheap-csrf': token },
        body: JSON.stringify({ kind: 'job', id: app.digest.id, action: 'pause' }),
      });
      expect(action.status).toBe(403);
      expect(app.digest.state).toBe('scheduled');
    } finally {
      await app.close();
    }
  }, 60_000);
});
