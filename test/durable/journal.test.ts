// Progress and log lines of stored tasks (ctx.progress(), ctx.log()): written
// by the store in batches, read back through getTask() and listTasks(),
// bounded to the latest 100 lines, cleared when a key's task is replaced,
// announced as events with the stored id; from a handler in the main thread
// and from a module handler in a worker thread. Then the listings from the
// store: the queue filter and countTasks(). On a real SQLite file and a real
// PostgreSQL server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Store } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';
import type { PgServer } from './pg-server.js';

let server: PgServer;
usePostgres((s) => {
  server = s;
});
const schema = schemaNamer('journal');
const opened = closedAfterEach((scheduler: Scheduler) => scheduler.close({ abort: true }));

const STORES: Record<string, () => Store> = {
  sqlite: () => sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-journal-')), 'store.db')),
  postgres: () => postgresStore({ connectionString: server.url, schema: schema() }),
};

describe.each(Object.keys(STORES))('progress and logs on %s', (kind) => {
  function open(options: { threads?: number } = {}): Scheduler {
    const scheduler = new Scheduler({ store: STORES[kind]!(), onError: () => {}, ...options });
    opened.push(scheduler);
    return scheduler;
  }

  it('a handler’s progress and lines are stored, read by getTask and listTasks, and announced with the stored id', async () => {
    const scheduler = open();
    const events: unknown[] = [];
    scheduler.on('progress', (_task, value, id) => events.push(['progress', value, id]));
    scheduler.on('log', (_task, line, id) => events.push(['log', line.line, line.attempt, id]));
    scheduler.define('import', async (ctx, payload: { rows: number }) => {
      ctx.log(`importing ${payload.rows} rows`);
      for (let i = 1; i <= 4; i++) ctx.progress(i * 25);
      ctx.log(`attempt ${ctx.attempt}`);
      if (ctx.attempt === 1) throw new Error('flaky');
      return 'done';
    });
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'import', { payload: { rows: 9 }, retry: { attempts: 2, delay: 10 } });
    expect(task.progress).toBeUndefined();
    expect(task.logs).toEqual([]);
    const done = await scheduler.waitFor(task.id, { timeout: 60_000 });
    expect(done.state).toBe('succeeded');
    expect(done.progress).toBe(100);
    expect(done.logs!.map((l) => [l.line, l.attempt])).toEqual([
      ['importing 9 rows', 1],
      ['attempt 1', 1],
      ['importing 9 rows', 2],
      ['attempt 2', 2],
    ]);
    expect(done.logs![0]!.at).toBeInstanceOf(Date);
    expect(await scheduler.getTask(task.id)).toEqual(done);
    const [listed] = await scheduler.listTasks({ name: 'import' });
    expect(listed!.progress).toBe(100);
    expect(listed!.logs).toHaveLength(4);
    expect(events).toContainEqual(['progress', 100, task.id]);
    expect(events).toContainEqual(['log', 'attempt 2', 2, task.id]);
    expect(events.filter((e) => (e as unknown[])[0] === 'progress')).toHaveLength(8);
  });

  it('keeps the latest 100 lines over many writes; a replaced key’s task starts with none', async () => {
    const scheduler = open();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    scheduler.define('chatty', async (ctx) => {
      for (let i = 0; i < 60; i++) ctx.log(`a${i}`);
      ctx.progress({ phase: 'a' });
      await gate;
      for (let i = 0; i < 70; i++) ctx.log(`b${i}`);
    });
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'chatty', { key: 'chatty' });
    // The first lines reach the store while the run goes on (a batched write, at most 500 ms later).
    await expect.poll(async () => (await scheduler.getTask(task.id))!.logs!.length, { timeout: 60_000, interval: 100 }).toBe(60);
    const running = (await scheduler.getTask(task.id))!;
    expect(running.progress).toEqual({ phase: 'a' });
    // Held: the lease's owner and end are shown; gone once the task is over.
    expect(running.lease).toEqual({ owner: expect.any(String), until: expect.any(Date) });
    release();
    const done = await scheduler.waitFor(task.id, { timeout: 60_000 });
    expect(done.logs).toHaveLength(100);
    expect(done.logs![0]!.line).toBe('a30');
    expect(done.logs!.at(-1)!.line).toBe('b69');
    expect(done.progress).toEqual({ phase: 'a' });
    expect(done.lease).toBeUndefined();
    // A finished task overwritten through its key starts over: no progress, no lines.
    const again = await scheduler.schedule(Date.now() + 3_600_000, 'chatty', { key: 'chatty' });
    expect(again.id).toBe(task.id);
    expect(again.progress).toBeUndefined();
    expect(again.logs).toEqual([]);
  });

  it('a module handler in a worker thread reports progress and lines; bad values throw at its call', async () => {
    const scheduler = open({ threads: 1 });
    scheduler.define('report', new URL('../fixtures/threads/report.js', import.meta.url));
    await scheduler.start();
    const seen: unknown[] = [];
    scheduler.on('log', (_task, line, id) => seen.push([line.line, id]));
    const task = await scheduler.schedule(Date.now(), 'report', { payload: { steps: 3 } });
    const done = await scheduler.waitFor(task.id, { timeout: 60_000 });
    expect(done.state).toBe('succeeded');
    expect(done.result).toEqual(['TypeError', 'RangeError', 'TypeError']);
    expect(done.progress).toEqual({ step: 3 });
    expect(done.logs!.map((l) => l.line)).toEqual(['step 1', 'step 2', 'step 3']);
    expect(seen).toEqual([
      ['step 1', task.id],
      ['step 2', task.id],
      ['step 3', task.id],
    ]);
  });

  it('listTasks filters by queue; countTasks counts every state from the store under the same filters', async () => {
    const scheduler = open();
    const base = Date.UTC(2030, 0, 1);
    const add = (i: number, name: string, queue: string) =>
      scheduler.schedule(base + i * 1_000, name, { key: `${name}:${i}`, queue, payload: { i } });
    for (let i = 0; i < 6; i++) await add(i, 'mail', i % 2 === 0 ? 'emails' : 'default');
    for (let i = 0; i < 3; i++) await add(i, 'sms', 'texts');
    const mails = await scheduler.listTasks({ name: 'mail' });
    await scheduler.cancel(mails[0]!.id);
    expect((await scheduler.listTasks({ queue: 'emails' })).map((t) => t.key)).toEqual(['mail:0', 'mail:2', 'mail:4']);
    expect((await scheduler.listTasks({ queue: 'emails', state: 'waiting' })).map((t) => t.key)).toEqual(['mail:2', 'mail:4']);
    const page = await scheduler.listTasks({ queue: 'emails', limit: 2 });
    expect((await scheduler.listTasks({ queue: 'emails', limit: 2, after: page.at(-1) })).map((t) => t.key)).toEqual(['mail:4']);
    const none = { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 };
    expect(await scheduler.countTasks()).toEqual({ ...none, waiting: 8, cancelled: 1 });
    expect(await scheduler.countTasks({ queue: 'emails' })).toEqual({ ...none, waiting: 2, cancelled: 1 });
    expect(await scheduler.countTasks({ name: 'sms' })).toEqual({ ...none, waiting: 3 });
    expect(await scheduler.countTasks({ keyPrefix: 'mail:', from: base + 2_000, to: base + 5_000 })).toEqual({ ...none, waiting: 3 });
    expect(await scheduler.countTasks({ name: 'nothing' })).toEqual(none);
    // deleteTasks: finished tasks only, under the filters.
    await expect(async () => scheduler.deleteTasks({ state: 'waiting' })).rejects.toThrow(RangeError);
    expect(await scheduler.deleteTasks({ queue: 'texts' })).toBe(0);
    expect(await scheduler.deleteTasks({ queue: 'emails' })).toBe(1);
    expect(await scheduler.countTasks()).toEqual({ ...none, waiting: 8 });
    // Bad filters throw at the call.
    await expect(async () => scheduler.countTasks({ state: 'waiting' } as never)).rejects.toThrow(/Unknown countTasks filter `state`/);
    await expect(async () => scheduler.listTasks({ queue: 5 } as never)).rejects.toThrow(TypeError);
  });
});
