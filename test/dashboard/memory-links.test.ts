// The dashboard's task detail without a store (issue 28): an in-memory
// flow's task (`#task-<id>`, api/task and api/links) with its dependencies
// and dependents, each with its state and rule, and the flow's status; an
// in-memory task of the heap (`#memory-task-<id>`, api/memory-task) while it
// waits or runs (with a store too: one that runs a claimed stored task
// links to it); clear 404s for a task that is not there (a bad id, a
// finished task, a finished flow forgotten). Over HTTP, and in a real
// headless Chromium, on a ManualClock: nothing runs unless the test says.
// A screenshot of the detail goes to test/artifacts/.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import { Scheduler, type Task } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { chromiumLaunchOptions } from '../binaries.js';
import { gate, setup, START } from '../helpers.js';
import { shoot } from './harness.js';

const HOUR = 3_600_000;

/**
 * A scheduler without a store on a ManualClock, served over node:http with
 * actions: a flow `a`, `b` -> `c` -> `d` (`c` waits for `a` by 'fail' and
 * for `b` by 'continue'; `a` and `b` due in an hour), a flow whose one task
 * `slow` runs until the test opens its gate (logging a line and its
 * progress), and a task `ping` of the heap due in an hour.
 */
async function serve() {
  const { clock, scheduler } = setup({ workers: 4 });
  const ran: string[] = [];
  const step = (name: string) => () => {
    ran.push(name);
    return `${name} done`;
  };
  const flow = await scheduler.flows.add({
    tasks: {
      a: { handler: step('a'), payload: { n: 1 }, when: START + HOUR },
      b: { handler: step('b'), when: START + HOUR },
      c: { handler: step('c'), after: ['a', { task: 'b', onFailure: 'continue' }], payload: { big: 10n } },
      d: { handler: step('d'), after: ['c'], retry: 3 },
    },
  });
  const held = gate();
  const started: Task[] = [];
  scheduler.on('start', (task) => started.push(task));
  const slow = await scheduler.flows.add({
    tasks: {
      slow: {
        handler: async (ctx) => {
          ctx.log('half way');
          ctx.progress(50);
          await held.promise;
        },
        timeout: 60_000,
      },
    },
  });
  const ping = scheduler.after(HOUR, () => {}, { name: 'ping', key: 'ping:1' });
  await clock.advance(0); // `slow` starts
  const slowRun = started.find((task) => task.name === 'slow')!;
  const dash = dashboard(scheduler, { actions: true, authorize: () => true });
  const server: Server = createServer(dash.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const t = flow.tasks;
  return {
    clock,
    scheduler,
    origin,
    ran,
    held,
    ping,
    /** The heap's task that runs `slow`. */
    slowRun,
    ids: { a: t.a!.id, b: t.b!.id, c: t.c!.id, d: t.d!.id, slow: slow.tasks.slow!.id },
    get: async (path: string) => {
      const response = await fetch(`${origin}/${path}`);
      return { status: response.status, body: (await response.json()) as any };
    },
    close: async () => {
      server.close();
      held.open();
      await scheduler.close();
    },
  };
}

/** The heap's waiting tasks as api/state lists them, by name. */
async function waitingRows(app: Awaited<ReturnType<typeof serve>>) {
  const state = (await app.get('api/state')).body;
  return Object.fromEntries(state.tasks.map((task: { name: string }) => [task.name, task]));
}

describe('the task detail of in-memory tasks', () => {
  it('api/task and api/links: a flow task’s dependencies and dependents with their states and rules, the flow, as the stores give them', async () => {
    const app = await serve();
    const { a, b, c, d } = app.ids;
    try {
      const ofC = await app.get(`api/task?id=${c}`);
      expect(ofC.status).toBe(200);
      // A payload that is not JSON (a bigint: in memory it is handed over as given) is said so, not a failed answer.
      expect(ofC.body).toMatchObject({
        id: c,
        name: 'c',
        state: 'blocked',
        attempts: 0,
        queue: 'default',
        payload: expect.stringMatching(/^\(not shown, not JSON: .*BigInt/),
      });
      expect((await app.get(`api/task?id=${d}`)).body).toMatchObject({ id: d, name: 'd', state: 'blocked', maxAttempts: 3 });
      expect((await app.get(`api/task?id=${a}`)).body).toMatchObject({
        state: 'waiting',
        payload: { n: 1 },
        runAt: new Date(START + HOUR).toISOString(),
      });

      const links = await app.get(`api/links?id=${c}`);
      expect(links.status).toBe(200);
      expect(links.body.dependencies).toEqual([
        { id: a, name: 'a', state: 'waiting', onFailure: 'fail', done: false },
        { id: b, name: 'b', state: 'waiting', onFailure: 'continue', done: false },
      ]);
      expect(links.body.dependents).toEqual([{ id: d, name: 'd', state: 'blocked', onFailure: 'fail', done: false }]);
      expect(links.body).toMatchObject({ dependencyCount: 2, dependentCount: 1 });
      expect(links.body.flow).toMatchObject({
        id: a,
        total: 4,
        done: false,
        counts: { waiting: 2, blocked: 2 },
        blocked: [
          { id: c, name: 'c', waitingFor: [a, b], waitingCount: 2 },
          { id: d, name: 'd', waitingFor: [c], waitingCount: 1 },
        ],
        blockedCount: 2,
      });
      // A dependency's own detail lists its dependents.
      const ofA = (await app.get(`api/links?id=${a}`)).body;
      expect(ofA).toMatchObject({ dependencies: [], dependencyCount: 0, dependentCount: 1 });
      expect(ofA.dependents).toEqual([{ id: c, name: 'c', state: 'blocked', onFailure: 'fail', done: false }]);

      // `b` cancelled: `c` counts it done ('continue'); an hour on, `a`, `c` and `d` run, and the links follow.
      expect(await app.scheduler.cancelTask(b)).toBe(true);
      expect((await app.get(`api/links?id=${c}`)).body.dependencies[1]).toEqual({
        id: b,
        name: 'b',
        state: 'cancelled',
        onFailure: 'continue',
        done: true,
      });
      await app.clock.advance(HOUR);
      await app.scheduler.waitFor(d, { timeout: 10_000 });
      expect(app.ran).toEqual(['a', 'c', 'd']);
      const after = (await app.get(`api/links?id=${d}`)).body;
      expect(after.dependencies).toEqual([{ id: c, name: 'c', state: 'succeeded', onFailure: 'fail', done: true }]);
      expect(after.flow).toMatchObject({ done: true, counts: { succeeded: 3, cancelled: 1, blocked: 0 }, blocked: [] });
      expect((await app.get(`api/task?id=${d}`)).body).toMatchObject({ state: 'succeeded', result: 'd done', attempts: 1 });
    } finally {
      await app.close();
    }
  });

  it('api/memory-task: a heap task while it waits or runs, linked to the flow task it runs; the waiting rows say which', async () => {
    const app = await serve();
    const { a, slow } = app.ids;
    try {
      const rows = await waitingRows(app);
      expect(rows.ping).toMatchObject({ id: app.ping.id, state: 'waiting', runsTask: null });
      expect(rows.a).toMatchObject({ state: 'waiting', runsTask: a });
      expect(rows.b).toMatchObject({ runsTask: app.ids.b });
      expect(rows.c).toBeUndefined(); // blocked: not in the heap

      const ping = await app.get(`api/memory-task?id=${app.ping.id}`);
      expect(ping.status).toBe(200);
      expect(ping.body).toEqual({
        id: app.ping.id,
        name: 'ping',
        state: 'waiting',
        runsTask: null,
        key: 'ping:1',
        queue: 'default',
        priority: 0,
        serial: null,
        attempts: 0,
        maxAttempts: 1,
        runAt: START + HOUR,
        startedAt: null,
        timeout: null,
        logs: [],
      });
      expect((await app.get(`api/memory-task?id=${rows.a.id}`)).body).toMatchObject({ name: 'a', runsTask: a });

      // `slow` runs: its heap task is found among the running ones, with its progress and log line; so is its flow task.
      expect((await app.get(`api/task?id=${slow}`)).body).toMatchObject({
        state: 'running',
        attempts: 1,
        progress: 50,
        logs: [{ attempt: 1, line: 'half way' }],
      });
      const found = app.slowRun.id;
      expect((await app.get(`api/memory-task?id=${found}`)).body).toMatchObject({
        runsTask: slow,
        name: 'slow',
        state: 'running',
        attempts: 1,
        startedAt: START,
        timeout: 60_000,
        progress: 50,
        logs: [{ attempt: 1, line: 'half way' }],
      });

      // Finished: the heap keeps nothing of it, and says so.
      app.held.open();
      await app.scheduler.waitFor(slow, { timeout: 10_000 });
      const gone = await app.get(`api/memory-task?id=${found}`);
      expect(gone.status).toBe(404);
      expect(gone.body.error).toBe(`No in-memory task #${found} waiting or running (a finished one is not kept)`);
      expect((await app.get(`api/task?id=${slow}`)).body).toMatchObject({ state: 'succeeded' });
    } finally {
      await app.close();
    }
  });

  it('with a store: a task of the heap that runs a claimed stored task links to the stored task', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-memory-links-'));
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'tasks.db')), onError: () => {} });
    const held = gate();
    const started: Task[] = [];
    scheduler.on('start', (task) => started.push(task));
    scheduler.define('hold', () => held.promise);
    const server = createServer(dashboard(scheduler, { authorize: () => true }).handle);
    try {
      await scheduler.start();
      const stored = await scheduler.schedule(Date.now(), 'hold');
      await expect.poll(() => started.length).toBe(1);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const answer = await fetch(`${origin}/api/memory-task?id=${started[0]!.id}`);
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ name: 'hold', state: 'running', runsTask: stored.id });
      // With a store, #task-<id> is the store's: an unknown id says so.
      expect(await (await fetch(`${origin}/api/task?id=999999`)).json()).toEqual({ error: 'No stored task #999999' });
    } finally {
      held.open();
      server.close();
      await scheduler.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a task that is not there: 400 for a bad id, 404 with a reason for an unknown one and for a finished flow forgotten', async () => {
    const app = await serve();
    try {
      for (const [path, status] of [
        ['api/task?id=abc', 400],
        ['api/task?id=0', 400],
        ['api/links?id=1.5', 400],
        ['api/memory-task', 400],
        ['api/memory-task?id=-3', 400],
        ['api/memory-task?id=99999999999999999999', 400],
        ['api/task?id=999999', 404],
        ['api/links?id=999999', 404],
        ['api/memory-task?id=999999999', 404],
      ] as const) {
        const answer = await app.get(path);
        expect([path, answer.status]).toEqual([path, status]);
        expect(typeof answer.body.error).toBe('string');
      }
      expect((await app.get('api/task?id=999999')).body.error).toBe(
        "No in-memory flow task #999999 (without a store, a flow's tasks are kept until 1,000 more flows have finished)",
      );
      // A payload too large to show every refresh is said so.
      const big = await app.scheduler.flows.add({
        tasks: { big: { handler: () => {}, payload: 'x'.repeat(100_000), when: START + HOUR } },
      });
      expect((await app.get(`api/task?id=${big.id}`)).body.payload).toBe('(not shown: its JSON is 100002 characters, over 65536)');
      // A finished flow is kept until 1,000 more have finished, then forgotten: its tasks are 404s, not errors.
      const first = await app.scheduler.flows.add({ tasks: { once: { handler: () => 1 } } });
      await app.clock.advance(0);
      await app.scheduler.waitFor(first.id);
      expect((await app.get(`api/task?id=${first.id}`)).status).toBe(200);
      for (let i = 0; i < 1_000; i++) await app.scheduler.flows.add({ tasks: { more: { handler: () => i } } });
      await app.clock.advance(0);
      await expect.poll(async () => (await app.get(`api/task?id=${first.id}`)).status).toBe(404);
      expect((await app.get(`api/links?id=${first.id}`)).status).toBe(404);
      expect((await app.get(`api/links?id=${app.ids.c}`)).status).toBe(200); // unfinished: kept
    } finally {
      await app.close();
    }
  });
});

describe('the task detail of in-memory tasks, in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch(await chromiumLaunchOptions());
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  it('a flow task’s detail lists its dependencies and dependents as links; a waiting row opens its detail; an unknown task says so', async () => {
    const app = await serve();
    const { a, b, c, d } = app.ids;
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page: Page = await context.newPage();
      await page.goto(`${app.origin}/#task-${c}`);
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe(`Task ${c} · c · in memory`);
      await expect.poll(() => page.locator('#detail-deps tr[data-id]').count()).toBe(2);
      const cells = (row: string) => page.locator(`${row} td`).allTextContents();
      expect(await cells(`#detail-deps tr[data-id="${a}"]`)).toEqual([String(a), 'a', 'waiting', 'fail', 'no']);
      expect(await cells(`#detail-deps tr[data-id="${b}"]`)).toEqual([String(b), 'b', 'waiting', 'continue', 'no']);
      expect(await cells(`#detail-dependents tr[data-id="${d}"]`)).toEqual([String(d), 'd', 'blocked', 'fail', 'no']);
      expect(await page.locator('#detail-flow-title').textContent()).toBe(`Flow ${a} · 4 task(s) · in progress`);
      expect(await cells(`#detail-flow-blocked tr[data-id="${c}"]`)).toEqual([String(c), 'c', `${a}${b}`]);
      await shoot(page.locator('#detail'), 'console-memory-flow', 'memory');

      // A dependency's link opens its detail, which lists its dependent and follows the scheduler.
      await page.click(`#detail-deps tr[data-id="${b}"] a`);
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe(`Task ${b} · b · in memory`);
      expect(await page.locator('#detail-deps tr[data-id]').count()).toBe(0);
      expect(await cells(`#detail-dependents tr[data-id="${c}"]`)).toEqual([String(c), 'c', 'blocked', 'continue', 'no']);
      await app.scheduler.cancelTask(b);
      await expect.poll(() => page.locator('#detail-fields dd').first().textContent()).toBe('cancelled');
      await expect.poll(() => cells(`#detail-dependents tr[data-id="${c}"]`)).toEqual([String(c), 'c', 'blocked', 'continue', 'yes']);

      // The waiting rows open their detail: a flow's task its flow task's, a task of the heap its own.
      await page.click('#tasks a:text-is("a")');
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe(`Task ${a} · a · in memory`);
      await page.click('#tasks a:text-is("ping")');
      await expect.poll(() => page.locator('#detail-title').textContent()).toBe(`In-memory task ${app.ping.id} · ping`);
      expect(page.url()).toMatch(new RegExp(`#memory-task-${app.ping.id}$`));
      expect(await page.locator('#detail-fields').textContent()).toContain('Keyping:1');
      expect(await page.locator('#detail-links').isVisible()).toBe(false);

      // An unknown task: the reason, no detail, and the page lives on.
      await page.goto(`${app.origin}/#task-999999`);
      await expect.poll(() => page.locator('#message').textContent()).toMatch(/^No in-memory flow task #999999/);
      expect(await page.locator('#detail').isVisible()).toBe(false);
      await page.goto(`${app.origin}/#memory-task-999999999`);
      await expect.poll(() => page.locator('#message').textContent()).toMatch(/^No in-memory task #999999999 waiting or running/);
      await context.close();
    } finally {
      await app.close();
    }
  }, 120_000);
});
