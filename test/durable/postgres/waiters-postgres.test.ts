// What waiting costs on PostgreSQL, and what still wakes a waiter. The
// waiting scheduler runs on a ManualClock, so its timers (the sweep) fire
// only when the test advances it, and its statements are counted on the
// pool it is given: 2,500 waitFor() calls on tasks due in an hour look
// once, together, and then send nothing until the safety sweep (one read
// per 1,000 of them each time), while a
// completion by another scheduler, a cancelled job's occurrence, and a task
// ended without any announcement once the listening connection is cut and
// back, all reach their waiters without the clock moving. Behind PgBouncer
// without a listening connection nothing is announced: waiters sweep every
// poll, as before.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, TaskNotFoundError, type StoredTask } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { ManualClock } from '../../../src/testing.js';
import { safetyPoll } from '../../../src/durable/waiters.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';
import { countedPool as countingPool } from './counted-pool.js';

/** The store's default poll. */
const POLL = 5_000;
const WAITERS = 2_500;
/** Sweep reads of WAITERS ids (1,000 to a read). */
const SWEEP_READS = 3;

describe('waitFor on PostgreSQL: announcements, and a slow safety sweep', () => {
  let server: PgServer;
  let admin: pg.Pool;
  const schema = schemaNamer('w');
  const opened: Scheduler[] = [];
  const pools: pg.Pool[] = [];

  usePostgres((started, pool) => {
    server = started;
    admin = pool;
  });

  afterEach(async () => {
    for (const scheduler of opened.splice(0)) await scheduler.close({ abort: true }).catch(() => {});
    for (const pool of pools.splice(0)) await pool.end().catch(() => {});
  });

  /** A counted pool (counted-pool.ts) on `name`, ended after the test. */
  function countedPool(sent: string[], name: string): pg.Pool {
    const pool = countingPool(server.url, name, sent);
    pools.push(pool);
    return pool;
  }

  /** A scheduler of its own on `name`, closed after the test. */
  function open(scheduler: Scheduler): Scheduler {
    opened.push(scheduler);
    return scheduler;
  }

  /** Waits (real time) until `check` holds, at most `ms`. */
  async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** `wait`'s task, or a rejection after `ms` of real time (never the sweep: the waiting scheduler's clock stands still). */
  function within(wait: Promise<StoredTask>, ms = 20_000): Promise<StoredTask> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms)));
    return Promise.race([wait, late]).finally(() => clearTimeout(timer));
  }

  /** Whether `wait` has settled, after the microtasks and a little real time. */
  async function settled(wait: Promise<unknown>, ms = 300): Promise<boolean> {
    let done = false;
    void wait.then(
      () => (done = true),
      () => (done = true),
    );
    await new Promise((resolve) => setTimeout(resolve, ms));
    return done;
  }

  /**
   * `count` tasks due in an hour, keys `w:<i>`, and a waitFor() on each from
   * `waiting`, all at once: their first looks are one read per 1,000 of them.
   */
  async function waitOnMany(waiting: Scheduler, count: number, sent: string[]) {
    const hour = Date.now() + 3_600_000;
    const tasks: { id: number }[] = [];
    for (let i = 0; i < count; i += 1_000) {
      const items = Array.from({ length: Math.min(1_000, count - i) }, (_, k) => ({ when: hour, name: 'later', key: `w:${i + k}` }));
      tasks.push(...(await waiting.scheduleMany(items)));
    }
    const before = sent.length;
    const waits = tasks.map((task) => waiting.waitFor(task.id));
    for (const wait of waits) wait.catch(() => {});
    const reads = Math.ceil(count / 1_000);
    await until('the first looks', () => sent.length - before >= reads);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A first look marks what it waits for (a worker whose retention keeps nothing keeps those).
    expect(sent.slice(before)).toEqual(Array(reads).fill('awaitTasks'));
    return { tasks, waits };
  }

  it('2,500 waiters look once, together, then send nothing until the safety sweep; a completion elsewhere, a cancelled job and a reconnect still wake theirs', async () => {
    const name = schema();
    const sent: string[] = [];
    const clock = new ManualClock(Date.now());
    const errors: unknown[] = [];
    const waiting = open(
      new Scheduler({
        clock,
        store: postgresStore({ pool: countedPool(sent, name), schema: name }),
        onError: (error) => errors.push(error),
      }),
    );
    await waiting.migrate();
    const { tasks, waits } = await waitOnMany(waiting, WAITERS, sent);

    // 50 s of waiting (ten polls): not one statement. Each poll used to read them all.
    let mark = sent.length;
    await clock.advance(10 * POLL);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(sent.slice(mark)).toEqual([]);
    // The safety sweep, a minute after the first waiter: one read per 1,000 waited tasks, nothing else.
    expect(safetyPoll(POLL)).toBe(60_000);
    await clock.advance(safetyPoll(POLL) - 10 * POLL);
    await until('the safety sweep', () => sent.length - mark >= SWEEP_READS);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sent.slice(mark)).toEqual(Array(SWEEP_READS).fill('endedTasks'));

    // A completion by another scheduler: announced, it is read (that task only) and resolves its waiter; the clock stands still.
    const worker = open(new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }) }));
    worker.define('later', () => 'ran');
    await worker.start();
    mark = sent.length;
    expect((await worker.schedule(Date.now(), 'later', { key: 'w:7' })).id).toBe(tasks[7]!.id); // due now: replaced
    await expect(within(waits[7]!)).resolves.toMatchObject({ id: tasks[7]!.id, state: 'succeeded', result: 'ran' });
    expect(sent.slice(mark)).toEqual(['endedTasks']);
    await worker.close();

    // A job's occurrence cancelled with its job elsewhere is announced too.
    const other = open(new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }) }));
    await other.cron('0 6 * * *', { timezone: 'UTC' }).run('later', { key: 'report:daily' });
    const occurrence = await other.triggerJob('report:daily');
    mark = sent.length;
    const onOccurrence = waiting.waitFor(occurrence!.id);
    onOccurrence.catch(() => {});
    await until('its first look', () => sent.length > mark);
    expect(await other.cancelJob('report:daily')).toBe(true);
    await expect(within(onOccurrence)).resolves.toMatchObject({ id: occurrence!.id, state: 'cancelled' });
    await other.close();

    // A task ended without any announcement: nothing reads it...
    const silent = tasks[1_234]!.id;
    await admin.query(`UPDATE ${pg.escapeIdentifier(name)}.taskheap_tasks SET state = 'cancelled' WHERE id = $1`, [silent]);
    expect(await settled(waits[1_234]!)).toBe(false);
    // ...until the listening connection is cut: back, it sweeps every waited task once (catch-up).
    const listeners = () =>
      admin.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'taskheap-listener'`,
      );
    await until('only the waiting scheduler listening', async () => (await listeners()).rows.length === 1);
    const [{ pid }] = (await listeners()).rows as [{ pid: number }];
    mark = sent.length;
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    await expect(within(waits[1_234]!)).resolves.toMatchObject({ id: silent, state: 'cancelled' });
    await until('the whole catch-up sweep', () => sent.length - mark >= SWEEP_READS);
    await until('the listener back', async () => (await listeners()).rows.some((row) => row.pid !== pid));
    expect(sent.slice(mark)).toEqual(Array(SWEEP_READS).fill('endedTasks'));
    // The new connection listens for final states again.
    const canceller = open(new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }) }));
    expect(await canceller.cancelTask(tasks[99]!.id)).toBe(true);
    await canceller.close();
    await expect(within(waits[99]!)).resolves.toMatchObject({ id: tasks[99]!.id, state: 'cancelled' });

    // And the safety sweep finds a task ended without an announcement, with the listener connected all along.
    await admin.query(`UPDATE ${pg.escapeIdentifier(name)}.taskheap_tasks SET state = 'cancelled' WHERE id = $1`, [tasks[2_000]!.id]);
    expect(await settled(waits[2_000]!)).toBe(false);
    await clock.advance(safetyPoll(POLL));
    await expect(within(waits[2_000]!)).resolves.toMatchObject({ id: tasks[2_000]!.id, state: 'cancelled' });
    expect(errors).toEqual([]);
    await waiting.close();
    await Promise.allSettled(waits);
  }, 120_000);

  it('first looks made together are one read: a finished task resolves, a missing one rejects, two waiters of a task get a copy each', async () => {
    const name = schema();
    const sent: string[] = [];
    const waiting = open(new Scheduler({ store: postgresStore({ pool: countedPool(sent, name), schema: name }) }));
    waiting.define('echo', (_ctx, payload: { n: number }) => ({ n: payload.n }));
    await waiting.start();
    const finished = await waiting.schedule(Date.now(), 'echo', { payload: { n: 1 } });
    await expect(within(waiting.waitFor(finished.id))).resolves.toMatchObject({ state: 'succeeded' });
    const later = await waiting.schedule(Date.now() + 3_600_000, 'echo', { payload: { n: 2 } });
    const mark = sent.length;
    const [a, b, gone, pending] = [
      waiting.waitFor(finished.id),
      waiting.waitFor(finished.id),
      waiting.waitFor(finished.id + 1_000_000),
      waiting.waitFor(later.id),
    ];
    pending.catch(() => {});
    const [first, second] = await Promise.all([within(a), within(b)]);
    expect(first).toMatchObject({ id: finished.id, state: 'succeeded', result: { n: 1 } });
    expect(second).toEqual(first);
    expect(second).not.toBe(first);
    await expect(gone).rejects.toBeInstanceOf(TaskNotFoundError);
    expect(await settled(pending)).toBe(false);
    expect(sent.slice(mark).filter((text) => text === 'awaitTasks' || text === 'endedTasks')).toEqual(['awaitTasks']);
  });

  it('behind PgBouncer without a listening connection nothing is announced: waiters sweep every poll', async () => {
    const name = schema();
    const sent: string[] = [];
    const clock = new ManualClock(Date.now());
    // pgbouncer: true on a direct connection: no LISTEN (there is no listenConnectionString), statements as through PgBouncer.
    const store = postgresStore({ pool: countedPool(sent, name), schema: name, pgbouncer: true });
    const waiting = open(new Scheduler({ clock, store }));
    await waiting.migrate();
    const { tasks, waits } = await waitOnMany(waiting, 1_500, sent);
    const mark = sent.length;
    await clock.advance(2 * POLL);
    await until('two sweeps', () => sent.length - mark >= 4);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sent.slice(mark)).toEqual(Array(4).fill('endedTasks'));
    // Completed elsewhere: announced, but nobody here listens; the next sweep finds it.
    const other = open(new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }) }));
    expect(await other.cancelTask(tasks[3]!.id)).toBe(true);
    await other.close();
    expect(await settled(waits[3]!)).toBe(false);
    await clock.advance(POLL);
    await expect(within(waits[3]!)).resolves.toMatchObject({ id: tasks[3]!.id, state: 'cancelled' });
    await waiting.close();
    await Promise.allSettled(waits);
  }, 60_000);
});
