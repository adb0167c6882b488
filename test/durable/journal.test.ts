// Progress and log lines of stored tasks (ctx.progress(), ctx.log()): written
// by the store in batches, read back through getTask() and listTasks(),
// bounded to the latest 100 lines, cleared when a key's task is replaced,
// announced as events with the stored id; from a handler in the main thread
// and from a module handler in a worker thread. Text a store cannot keep is
// refused at the call, and an entry the store refuses all the same costs only
// its own task's lines. Then the listings from the store: the queue filter
// and countTasks(). On a real SQLite file and a real PostgreSQL server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import type { Store } from '../../src/store.js';
import { openDatabase } from '../../src/durable/sqlite/driver.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { gate, START, tryUnstorable, UNSTORABLE_MESSAGES } from '../helpers.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';
import type { PgServer } from './pg-server.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres((s, a) => {
  server = s;
  admin = a;
});
const schema = schemaNamer('journal');
const opened = closedAfterEach((scheduler: Scheduler) => scheduler.close({ abort: true }));
const stores = closedAfterEach((store: Store) => store.close());

/** One store's database: stores on it, and a change of a task's row behind their back (SQL assignments, the same on both). */
interface Place {
  store(): Store;
  update(id: number, assignments: string): Promise<void>;
}

const PLACES: Record<string, () => Place> = {
  sqlite: () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-journal-')), 'store.db');
    return {
      store: () => sqliteStore(path),
      // A store holds its file alone: this runs while none is open.
      update: async (id, assignments) => {
        const db = await openDatabase(path);
        try {
          db.prepare(`UPDATE taskheap_tasks SET ${assignments} WHERE id = ?`).run(id);
        } finally {
          db.close();
        }
      },
    };
  },
  postgres: () => {
    const name = schema();
    return {
      store: () => postgresStore({ connectionString: server.url, schema: name }),
      update: async (id, assignments) => {
        await admin.query(`UPDATE "${name}".taskheap_tasks SET ${assignments} WHERE id = $1`, [id]);
      },
    };
  },
};

describe.each(Object.keys(PLACES))('progress and logs on %s', (kind) => {
  function open(options: { threads?: number; onError?: (error: unknown) => void } = {}, store = PLACES[kind]!().store()): Scheduler {
    const scheduler = new Scheduler({ store, onError: () => {}, ...options });
    opened.push(scheduler);
    return scheduler;
  }

  /** `count` tasks of handler 'talk' added to `place` (due now) by a process that runs none. */
  async function added(place: Place, count: number): Promise<number[]> {
    const producer = new Scheduler({ store: place.store(), handlers: ['talk'] });
    const ids: number[] = [];
    for (let i = 0; i < count; i++) ids.push((await producer.schedule(Date.now(), 'talk', { payload: { i } })).id);
    await producer.close();
    return ids;
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

  it('keeps the latest 100 lines over many writes; a new task of a finished one’s key starts with none', async () => {
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
    // A task added with the finished one's key is a new task: no progress, no lines; the finished one keeps its own.
    const again = await scheduler.schedule(Date.now() + 3_600_000, 'chatty', { key: 'chatty' });
    expect(again.id).not.toBe(task.id);
    expect(again.progress).toBeUndefined();
    expect(again.logs).toEqual([]);
    expect((await scheduler.getTask(task.id))!.logs).toHaveLength(100);
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
    expect(done.result).toEqual({
      errors: ['TypeError', 'RangeError', 'TypeError'],
      refused: UNSTORABLE_MESSAGES,
      steps: ['TypeError', 'TypeError', 'TypeError'],
    });
    expect(done.progress).toEqual({ step: 3 });
    expect(done.logs!.map((l) => l.line)).toEqual(['step 1', 'step 2', 'step 3']);
    expect(seen).toEqual([
      ['step 1', task.id],
      ['step 2', task.id],
      ['step 3', task.id],
    ]);
  });

  it('text a store cannot keep (NUL, a lone surrogate) throws at the call; the task’s other lines and other tasks’ lines are all stored', async () => {
    const errors: unknown[] = [];
    const scheduler = open({ onError: (error) => errors.push(error) });
    const refused = new Map<number, string[]>();
    scheduler.define('talk', async (ctx, payload: { bad: boolean }) => {
      for (let i = 1; i <= 5; i++) {
        ctx.progress({ step: i, of: 5 });
        ctx.log(`line ${i}`);
        if (payload.bad && i === 2) refused.set(ctx.id, tryUnstorable(ctx));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });
    await scheduler.start();
    const tasks = await scheduler.scheduleMany(
      Array.from({ length: 6 }, (_, i) => ({ when: Date.now(), name: 'talk', payload: { bad: i === 2 } })),
    );
    for (const task of tasks) {
      const done = await scheduler.waitFor(task.id, { timeout: 60_000 });
      expect(done.state).toBe('succeeded');
      expect(done.progress).toEqual({ step: 5, of: 5 });
      expect(done.logs!.map((l) => l.line)).toEqual(['line 1', 'line 2', 'line 3', 'line 4', 'line 5']);
    }
    expect(refused.get(tasks[2]!.id)).toEqual(UNSTORABLE_MESSAGES);
    expect(errors).toEqual([]);
  });

  it('an entry the store refuses costs only its task’s lines: the rest of the batch is stored, and onError hears of it once, with the task’s id', async () => {
    const place = PLACES[kind]!();
    const ids = await added(place, 3);
    // Lines the database cannot add to (not JSON): the write of this task's entry fails however it was checked.
    await place.update(ids[1]!, "logs = 'not json'");
    const errors: unknown[] = [];
    const scheduler = open({ onError: (error) => errors.push(error) }, place.store());
    const all = gate();
    let talked = 0;
    scheduler.define('talk', async (ctx) => {
      ctx.progress({ id: ctx.id });
      ctx.log(`one of ${ctx.id}`);
      ctx.log(`two of ${ctx.id}`);
      // All three have something to write before the first run ends and writes it all.
      if (++talked === 3) all.open();
      await all.promise;
    });
    await scheduler.start();
    for (const id of [ids[0]!, ids[2]!]) {
      const done = await scheduler.waitFor(id, { timeout: 60_000 });
      expect(done.progress).toEqual({ id });
      expect(done.logs!.map((l) => l.line)).toEqual([`one of ${id}`, `two of ${id}`]);
    }
    await expect.poll(async () => (await scheduler.countTasks()).succeeded, { timeout: 60_000, interval: 100 }).toBe(3);
    expect(errors).toHaveLength(1);
    const error = errors[0] as Error & { code: string; cause: unknown };
    expect(error.code).toBe('ERR_PROGRESS_NOT_STORED');
    expect(error.message).toMatch(new RegExp(`^Task ${ids[1]}: the store refused its progress and log lines`));
    expect(error.cause).toBeInstanceOf(Error);
  });

  it('a batch the database refuses for one task’s entry is written task by task: the others are stored, the refused ones told once each', async () => {
    const place = PLACES[kind]!();
    const ids = await added(place, 4);
    for (const id of ids) await place.update(id, "state = 'running', locked_by = 'owner-1'");
    await place.update(ids[1]!, "logs = 'not json'");
    const store = place.store();
    stores.push(store);
    await store.migrate();
    const line = (text: string) => ({ at: new Date(START), attempt: 1, line: text });
    // ids[3]: a NUL the call would have refused; PostgreSQL's jsonb cannot hold it, SQLite's text can.
    const writes = ids.map((id, i) => ({ id, progress: JSON.stringify({ id }), lines: [line(i === 3 ? 'a\0b' : `for ${id}`)] }));
    const lost: [number, unknown][] = [];
    await store.journal!('owner-1', writes, (id, error) => lost.push([id, error]));
    const refused = kind === 'postgres' ? [ids[1], ids[3]] : [ids[1]];
    expect(lost.map(([id]) => id)).toEqual(refused);
    for (const [, error] of lost) expect(error).toBeInstanceOf(Error);
    for (const id of [ids[0]!, ids[2]!]) {
      const task = await store.getTask(id);
      expect(task!.progress).toEqual({ id });
      expect(task!.logs!.map((l) => l.line)).toEqual([`for ${id}`]);
    }
    if (kind === 'sqlite') expect((await store.getTask(ids[3]!))!.logs!.map((l) => l.line)).toEqual(['a\0b']);
    else expect((await store.getTask(ids[3]!))!.logs).toEqual([]);
    // A failure that is not about one entry (the store closed) rejects, as before, and costs no entry of its own.
    await store.close();
    await expect(store.journal!('owner-1', writes, (id, error) => lost.push([id, error]))).rejects.toThrow();
    expect(lost).toHaveLength(refused.length);
  });

  it('listTasks filters by queue; countTasks counts every state from the store under the same filters', async () => {
    const scheduler = open();
    const base = Date.UTC(2030, 0, 1);
    const add = (i: number, name: string, queue: string) =>
      scheduler.schedule(base + i * 1_000, name, { key: `${name}:${i}`, queue, payload: { i } });
    for (let i = 0; i < 6; i++) await add(i, 'mail', i % 2 === 0 ? 'emails' : 'default');
    for (let i = 0; i < 3; i++) await add(i, 'sms', 'texts');
    const mails = await scheduler.listTasks({ name: 'mail' });
    await scheduler.cancelTask(mails[0]!.id);
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
