// The dashboard mounted the way the README shows, in real Express, Fastify
// and Hono servers on loopback: the page, its data and an action, under a
// mount path, next to the application's own routes.
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { dashboard, type Dashboard } from '../../src/dashboard.js';
import { Scheduler, type Job } from '../../src/index.js';

const open = { authorize: () => true, actions: true } as const;
let cleanup: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

function app(): { scheduler: Scheduler; job: Job } {
  const scheduler = new Scheduler();
  const job = scheduler
    .every()
    .hour()
    .run(() => {}, { name: 'hourly report' });
  cleanup.push(() => scheduler.close());
  return { scheduler, job };
}

/** What every mount must do: serve the page at /admin/jobs/, its data, and an action. */
async function exercise(origin: string, job: Job): Promise<void> {
  const redirect = await fetch(`${origin}/admin/jobs`, { redirect: 'manual' });
  expect(redirect.status).toBe(308);
  expect(redirect.headers.get('location')).toBe('/admin/jobs/');
  const page = await fetch(`${origin}/admin/jobs/`);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-security-policy')).toMatch(/script-src 'nonce-/);
  const html = await page.text();
  const token = /name="taskheap-csrf" content="([0-9a-f]+)"/.exec(html)![1]!;
  const state = (await (await fetch(`${origin}/admin/jobs/api/state`)).json()) as { jobs: { name: string }[] };
  expect(state.jobs.map((j) => j.name)).toEqual(['hourly report']);
  const action = await fetch(`${origin}/admin/jobs/api/action`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-taskheap-csrf': token },
    body: JSON.stringify({ kind: 'job', id: job.id, action: 'pause' }),
  });
  expect(action.status).toBe(200);
  expect(job.state).toBe('paused');
  expect(await (await fetch(`${origin}/health`)).text()).toBe('app route');
}

describe('mounting the dashboard', () => {
  it('in node:http with a basePath', async () => {
    const { scheduler, job } = app();
    const dash: Dashboard = dashboard(scheduler, { ...open, basePath: '/admin/jobs' });
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => dash.handle(req, res, () => res.end('app route')));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanup.push(async () => void server.close());
    await exercise(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, job);
  });

  it('in Express, behind express.json()', async () => {
    const { scheduler, job } = app();
    const web = express();
    web.use(express.json()); // reads bodies before the dashboard sees them
    web.use('/admin/jobs', dashboard(scheduler, open).handle);
    web.get('/health', (_req, res) => void res.send('app route'));
    const server = web.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', resolve));
    cleanup.push(async () => void server.close());
    await exercise(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, job);
  });

  it('in Fastify, in a plugin that leaves request bodies to the dashboard', async () => {
    const { scheduler, job } = app();
    const web = Fastify();
    const dash = dashboard(scheduler, { ...open, basePath: '/admin/jobs' });
    await web.register(async (admin) => {
      admin.removeAllContentTypeParsers();
      admin.addContentTypeParser('*', (_request, _payload, done) => done(null));
      admin.all('/admin/jobs', (request, reply) => {
        reply.hijack();
        dash.handle(request.raw, reply.raw);
      });
      admin.all('/admin/jobs/*', (request, reply) => {
        reply.hijack();
        dash.handle(request.raw, reply.raw);
      });
    });
    web.get('/health', async () => 'app route');
    await web.listen({ port: 0, host: '127.0.0.1' });
    cleanup.push(() => web.close());
    await exercise(`http://127.0.0.1:${(web.server.address() as AddressInfo).port}`, job);
  });

  it('in Hono, through fetch()', async () => {
    const { scheduler, job } = app();
    const web = new Hono();
    const dash = dashboard(scheduler, { ...open, basePath: '/admin/jobs' });
    web.all('/admin/jobs', (c) => dash.fetch(c.req.raw));
    web.all('/admin/jobs/*', (c) => dash.fetch(c.req.raw));
    web.get('/health', (c) => c.text('app route'));
    const server = serve({ fetch: web.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', resolve)));
    cleanup.push(async () => void server.close());
    await exercise(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, job);
  });

  it('rejects bad options at the call', () => {
    const { scheduler } = app();
    expect(() => dashboard(scheduler, {} as never)).toThrow(/`authorize` to be a function \(pass `\(\) => true` for an open dashboard\)/);
    expect(() => dashboard(scheduler, { authorize: () => true, basePath: 'admin/' })).toThrow(/basePath/);
    expect(() => dashboard(scheduler, { authorize: () => true, limit: 0 })).toThrow(RangeError);
    expect(() => dashboard(scheduler, { authorize: () => true, action: true } as never)).toThrow(/Unknown dashboard option `action`/);
  });
});
