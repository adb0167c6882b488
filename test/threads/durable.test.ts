// Durable module tasks (issue 26): `define(name, url)` runs a stored task's
// handler in a pool thread, with the stored id and attempt in its context;
// and while the thread burns CPU the main thread keeps renewing the lease,
// so a handler that runs three times longer than its lease runs once. On
// SQLite and on a real PostgreSQL server.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import type { Store } from '../../src/store.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { storePool } from '../fixtures/store-pool.js';
import { schemaNamer, usePostgres } from '../durable/use-postgres.js';
import { fixture } from './helpers.js';

const open: Scheduler[] = [];
afterEach(async () => {
  for (const scheduler of open.splice(0)) await scheduler.close({ abort: true });
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'taskheap-threads-'));
}

/**
 * Runs the shared checks against stores made by `makeStore(lease)`;
 * `replicaOf` makes a second store on the same data (PostgreSQL), for a
 * second process's claimer that would take over a lapsed lease.
 */
function durableSuite(makeStore: (lease: number) => Store, lease: number, replicaOf?: (lease: number) => Store): void {
  it('a defined module runs each stored task in a thread, with the stored id, attempt and name', async () => {
    const scheduler = new Scheduler({ store: makeStore(lease), threads: 1 });
    open.push(scheduler);
    scheduler.define('echo', fixture('echo'));
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'echo', { payload: { file: 'cat.png' } });
    const done = await scheduler.waitFor(task.id);
    expect(done.state).toBe('succeeded');
    expect(done.result).toMatchObject({ payload: { file: 'cat.png' }, id: task.id, attempt: 1, name: 'echo', isMainThread: false });
  });

  it('cancel(id) aborts ctx.signal inside the thread: the stored task ends cancelled', async () => {
    const log = join(tempDir(), 'runs.log');
    const scheduler = new Scheduler({ store: makeStore(lease), threads: 1, onError: () => {} });
    open.push(scheduler);
    scheduler.define('wait', fixture('wait-abort'));
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'wait', { payload: { log } });
    await expect.poll(() => existsSync(log) && readFileSync(log, 'utf8'), { timeout: 60_000 }).toBe(`started ${task.id}\n`);
    expect(await scheduler.cancelTask(task.id)).toBe(true);
    const done = await scheduler.waitFor(task.id);
    expect(done.state).toBe('cancelled');
  });

  it('a CPU-bound handler running three times its lease runs once: the main thread renews the lease meanwhile', async () => {
    const log = join(tempDir(), 'runs.log');
    // Two threads: were the lease let lapse, this process's own claimer (its
    // main thread is free) would claim the task again and run it beside the first.
    const scheduler = new Scheduler({ store: makeStore(lease), threads: 2, onError: () => {} });
    open.push(scheduler);
    scheduler.define('burn', fixture('burn'));
    await scheduler.start();
    const replica = replicaOf === undefined ? undefined : new Scheduler({ store: replicaOf(lease), threads: 2, onError: () => {} });
    if (replica !== undefined) {
      open.push(replica);
      replica.define('burn', fixture('burn'));
      await replica.start();
    }
    const task = await scheduler.schedule(Date.now(), 'burn', { payload: { ms: 3 * lease, log } });
    // The main thread stays free while the thread burns: the store answers, the task is running.
    await expect.poll(async () => (await scheduler.getTask(task.id))?.state, { timeout: 60_000 }).toBe('running');
    const done = await scheduler.waitFor(task.id);
    expect(done).toMatchObject({ state: 'succeeded', attempts: 1, result: { id: task.id, attempt: 1, spun: true } });
    expect(readFileSync(log, 'utf8')).toBe(`run ${task.id} attempt 1\n`);
  });
}

describe('durable module tasks on SQLite', () => {
  durableSuite((lease) => sqliteStore(join(tempDir(), 'store.db'), { lease }), 500);
});

describe('durable module tasks on PostgreSQL', () => {
  // The stores share a pool whose connections may take 30 s under load (see storePool).
  let pool!: pg.Pool;
  usePostgres((server) => {
    pool = storePool(server.url);
  });
  afterAll(() => pool.end());
  const schema = schemaNamer('threads');
  let current = '';
  durableSuite(
    (lease) => postgresStore({ pool, schema: (current = schema()), lease }),
    1_500,
    (lease) => postgresStore({ pool, schema: current, lease }),
  );
});
