// Malformed requests to the dashboard, sent as a client could send them: a
// raw target Node's URL parser refuses, bad bodies and an oversized one. Each
// gets a 4xx and the server lives on, under node:http and Express.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import express from 'express';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { dashboard } from '../../src/dashboard.js';
import { Scheduler } from '../../src/index.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Sends `head` as is over a socket and returns the status line and body of the answer. */
function raw(origin: string, head: string): Promise<string> {
  const { port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(head));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

function setup(): Scheduler {
  const scheduler = new Scheduler();
  scheduler
    .every()
    .hour()
    .run(() => {}, { name: 'hourly report' });
  cleanup.push(() => scheduler.close());
  return scheduler;
}

async function token(origin: string): Promise<string> {
  const html = await (await fetch(`${origin}/admin/jobs/`)).text();
  return /name="taskheap-csrf" content="([0-9a-f]+)"/.exec(html)![1]!;
}

/** What every mount must survive; ends by checking the dashboard still answers. */
async function hostile(origin: string, parsedBefore = false): Promise<void> {
  const bad = await raw(origin, 'GET //[ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  expect(bad).toMatch(/^HTTP\/1\.1 4\d\d /);
  const badUnder = await raw(origin, 'GET /admin/jobs/api/state?x=%E0%A4%A HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  expect(badUnder).toMatch(/^HTTP\/1\.1 (200|4\d\d) /);
  const csrf = await token(origin);
  const post = (body: string, type = 'application/json') =>
    fetch(`${origin}/admin/jobs/api/action`, { method: 'POST', headers: { 'content-type': type, 'x-taskheap-csrf': csrf }, body });
  for (const body of [
    '{',
    'null',
    '[]',
    '7',
    '"job"',
    '{"kind":"job","id":"1","action":"pause"}',
    '{"kind":"stored-job","key":"k","action":"pause"}',
  ]) {
    const response = await post(body);
    expect(response.status, body).toBeGreaterThanOrEqual(400);
    expect(response.status, body).toBeLessThan(500);
    // Behind express.json(), Express itself refuses what is not a JSON object or array, with its own page.
    if (!parsedBefore || response.headers.get('content-type')?.startsWith('application/json'))
      expect(((await response.json()) as { error: string }).error, body).toBeTypeOf('string');
  }
  const big = await post(JSON.stringify({ kind: 'job', id: 1, action: 'pause', padding: 'x'.repeat(20_000) }));
  expect(big.status).toBe(413);
  expect(((await big.json()) as { error: string }).error).toMatch(/larger than 4096 bytes/);
  const state = await fetch(`${origin}/admin/jobs/api/state`);
  expect(state.status).toBe(200);
}

describe('the dashboard under malformed requests', () => {
  it('node:http: 4xx for each, 413 for an oversized body, and the process serves on', async () => {
    const scheduler = setup();
    const dash = dashboard(scheduler, { authorize: () => true, actions: true, basePath: '/admin/jobs' });
    const origin = await listen(createServer((req, res) => dash.handle(req, res, () => res.writeHead(404).end())));
    await hostile(origin);
  });

  it('node:http: a body that grows past the limit while streamed (no content-length) gets 413', async () => {
    const scheduler = setup();
    const dash = dashboard(scheduler, { authorize: () => true, actions: true, basePath: '/admin/jobs' });
    const origin = await listen(createServer((req, res) => dash.handle(req, res, () => res.writeHead(404).end())));
    const csrf = await token(origin);
    const chunk = 'x'.repeat(3_000);
    const head =
      'POST /admin/jobs/api/action HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      `x-taskheap-csrf: ${csrf}\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const body = `${(3_000).toString(16)}\r\n${chunk}\r\n${(3_000).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`;
    const answer = await raw(origin, head + body);
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect((await fetch(`${origin}/admin/jobs/api/state`)).status).toBe(200);
  });

  it('Express, behind express.json(): 4xx for each, 413 for an oversized body', async () => {
    const scheduler = setup();
    const web = express();
    web.use(express.json());
    web.use('/admin/jobs', dashboard(scheduler, { authorize: () => true, actions: true }).handle);
    await hostile(await listen(createServer(web)), true);
  });

  it('Hono (fetch): bad bodies get 400, an oversized one 413', async () => {
    const scheduler = setup();
    const dash = dashboard(scheduler, { authorize: () => true, actions: true, basePath: '/admin/jobs' });
    const hono = new Hono();
    hono.all('/admin/jobs/*', (c) => dash.fetch(c.req.raw));
    const html = await (await hono.request('/admin/jobs/')).text();
    const csrf = /name="taskheap-csrf" content="([0-9a-f]+)"/.exec(html)![1]!;
    const post = (body: string) =>
      hono.request('/admin/jobs/api/action', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-taskheap-csrf': csrf },
        body,
      });
    for (const body of ['{', '[]', '"job"', '{"kind":"stored-job","key":"k","action":"pause"}'])
      expect((await post(body)).status, body).toBe(400);
    expect((await post(JSON.stringify({ padding: 'x'.repeat(20_000) }))).status).toBe(413);
  });

  it('Express, without a body parser', async () => {
    const scheduler = setup();
    const web = express();
    web.use('/admin/jobs', dashboard(scheduler, { authorize: () => true, actions: true }).handle);
    await hostile(await listen(createServer(web)));
  });
});
