// Delivery under faults, against a real PostgreSQL server: the server stopped
// and restarted, every connection terminated, the server frozen (SIGSTOP), a
// handler blocking its event loop past the lease, a process clock minutes
// ahead. Two schedulers stand for two processes (each has its own owner id,
// pool and listener). Each test asserts that nothing is lost and that no task
// starts twice where no process died.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Clock } from '../../../src/index.js';
import { postgresStore, type PostgresStoreOptions } from '../../../src/postgres.js';
import { statements } from '../../../src/durable/postgres/store.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';
import { SCHEMA_VERSION } from '../../../src/durable/store.js';

let server: PgServer;
let admin: pg.Pool;

// A server of its own: these tests stop, restart and freeze it.
usePostgres(
  (started, pool) => {
    server = started;
    admin = pool;
  },
  { own: true },
);

const freshSchema = schemaNamer('d');

const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

type Options = Omit<PostgresStoreOptions, 'connectionString' | 'schema' | 'pool'> & { clock?: Clock; workers?: number };

/** One "process": a scheduler whose 'work' handler counts its runs per task id into `runs`. */
function open(
  schema: string,
  runs: Map<number, number>,
  options: Options = {},
  work: (ms: number) => Promise<void> | void = (ms) => sleep(ms),
) {
  const { clock, workers, ...storeOptions } = options;
  const errors: unknown[] = [];
  const scheduler = new Scheduler({
    store: postgresStore({ connectionString: server.url, schema, lease: 3_000, poll: 200, timeout: 1_000, ...storeOptions }),
    onError: (error) => errors.push(error),
    workers: workers ?? 8,
    ...(clock === undefined ? {} : { clock }),
  });
  scheduler.define('work', async (ctx, payload: { ms: number }) => {
    runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
    await work(payload.ms);
  });
  opened.push(scheduler);
  return { scheduler, errors };
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeout = 20_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // the database is away: look again
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(50);
  }
}

/** The tasks of a schema by state, straight from the table. */
async function states(schema: string): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ state: string; n: string }>(
    `SELECT state, count(*) AS n FROM "${schema}".taskheap_tasks GROUP BY state`,
  );
  return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
}

async function maxAttempts(schema: string): Promise<number> {
  const { rows } = await admin.query<{ m: number }>(`SELECT max(attempts) AS m FROM "${schema}".taskheap_tasks`);
  return Number(rows[0]!.m);
}

/**
 * Schedules `n` tasks due now that run `ms` each, through a producer with the
 * store's default timeout: the workers' short timeouts are what these tests
 * try, and an add a loaded machine answers in more than 500 ms is no failure
 * of theirs (the workers hear of the work by NOTIFY).
 */
async function seed(schema: string, n: number, ms: number): Promise<number[]> {
  const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
  try {
    const now = Date.now();
    const added = await producer.scheduleMany(Array.from({ length: n }, () => ({ when: now, name: 'work', payload: { ms } })));
    return added.map((task) => task.id);
  } finally {
    await producer.close();
  }
}

function expectOnceEach(runs: Map<number, number>, ids: number[]): void {
  const twice = ids.filter((id) => (runs.get(id) ?? 0) > 1);
  const never = ids.filter((id) => (runs.get(id) ?? 0) === 0);
  expect({ twice, never }).toEqual({ twice: [], never: [] });
}

describe('postgresStore: no task runs twice unless a process dies', () => {
  it('the server stopped and restarted under load: outcomes written during the outage are retried, not lost', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    const a = open(schema, runs, { lease: 6_000 });
    const b = open(schema, runs, { lease: 6_000 });
    await a.scheduler.start();
    await b.scheduler.start();
    const ids = await seed(schema, 60, 400);
    await waitFor('work to be running', () => runs.size >= 10);
    await server.stop(); // connections terminated: tasks finish while nothing can be written
    await sleep(1_500);
    await server.start();
    await waitFor('every task to succeed', async () => (await states(schema)).succeeded === ids.length, 30_000);
    expectOnceEach(runs, ids);
    expect(await maxAttempts(schema)).toBe(1);
    // The outage was reported, and both recovered by themselves.
    expect(a.errors.length + b.errors.length).toBeGreaterThan(0);
  }, 60_000);

  it('the server down for longer than the lease: a living owner keeps its tasks (no takeover until the server has been up for a lease)', async () => {
    const schema = freshSchema();
    const options = { connectionString: server.url, schema, lease: 2_000, timeout: 600 };
    const a = postgresStore(options);
    const b = postgresStore(options);
    await a.migrate();
    await b.migrate();
    try {
      await a.addTask({ name: 'work', key: null, payload: '{}', runAt: Date.now() - 1_000, maxAttempts: 1, options: '{}' });
      const none = (): never => {
        throw new Error('no jobs here');
      };
      const [held] = await a.claim({ owner: 'a', now: 0, lease: 2_000, limit: 10, advance: none });
      await server.stop();
      await sleep(3_000); // the lease runs out while nobody can renew it
      await server.start();
      // b asks at once: the lease ran out during the outage, not because a died.
      await waitFor('b to reach the server again', async () => {
        await b.claim({ owner: 'b', now: 0, lease: 2_000, limit: 10, advance: none });
        return true;
      });
      expect(await b.getTask(held!.id)).toMatchObject({ state: 'running', attempts: 1 });
      // a is back within the grace: it renews its lease and reports the outcome.
      await waitFor('a to renew', async () => (await a.renew({ owner: 'a', ids: [held!.id], now: 0, lease: 2_000 })).length === 0);
      await a.settle('a', [{ id: held!.id, kind: 'complete', state: 'succeeded', error: null }], 0);
      expect(await b.getTask(held!.id)).toMatchObject({ state: 'succeeded', attempts: 1 });
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  it('every connection terminated, ten times mid-run: nothing lost, nothing run twice', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    const a = open(schema, runs);
    const b = open(schema, runs);
    await a.scheduler.start();
    await b.scheduler.start();
    const ids = await seed(schema, 200, 100);
    await waitFor('work to be running', () => runs.size >= 10);
    for (let round = 0; round < 10; round++) {
      await sleep(60);
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      );
    }
    await waitFor('every task to succeed', async () => (await states(schema)).succeeded === ids.length, 30_000);
    expectOnceEach(runs, ids);
    expect(await maxAttempts(schema)).toBe(1);
  }, 60_000);

  it('the server frozen (SIGSTOP) beyond the timeout: noticed within seconds, reported, then recovered; nothing run twice', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    // A lease longer than any freeze here (at most 8 s, below): what it holds is still its own when the server thaws.
    const a = open(schema, runs, { lease: 15_000, timeout: 500 });
    await a.scheduler.start();
    const ids = await seed(schema, 40, 300);
    await waitFor('work to be running', () => runs.size >= 8);
    const frozenAt = Date.now();
    server.freeze();
    try {
      // A frozen server sends nothing, not even a reset: only the client-side timeout (timeout + 0.5 s,
      // about 1.3 s after the freeze here) can notice it, well before the 10 s default or never.
      await waitFor('a timeout to be reported', () => a.errors.length > 0, 8_000);
      await sleep(Math.max(0, 2_000 - (Date.now() - frozenAt)));
    } finally {
      server.thaw();
    }
    expect(String(a.errors[0])).toMatch(/timeout|terminated|canceling statement/i);
    await waitFor('every task to succeed', async () => (await states(schema)).succeeded === ids.length, 30_000);
    expectOnceEach(runs, ids);
  }, 60_000);

  it('close() finishes within about 3 × timeout after running tasks end, even if the server never answers', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    const a = open(schema, runs, { lease: 6_000, timeout: 500 });
    await a.scheduler.start();
    await seed(schema, 4, 300);
    await waitFor('work to be running', () => runs.size >= 4);
    server.freeze();
    const started = Date.now();
    let took = Infinity;
    try {
      await a.scheduler.close();
      took = Date.now() - started;
    } finally {
      server.thaw();
    }
    // The outcomes it could not write were reported, given up after `timeout` (500 ms), not the 5 s
    // default; those tasks are not lost: they run again later.
    expect(a.errors.map(String).filter((error) => /could not be recorded/.test(error))).toEqual([
      expect.stringMatching(/could not be recorded within 500 ms of close\(\)/),
    ]);
    // 300 ms of running work, then at most timeout for the outcomes, the in-flight queries (whose
    // answers wait timeout + 0.5 s) and the sockets each: about 2 s on a quiet machine. The bound
    // leaves a loaded machine seconds of room and is still below a close that waited for anything
    // but these timeouts (the 10 s default timeout, a socket that never answers: forever).
    expect(took).toBeLessThan(300 + 3 * (500 + 500) + 5_000);
    const b = open(schema, runs);
    await b.scheduler.start();
    await waitFor('the unconfirmed tasks to run again and succeed', async () => (await states(schema)).succeeded === 4, 20_000);
  }, 60_000);

  it('a handler blocking its event loop past the lease: re-claims are bounded by maxLeaseExpiries, attempts by the README bound', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    // Both "processes" share this event loop, so a blocking handler stalls both: neither renews.
    const block = (ms: number) => {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        /* a synchronous handler hogging the event loop */
      }
    };
    // The handler blocks for 4 s, well past the 1.5 s lease. Timeouts of 500 ms (at most lease / 3):
    // shorter ones fail on a loaded machine before anything blocks (connecting alone can take 100 ms).
    const a = open(schema, runs, { lease: 1_500, timeout: 500, poll: 200 }, block);
    const b = open(schema, runs, { lease: 1_500, timeout: 500, poll: 200 }, block);
    await a.scheduler.start();
    await b.scheduler.start();
    const [id] = await seed(schema, 1, 4_000);
    // Read through the admin pool: the stores' 500 ms query timeout is for what they do, and a loaded
    // machine may exceed it on a read (they retry what they do; a test's read would just fail).
    const read = async () =>
      (
        await admin.query<{ state: string; attempts: number; lastError: string | null }>(
          `SELECT state, attempts, last_error AS "lastError" FROM ${schema}.taskheap_tasks WHERE id = $1`,
          [id],
        )
      ).rows[0]!;
    await waitFor(
      'the task to end',
      async () => {
        const { state } = await read();
        return state === 'succeeded' || state === 'failed';
      },
      40_000,
    );
    const task = await read();
    // maxAttempts 1 + maxLeaseExpiries 1: at most two runs.
    expect(runs.get(id!)).toBeLessThanOrEqual(2);
    expect(task.attempts).toBeLessThanOrEqual(2);
    if (task.state === 'failed') expect(task.lastError).toMatch(/lease of this task expired 2 times/);
  }, 60_000);

  it('a claim whose answer never arrived is handed back, unrun and uncounted, by the next renewal', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    const { scheduler } = open(schema, runs);
    await scheduler.start();
    const known = (await scheduler.schedule(Date.now() + 60_000, 'work', { payload: { ms: 0 } })).id;
    const lost = (await scheduler.schedule(Date.now() + 60_000, 'work', { payload: { ms: 0 } })).id;
    await scheduler.close();
    await admin.query(`UPDATE "${schema}".taskheap_tasks SET run_at = now()`);
    // The default timeout (10 s): a claim is "lost" once more than 3 × 10 s old. The renewal right
    // after the claim is well within that on any machine; the claim is then made older in the database
    // (as if those 30 s had passed) instead of sleeping through them.
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    try {
      const none = (): never => {
        throw new Error('no jobs here');
      };
      // The process got both, as far as the database knows; it only heard of `known`.
      expect((await store.claim({ owner: 'me', now: 0, lease: 60_000, limit: 10, advance: none })).map((c) => c.id)).toEqual([known, lost]);
      // A renewal right away leaves a claim that may still be on its way alone.
      expect(await store.renew({ owner: 'me', ids: [known], now: 0, lease: 60_000 })).toEqual([]);
      expect(await store.getTask(lost)).toMatchObject({ state: 'running' });
      await admin.query(`UPDATE "${schema}".taskheap_tasks SET updated_at = updated_at - interval '31 seconds' WHERE state = 'running'`);
      // While a claim of the process is still on its way (its answer may sit
      // unread behind a blocked event loop), nothing is handed back: the
      // task would run here once that answer is read, and again elsewhere.
      expect(await store.renew({ owner: 'me', ids: [known], now: 0, lease: 60_000, handBack: false })).toEqual([]);
      expect(await store.getTask(lost)).toMatchObject({ state: 'running', attempts: 1 });
      expect(await store.renew({ owner: 'me', ids: [known], now: 0, lease: 60_000 })).toEqual([]);
      expect(await store.getTask(lost)).toMatchObject({ state: 'waiting', attempts: 0 });
      expect(await store.getTask(known)).toMatchObject({ state: 'running', attempts: 1 });
    } finally {
      await store.close();
    }
  }, 30_000);

  it('a process whose clock is minutes ahead neither runs tasks early nor takes over running work', async () => {
    const schema = freshSchema();
    const runs = new Map<number, number>();
    const startedAt = new Map<number, number>();
    const ahead: Clock = {
      now: () => Date.now() + 3 * 60_000,
      setTimer: (callback, delay, unref) => {
        const timer = setTimeout(callback, delay);
        if (unref) timer.unref();
        return timer;
      },
      clearTimer: (handle) => clearTimeout(handle as NodeJS.Timeout),
    };
    const work = (ms: number) => sleep(ms);
    const normal = open(schema, runs, { lease: 1_500, timeout: 400 }, work);
    const skewed = open(schema, runs, { lease: 1_500, timeout: 400, clock: ahead }, work);
    for (const { scheduler } of [normal, skewed]) {
      scheduler.define('timed', async (ctx, payload: { at: number }) => {
        runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
        startedAt.set(ctx.id, Date.now() - payload.at);
        await sleep(2_000); // longer than the lease: renewals must keep it
      });
    }
    await normal.scheduler.start();
    const due = Date.now() + 1_000;
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) ids.push((await normal.scheduler.schedule(due, 'timed', { payload: { at: due } })).id);
    await skewed.scheduler.start();
    await waitFor('every task to succeed', async () => (await states(schema)).succeeded === ids.length, 30_000);
    expectOnceEach(runs, ids);
    // None started before it was due (the server's clock and ours agree; 50 ms for rounding).
    expect(Math.min(...startedAt.values())).toBeGreaterThanOrEqual(-50);
  }, 60_000);
});

describe('postgresStore: schema version 2', () => {
  it('upgrades a version 1 database in place: rows kept, lease expiries counted from 0', async () => {
    const schema = freshSchema();
    const sql = statements(schema);
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(sql.createMeta);
    await admin.query(sql.migrations[0]!);
    await admin.query(sql.insertVersion, [1]);
    await admin.query(`INSERT INTO "${schema}".taskheap_tasks (name, payload, run_at) VALUES ('work', '{"ms":0}', now())`);
    const runs = new Map<number, number>();
    const { scheduler } = open(schema, runs);
    await scheduler.start();
    await waitFor('the old task to run', async () => (await states(schema)).succeeded === 1);
    const { rows } = await admin.query(
      `SELECT (SELECT version FROM "${schema}".taskheap_meta) AS version, expiries FROM "${schema}".taskheap_tasks`,
    );
    expect(rows).toEqual([{ version: SCHEMA_VERSION, expiries: 0 }]);
  });
});
