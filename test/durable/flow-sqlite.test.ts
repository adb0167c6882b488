// Issue 16 on the SQLite store: the rate, serial and priority options of
// durable tasks and stored jobs are validated at the call and stored with the
// task; the claim orders due tasks by priority, then due time, then id; a
// serial key lets one task run at a time, in due order, held through retries
// and let go of on a final state, a cancel, or a lease that expired for good;
// and a version 3 file upgrades to version 4 keeping its rows.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type StoredTask } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { advanceJob } from '../../src/durable/advance-job.js';
import { openDatabase } from '../../src/durable/sqlite/driver.js';
import { MIGRATIONS, SQL } from '../../src/durable/sqlite/sql.js';
import type { NewTask, Store } from '../../src/durable/store.js';
import { START } from '../helpers.js';
import { Gate, ticks, until } from './flow-helpers.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-flow-')), 'store.db');
}

function task(name: string, runAt: number, extra: Partial<NewTask> = {}): NewTask {
  return { name, key: null, payload: '{}', runAt, maxAttempts: 1, options: '{}', ...extra };
}

async function openStore(path = tempDb()): Promise<Store> {
  const store = sqliteStore(path);
  await store.migrate();
  return store;
}

describe('SQLite claim order and serial keys (store level)', () => {
  it('claims by priority (highest first), then due time, then id; future tasks of a higher priority wait', async () => {
    const store = await openStore();
    const ids: Record<string, number> = {};
    for (const [name, at, priority] of [
      ['low-early', START - 3_000, -1], ['zero-late', START - 1_000, 0], ['zero-early', START - 2_000, 0],
      ['high-late', START - 500, 7], ['high-early', START - 600, 7], ['high-future', START + 1_000, 9], ['mid', START, 3],
    ] as const) {
      ids[name] = (await store.addTask(task(name, at, { priority }))).id;
    }
    const first = await store.claim('me', START, 30_000, 3, advanceJob);
    expect(first.map((c) => c.name)).toEqual(['high-early', 'high-late', 'mid']);
    const rest = await store.claim('me', START, 30_000, 10, advanceJob);
    expect(rest.map((c) => c.name)).toEqual(['zero-early', 'zero-late', 'low-early']);
    // The future one is due later: nextDue says when.
    expect(await store.nextDue(START)).toBe(1_000);
    expect((await store.claim('me', START + 1_000, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([ids['high-future']]);
    await store.close();
  });

  it('one task per serial key at a time, the head first; held through a retry, let go of when final', async () => {
    const store = await openStore();
    const a1 = await store.addTask(task('a1', START - 300, { serial: 'a' }));
    const b1 = await store.addTask(task('b1', START - 250, { serial: 'b' }));
    const a2 = await store.addTask(task('a2', START - 200, { serial: 'a', priority: 5 }));
    const free = await store.addTask(task('free', START - 100));
    // a2's priority does not put it before a1: within a key, due order.
    let claimed = await store.claim('me', START, 30_000, 10, advanceJob);
    expect(claimed.map((c) => c.name)).toEqual(['a1', 'b1', 'free']);
    expect(await store.claim('me', START, 30_000, 10, advanceJob)).toEqual([]);
    // Nothing can run before a key is let go of: a held key's tasks do not make work due.
    expect(await store.nextDue(START)).toBe(30_000);
    // a1 fails and will be retried in 1 s: it keeps the key; b1 succeeds: b is free again (no task left).
    await store.settle('me', [{ id: a1.id, kind: 'retry', delay: 1_000, error: 'boom' }, { id: b1.id, kind: 'complete', state: 'succeeded', error: null }], START);
    expect(await store.claim('me', START + 500, 30_000, 10, advanceJob)).toEqual([]);
    claimed = await store.claim('me', START + 1_000, 30_000, 10, advanceJob);
    expect(claimed.map((c) => [c.name, c.attempts])).toEqual([['a1', 2]]);
    await store.settle('me', [{ id: a1.id, kind: 'complete', state: 'failed', error: 'boom again' }], START + 1_000);
    claimed = await store.claim('me', START + 1_000, 30_000, 10, advanceJob);
    expect(claimed.map((c) => c.id)).toEqual([a2.id]);
    expect(free.serial).toBeNull();
    expect(a2).toMatchObject({ serial: 'a', priority: 5, rate: null });
    await store.close();
  });

  it('a handed-back task keeps its key; a cancel lets go of it; a replaced task starts over', async () => {
    const store = await openStore();
    const a1 = await store.addTask(task('a1', START - 300, { serial: 'a', key: 'first' }));
    const a2 = await store.addTask(task('a2', START - 200, { serial: 'a' }));
    expect((await store.claim('me', START, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([a1.id]);
    await store.settle('me', [{ id: a1.id, kind: 'release' }], START);
    expect((await store.claim('me', START, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([a1.id]);
    await store.settle('me', [{ id: a1.id, kind: 'retry', delay: 60_000, error: 'later' }], START);
    // Waiting for its retry, a1 holds the key; replacing it (same idempotency key) starts it over, due later than a2.
    await store.addTask(task('a1-again', START + 10, { serial: 'a', key: 'first' }));
    expect((await store.claim('me', START, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([a2.id]);
    expect(await store.cancel(a2.id)).toBe(true);
    expect((await store.claim('me', START + 10, 30_000, 10, advanceJob)).map((c) => c.name)).toEqual(['a1-again']);
    await store.close();
  });

  it('a task whose lease expired for good (its process died) is failed at recovery and lets go of its key', async () => {
    const path = tempDb();
    let store = await openStore(path);
    const a1 = await store.addTask(task('a1', START - 300, { serial: 'a' }));
    const a2 = await store.addTask(task('a2', START - 200, { serial: 'a' }));
    expect((await store.claim('dead', START, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([a1.id]);
    await store.close(); // the owner "dies" with a1 running
    store = sqliteStore(path, { maxLeaseExpiries: 0 });
    await store.migrate();
    await store.recover!();
    expect((await store.getTask(a1.id))?.state).toBe('failed');
    expect((await store.claim('me', START, 30_000, 10, advanceJob)).map((c) => c.id)).toEqual([a2.id]);
    await store.close();
  });

  it('a recurring job passes its serial key and priority to every occurrence', async () => {
    const clock = new ManualClock(START);
    const errors: unknown[] = [];
    const scheduler = new Scheduler({ clock, store: sqliteStore(tempDb()), workers: 4, onError: (error) => errors.push(error) });
    const gate = new Gate();
    const started: string[] = [];
    scheduler.define('tick', async (ctx) => {
      started.push(`tick@${ctx.scheduledAt.getTime() - START}`);
      await gate.wait('tick');
    });
    await scheduler.start();
    await scheduler.every(1).seconds().run('tick', { key: 'ticker', serial: 'ticks', priority: 2, overlap: 'allow' });
    await clock.advance(1_000);
    await until(() => started.length === 1 || errors.length > 0, 'the first occurrence starts');
    expect(errors).toEqual([]);
    await clock.advance(1_000);
    await ticks();
    // The second occurrence is due but waits for the first: one serial key.
    expect(started).toEqual(['tick@1000']);
    const [waiting] = await scheduler.listTasks({ state: 'waiting', jobKey: 'ticker' });
    expect(waiting).toMatchObject({ serial: 'ticks', priority: 2 });
    gate.open('tick');
    await until(() => started.length === 2, 'the second occurrence starts once the first is over');
    expect(started).toEqual(['tick@1000', 'tick@2000']);
    await scheduler.close({ abort: true });
  });
});

describe('SQLite serial keys through the scheduler (ManualClock)', () => {
  function open() {
    const clock = new ManualClock(START);
    const errors: unknown[] = [];
    const scheduler = new Scheduler({ clock, store: sqliteStore(tempDb()), workers: 4, onError: (error) => errors.push(error) });
    const gate = new Gate();
    const log: string[] = [];
    const attempts = new Map<string, number>();
    scheduler.define('step', async (_ctx, payload: { id: string; failFirst?: boolean }) => {
      const attempt = (attempts.get(payload.id) ?? 0) + 1;
      attempts.set(payload.id, attempt);
      log.push(`start ${payload.id}`);
      try {
        await gate.wait(payload.id);
        if (payload.failFirst && attempt === 1) throw new Error(`${payload.id} fails its first attempt`);
      } finally {
        log.push(`end ${payload.id}`);
      }
    });
    return { clock, scheduler, gate, log, errors };
  }

  it('runs one task per key at a time, in due order, while other keys go on', async () => {
    const { clock, scheduler, gate, log } = open();
    await scheduler.start();
    await scheduler.scheduleMany([
      { when: START + 30, name: 'step', payload: { id: 'a3' }, serial: 'a' },
      { when: START + 10, name: 'step', payload: { id: 'a1' }, serial: 'a' },
      { when: START + 20, name: 'step', payload: { id: 'a2' }, serial: 'a' },
      { when: START + 10, name: 'step', payload: { id: 'b1' }, serial: 'b' },
      { when: START + 15, name: 'step', payload: { id: 'b2' }, serial: 'b' },
    ]);
    await clock.advance(30);
    await until(() => log.length === 2, 'a1 and b1 start');
    expect(log.sort()).toEqual(['start a1', 'start b1']);
    log.length = 0;
    gate.open('b1');
    await until(() => log.includes('start b2'), 'b2 starts after b1');
    gate.open('a1');
    await until(() => log.includes('start a2'), 'a2 starts after a1');
    gate.open('a2');
    gate.open('b2');
    await until(() => log.includes('start a3'), 'a3 starts after a2');
    gate.open('a3');
    await until(() => log.includes('end a3'), 'a3 ends');
    const a = log.filter((line) => line.endsWith('a1') || line.endsWith('a2') || line.endsWith('a3'));
    expect(a).toEqual(['end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    await scheduler.close();
  });

  it('a task waiting for its retry keeps the key: the next task of the key waits for the retry to finish', async () => {
    const { clock, scheduler, gate, log } = open();
    await scheduler.start();
    const first = await scheduler.schedule(START, 'step', { payload: { id: 'a1', failFirst: true }, serial: 'a', retry: { attempts: 2, delay: 1_000 } });
    await scheduler.schedule(START + 1, 'step', { payload: { id: 'a2' }, serial: 'a' });
    await clock.advance(1);
    await until(() => log.includes('start a1'), 'a1 starts');
    gate.open('a1');
    await until(async () => (await scheduler.getTask(first.id))?.state === 'waiting', 'a1 waits for its retry');
    await clock.advance(500);
    await ticks();
    expect(log).toEqual(['start a1', 'end a1']);
    await clock.advance(500);
    await until(() => log.includes('start a2'), 'a2 starts after the retry of a1');
    expect(log).toEqual(['start a1', 'end a1', 'start a1', 'end a1', 'start a2']);
    gate.open('a2');
    await scheduler.close();
  });

  it('cancelling the task holding a key (waiting for its retry) lets the next one run at once', async () => {
    const { clock, scheduler, gate, log } = open();
    await scheduler.start();
    const first = await scheduler.schedule(START, 'step', { payload: { id: 'a1', failFirst: true }, serial: 'a', retry: { attempts: 2, delay: 60_000 } });
    await scheduler.schedule(START + 1, 'step', { payload: { id: 'a2' }, serial: 'a' });
    await clock.advance(1);
    gate.open('a1');
    await until(async () => (await scheduler.getTask(first.id))?.state === 'waiting', 'a1 waits for its retry');
    await ticks();
    expect(log).toEqual(['start a1', 'end a1']);
    expect(await scheduler.cancel(first.id)).toBe(true);
    // No time passes: the cancel wakes the claim (a timer due now, which the ManualClock fires on advance(0)).
    await clock.advance(0);
    await until(() => log.includes('start a2'), 'a2 starts once a1 is cancelled');
    gate.open('a2');
    await scheduler.close();
  });

  it('a final failure lets go of the key', async () => {
    const { clock, scheduler, gate, log, errors } = open();
    await scheduler.start();
    await scheduler.schedule(START, 'step', { payload: { id: 'a1', failFirst: true }, serial: 'a' });
    await scheduler.schedule(START, 'step', { payload: { id: 'a2' }, serial: 'a' });
    await clock.advance(0);
    await until(() => log.includes('start a1'), 'a1 starts');
    gate.open('a1');
    await until(() => log.includes('start a2'), 'a2 starts after a1 failed');
    expect(errors).toHaveLength(1);
    gate.open('a2');
    await scheduler.close();
  });
});

describe('validation and storage of the options (SQLite)', () => {
  it('refuses bad rate, serial and priority at the call, naming them; nothing is stored', async () => {
    const scheduler = new Scheduler({ clock: new ManualClock(START), store: sqliteStore(tempDb()) });
    scheduler.define('work', () => {});
    await scheduler.start();
    const bad: [object, RegExp, ErrorConstructor][] = [
      [{ priority: 1.5 }, /`priority` to be an integer/, RangeError],
      [{ priority: 2 ** 31 }, /`priority` to be an integer from -2147483648 to 2147483647/, RangeError],
      [{ priority: '1' }, /`priority`/, RangeError],
      [{ serial: '' }, /`serial` to be a non-empty string/, TypeError],
      [{ serial: 7 }, /`serial` to be a non-empty string, got 7/, TypeError],
      [{ serial: 'x'.repeat(513) }, /`serial` to be at most 512/, RangeError],
      [{ serial: 'a\0b' }, /`serial` to contain no NUL/, TypeError],
      [{ rate: { limit: 1, interval: '1s' } }, /`rate.key`/, TypeError],
      [{ rate: { key: 'k', limit: 0, interval: '1s' } }, /`rate.limit` to be an integer from 1/, RangeError],
      [{ rate: { key: 'k', limit: 1, interval: 'soon' } }, /`rate.interval`/, Error],
      [{ rate: { key: 'k', limit: 1, interval: '1s', burst: 2 } }, /Unknown `rate` option "burst"|Unknown `rate` option/, TypeError],
      [{ rate: { key: 'k\0', limit: 1, interval: '1s' } }, /`rate.key` to contain no NUL/, TypeError],
      [{ rate: 5 }, /`rate` to be an object/, TypeError],
    ];
    for (const [options, message, kind] of bad) {
      expect(() => scheduler.schedule(START, 'work', options as never), JSON.stringify(options)).toThrow(message);
      expect(() => scheduler.schedule(START, 'work', options as never)).toThrow(kind);
      expect(() => scheduler.every(1_000).milliseconds().run('work', options as never), JSON.stringify(options)).toThrow(message);
    }
    expect(() => scheduler.scheduleMany([
      { when: START, name: 'work', serial: 'ok' },
      { when: START, name: 'work', priority: -0.5 },
    ])).toThrow(/scheduleMany\(\) item 1: Expected `priority`/);
    expect(await scheduler.listTasks()).toEqual([]);
    expect(await scheduler.listJobs()).toEqual([]);
    await scheduler.close();
  });

  it('stores the options with the task and the job; listTasks and getTask show them', async () => {
    const scheduler = new Scheduler({ clock: new ManualClock(START), store: sqliteStore(tempDb()) });
    scheduler.define('work', () => {});
    await scheduler.start();
    const payload = { text: 'hello' };
    const one = await scheduler.schedule(START + 1_000, 'work', { payload, rate: { key: 'chat:1', limit: 1, interval: '1s' }, serial: 'chat:1', priority: -3 });
    expect(payload).toEqual({ text: 'hello' });
    expect(one).toMatchObject({ serial: 'chat:1', priority: -3, rate: { key: 'chat:1', limit: 1, interval: 1_000 }, payload });
    const plain = await scheduler.schedule(START + 1_000, 'work');
    expect(plain).toMatchObject({ serial: null, priority: 0, rate: null });
    const [many] = await scheduler.scheduleMany([{ when: START, name: 'work', serial: 's', priority: 4 }]);
    expect(many).toMatchObject({ serial: 's', priority: 4 });
    expect((await scheduler.getTask(one.id))).toMatchObject({ serial: 'chat:1', priority: -3 });
    expect((await scheduler.listTasks()).map((t: StoredTask) => [t.serial, t.priority])).toEqual([['s', 4], ['chat:1', -3], [null, 0]]);
    await scheduler.close();
  });
});

describe('schema version 4 (SQLite)', () => {
  it('upgrades a version 3 file in place: rows kept, serial null and priority 0, and they run', async () => {
    const path = tempDb();
    const db = await openDatabase(path);
    db.exec(SQL.createMeta);
    for (const migration of MIGRATIONS.slice(0, 3)) db.exec(migration);
    db.prepare(SQL.insertVersion).run(3);
    const insert = db.prepare(`INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, created_at, updated_at, result)
      VALUES (?, ?, ?, ?, 1, '{}', ?, ?, ?)`);
    insert.run('work', 'old-1', '{"n":1}', START, START, START, null);
    insert.run('work', null, '{"n":2}', START + 1, START, START, null);
    db.prepare(`UPDATE taskheap_tasks SET state = 'succeeded', result = '7' WHERE key = 'old-1'`).run();
    db.prepare(`INSERT INTO taskheap_tasks (name, payload, run_at, options, created_at, updated_at) VALUES ('work', '{"n":3}', ?, '{}', ?, ?)`).run(START + 2, START, START);
    db.close();
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, store: sqliteStore(path) });
    const ran: number[] = [];
    scheduler.define('work', (_ctx, payload: { n: number }) => {
      ran.push(payload.n);
    });
    await scheduler.start();
    const rows = await scheduler.listTasks();
    expect(rows.map((t) => [t.payload, t.state, t.serial, t.priority])).toEqual([
      [{ n: 1 }, 'succeeded', null, 0], [{ n: 2 }, 'waiting', null, 0], [{ n: 3 }, 'waiting', null, 0],
    ]);
    expect(rows[0]!.result).toBe(7);
    await clock.advance(2);
    await until(() => ran.length === 2, 'the old waiting rows run');
    expect(ran).toEqual([2, 3]);
    await scheduler.close();
    const after = await openDatabase(path);
    expect(after.prepare('SELECT version FROM taskheap_meta').get()).toEqual({ version: 4 });
    expect(after.prepare(`SELECT count(*) AS n FROM taskheap_serial_keys`).get()).toEqual({ n: 0 });
    after.close();
  });
});
