// postgresStore against a real PostgreSQL server (started by test/durable/pg-server.ts):
// the SQLite store's cases, cancellation across instances through NOTIFY,
// three worker processes sharing one schedule with one SIGKILLed, and the
// database restarting under a running scheduler. No mocks.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type SkipInfo, SchemaVersionError, UnknownHandlerError, type Clock } from '../../src/index.js';
import { postgresStore, type PostgresStoreOptions } from '../../src/postgres.js';
import { ManualClock } from '../../src/testing.js';
import { START } from '../helpers.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres((started, pool) => {
  server = started;
  admin = pool;
}, { adminConnections: 4 });

const freshSchema = schemaNamer('t');

const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

function open(schema: string, options: Omit<PostgresStoreOptions, 'connectionString' | 'schema'> & { clock?: Clock; workers?: number } = {}) {
  const { clock, workers, ...storeOptions } = options;
  const errors: unknown[] = [];
  const scheduler = new Scheduler({
    store: postgresStore({ connectionString: server.url, schema, ...storeOptions }),
    onError: (error) => errors.push(error),
    ...(clock === undefined ? {} : { clock }),
    ...(workers === undefined ? {} : { workers }),
  });
  opened.push(scheduler);
  return { scheduler, errors };
}

/** Polls `condition` until it holds; fails with `what` after `timeout` ms. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(20);
  }
}

/** Defines a 'long' handler that runs until its signal aborts, recording when. */
function defineLong(scheduler: Scheduler) {
  const state = { started: false, abortedAt: 0 };
  scheduler.define('long', (ctx) => new Promise<void>((resolve) => {
    state.started = true;
    ctx.signal.addEventListener('abort', () => {
      state.abortedAt = Date.now();
      resolve();
    });
  }));
  return state;
}

describe('postgresStore: durable tasks', () => {
  it('runs a named handler with its payload at its time and records the outcome', async () => {
    const { scheduler, errors } = open(freshSchema());
    const seen: [string, number, number, number][] = [];
    scheduler.define('remind', (ctx, payload: { text: string }) => {
      seen.push([payload.text, ctx.attempt, Date.now(), ctx.scheduledAt.getTime()]);
    });
    await scheduler.start();
    const runAt = Date.now() + 300;
    const task = await scheduler.schedule(runAt, 'remind', { payload: { text: 'stretch' } });
    expect(task).toMatchObject({ name: 'remind', state: 'waiting', attempts: 0, payload: { text: 'stretch' }, key: null, jobKey: null });
    expect(task.runAt).toEqual(new Date(runAt));
    expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'waiting' });
    await waitFor('the task to succeed', async () => (await scheduler.getTask(task.id))?.state === 'succeeded');
    expect(seen).toHaveLength(1);
    const [text, attempt, ranAt, scheduledAt] = seen[0]!;
    expect([text, attempt, scheduledAt]).toEqual(['stretch', 1, runAt]);
    expect(ranAt).toBeGreaterThanOrEqual(runAt);
    expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'succeeded', attempts: 1, lastError: null });
    expect(await scheduler.getTask(123_456)).toBeUndefined();
    expect(errors).toEqual([]);
  });

  it('a key makes scheduling idempotent', async () => {
    const { scheduler } = open(freshSchema());
    const seen: number[] = [];
    scheduler.define('remind', (_ctx, payload: number) => void seen.push(payload));
    await scheduler.start();
    const first = await scheduler.schedule(Date.now() + 300, 'remind', { payload: 1, key: 'remind:42' });
    const second = await scheduler.schedule(Date.now() + 400, 'remind', { payload: 2, key: 'remind:42' });
    expect(second.id).toBe(first.id);
    expect(second.payload).toBe(2);
    expect(await scheduler.listTasks()).toHaveLength(1);
    await waitFor('the task to succeed', async () => (await scheduler.getTask(first.id))?.state === 'succeeded');
    expect(seen).toEqual([2]);
    // Re-registering a finished task by key schedules it again, still as one row.
    const third = await scheduler.schedule(Date.now(), 'remind', { payload: 3, key: 'remind:42' });
    expect(third.id).toBe(first.id);
    await waitFor('the rerun', () => seen.length === 2);
    expect(seen).toEqual([2, 3]);
    expect(await scheduler.listTasks()).toHaveLength(1);
  });

  it('retries failures with backoff through the store, then records the error', async () => {
    const { scheduler, errors } = open(freshSchema());
    const attempts: [number, number][] = [];
    scheduler.define('flaky', (ctx) => {
      attempts.push([ctx.attempt, Date.now()]);
      throw new Error(`attempt ${ctx.attempt} failed`);
    });
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'flaky', { retry: { attempts: 3, delay: 250, backoff: 'fixed' } });
    await waitFor('the task to fail for good', async () => (await scheduler.getTask(task.id))?.state === 'failed');
    expect(attempts.map(([attempt]) => attempt)).toEqual([1, 2, 3]);
    expect(attempts[1]![1] - attempts[0]![1]).toBeGreaterThanOrEqual(240);
    expect(attempts[2]![1] - attempts[1]![1]).toBeGreaterThanOrEqual(240);
    // The retry's wake is announced: it does not wait for the 5 s poll.
    expect(attempts[2]![1] - attempts[0]![1]).toBeLessThan(2_500);
    const stored = await scheduler.getTask(task.id);
    expect(stored).toMatchObject({ state: 'failed', attempts: 3, maxAttempts: 3 });
    expect(stored!.lastError).toContain('attempt 3 failed');
    expect(errors.length).toBeGreaterThan(0);
  });

  it('times out a run and records timed-out', async () => {
    const { scheduler } = open(freshSchema());
    scheduler.define('slow', () => new Promise(() => {}));
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'slow', { timeout: 200 });
    await waitFor('the task to time out', async () => (await scheduler.getTask(task.id))?.state === 'timed-out');
    expect((await scheduler.getTask(task.id))!.lastError).toMatch(/Timeout/);
  });

  it('cancel(id) stops a waiting task and aborts a running one', async () => {
    const { scheduler } = open(freshSchema());
    let started = false;
    let aborted = false;
    scheduler.define('long', (ctx) => new Promise<void>((resolve) => {
      started = true;
      ctx.signal.addEventListener('abort', () => {
        aborted = true;
        resolve();
      });
    }));
    const later: number[] = [];
    scheduler.define('later', () => void later.push(Date.now()));
    await scheduler.start();
    const waiting = await scheduler.schedule(Date.now() + 1_000, 'later');
    const running = await scheduler.schedule(Date.now(), 'long');
    await waitFor('the long task to start', () => started);
    expect(await scheduler.cancel(waiting.id)).toBe(true);
    expect(await scheduler.cancel(running.id)).toBe(true);
    await waitFor('the running task to see its signal abort', () => aborted);
    expect(await scheduler.cancel(running.id)).toBe(false);
    expect(await scheduler.cancel(999_999)).toBe(false);
    expect((await scheduler.getTask(waiting.id))!.state).toBe('cancelled');
    expect((await scheduler.getTask(running.id))!.state).toBe('cancelled');
    await sleep(1_200); // past the cancelled task's time: it must not run
    expect(later).toEqual([]);
  });

  it('cancel(id) from another instance reaches the running task through NOTIFY', async () => {
    const schema = freshSchema();
    // A long lease: renewal (every lease / 3) would notice the cancellation too, but only after 20 s.
    const a = open(schema, { lease: 60_000 });
    const long = defineLong(a.scheduler);
    const ranLater: number[] = [];
    a.scheduler.define('later', () => void ranLater.push(Date.now()));
    await a.scheduler.start();
    const running = await a.scheduler.schedule(Date.now(), 'long');
    const waiting = await a.scheduler.schedule(Date.now() + 800, 'later');
    await waitFor('the long task to start', () => long.started);

    const b = open(schema, { lease: 60_000 });
    b.scheduler.define('long', () => {});
    b.scheduler.define('later', () => {});
    await b.scheduler.start();
    const cancelledAt = Date.now();
    expect(await b.scheduler.cancel(running.id)).toBe(true);
    expect(await b.scheduler.cancel(waiting.id)).toBe(true);
    await waitFor('the running task in the other instance to abort', () => long.abortedAt > 0, 5_000);
    expect(long.abortedAt - cancelledAt).toBeLessThan(2_000);
    expect((await a.scheduler.getTask(running.id))!.state).toBe('cancelled');
    await sleep(1_000);
    expect(ranLater).toEqual([]);
    expect((await b.scheduler.getTask(waiting.id))!.state).toBe('cancelled');
  });

  it('work added by another instance wakes an idle one through NOTIFY, not the poll', async () => {
    const schema = freshSchema();
    const { scheduler } = open(schema, { poll: 60_000 });
    const ran: number[] = [];
    scheduler.define('remind', () => void ran.push(Date.now()));
    await scheduler.start();
    await sleep(200); // its first claim found nothing: it now sleeps for the poll interval
    const other = postgresStore({ connectionString: server.url, schema });
    await other.migrate();
    try {
      const added = Date.now();
      await other.addTask({ name: 'remind', key: null, payload: 'null', runAt: added, maxAttempts: 1, options: '{}' });
      await waitFor('the idle instance to run the new task', () => ran.length === 1, 5_000);
      expect(ran[0]! - added).toBeLessThan(2_000);
    } finally {
      await other.close();
    }
  });

  it('runs recurring jobs once per occurrence across instances, and re-registering by key does not duplicate', async () => {
    const schema = freshSchema();
    const seen: { at: number; by: string }[] = [];
    const from = Date.now() + 300;
    const instances = ['a', 'b'].map((by) => {
      const { scheduler } = open(schema);
      scheduler.define('tick', (ctx) => void seen.push({ at: ctx.scheduledAt.getTime(), by }));
      return scheduler;
    });
    for (const scheduler of instances) await scheduler.start();
    const job = await instances[0]!.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
    expect(job).toMatchObject({ key: 'ticker', state: 'scheduled', runs: 0 });
    const first = from + 200; // interval rules run at start + k * interval, k >= 1
    expect(job.nextRunAt).toEqual(new Date(first));
    // Both instances register it; the second keeps its place.
    const again = await instances[1]!.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
    expect(again.nextRunAt).toEqual(new Date(first));
    await waitFor('five occurrences', () => seen.length >= 5);
    expect(await instances[1]!.cancelJob('ticker')).toBe(true);
    expect(await instances[1]!.cancelJob('ticker')).toBe(false);
    const tasks = await instances[0]!.listTasks({ jobKey: 'ticker' });
    await waitFor('running occurrences to finish', async () =>
      (await instances[0]!.listTasks({ jobKey: 'ticker', state: 'running' })).length === 0);
    const count = seen.length;
    await sleep(600);
    expect(seen.length).toBe(count);
    const times = seen.map((s) => s.at).sort((x, y) => x - y);
    expect(new Set(times).size).toBe(times.length); // no occurrence ran twice
    expect(times[0]).toBe(first);
    for (const at of times) expect((at - first) % 200).toBe(0);
    const succeeded = await instances[0]!.listTasks({ jobKey: 'ticker', state: 'succeeded' });
    expect(succeeded).toHaveLength(seen.length);
    expect(tasks.every((t) => t.jobKey === 'ticker' && t.name === 'tick')).toBe(true);
  });

  it('re-registering an interval job at a later start keeps its place and count; a new rule starts afresh', async () => {
    // Due times are compared on the server's clock: start an hour ahead of it,
    // so no claim materializes an occurrence while the test re-registers.
    const base = Math.ceil(Date.now() / 1000) * 1000 + 3_600_000;
    const clock = new ManualClock(base);
    const { scheduler } = open(freshSchema(), { clock });
    scheduler.define('tick', () => {});
    // Not started: nothing claims. The server's clock is far past START, so a
    // running claim loop would advance the overdue job between the two calls.
    await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
    await clock.advance(5_000);
    const again = await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' }); // as a restart would
    expect(again.nextRunAt).toEqual(new Date(base + 10_000));
    const changed = await scheduler.every(7).seconds().run('tick', { key: 'k' });
    expect(changed.nextRunAt).toEqual(new Date(base + 5_000 + 7_000));
  });

  it('gives handlers the stored task id', async () => {
    const { scheduler } = open(freshSchema());
    const ids: number[] = [];
    scheduler.define('note', (ctx) => void ids.push(ctx.id));
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'note');
    await waitFor('the task to run', () => ids.length === 1);
    expect(ids).toEqual([task.id]);
  });

  it('overdue job occurrences at start-up follow the misfire policy', async () => {
    const schema = freshSchema();
    // Due times are the server's: the jobs are registered by a process whose
    // (manual, never advanced) clock reads ten and a half minutes ago.
    const base = Date.now() - 10 * 60_000 - 30_000;
    const clock = new ManualClock(base);
    // A producer (never started): it registers the jobs but claims nothing, so
    // it cannot advance them (and report the skips) before it closes.
    const first = open(schema, { clock });
    await first.scheduler.every(1).minute().run('tick', { key: 'once' });
    await first.scheduler.every(1).minute().run('tick', { key: 'skip', misfire: 'skip' });
    await first.scheduler.every(1).minute().run('tick', { key: 'all', misfire: 'all' });
    await first.scheduler.every(1).minute().run('tick', { key: 'capped', misfire: 'all', catchUp: 3 });
    await first.scheduler.close();
    const second = open(schema);
    const skips: SkipInfo[] = [];
    second.scheduler.on('skip', (info) => skips.push(info));
    second.scheduler.define('tick', () => {});
    await second.scheduler.start();
    const count = async (key: string) => (await second.scheduler.listTasks({ jobKey: key })).length;
    // All three are due in the same claim, in one transaction.
    await waitFor('the overdue jobs to be materialized', async () => (await count('once')) === 1 && (await count('all')) === 10 && skips.length === 2);
    expect({ once: await count('once'), skip: await count('skip'), all: await count('all') }).toEqual({ once: 1, skip: 0, all: 10 });
    const all = await second.scheduler.listTasks({ jobKey: 'all' });
    expect(all.map((t) => (t.runAt.getTime() - base) / 60_000)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await count('capped')).toBe(3);
    // What was dropped is reported once the claim committed, one event per job, by key:
    // misfire 'skip' from its first missed occurrence, the capped catch-up from the first beyond the cap.
    expect(skips.sort((a, b) => a.key!.localeCompare(b.key!))).toEqual([
      { job: undefined, name: 'tick', key: 'capped', scheduledAt: new Date(base + 4 * 60_000), reason: 'misfire' },
      { job: undefined, name: 'tick', key: 'skip', scheduledAt: new Date(base + 60_000), reason: 'misfire' },
    ]);
  });

  it('rejects bad input at the call: unknown handler, non-JSON payload, bad options', async () => {
    const { scheduler } = open(freshSchema());
    scheduler.define('known', () => {});
    await scheduler.start();
    await expect(async () => scheduler.schedule(Date.now(), 'unknown')).rejects.toBeInstanceOf(UnknownHandlerError);
    await expect(async () => scheduler.every().second().run('unknown')).rejects.toBeInstanceOf(UnknownHandlerError);
    expect(() => scheduler.schedule(Date.now(), 'known', { payload: { n: 1n } })).toThrow(/JSON/);
    expect(() => scheduler.schedule(Date.now(), 'known', { payload: () => {} })).toThrow(/JSON/);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => scheduler.schedule(Date.now(), 'known', { payload: circular })).toThrow(/JSON/);
    expect(() => scheduler.schedule(Date.now(), 'known', { colour: 1 } as never)).toThrow(/Unknown durable task option/);
    expect(() => scheduler.every().second().run('known', { overlap: 'queue' as never })).toThrow(/overlap/);
    expect(await scheduler.listTasks()).toEqual([]);
    // Payloads round-trip exactly, including ones jsonb would refuse or reorder.
    const odd = { z: 1, a: 'nul \u0000 and emoji 🎉', big: 12345678901234567890, nested: [null, true, { b: 2 }] };
    const stored = await scheduler.schedule(Date.now() + 60_000, 'known', { payload: odd });
    expect(stored.payload).toEqual(JSON.parse(JSON.stringify(odd)));
    expect((await scheduler.getTask(stored.id))!.payload).toEqual(JSON.parse(JSON.stringify(odd)));
  });

  it('validates its own options at the call', () => {
    expect(() => postgresStore({ lease: 0 })).toThrow(/lease/);
    expect(() => postgresStore({ poll: -1 })).toThrow(/poll/);
    expect(() => postgresStore({ schema: '' })).toThrow(/schema/);
    expect(() => postgresStore({ connectionString: 'postgres://x', pool: new pg.Pool() })).toThrow(/either/);
    expect(() => postgresStore({ tmeout: 1 } as never)).toThrow(/Unknown postgresStore option `tmeout`/);
    expect(() => postgresStore(42 as never)).toThrow(TypeError);
    expect(postgresStore({ lease: 2_000, poll: 700 })).toMatchObject({ lease: 2_000, poll: 700 });
    expect(postgresStore()).toMatchObject({ lease: 30_000, poll: 5_000 });
  });

  it('refuses a schema from a newer version with a clear error', async () => {
    const schema = freshSchema();
    await admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.taskheap_meta (version integer NOT NULL); INSERT INTO ${schema}.taskheap_meta VALUES (99)`);
    const { scheduler } = open(schema);
    await expect(scheduler.start()).rejects.toBeInstanceOf(SchemaVersionError);
    await expect(scheduler.start()).rejects.toThrow(/version 99/);
    // Nothing was created next to the newer schema.
    const { rows } = await admin.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, [schema]);
    expect(rows).toEqual([{ table_name: 'taskheap_meta' }]);
  });

  it('migrates once when many stores start together, and records its version', async () => {
    const schema = freshSchema();
    const stores = Array.from({ length: 5 }, () => postgresStore({ connectionString: server.url, schema }));
    try {
      await Promise.all(stores.map((store) => store.migrate()));
      await stores[0]!.migrate(); // again: nothing to do
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
    const { rows } = await admin.query(`SELECT version FROM ${schema}.taskheap_meta`);
    expect(rows).toEqual([{ version: 4 }]);
  });

  it('uses a pool it is given and leaves it open', async () => {
    const schema = freshSchema();
    const pool = new pg.Pool({ connectionString: server.url, max: 3 });
    try {
      const scheduler = new Scheduler({ store: postgresStore(pool), onError: () => {} });
      const withSchema = new Scheduler({ store: postgresStore({ pool, schema, lease: 5_000 }), onError: () => {} });
      opened.push(scheduler, withSchema);
      const seen: string[] = [];
      withSchema.define('hello', (_ctx, payload: string) => void seen.push(payload));
      await withSchema.start();
      await withSchema.schedule(Date.now(), 'hello', { payload: 'from a shared pool' });
      await waitFor('the task to run', () => seen.length === 1);
      await withSchema.close();
      await scheduler.close();
      const { rows } = await pool.query('SELECT 1 AS ok');
      expect(rows).toEqual([{ ok: 1 }]);
    } finally {
      await pool.end();
    }
  });
});

describe('postgresStore: three processes share one schedule', () => {
  interface Worker {
    pid: number;
    exited: Promise<number | null>;
    ready: Promise<void>;
    output: () => string;
    kill: (signal: NodeJS.Signals) => void;
  }

  function worker(args: string[]): Worker {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/pg-worker.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ready\n')) markReady();
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    return { pid: child.pid!, exited, ready, output: () => out, kill: (signal) => child.kill(signal) };
  }

  it('runs 10,000 tasks and three recurring jobs with one worker SIGKILLed: nothing lost, no occurrence run twice at once', async () => {
    const schema = freshSchema();
    const N = 10_000;
    // Long enough that renewals (every lease / 3, each query bounded by lease / 3) keep up on a loaded machine.
    const lease = 3_000;
    await admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.runs (
      id serial PRIMARY KEY, n integer, job_key text, scheduled_at timestamptz, pid integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(), finished_at timestamptz)`);
    // The store creates its tables; the test seeds them in one statement (scheduling
    // through addTask is covered above, and 10,000 round trips would only slow this down).
    const seeder = postgresStore({ connectionString: server.url, schema });
    await seeder.migrate();
    await admin.query(`INSERT INTO ${schema}.taskheap_tasks (name, key, payload, run_at)
      SELECT 'work', 'work:' || n, json_build_object('n', n)::text, now() FROM generate_series(0, $1 - 1) AS n`, [N]);
    await seeder.close();

    const jobsFrom = Date.now() + 3_000;
    const jobsUntil = jobsFrom + 3_000;
    const workers = [0, 1, 2].map(() => worker([server.url, schema, String(jobsFrom), String(jobsUntil), String(lease)]));
    const [victim, ...survivors] = workers as [Worker, Worker, Worker];
    try {
      await Promise.race([
        Promise.all(workers.map((w) => w.ready)),
        sleep(30_000).then(() => {
          throw new Error(`workers did not start:\n${workers.map((w) => w.output()).join('\n')}`);
        }),
      ]);
      // Kill the victim mid-run, while it holds claims: once it has done some work and the
      // jobs are running (or sooner, on a machine fast enough to nearly finish the work first).
      await waitFor('the victim to be busy', async () => {
        const { rows: [runs] } = await admin.query<{ done: number; running: number; waiting: number }>(`SELECT count(finished_at)::int AS done,
          (count(*) - count(finished_at))::int AS running,
          (SELECT count(*)::int FROM ${schema}.taskheap_tasks WHERE state = 'waiting') AS waiting
          FROM ${schema}.runs WHERE pid = $1`, [victim.pid]);
        return runs!.done >= 300 && runs!.running >= 2 && (Date.now() >= jobsFrom + 600 || runs!.waiting < N / 3);
      }, 30_000);
      // What it runs, seen while it is frozen (SIGSTOP): a stopped process finishes nothing, so
      // what is seen running is still held when SIGKILL lands (20 ms let the queries it had
      // already sent land first). Between two of its 10 ms tasks it may hold nothing at all:
      // then it goes on (SIGCONT) and is looked at again.
      type Held = { n: number | null; job_key: string | null; scheduled_at: Date | null; locked_until: Date };
      let held: Held[] = [];
      for (let look = 0; held.length === 0 && look < 50; look++) {
        if (look > 0) {
          victim.kill('SIGCONT');
          await sleep(20);
        }
        victim.kill('SIGSTOP');
        await sleep(20);
        ({ rows: held } = await admin.query<Held>(`
        SELECT r.n, r.job_key, r.scheduled_at, t.locked_until FROM ${schema}.runs r
        JOIN ${schema}.taskheap_tasks t ON (r.n IS NOT NULL AND t.key = 'work:' || r.n)
          OR (r.job_key IS NOT NULL AND t.job_key = r.job_key AND t.scheduled_at = r.scheduled_at)
        WHERE r.pid = $1 AND r.finished_at IS NULL AND t.state = 'running'`, [victim.pid]));
      }
      victim.kill('SIGKILL');
      const killedAt = Date.now();
      await victim.exited;
      expect(held.length).toBeGreaterThan(0);

      for (const w of survivors) {
        const code = await Promise.race([w.exited, sleep(40_000).then(() => 'timeout' as const)]);
        expect(code, w.output()).toBe(0);
      }

      // Every task ran to success, none lost.
      const { rows: states } = await admin.query(`SELECT state, count(*)::int AS n, (job_key IS NULL) AS one_shot
        FROM ${schema}.taskheap_tasks GROUP BY 1, 3 ORDER BY 3 DESC`);
      expect(states.filter((s) => s.one_shot)).toEqual([{ state: 'succeeded', n: N, one_shot: true }]);
      expect(states.filter((s) => !s.one_shot).map((s) => s.state)).toEqual(['succeeded']);
      const { rows: [ran] } = await admin.query(`SELECT count(DISTINCT n)::int AS n FROM ${schema}.runs WHERE n IS NOT NULL AND finished_at IS NOT NULL`);
      expect(ran.n).toBe(N);

      // The dead process's claims ran again, elsewhere, after its lease ran out.
      for (const h of held) {
        const { rows: again } = await admin.query<{ pid: number; started_at: Date }>(`SELECT pid, started_at FROM ${schema}.runs
          WHERE pid <> $1 AND ((n = $2) OR (job_key = $3 AND scheduled_at = $4)) AND finished_at IS NOT NULL`,
        [victim.pid, h.n, h.job_key, h.scheduled_at]);
        expect(again, `held ${JSON.stringify(h)}`).toHaveLength(1);
        expect(again[0]!.started_at.getTime()).toBeGreaterThanOrEqual(h.locked_until.getTime());
        expect(again[0]!.started_at.getTime()).toBeGreaterThanOrEqual(killedAt);
      }

      // Recurring jobs: registered by all three, stored once each; occurrences ran.
      const { rows: jobs } = await admin.query(`SELECT key, state FROM ${schema}.taskheap_jobs ORDER BY key`);
      expect(jobs.map((j) => j.key)).toEqual(['tick:a', 'tick:b', 'tick:c']);
      const { rows: perJob } = await admin.query<{ job_key: string; n: number }>(`SELECT job_key, count(DISTINCT scheduled_at)::int AS n
        FROM ${schema}.runs WHERE job_key IS NOT NULL GROUP BY 1 ORDER BY 1`);
      expect(perJob.map((j) => j.job_key)).toEqual(['tick:a', 'tick:b', 'tick:c']);
      for (const j of perJob) expect(j.n).toBeGreaterThanOrEqual(5);
      // No occurrence ran twice at the same time (a dead run lasts until the kill)...
      const { rows: overlapping } = await admin.query(`SELECT a.job_key, a.scheduled_at, a.pid AS a_pid, b.pid AS b_pid FROM ${schema}.runs a
        JOIN ${schema}.runs b ON a.job_key = b.job_key AND a.scheduled_at = b.scheduled_at AND a.id < b.id
        WHERE a.started_at < coalesce(b.finished_at, $1) AND b.started_at < coalesce(a.finished_at, $1)`, [new Date(killedAt)]);
      expect(overlapping).toEqual([]);
      // ...and the live processes ran each occurrence at most once.
      const { rows: twice } = await admin.query(`SELECT job_key, scheduled_at, count(*)::int AS n FROM ${schema}.runs
        WHERE job_key IS NOT NULL AND pid <> $1 GROUP BY 1, 2 HAVING count(*) > 1`, [victim.pid]);
      expect(twice).toEqual([]);
      // The one-shot work was shared: each live worker ran a fair part of it.
      const { rows: share } = await admin.query<{ pid: number; n: number }>(`SELECT pid, count(*)::int AS n FROM ${schema}.runs
        WHERE n IS NOT NULL GROUP BY pid`);
      for (const w of survivors) expect(share.find((s) => s.pid === w.pid)?.n ?? 0).toBeGreaterThan(N / 10);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
    }
  }, 60_000);
});

describe('postgresStore: the database goes away and comes back', () => {
  it('keeps running, reconnects, runs what fell due meanwhile, and the listener hears cancels again', async () => {
    const schema = freshSchema();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      // A short poll: the scheduler keeps trying (and failing) while the database is down.
      const a = open(schema, { lease: 60_000, poll: 300 });
      const longRun = defineLong(a.scheduler);
      const ran: number[] = [];
      a.scheduler.define('later', () => void ran.push(Date.now()));
      await a.scheduler.start();
      const long = await a.scheduler.schedule(Date.now(), 'long');
      await waitFor('the long task to start', () => longRun.started);
      const dueAt = Date.now() + 3_000;
      const later = await a.scheduler.schedule(dueAt, 'later');
      const listeners = async () => {
        const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = 'taskheap-listener' AND query LIKE 'LISTEN%'`);
        return rows[0]!.n;
      };
      await waitFor('the listener', async () => (await listeners()) === 1);

      await server.stop();
      await sleep(1_200); // down, while the scheduler keeps claiming (and failing)
      await server.start();
      expect(Date.now()).toBeLessThan(dueAt); // the task falls due after the outage
      expect(ran).toEqual([]);

      await waitFor('the task that fell due after the outage to run', () => ran.length === 1, 15_000);
      expect(ran[0]).toBeGreaterThanOrEqual(dueAt);
      await waitFor('its success to be recorded', async () => (await a.scheduler.getTask(later.id).catch(() => undefined))?.state === 'succeeded');
      // The outage was reported through onError (failed claims), never thrown.
      expect(a.errors.length).toBeGreaterThan(0);
      for (const error of a.errors) expect(error).toBeInstanceOf(Error);

      await waitFor('the listener to reconnect', async () => (await listeners().catch(() => 0)) === 1, 15_000);
      expect(longRun.abortedAt).toBe(0);
      const b = open(schema);
      b.scheduler.define('long', () => {});
      await b.scheduler.start();
      expect(await b.scheduler.cancel(long.id)).toBe(true);
      await waitFor('the cancel to reach the running task after the restart', () => longRun.abortedAt > 0, 5_000);
      expect((await a.scheduler.getTask(long.id))!.state).toBe('cancelled');
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }, 60_000);
});
