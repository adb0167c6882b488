import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type JobServer } from '../../examples/http-server.js';
import { ManualClock } from '../../src/testing.js';

// Thursday 2026-01-01 12:00:00 UTC.
const START = Date.UTC(2026, 0, 1, 12, 0, 0);
const iso = (ms: number) => new Date(ms).toISOString();

let app: JobServer | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A server on a loopback port, on a ManualClock; `api()` sends real HTTP requests. */
async function setup(options: { workers?: number; workMs?: number } = {}) {
  const clock = new ManualClock(START);
  app = createServer({ clock, timezone: 'UTC', workMs: 100, ...options });
  const port = await app.listen(0);
  const base = `http://127.0.0.1:${port}`;
  const api = async (method: string, path: string, body?: unknown) => {
    const init: RequestInit = { method };
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    const response = await fetch(base + path, init);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    return { status: response.status, body: (await response.json()) as any };
  };
  return { clock, app, api };
}

describe('http-server example', () => {
  it('creates once, cron and every jobs and lists them', async () => {
    const { api } = await setup();
    const once = await api('POST', '/jobs', { type: 'once', in: 1_000, name: 'tea', message: 'tea is ready' });
    expect(once.status).toBe(201);
    expect(once.body).toMatchObject({
      id: '1',
      name: 'tea',
      type: 'once',
      state: 'scheduled',
      nextRunAt: iso(START + 1_000),
      runs: 0,
      in: 1_000,
    });

    const at = await api('POST', '/jobs', { type: 'once', at: '2026-01-02T09:00:00Z', message: 'tomorrow' });
    expect(at.body).toMatchObject({ id: '2', name: 'once-2', message: 'tomorrow', nextRunAt: '2026-01-02T09:00:00.000Z' });

    const cron = await api('POST', '/jobs', { type: 'cron', expression: '*/10 * * * * *', timezone: 'Europe/Paris', name: 'tick' });
    expect(cron.status).toBe(201);
    expect(cron.body).toMatchObject({
      id: '3',
      type: 'cron',
      nextRunAt: iso(START + 10_000),
      expression: '*/10 * * * * *',
      timezone: 'Europe/Paris',
      message: 'tick',
    });

    const every = await api('POST', '/jobs', { type: 'every', ms: 60_000 });
    expect(every.body).toMatchObject({ id: '4', type: 'every', name: 'every-4', nextRunAt: iso(START + 60_000), ms: 60_000 });

    const list = await api('GET', '/jobs');
    expect(list.status).toBe(200);
    expect(list.body.map((job: any) => [job.id, job.name, job.type, job.state])).toEqual([
      ['1', 'tea', 'once', 'scheduled'],
      ['2', 'once-2', 'once', 'scheduled'],
      ['3', 'tick', 'cron', 'scheduled'],
      ['4', 'every-4', 'every', 'scheduled'],
    ]);
    expect((await api('GET', '/jobs/3')).body.name).toBe('tick');
  });

  it('runs the work after a short async delay and appends to the log', async () => {
    const { api, clock } = await setup();
    await api('POST', '/jobs', { type: 'once', in: 1_000, name: 'tea', message: 'tea is ready' });
    await api('POST', '/jobs', { type: 'every', ms: 400, name: 'poll', message: 'polled' });

    await clock.advance(1_050); // tea started at +1000 and is still working
    const running = (await api('GET', '/jobs/1')).body;
    expect(running).toMatchObject({ state: 'done', running: true, runs: 1, lastRunAt: iso(START + 1_000) });
    expect((await api('GET', '/log')).body.map((entry: any) => entry.message)).toEqual(['polled', 'polled']);

    await clock.advance(50);
    const log = (await api('GET', '/log')).body;
    expect(log).toContainEqual({
      at: iso(START + 1_100),
      scheduledAt: iso(START + 1_000),
      jobId: '1',
      name: 'tea',
      message: 'tea is ready',
    });
    expect((await api('GET', '/jobs/1')).body).toMatchObject({ state: 'done', running: false, runs: 1 });

    const stats = (await api('GET', '/stats')).body;
    expect(stats).toMatchObject({ waiting: 1, running: 0, workers: 4, failed: 0 });
    expect(stats.succeeded).toBe(3);
    expect(stats.lateness).toEqual({ p50: 0, p99: 0, max: 0 });
  });

  it('pauses and resumes jobs (one-shots included)', async () => {
    const { api, clock } = await setup();
    await api('POST', '/jobs', { type: 'cron', expression: '*/10 * * * * *', message: 'tick' });
    await api('POST', '/jobs', { type: 'once', in: 5_000, message: 'once' });

    expect((await api('POST', '/jobs/1/pause')).body).toMatchObject({ state: 'paused', nextRunAt: null });
    expect((await api('POST', '/jobs/2/pause')).body).toMatchObject({ state: 'paused' });
    await clock.advance(30_000);
    expect((await api('GET', '/log')).body).toEqual([]);

    expect((await api('POST', '/jobs/1/resume')).body).toMatchObject({ state: 'scheduled', nextRunAt: iso(START + 40_000) });
    // The one-shot's time passed while it was paused: it runs now rather than never.
    expect((await api('POST', '/jobs/2/resume')).body).toMatchObject({ state: 'scheduled', nextRunAt: iso(START + 30_000) });
    await clock.advance(10_100);
    expect((await api('GET', '/log')).body.map((entry: any) => entry.message)).toEqual(['once', 'tick']);

    const again = await api('POST', '/jobs/1/resume');
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: 'Job "1" cannot be resumed: it is scheduled' });
    const done = await api('POST', '/jobs/2/pause');
    expect(done.status).toBe(409);
    expect(done.body).toEqual({ error: 'Job "2" cannot be paused: it is done' });
  });

  it('resumes a one-shot paused before its time at its original time', async () => {
    const { api, clock } = await setup();
    await api('POST', '/jobs', { type: 'once', in: 60_000, message: 'later' });
    await api('POST', '/jobs/1/pause');
    await clock.advance(10_000);
    expect((await api('POST', '/jobs/1/resume')).body).toMatchObject({ state: 'scheduled', nextRunAt: iso(START + 60_000) });
    await clock.advance(50_100);
    expect((await api('GET', '/log')).body).toHaveLength(1);
  });

  it('cancels jobs; a running one sees its signal abort and logs nothing', async () => {
    const { api, clock, app } = await setup();
    await api('POST', '/jobs', { type: 'every', ms: 1_000, message: 'beat' });
    await api('POST', '/jobs', { type: 'once', in: 500, message: 'never logged' });

    await clock.advance(550); // job 2 is mid-work
    expect((await api('GET', '/jobs/2')).body.running).toBe(true);
    const deleted = await api('DELETE', '/jobs/2');
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: '2', state: 'cancelled' });
    expect((await api('DELETE', '/jobs/1')).body.state).toBe('cancelled');

    await clock.advance(5_000);
    expect((await api('GET', '/log')).body).toEqual([]);
    expect((await api('GET', '/jobs')).body).toEqual([]);
    expect((await api('GET', '/jobs/2')).status).toBe(404);
    expect(app.scheduler.stats()).toMatchObject({ waiting: 0, running: 0, cancelled: 2 });
  });

  it('bounds concurrency by workers', async () => {
    const { api, clock } = await setup({ workers: 2 });
    for (let i = 0; i < 5; i++) await api('POST', '/jobs', { type: 'once', in: 0, message: `m${i}` });
    await clock.advance(1);
    expect((await api('GET', '/stats')).body).toMatchObject({ running: 2, waiting: 3, due: 3, workers: 2 });
    await clock.advance(100);
    expect((await api('GET', '/stats')).body).toMatchObject({ running: 2, waiting: 1, succeeded: 2 });
    await clock.advance(200);
    expect((await api('GET', '/log')).body.map((entry: any) => entry.message)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('rejects bad requests with 400 and a clear message, disturbing nothing', async () => {
    const { api, clock } = await setup();
    await api('POST', '/jobs', { type: 'every', ms: 1_000, message: 'keep' });
    const cases: [unknown, number, string | RegExp][] = [
      ['{"type": "once", ', 400, /^Invalid JSON: /],
      ['', 400, 'Missing request body: send a JSON object'],
      [[1, 2], 400, 'Expected a JSON object such as {"type":"once","in":5000,"message":"hello"}'],
      [{}, 400, 'Missing "type": expected "once", "cron" or "every"'],
      [{ type: 'weekly' }, 400, 'Unknown job type "weekly": expected "once", "cron" or "every"'],
      [{ type: 'once', in: 5, colour: 'red' }, 400, 'Unknown field "colour" for a once job; expected: type, name, message, at, in'],
      [{ type: 'once' }, 400, 'A once job needs exactly one of "at" (an ISO date or epoch ms) and "in" (ms from now)'],
      [
        { type: 'once', at: '2026-01-02T00:00:00Z', in: 5 },
        400,
        'A once job needs exactly one of "at" (an ISO date or epoch ms) and "in" (ms from now)',
      ],
      [{ type: 'once', at: 'next tuesday' }, 400, '"at": Expected `when` to be a valid Date, got Invalid Date'],
      [{ type: 'once', at: true }, 400, '"at" must be an ISO date string or epoch milliseconds, got true'],
      [{ type: 'once', in: -5 }, 400, '"in" must be a number of milliseconds >= 0, got -5'],
      [{ type: 'once', in: 5, name: 42 }, 400, '"name" must be a string, got 42'],
      [
        { type: 'cron', expression: '*/5 * * *' },
        400,
        'Invalid cron expression "*/5 * * *": wrong number of fields (4): expected 5, 6 (seconds first) or 7 (seconds first, year last)',
      ],
      [{ type: 'cron', expression: '61 * * * *' }, 400, /^Invalid cron expression "61 \* \* \* \*": .*minute/],
      [{ type: 'cron', expression: 5 }, 400, /^Cron expression must be a string/],
      [{ type: 'cron' }, 400, 'A cron job needs "expression", e.g. "*/5 * * * *"'],
      [{ type: 'cron', expression: '0 9 * * *', timezone: 'Mars/Olympus_Mons' }, 400, /Mars\/Olympus_Mons/],
      [{ type: 'every' }, 400, 'An every job needs "ms", the interval in milliseconds'],
      [{ type: 'every', ms: 0 }, 400, '"ms": Expected every(n) to get an integer >= 1, got 0 (number)'],
      [{ type: 'every', ms: 1.5 }, 400, '"ms": Expected every(n) to get an integer >= 1, got 1.5 (number)'],
    ];
    for (const [body, status, message] of cases) {
      const response = await api('POST', '/jobs', body);
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(Object.keys(response.body)).toEqual(['error']);
      if (typeof message === 'string') expect(response.body.error).toBe(message);
      else expect(response.body.error).toMatch(message);
    }

    const unknown: [string, string, number, string][] = [
      ['DELETE', '/jobs/99', 404, 'No job with id "99"'],
      ['POST', '/jobs/99/pause', 404, 'No job with id "99"'],
      ['POST', '/jobs/99/resume', 404, 'No job with id "99"'],
      ['GET', '/nope', 404, 'Not found: GET /nope'],
      ['GET', '/jobs/1/pause', 405, 'Use POST /jobs/1/pause'],
      ['PUT', '/jobs', 405, 'PUT is not allowed on /jobs; use GET or POST'],
    ];
    for (const [method, path, status, error] of unknown) {
      const response = await api(method, path);
      expect(response.status, `${method} ${path}`).toBe(status);
      expect(response.body).toEqual({ error });
    }

    // The job created first is untouched and still runs; no id was used up.
    const jobs = (await api('GET', '/jobs')).body;
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ id: '1', state: 'scheduled', nextRunAt: iso(START + 1_000) });
    await clock.advance(1_100);
    expect((await api('GET', '/log')).body.map((entry: any) => entry.message)).toEqual(['keep']);
    expect((await api('POST', '/jobs', { type: 'once', in: 10 })).body.id).toBe('2');
  });

  it('close() stops the server and lets running work finish', async () => {
    const { api, clock, app: server } = await setup();
    await api('POST', '/jobs', { type: 'once', in: 0, message: 'finishing' });
    await clock.advance(1);
    expect(server.scheduler.running).toBe(1);
    const closing = server.close();
    await clock.advance(100);
    await closing;
    app = undefined;
    expect(server.log.map((entry) => entry.message)).toEqual(['finishing']);
    expect(server.server.listening).toBe(false);
    expect(server.scheduler.closed).toBe(true);
  });
});
