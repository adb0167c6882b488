// What is PostgreSQL's alone, against a real server (started by
// test/durable/pg-server.ts): an idle instance woken through NOTIFY, the
// store's own options, concurrent migration, a pool of the caller's, three
// worker processes sharing one schedule with one SIGKILLed, and the database
// restarting under a running scheduler. No mocks. The behaviour every store
// shares (tasks, jobs, claims, serial groups, batching) is the conformance
// suite: store-postgres.test.ts runs it here.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Clock } from '../../../src/index.js';
import { postgresStore, type PostgresStoreOptions } from '../../../src/postgres.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';
import { SCHEMA_VERSION } from '../../../src/durable/store.js';
import { compiled } from '../../compiled-fixture.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres(
  (started, pool) => {
    server = started;
    admin = pool;
  },
  // A server of its own: a test stops and restarts it.
  { adminConnections: 4, own: true },
);

const freshSchema = schemaNamer('t');

const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

function open(
  schema: string,
  options: Omit<PostgresStoreOptions, 'connectionString' | 'schema'> & { clock?: Clock; workers?: number } = {},
) {
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
  scheduler.define(
    'long',
    (ctx) =>
      new Promise<void>((resolve) => {
        state.started = true;
        ctx.signal.addEventListener('abort', () => {
          state.abortedAt = Date.now();
          resolve();
        });
      }),
  );
  return state;
}

describe('postgresStore: its own', () => {
  it('work added by another instance wakes an idle one through NOTIFY, not the poll', async () => {
    const schema = freshSchema();
    // A poll of an hour: once idle, only NOTIFY can make it claim the new task.
    const store = postgresStore({ connectionString: server.url, schema, poll: 3_600_000 });
    let idle = false;
    const nextDue = store.nextDue.bind(store);
    store.nextDue = async (...args) => {
      const due = await nextDue(...args);
      idle = true;
      return due;
    };
    const scheduler = new Scheduler({ store });
    opened.push(scheduler);
    const ran: number[] = [];
    scheduler.define('remind', () => void ran.push(Date.now()));
    await scheduler.start();
    // Its first claim found nothing and it asked when work is due: it sleeps for the poll now.
    await waitFor('the instance to go idle', () => idle);
    const other = postgresStore({ connectionString: server.url, schema });
    await other.migrate();
    try {
      await other.addTask({ name: 'remind', key: null, payload: 'null', runAt: Date.now(), maxAttempts: 1, options: '{}' });
      await waitFor('the idle instance to run the new task (woken by NOTIFY: its poll is an hour)', () => ran.length === 1);
    } finally {
      await other.close();
    }
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
    expect(rows).toEqual([{ version: SCHEMA_VERSION }]);
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
    const child = spawn(process.execPath, [compiled('test/fixtures/pg-worker.ts'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
    // Long enough that renewals (every lease / 3) and every query (each bounded by lease / 3 + 0.5 s,
    // the start's job registrations too) keep up on a loaded machine: at 3 s, a registration beside
    // 48 busy workers, two CPU burners and the rest of the suite once took longer than 1.5 s.
    const lease = 6_000;
    await admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.runs (
      id serial PRIMARY KEY, n integer, job_key text, scheduled_at timestamptz, pid integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(), finished_at timestamptz)`);
    // The store creates its tables; the test seeds them in one statement (scheduling
    // through addTask is covered above, and 10,000 round trips would only slow this down).
    const seeder = postgresStore({ connectionString: server.url, schema });
    await seeder.migrate();
    await admin.query(
      `INSERT INTO ${schema}.taskheap_tasks (name, key, payload, run_at)
      SELECT 'work', 'work:' || n, json_build_object('n', n)::text, now() FROM generate_series(0, $1 - 1) AS n`,
      [N],
    );
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
      await waitFor(
        'the victim to be busy',
        async () => {
          const {
            rows: [runs],
          } = await admin.query<{ done: number; running: number; waiting: number }>(
            `SELECT count(finished_at)::int AS done,
          (count(*) - count(finished_at))::int AS running,
          (SELECT count(*)::int FROM ${schema}.taskheap_tasks WHERE state = 'waiting') AS waiting
          FROM ${schema}.runs WHERE pid = $1`,
            [victim.pid],
          );
          return runs!.done >= 300 && runs!.running >= 2 && (Date.now() >= jobsFrom + 600 || runs!.waiting < N / 3);
        },
        30_000,
      );
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
        ({ rows: held } = await admin.query<Held>(
          `
        SELECT r.n, r.job_key, r.scheduled_at, t.locked_until FROM ${schema}.runs r
        JOIN ${schema}.taskheap_tasks t ON (r.n IS NOT NULL AND t.key = 'work:' || r.n)
          OR (r.job_key IS NOT NULL AND t.job_key = r.job_key AND t.scheduled_at = r.scheduled_at)
        WHERE r.pid = $1 AND r.finished_at IS NULL AND t.state = 'running'`,
          [victim.pid],
        ));
      }
      victim.kill('SIGKILL');
      const killedAt = Date.now();
      await victim.exited;
      expect(held.length).toBeGreaterThan(0);

      // The survivors finish the work and exit. No bound on how long that takes (a loaded
      // machine is slow): only on a stall, 30 s without a single run finishing anywhere.
      const finished = async () => (await admin.query<{ n: number }>(`SELECT count(finished_at)::int AS n FROM ${schema}.runs`)).rows[0]!.n;
      let exited = false;
      void Promise.all(survivors.map((w) => w.exited)).then(() => (exited = true));
      for (let last = -1, since = Date.now(); !exited; await sleep(250)) {
        const now = await finished();
        if (now !== last) [last, since] = [now, Date.now()];
        else if (Date.now() - since > 30_000)
          throw new Error(`no run finished for 30 s (${now} finished):\n${survivors.map((w) => w.output()).join('\n')}`);
      }
      for (const w of survivors) expect(await w.exited, w.output()).toBe(0);

      // Every task ran to success, none lost.
      const { rows: states } = await admin.query(`SELECT state, count(*)::int AS n, (job_key IS NULL) AS one_shot
        FROM ${schema}.taskheap_tasks GROUP BY 1, 3 ORDER BY 3 DESC`);
      expect(states.filter((s) => s.one_shot)).toEqual([{ state: 'succeeded', n: N, one_shot: true }]);
      expect(states.filter((s) => !s.one_shot).map((s) => s.state)).toEqual(['succeeded']);
      const {
        rows: [ran],
      } = await admin.query(`SELECT count(DISTINCT n)::int AS n FROM ${schema}.runs WHERE n IS NOT NULL AND finished_at IS NOT NULL`);
      expect(ran.n).toBe(N);

      // The dead process's claims ran again, elsewhere, after its lease ran out.
      for (const h of held) {
        const { rows: again } = await admin.query<{ pid: number; started_at: Date }>(
          `SELECT pid, started_at FROM ${schema}.runs
          WHERE pid <> $1 AND ((n = $2) OR (job_key = $3 AND scheduled_at = $4)) AND finished_at IS NOT NULL`,
          [victim.pid, h.n, h.job_key, h.scheduled_at],
        );
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
      const { rows: overlapping } = await admin.query(
        `SELECT a.job_key, a.scheduled_at, a.pid AS a_pid, b.pid AS b_pid FROM ${schema}.runs a
        JOIN ${schema}.runs b ON a.job_key = b.job_key AND a.scheduled_at = b.scheduled_at AND a.id < b.id
        WHERE a.started_at < coalesce(b.finished_at, $1) AND b.started_at < coalesce(a.finished_at, $1)`,
        [new Date(killedAt)],
      );
      expect(overlapping).toEqual([]);
      // ...and the live processes ran each occurrence at most once.
      const { rows: twice } = await admin.query(
        `SELECT job_key, scheduled_at, count(*)::int AS n FROM ${schema}.runs
        WHERE job_key IS NOT NULL AND pid <> $1 GROUP BY 1, 2 HAVING count(*) > 1`,
        [victim.pid],
      );
      expect(twice).toEqual([]);
      // The one-shot work was shared: each live worker ran a fair part of it.
      const { rows: share } = await admin.query<{ pid: number; n: number }>(`SELECT pid, count(*)::int AS n FROM ${schema}.runs
        WHERE n IS NOT NULL GROUP BY pid`);
      for (const w of survivors) expect(share.find((s) => s.pid === w.pid)?.n ?? 0).toBeGreaterThan(N / 10);
    } finally {
      for (const w of workers) w.kill('SIGKILL');
    }
  }, 300_000); // bounded by the stall check above, not by how fast the machine is
});

describe('postgresStore: the database goes away and comes back', () => {
  it('keeps running, reconnects, runs what fell due meanwhile, and the listener hears cancels again', async () => {
    const schema = freshSchema();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      // A short poll: the scheduler keeps trying (and failing) while the database is down.
      // A lease of an hour: no renewal (every 20 minutes) can be what tells it of the cancel at the end.
      const a = open(schema, { lease: 3_600_000, poll: 300 });
      const longRun = defineLong(a.scheduler);
      const ran: number[] = [];
      a.scheduler.define('later', () => void ran.push(Date.now()));
      await a.scheduler.start();
      const long = await a.scheduler.schedule(Date.now(), 'long');
      await waitFor('the long task to start', () => longRun.started);
      const listeners = async () => {
        const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = 'taskheap-listener' AND query LIKE 'LISTEN%'`);
        return rows[0]!.n;
      };
      await waitFor('the listener', async () => (await listeners()) === 1);
      // Due 3 s from now: after the server goes down (at once, below). It falls due during the
      // outage or after it, as fast as the machine stops and starts the server: either way it may
      // only run once the database is back, and not before its time.
      const dueAt = Date.now() + 3_000;
      const later = await a.scheduler.schedule(dueAt, 'later');

      await server.stop();
      await sleep(1_200); // down, while the scheduler keeps claiming (and failing)
      await server.start();
      expect(ran).toEqual([]);

      await waitFor('the task that fell due after the outage to run', () => ran.length === 1, 15_000);
      expect(ran[0]).toBeGreaterThanOrEqual(dueAt);
      await waitFor(
        'its success to be recorded',
        async () => (await a.scheduler.getTask(later.id).catch(() => undefined))?.state === 'succeeded',
      );
      // The outage was reported through onError (failed claims), never thrown.
      expect(a.errors.length).toBeGreaterThan(0);
      for (const error of a.errors) expect(error).toBeInstanceOf(Error);

      await waitFor('the listener to reconnect', async () => (await listeners().catch(() => 0)) === 1, 15_000);
      expect(longRun.abortedAt).toBe(0);
      const b = open(schema);
      b.scheduler.define('long', () => {});
      await b.scheduler.start();
      expect(await b.scheduler.cancelTask(long.id)).toBe(true);
      await waitFor('the cancel to reach the running task after the restart (through the listener)', () => longRun.abortedAt > 0);
      expect((await a.scheduler.getTask(long.id))!.state).toBe('cancelled');
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }, 60_000);
});
