// What an idle worker sends PostgreSQL. On a ManualClock its timers fire only
// when the test advances it, and every statement is counted on the pool it is
// given: with nothing due and nothing held, a worker that LISTENs sends
// nothing for five minutes (new work anywhere is announced to it; it checks
// once per idleCheck() as a safety net), no lease renewal and no retention
// sweep, so a serverless database can suspend; one that cannot listen
// (PgBouncer without a listening connection) asks once a poll. Once a task has run, the next sweep deletes as
// before; a claim that failed keeps renewals going (they hand back what its
// lost answer may have claimed) until that is surely done. A worker that
// starts holding tasks announces when their leases run out, and a killed
// LISTEN connection comes back by itself: with a poll of an hour, a task
// added elsewhere afterwards still starts at once.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type StoredTask } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { ManualClock } from '../../../src/testing.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';
import { workerProcesses } from '../worker-process.js';
import { countedPool as countingPool } from './counted-pool.js';

const POLL = 60_000;
const LEASE = 30_000;

describe('an idle worker on PostgreSQL', () => {
  const spawnWorker = workerProcesses();
  let server: PgServer;
  const schema = schemaNamer('idle');
  const opened: Scheduler[] = [];
  const pools: pg.Pool[] = [];

  usePostgres((started) => {
    server = started;
  });

  afterEach(async () => {
    for (const scheduler of opened.splice(0)) await scheduler.close({ abort: true }).catch(() => {});
    for (const pool of pools.splice(0)) await pool.end().catch(() => {});
  });

  /** A counted pool (counted-pool.ts) on `name`, ended after the test. */
  function countedPool(sent: string[], name: string, failing?: Set<string>): pg.Pool {
    const pool = countingPool(server.url, name, sent, failing);
    pools.push(pool);
    return pool;
  }

  /**
   * Advances `clock` by `ms` in steps of a second, letting the statements
   * each step sends come back before the next: the clock moves with the work
   * done, not with the real time a loaded machine takes to do it.
   */
  async function idle(clock: ManualClock, ms: number): Promise<void> {
    for (let passed = 0; passed < ms; passed += 1_000) {
      await clock.advance(1_000);
      await new Promise((resolve) => setTimeout(resolve, 5));
      await until(() => pools.every((pool) => pool.idleCount === pool.totalCount && pool.waitingCount === 0));
    }
  }

  /** Waits (real time) until `check` holds, at most 20 s. */
  async function until(check: () => boolean | Promise<boolean>): Promise<void> {
    const end = Date.now() + 20_000;
    while (!(await check())) {
      if (Date.now() > end) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** The statements of `sent` from `from` on, by name, counted. */
  function counted(sent: string[], from: number): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const name of sent.slice(from)) counts[name] = (counts[name] ?? 0) + 1;
    return counts;
  }

  async function started(sent: string[], failing?: Set<string>, options: { poll?: number; pgbouncer?: boolean } = { poll: POLL }) {
    const name = schema();
    const clock = new ManualClock(Date.now());
    const scheduler = new Scheduler({
      clock,
      store: postgresStore({ pool: countedPool(sent, name, failing), schema: name, lease: LEASE, ...options }),
      onError: () => {},
    });
    opened.push(scheduler);
    scheduler.define('work', () => 'done');
    await scheduler.start();
    // The start's first claim, next-due question and sweep (its last statement: pruneLimits) come back.
    await idle(clock, 2_000);
    await until(() => sent.includes('pruneLimits'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { scheduler, clock };
  }

  it('sends nothing for five minutes with nothing due (default poll): no check, no renewal, no retention sweep', async () => {
    const sent: string[] = [];
    const { clock } = await started(sent, undefined, {});
    const from = sent.length;
    await idle(clock, 290_000);
    expect(sent.slice(from)).toEqual([]);
    // Then the safety net: one question (when is something due?) every five minutes.
    await idle(clock, 610_000);
    const counts = counted(sent, from);
    expect(Object.keys(counts).filter((name) => !['claim', 'claimPlain', 'nextDue', 'nextDuePlain'].includes(name))).toEqual([]);
    expect(sent.length - from).toBeGreaterThanOrEqual(1);
    expect(sent.length - from).toBeLessThanOrEqual(3);
  }, 120_000);

  it('where it cannot listen (PgBouncer, no listening connection) it asks once a poll', async () => {
    const sent: string[] = [];
    const { clock } = await started(sent, undefined, { poll: POLL, pgbouncer: true });
    const from = sent.length;
    await idle(clock, 600_000);
    const counts = counted(sent, from);
    expect(Object.keys(counts).filter((name) => !['claim', 'claimPlain', 'nextDue', 'nextDuePlain'].includes(name))).toEqual([]);
    expect(sent.length - from).toBeGreaterThanOrEqual(600_000 / POLL - 1);
    expect(sent.length - from).toBeLessThanOrEqual(600_000 / POLL);
  }, 120_000);

  /**
   * Adds a task due now and advances `clock` until it ran (the wake-up is
   * armed on that clock), for at most 30 s of real time.
   */
  async function ran(scheduler: Scheduler, clock: ManualClock): Promise<void> {
    const task = await scheduler.schedule(Date.now(), 'work');
    let done: StoredTask | undefined;
    // A scheduler closed by a failed test rejects its waiters: nothing to report then.
    scheduler.waitFor(task.id).then(
      (ended) => (done = ended),
      () => {},
    );
    const end = Date.now() + 30_000;
    while (done === undefined && Date.now() < end) await idle(clock, 1_000);
    expect(done).toMatchObject({ state: 'succeeded', result: 'done' });
  }

  it('sweeps again after a task ran, then is quiet again: no renewal, no sweep', async () => {
    const sent: string[] = [];
    const { scheduler, clock } = await started(sent);
    await ran(scheduler, clock);
    const from = sent.length;
    await idle(clock, 60_000);
    // The sweep a minute after the last: a task finished since.
    await until(() => sent.lastIndexOf('pruneLimits') >= from);
    expect(counted(sent, from).pruneTasks).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = sent.length;
    await idle(clock, 600_000);
    expect(counted(sent, after)).not.toHaveProperty('pruneTasks');
    expect(counted(sent, after)).not.toHaveProperty('renew');
  }, 120_000);

  it('after a failed claim (its answer may be lost) renews for two leases, handing back what it may have claimed, then is quiet', async () => {
    const sent: string[] = [];
    const failing = new Set<string>();
    const { scheduler, clock } = await started(sent, failing);
    failing.add('claimPlain');
    await ran(scheduler, clock);
    expect(failing.size).toBe(0);
    const from = sent.length;
    await idle(clock, 2 * LEASE);
    expect(counted(sent, from).renew).toBeGreaterThan(0);
    await idle(clock, LEASE);
    const after = sent.length;
    await idle(clock, 600_000);
    expect(counted(sent, after)).not.toHaveProperty('renew');
  }, 120_000);

  it('a worker that held nothing announces when its first leases run out, so an idle one with a long poll can take them over; a busy one does not', async () => {
    const name = schema();
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    const heard: number[] = [];
    listener.on('notification', ({ channel, payload }) => {
      if (channel === 'taskheap_wake' && payload?.startsWith(`${name}:`)) heard.push(Number(payload.slice(name.length + 1)));
    });
    await listener.query('LISTEN taskheap_wake');
    try {
      const scheduler = new Scheduler({
        store: postgresStore({ connectionString: server.url, schema: name, lease: LEASE }),
        onError: () => {},
      });
      opened.push(scheduler);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      scheduler.define('work', () => held);
      await scheduler.start();
      // The wake-ups heard since `from` (an index of `heard`) that name a lease's end, `at` or later.
      const leased = (from: number, at: number) => heard.slice(from).filter((time) => time >= at + LEASE - 5_000);
      const first = Date.now();
      const a = await scheduler.schedule(first, 'work');
      await until(() => leased(0, first).length > 0);
      expect(leased(0, first)).toHaveLength(1);
      expect(leased(0, first)[0]).toBeLessThanOrEqual(Date.now() + LEASE + 5_000);
      // While it holds a task, its claims announce no lease: only the add's wake-up.
      const before = heard.length;
      const second = Date.now();
      const b = await scheduler.schedule(second, 'work');
      await until(() => heard.length > before);
      await until(async () => (await scheduler.getTask(b.id))?.state === 'running');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(leased(before, second)).toEqual([]);
      release();
      expect(await scheduler.waitFor(a.id)).toMatchObject({ state: 'succeeded' });
      expect(await scheduler.waitFor(b.id)).toMatchObject({ state: 'succeeded' });
    } finally {
      await listener.end();
    }
  }, 60_000);

  it('a process killed as its claim commits is heard all the same: an idle worker with a poll of an hour takes its task over when the lease runs out', async () => {
    const name = schema();
    const worker = new Scheduler({
      store: postgresStore({ connectionString: server.url, schema: name, poll: '1h', lease: 2_000 }),
      onError: () => {},
    });
    opened.push(worker);
    const ran: number[] = [];
    worker.define('work', () => void ran.push(Date.now()));
    await worker.start();
    const doomed = spawnWorker('test/fixtures/pg-claim-and-die.ts', [server.url, name, '1500']);
    await doomed.ready;
    // Added without an announcement, as if before the worker asked what is due: only the doomed process's claim tells it.
    const admin = new pg.Pool({ connectionString: server.url, max: 1 });
    pools.push(admin);
    await admin.query(`INSERT INTO "${name}".taskheap_tasks (name, payload, run_at) VALUES ('work', 'null', now())`);
    doomed.next();
    await expect(doomed.done).rejects.toThrow(/exited with null/);
    const { rows } = await admin.query<{ locked_by: string }>(`SELECT locked_by FROM "${name}".taskheap_tasks`);
    expect(rows).toEqual([{ locked_by: 'doomed' }]);
    // Bounded for a stuck takeover, not by speed: without the announcement the worker would look in an hour.
    await until(() => ran.length === 1);
  }, 60_000);

  it('its LISTEN connection, killed, comes back by itself: a task added afterwards elsewhere starts without a poll', async () => {
    const name = schema();
    const admin = new pg.Pool({ connectionString: server.url, max: 1 });
    pools.push(admin);
    const listeners = async () =>
      (
        await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'taskheap-listener'`,
        )
      ).rows.map((row) => row.pid);
    // A poll of an hour: only the listener can wake it in time.
    const worker = new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name, poll: '1h' }), onError: () => {} });
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }) });
    opened.push(worker, producer);
    const ran: number[] = [];
    worker.define('work', () => void ran.push(Date.now()));
    await worker.start();
    await until(async () => (await listeners()).length === 1);
    const [killed] = await listeners();
    await admin.query('SELECT pg_terminate_backend($1)', [killed]);
    await until(async () => {
      const now = await listeners();
      return now.length === 1 && now[0] !== killed;
    });
    const added = Date.now();
    await producer.schedule(added, 'work');
    await until(() => ran.length === 1);
    expect(ran[0]! - added).toBeLessThan(20_000);
  }, 60_000);
});
