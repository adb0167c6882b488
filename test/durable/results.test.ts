// Results, waiting and failure handling of durable tasks: the handler's
// return value stored and read back, waitFor() woken in-process (SQLite) and
// across processes by NOTIFY (PostgreSQL), onError once per task, bounded
// per-attempt errors, retry(id), and the upgrade of version 2 databases.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ClosedError, Scheduler, TaskNotFoundError, WaitTimeoutError, type StoredTask } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { openDatabase } from '../../src/durable/sqlite/driver.js';
import { MIGRATION_SQL as MIGRATIONS, VERSION_SQL as SQL } from '../../src/durable/sqlite/migrations.js';
import { statements } from '../../src/durable/postgres/store.js';
import { START } from '../helpers.js';
import type { PgServer } from './pg-server.js';
import { usePostgres } from './use-postgres.js';
import { SCHEMA_VERSION } from '../../src/durable/store.js';
import { compiled } from '../compiled-fixture.js';

/** A task row as versions 1 to 3 of the SQLite schema hold it (the store's own insert has version 4's columns). */
const V1_INSERT = `INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-results-')), 'store.db');
}

function sqlite(path = tempDb(), clock = new ManualClock(START)) {
  const errors: unknown[] = [];
  const scheduler = new Scheduler({ clock, store: sqliteStore(path), onError: (error) => errors.push(error) });
  return { scheduler, clock, errors, path };
}

describe('results and waiting on SQLite', () => {
  it('stores the return value; waitFor resolves with it once the task has run', async () => {
    const { scheduler, clock } = sqlite();
    scheduler.define('double', (_ctx, payload: { n: number }) => ({ n: payload.n * 2, list: [1, 'two', null] }));
    scheduler.define('nothing', () => {});
    await scheduler.start();
    const task = await scheduler.schedule(START + 1_000, 'double', { payload: { n: 21 } });
    const quiet = await scheduler.schedule(START + 1_000, 'nothing');
    const waiting = scheduler.waitFor(task.id);
    expect((await scheduler.getTask(task.id))?.result).toBeUndefined();
    await clock.advance(1_000);
    const done = await waiting;
    expect(done).toMatchObject({ id: task.id, state: 'succeeded', result: { n: 42, list: [1, 'two', null] }, errors: [] });
    expect((await scheduler.getTask(task.id))?.result).toEqual({ n: 42, list: [1, 'two', null] });
    const none = await scheduler.waitFor(quiet.id);
    expect(none.state).toBe('succeeded');
    expect(none.result).toBeUndefined();
    // Already final: resolves at once.
    expect((await scheduler.waitFor(task.id)).result).toEqual({ n: 42, list: [1, 'two', null] });
    await scheduler.close();
  });

  it('2,500 waiters: their first looks and each poll cost one read per 1,000, not one each; a task ended where no announcement reaches is found by it', async () => {
    const store = sqliteStore(tempDb()); // polls every 5 s
    const reads = { getTask: 0, endedTasks: 0 };
    // The real store, its reads counted.
    const counted = new Proxy(store, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver) as unknown;
        if ((name === 'getTask' || name === 'endedTasks') && typeof value === 'function') {
          return (...args: unknown[]) => {
            reads[name]++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, store: counted });
    scheduler.define('later', () => {});
    const tasks = await scheduler.scheduleMany(Array.from({ length: 2_500 }, () => ({ when: START + 3_600_000, name: 'later' })));
    const waits = tasks.map((task) => scheduler.waitFor(task.id));
    // The waiters' first looks, made together (the store opens first): none of them is over.
    while (reads.endedTasks < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reads).toEqual({ getTask: 0, endedTasks: 3 });
    await clock.advance(4 * 5_000);
    expect(reads).toEqual({ getTask: 0, endedTasks: 3 + 4 * 3 });
    // Cancelled behind the scheduler's back (nothing tells its waiters): the next sweep finds it.
    expect(await store.cancel(tasks[1_234]!.id)).toBe(true);
    await clock.advance(5_000);
    await expect(waits[1_234]).resolves.toMatchObject({ id: tasks[1_234]!.id, state: 'cancelled' });
    await scheduler.close();
    await Promise.allSettled(waits);
  });

  it('a return value JSON would change fails the attempt, naming the path', async () => {
    const { scheduler, clock, errors } = sqlite();
    scheduler.define('date', () => ({ when: new Date(0) }));
    await scheduler.start();
    const task = await scheduler.schedule(START, 'date');
    const waiting = scheduler.waitFor(task.id);
    await clock.advance(0);
    const done = await waiting;
    expect(done.state).toBe('failed');
    expect(done.result).toBeUndefined();
    expect(done.lastError).toMatch(/`result\.when` is not: a Date becomes a string/);
    expect(errors).toHaveLength(1);
    await scheduler.close();
  });

  it('waitFor: timeout, abort, unknown id, cancel, close, bad arguments', async () => {
    const { scheduler, clock } = sqlite();
    scheduler.define('later', () => 'ok');
    await scheduler.start();
    const task = await scheduler.schedule(START + 60_000, 'later');
    const timedOut = scheduler.waitFor(task.id, { timeout: '1s' });
    const caught = timedOut.catch((error: unknown) => error);
    await new Promise((resolve) => setImmediate(resolve)); // waitFor has armed its timer
    await clock.advance(1_000);
    expect(await caught).toBeInstanceOf(WaitTimeoutError);
    expect((await scheduler.getTask(task.id))?.state).toBe('waiting'); // the task goes on

    const controller = new AbortController();
    const aborted = scheduler.waitFor(task.id, { signal: controller.signal });
    controller.abort(new Error('gave up'));
    await expect(aborted).rejects.toThrow('gave up');

    await expect(scheduler.waitFor(999_999)).rejects.toBeInstanceOf(TaskNotFoundError);
    const cancelled = scheduler.waitFor(task.id);
    await scheduler.cancelTask(task.id);
    expect((await cancelled).state).toBe('cancelled');

    expect(() => scheduler.waitFor(0)).toThrow(TypeError);
    expect(() => scheduler.waitFor(1.5)).toThrow(/integer/);
    expect(() => scheduler.waitFor(task.id, { timeout: -1 })).toThrow(RangeError);
    expect(() => scheduler.waitFor(task.id, { signal: 'x' as never })).toThrow(/AbortSignal/);
    expect(() => scheduler.waitFor(task.id, { wait: 1 } as never)).toThrow(/wait/);

    const other = await scheduler.schedule(START + 60_000, 'later');
    const pending = scheduler.waitFor(other.id);
    await scheduler.close();
    await expect(pending).rejects.toBeInstanceOf(ClosedError);
  });

  it('onError and failure fire once per task, after its last attempt; each attempt error is kept, the last 10', async () => {
    const { scheduler, clock, errors } = sqlite();
    const failures: unknown[] = [];
    scheduler.on('failure', (_task, error) => failures.push(error));
    scheduler.define('fail', (ctx) => {
      throw new Error(`boom ${ctx.attempt}`);
    });
    await scheduler.start();
    const three = await scheduler.schedule(START, 'fail', { retry: { attempts: 3, delay: 1_000 } });
    const twelve = await scheduler.schedule(START, 'fail', { retry: { attempts: 12, delay: 1_000, backoff: 'fixed' } });
    const a = scheduler.waitFor(three.id);
    const b = scheduler.waitFor(twelve.id);
    for (let i = 0; i < 13; i++) await clock.advance(1_000);
    const [first, second] = await Promise.all([a, b]);
    expect(first).toMatchObject({ state: 'failed', attempts: 3 });
    expect(first.errors.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(first.errors[2]!.error).toMatch(/^Error: boom 3/);
    expect(first.errors[0]!.at).toBeInstanceOf(Date);
    expect(second.errors.map((e) => e.attempt)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(errors.map((e) => (e as Error).message).sort()).toEqual(['boom 12', 'boom 3']);
    expect(failures).toHaveLength(2);
    await scheduler.close();
  });

  it('retry(id) runs a failed, timed-out or cancelled task again with all its attempts; refuses others', async () => {
    const { scheduler, clock } = sqlite();
    let fail = true;
    scheduler.define('flaky', () => {
      if (fail) throw new Error('down');
      return 'up';
    });
    await scheduler.start();
    const task = await scheduler.schedule(START, 'flaky', { retry: 2 });
    let waiting = scheduler.waitFor(task.id);
    await clock.advance(0);
    await clock.advance(60_000);
    expect(await waiting).toMatchObject({ state: 'failed', attempts: 2 });
    fail = false;
    const again = await scheduler.retryTask(task.id);
    expect(again).toMatchObject({ state: 'waiting', attempts: 0 });
    waiting = scheduler.waitFor(task.id);
    await clock.advance(0);
    const done = await waiting;
    expect(done).toMatchObject({ state: 'succeeded', attempts: 1, result: 'up' });
    expect(done.errors).toHaveLength(2); // the earlier attempts' errors stay
    await expect(scheduler.retryTask(task.id)).rejects.toMatchObject({ code: 'ERR_TASK_NOT_FINISHED' });
    await expect(scheduler.retryTask(424_242)).rejects.toBeInstanceOf(TaskNotFoundError);
    const later = await scheduler.schedule(START + 3_600_000, 'flaky');
    await expect(scheduler.retryTask(later.id)).rejects.toThrow(/is waiting/);
    await scheduler.cancelTask(later.id);
    expect((await scheduler.retryTask(later.id)).state).toBe('waiting');
    await scheduler.close();
  });

  it('upgrades a version 2 file: rows kept, results stored from then on', async () => {
    const path = tempDb();
    const db = await openDatabase(path);
    db.exec(SQL.createMeta);
    db.exec(MIGRATIONS[0]!);
    db.exec(MIGRATIONS[1]!);
    db.prepare(SQL.insertVersion).run(2);
    db.prepare(V1_INSERT).run('double', null, '{"n":4}', START, 1, '{}', START, START);
    db.close();
    const { scheduler, clock } = sqlite(path);
    scheduler.define('double', (_ctx, payload: { n: number }) => payload.n * 2);
    await scheduler.start();
    const [old] = await scheduler.listTasks();
    const waiting = scheduler.waitFor(old!.id);
    await clock.advance(0);
    expect(await waiting).toMatchObject({ state: 'succeeded', result: 8, errors: [] });
    await scheduler.close();
    const after = await openDatabase(path);
    expect(after.prepare('SELECT version FROM taskheap_meta').get()).toEqual({ version: SCHEMA_VERSION });
    after.close();
  });
});

describe('results and waiting on PostgreSQL', () => {
  let server: PgServer;
  let admin: pg.Pool;
  let schemas = 0;
  const opened: Scheduler[] = [];
  const children: { kill: (signal: NodeJS.Signals) => void; exited: Promise<number | null> }[] = [];

  usePostgres((started, pool) => {
    server = started;
    admin = pool;
  });

  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill('SIGTERM');
      await child.exited;
    }
    for (const scheduler of opened.splice(0)) await scheduler.close({ abort: true }).catch(() => {});
  });

  function schema(): string {
    return `r${++schemas}_${process.pid}`;
  }

  function scheduler(
    name: string,
    store = postgresStore({ connectionString: server.url, schema: name }),
  ): { scheduler: Scheduler; errors: unknown[] } {
    const errors: unknown[] = [];
    const s = new Scheduler({ store, onError: (error) => errors.push(error) });
    opened.push(s);
    return { scheduler: s, errors };
  }

  function worker(name: string): Promise<void> {
    const child = spawn(process.execPath, [compiled('test/fixtures/pg-result-worker.ts'), server.url, name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    children.push({ kill: (signal) => child.kill(signal), exited });
    return new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready\n')) resolve();
      });
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
      void exited.then(() => reject(new Error(`worker exited: ${out}`)));
    });
  }

  it('a producer waits for results computed by a worker process, woken by NOTIFY (its poll is an hour)', async () => {
    const name = schema();
    // The producer's waitFor() looks again when told (NOTIFY) or every poll: an hour here, so only NOTIFY wakes it.
    const store = postgresStore({ connectionString: server.url, schema: name, poll: 3_600_000 });
    let looked = (): void => {};
    const endedTasks = store.endedTasks.bind(store);
    store.endedTasks = async (ids) => {
      const ended = await endedTasks(ids);
      looked();
      return ended;
    };
    const { scheduler: web } = scheduler(name, store);
    await web.migrate();
    await worker(name);
    for (let n = 1; n <= 3; n++) {
      // Due in an hour, so the waiter's first look finds it waiting; then made due now (the same key: replaced).
      const task = await web.schedule(Date.now() + 3_600_000, 'double', { payload: { n }, key: `double:${n}` });
      const firstLook = new Promise<void>((resolve) => (looked = resolve));
      const waiting = web.waitFor(task.id, { timeout: '20s' });
      await firstLook; // it listens, and has found the task waiting
      expect((await web.schedule(Date.now(), 'double', { payload: { n }, key: `double:${n}` })).id).toBe(task.id);
      const done = await waiting;
      expect(done.state).toBe('succeeded');
      const result = done.result as { n: number; pid: number };
      expect(result.n).toBe(2 * n);
      expect(result.pid).not.toBe(process.pid);
    }
  }, 60_000);

  it('failures across processes: errors per attempt, retry(id) from the producer, waitFor again', async () => {
    const name = schema();
    const { scheduler: web } = scheduler(name);
    await worker(name);
    const task = await web.schedule(Date.now(), 'fail', { retry: { attempts: 3, delay: 10 } });
    const failed = await web.waitFor(task.id, { timeout: '20s' });
    expect(failed).toMatchObject({ state: 'failed', attempts: 3 });
    expect(failed.errors.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(failed.errors[0]!.error).toMatch(/boom on attempt 1/);
    expect(failed.lastError).toMatch(/boom on attempt 3/);
    expect((await web.retryTask(task.id)).state).toBe('waiting');
    const again = await web.waitFor(task.id, { timeout: '20s' });
    expect(again).toMatchObject({ state: 'failed', attempts: 3 });
    expect(again.errors.map((e) => e.attempt)).toEqual([1, 2, 3, 1, 2, 3]);
  }, 60_000);

  it('in one process: onError once after the last attempt; waitFor on cancel; the errors list bounded at 10', async () => {
    const { scheduler: s, errors } = scheduler(schema());
    s.define('fail', (ctx) => {
      throw new Error(`boom ${ctx.attempt}`);
    });
    s.define('slow', (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)));
    await s.start();
    const task = await s.schedule(Date.now(), 'fail', { retry: { attempts: 12, delay: 1, backoff: 'fixed' } });
    const done = await s.waitFor(task.id, { timeout: '20s' });
    expect(done.errors.map((e) => e.attempt)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(errors.map((e) => (e as Error).message)).toEqual(['boom 12']);
    const slow = await s.schedule(Date.now() + 3_600_000, 'slow');
    const waiting = s.waitFor(slow.id);
    await s.cancelTask(slow.id);
    expect((await waiting).state).toBe('cancelled');
  }, 60_000);

  it("ctx.transaction(): the handler's writes and the task's completion commit together, or neither does", async () => {
    const name = schema();
    const { scheduler: s } = scheduler(name);
    await s.migrate();
    await admin.query(`CREATE TABLE "${name}".effects (task bigint PRIMARY KEY, n int)`);
    s.define('pay', (ctx, payload: { n: number; fail?: boolean }) =>
      ctx.transaction(async (client) => {
        await client.query(`INSERT INTO "${name}".effects (task, n) VALUES ($1, $2)`, [ctx.id, payload.n]);
        if (payload.fail === true) throw new Error('declined');
        return { paid: payload.n };
      }),
    );
    await s.start();
    const ok = await s.schedule(Date.now(), 'pay', { payload: { n: 7 } });
    const bad = await s.schedule(Date.now(), 'pay', { payload: { n: 8, fail: true } });
    expect(await s.waitFor(ok.id, { timeout: '20s' })).toMatchObject({ state: 'succeeded', result: { paid: 7 } });
    expect(await s.waitFor(bad.id, { timeout: '20s' })).toMatchObject({ state: 'failed', lastError: expect.stringMatching(/declined/) });
    const { rows } = await admin.query(`SELECT task::int AS task, n FROM "${name}".effects`);
    expect(rows).toEqual([{ task: ok.id, n: 7 }]); // the failed one's write was rolled back with it

    const local = sqlite();
    local.scheduler.define('pay', (ctx) => ctx.transaction(async () => 1));
    await local.scheduler.start();
    const task = await local.scheduler.schedule(START, 'pay');
    const waiting = local.scheduler.waitFor(task.id);
    await local.clock.advance(0);
    expect((await waiting).lastError).toMatch(/postgresStore/);
    await local.scheduler.close();
  }, 60_000);

  it('ctx.transaction(): a worker killed between its write and the commit leaves nothing; the rerun writes once', async () => {
    const name = schema();
    const { scheduler: web } = scheduler(name);
    await web.migrate();
    await admin.query(`CREATE TABLE "${name}".effects (id serial PRIMARY KEY, task bigint NOT NULL)`);
    const task = await web.schedule(Date.now(), 'pay');
    const child = spawn(process.execPath, [compiled('test/fixtures/pg-tx-worker.ts'), server.url, name], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, sig) => resolve(sig)));
    expect(signal).toBe('SIGKILL');
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${name}".effects`)).rows).toEqual([{ n: 0 }]);
    // A second worker takes the task over once the dead one's lease (1 s) expires. Its own lease is
    // short too: no lease is taken over until the server has been up for the claim's lease, and this
    // file's server may be younger than the default 30 s (then the wait depended on the test order);
    // but not so short that a loaded machine lets it run out mid-run (a third attempt).
    const { scheduler: rescue } = scheduler(name, postgresStore({ connectionString: server.url, schema: name, lease: 5_000 }));
    rescue.define('pay', (ctx) =>
      ctx.transaction(async (client) => {
        await client.query(`INSERT INTO "${name}".effects (task) VALUES ($1)`, [ctx.id]);
        return 'paid';
      }),
    );
    await rescue.start();
    expect(await web.waitFor(task.id, { timeout: '20s' })).toMatchObject({ state: 'succeeded', attempts: 2, result: 'paid' });
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${name}".effects`)).rows).toEqual([{ n: 1 }]);
  }, 60_000);

  it('upgrades a version 2 database in place', async () => {
    const name = schema();
    const sql = statements(name);
    await admin.query(`CREATE SCHEMA "${name}"`);
    await admin.query(sql.createMeta);
    await admin.query(sql.migrations[0]!);
    await admin.query(sql.migrations[1]!);
    await admin.query(sql.insertVersion, [2]);
    await admin.query(`INSERT INTO "${name}".taskheap_tasks (name, payload, run_at) VALUES ('double', '{"n":5}', now())`);
    const { scheduler: s } = scheduler(name);
    s.define('double', (_ctx, payload: { n: number }) => payload.n * 2);
    await s.start();
    const [old] = await s.listTasks();
    const done: StoredTask = await s.waitFor(old!.id, { timeout: '20s' });
    expect(done).toMatchObject({ state: 'succeeded', result: 10 });
    const { rows } = await admin.query(`SELECT version FROM "${name}".taskheap_meta`);
    expect(rows).toEqual([{ version: SCHEMA_VERSION }]);
  }, 60_000);
});
