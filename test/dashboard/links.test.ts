// A task's dependencies, dependents and flow in the dashboard's task detail
// (issue 28), and a stored job's runs newest first (issue 24): the JSON
// endpoints over HTTP (api/links, api/job-runs, and their 4xx answers to
// malformed requests) and the page in a real headless Chromium, each on a
// real SQLite file and a real PostgreSQL server (with and without a schema).
// Screenshots go to test/artifacts/; `npm run screenshots` also refreshes
// docs/images/console-flow.png and console-job-runs.png (from SQLite).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import type { Store } from '../../src/durable/store.js';
import { Scheduler } from '../../src/index.js';
import { browserHarness, shoot } from './harness.js';

const harness = browserHarness('links');
const BACKENDS = harness.backends({ withoutSchema: true });

let served = 0;

/**
 * Served over node:http with actions, its scheduler started: a flow `a`,
 * `b` -> `c` -> `d` (`c` waits for `a` by 'fail' and for `b` by
 * 'continue'; `a` and `b` due in an hour, so nothing of it runs unless the
 * test says), a task `x` stored on its own and a flow `y` that depends on
 * it by id, and a stored hourly job (`job`, a key of its own) whose runs
 * `runJob()` triggers: five, the second one failing.
 */
async function serve(store: () => Store) {
  const scheduler = new Scheduler({ store: store(), onError: () => {} });
  let calls = 0;
  scheduler.define('step', () => {});
  scheduler.define('report', () => {
    if (++calls === 2) throw new Error('the mail server said no\nat line 2');
  });
  await scheduler.start();
  const later = Date.now() + 3_600_000;
  const flow = await scheduler.flows.add({
    tasks: {
      a: { handler: 'step', payload: { n: 1 }, when: later },
      b: { handler: 'step', when: later },
      c: { handler: 'step', after: ['a', { task: 'b', onFailure: 'continue' }] },
      d: { handler: 'step', after: ['c'] },
    },
  });
  const x = await scheduler.schedule(later, 'step');
  const other = await scheduler.flows.add({ tasks: { y: { handler: 'step', after: [x.id] } } });
  const job = `report:${++served}`;
  await scheduler.every('1h').run('report', { key: job });
  const dash = dashboard(scheduler, { actions: true, limit: 2, authorize: () => true });
  const server: Server = createServer(dash.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    scheduler,
    origin,
    job,
    ids: {
      a: flow.tasks.a!.id,
      b: flow.tasks.b!.id,
      c: flow.tasks.c!.id,
      d: flow.tasks.d!.id,
      x: x.id,
      y: other.tasks.y!.id,
    },
    get: async (path: string) => {
      const response = await fetch(`${origin}/${path}`);
      return { status: response.status, body: (await response.json()) as any };
    },
    /** Five runs of the job, each triggered and waited for; the second fails. */
    runJob: async () => {
      const runs: number[] = [];
      for (let i = 0; i < 5; i++) {
        const run = await scheduler.triggerJob(job);
        runs.push(run.id);
        await scheduler.waitFor(run.id, { timeout: 60_000 });
      }
      return runs;
    },
    close: async () => {
      server.close();
      await scheduler.close();
    },
  };
}

const eventually = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 30_000, interval: 100 });

for (const [backend, store] of BACKENDS) {
  const browserToo = !backend.includes('without');
  describe(`task links and job runs in the dashboard, ${backend}`, () => {
    it('api/links: dependencies and dependents with their states and rules, the flow with what is blocked on what', async () => {
      const app = await serve(store);
      const { a, b, c, d, x, y } = app.ids;
      try {
        const ofC = await app.get(`api/links?id=${c}`);
        expect(ofC.status).toBe(200);
        expect(ofC.body.dependencies).toEqual([
          { id: a, name: 'step', state: 'waiting', onFailure: 'fail', done: false },
          { id: b, name: 'step', state: 'waiting', onFailure: 'continue', done: false },
        ]);
        expect(ofC.body.dependents).toEqual([{ id: d, name: 'step', state: 'blocked', onFailure: 'fail', done: false }]);
        expect(ofC.body).toMatchObject({ dependencyCount: 2, dependentCount: 1 });
        expect(ofC.body.flow).toMatchObject({
          id: a,
          total: 4,
          done: false,
          counts: { waiting: 2, blocked: 2, succeeded: 0 },
          blocked: [
            { id: c, name: 'step', waitingFor: [a, b], waitingCount: 2 },
            { id: d, name: 'step', waitingFor: [c], waitingCount: 1 },
          ],
          blockedCount: 2,
        });
        // A task stored on its own, depended on by another flow's task: no flow of its own, one dependent.
        const ofX = await app.get(`api/links?id=${x}`);
        expect(ofX.body).toMatchObject({ dependencies: [], dependentCount: 1, flow: null });
        expect(ofX.body.dependents).toEqual([{ id: y, name: 'step', state: 'blocked', onFailure: 'fail', done: false }]);
        expect((await app.get(`api/links?id=${y}`)).body.flow).toMatchObject({ id: y, total: 1, blocked: [{ id: y, waitingFor: [x] }] });

        // `b` cancelled: `c` counts it done ('continue'); `a` cancelled: `c` and `d` are cancelled with it ('fail').
        await app.scheduler.cancelTask(b);
        expect((await app.get(`api/links?id=${c}`)).body.dependencies[1]).toMatchObject({ id: b, state: 'cancelled', done: true });
        await app.scheduler.cancelTask(a);
        const after = (await app.get(`api/links?id=${d}`)).body;
        expect(after.dependencies).toEqual([{ id: c, name: 'step', state: 'cancelled', onFailure: 'fail', done: false }]);
        expect(after.flow).toMatchObject({ done: true, counts: { cancelled: 4, blocked: 0 }, blocked: [], blockedCount: 0 });
      } finally {
        await app.close();
      }
    }, 60_000);

    it('api/job-runs: a job’s runs newest first, paged, with state, start, duration and error; 4xx for malformed requests', async () => {
      const app = await serve(store);
      try {
        const runs = await app.runJob();
        const key = encodeURIComponent(app.job);
        const first = await app.get(`api/job-runs?key=${key}`);
        expect(first.status).toBe(200);
        // limit: 2 per page; newest first.
        expect(first.body.runs.map((run: { id: number }) => run.id)).toEqual([runs[4], runs[3]]);
        for (const run of first.body.runs) {
          expect(run).toMatchObject({ state: 'succeeded', attempts: 1, error: null });
          expect(run.startedAt).toBeGreaterThan(0);
          expect(run.duration).toBeGreaterThanOrEqual(0);
        }
        const second = await app.get(`api/job-runs?key=${key}&after=${encodeURIComponent(first.body.next)}`);
        expect(second.body.runs.map((run: { id: number }) => run.id)).toEqual([runs[2], runs[1]]);
        expect(second.body.runs[1]).toMatchObject({ state: 'failed', error: 'Error: the mail server said no' });
        const third = await app.get(`api/job-runs?key=${key}&after=${encodeURIComponent(second.body.next)}`);
        expect(third.body.runs.map((run: { id: number }) => run.id)).toEqual([runs[0]]);
        expect(third.body.next).toBeNull();
        expect((await app.get('api/job-runs?key=nobody')).body).toEqual({ key: 'nobody', runs: [], next: null });

        // Malformed: 4xx with a reason, and the server still answers.
        for (const [path, status] of [
          ['api/job-runs', 400],
          ['api/job-runs?key=', 400],
          [`api/job-runs?key=${key}&after=yesterday`, 400],
          [`api/job-runs?key=${'k'.repeat(5_000)}`, 400],
          ['api/links', 400],
          ['api/links?id=abc', 400],
          ['api/links?id=0', 400],
          ['api/links?id=1.5', 400],
          ['api/links?id=99999999999999999999', 400],
          ['api/links?id=999999', 404],
        ] as const) {
          const answer = await app.get(path);
          expect([path, answer.status]).toEqual([path, status]);
          expect(typeof answer.body.error).toBe('string');
        }
        expect((await fetch(`${app.origin}/api/links?id=1`, { method: 'POST' })).status).toBe(404);
        expect((await app.get(`api/links?id=${app.ids.a}`)).status).toBe(200);
      } finally {
        await app.close();
      }
    }, 120_000);

    if (browserToo)
      it('in Chromium: the detail lists dependencies, dependents and the flow with links between them; a job’s runs page', async () => {
        const app = await serve(store);
        const { a, b, c, d } = app.ids;
        try {
          await app.runJob();
          const context = await harness.browser.newContext({ viewport: { width: 1280, height: 900 } });
          const page: Page = await context.newPage();
          await page.goto(`${app.origin}/#task-${c}`);
          await eventually(() => page.locator('#detail-title').textContent()).toBe(`Task ${c} · step`);
          await eventually(() => page.locator('#detail-deps tr[data-id]').count()).toBe(2);
          const cells = (row: string) => page.locator(`${row} td`).allTextContents();
          expect(await cells(`#detail-deps tr[data-id="${a}"]`)).toEqual([String(a), 'step', 'waiting', 'fail', 'no']);
          expect(await cells(`#detail-deps tr[data-id="${b}"]`)).toEqual([String(b), 'step', 'waiting', 'continue', 'no']);
          expect(await cells(`#detail-dependents tr[data-id="${d}"]`)).toEqual([String(d), 'step', 'blocked', 'fail', 'no']);
          expect(await page.locator('#detail-deps-title').textContent()).toBe('Depends on · 2');
          expect(await page.locator('#detail-flow-title').textContent()).toBe(`Flow ${a} · 4 task(s) · in progress`);
          expect(await page.locator('#detail-flow-summary').textContent()).toBe('blocked 2 · waiting 2');
          expect(await cells(`#detail-flow-blocked tr[data-id="${c}"]`)).toEqual([String(c), 'step', `${a}${b}`]);
          expect(await cells(`#detail-flow-blocked tr[data-id="${d}"]`)).toEqual([String(d), 'step', String(c)]);
          await shoot(page.locator('#detail'), 'console-flow', backend);

          // A dependency's link opens its detail, which follows the store: `a` cancelled sinks `c` and `d`.
          await page.click(`#detail-deps tr[data-id="${a}"] a`);
          await eventually(() => page.locator('#detail-title').textContent()).toBe(`Task ${a} · step`);
          expect(await page.locator('#detail-deps tr[data-id]').count()).toBe(0);
          expect(await cells(`#detail-dependents tr[data-id="${c}"]`)).toEqual([String(c), 'step', 'blocked', 'fail', 'no']);
          await app.scheduler.cancelTask(a);
          await eventually(() => cells(`#detail-dependents tr[data-id="${c}"]`)).toEqual([String(c), 'step', 'cancelled', 'fail', 'no']);
          await eventually(() => page.locator('#detail-flow-summary').textContent()).toBe('waiting 1 · cancelled 3');
          expect(await page.locator('#detail-flow-blocked').textContent()).toBe('Nothing is blocked');

          // The stored job's key opens its runs, newest first, two a page; Older and Newest page through them.
          await page.click('#detail-close');
          await page.click(`#stored-jobs a:text-is("${app.job}")`);
          await eventually(() => page.locator('#runs-title').textContent()).toBe(`Runs of ${app.job} · newest first`);
          await eventually(() => page.locator('#runs-rows tr[data-id]').count()).toBe(2);
          expect(await page.locator('#detail').isVisible()).toBe(false);
          const ids = () => page.locator('#runs-rows tr[data-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-id')));
          const newest = await ids();
          expect(await page.locator('#runs-rows tr[data-id] td:nth-child(2)').allTextContents()).toEqual(['succeeded', 'succeeded']);
          expect(await page.locator('#runs-rows tr[data-id] td:nth-child(5)').first().textContent()).toMatch(/^\d+ ms$|^\d+\.\d s$/);
          expect(await page.locator('#runs-newest').isDisabled()).toBe(true);
          await page.click('#runs-older');
          await eventually(async () => (await ids())[0] !== newest[0]).toBe(true);
          expect(await page.locator('#runs-rows tr[data-id] td:nth-child(2)').allTextContents()).toEqual(['succeeded', 'failed']);
          expect(await page.locator('#runs-rows tr[data-id] td:nth-child(7)').nth(1).textContent()).toBe('Error: the mail server said no');
          await shoot(page.locator('#runs'), 'console-job-runs', backend);
          await page.click('#runs-newest');
          await eventually(ids).toEqual(newest);
          // A run's id opens its task.
          await page.click(`#runs-rows tr[data-id="${newest[0]}"] a`);
          await eventually(() => page.locator('#detail-title').textContent()).toBe(`Task ${newest[0]} · report`);
          expect(await page.locator('#runs').isVisible()).toBe(false);
          await context.close();
        } finally {
          await app.close();
        }
      }, 120_000);
  });
}
