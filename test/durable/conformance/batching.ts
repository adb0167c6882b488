// Throughput machinery every store has, through the Scheduler: outcomes of
// tasks finishing together written in few settle() calls, claims only of
// defined handlers, prefetched claims handed back on close, scheduleMany() all
// or nothing. (Formerly copied between sqlite-batching and postgres-batching.)
import { describe, expect } from 'vitest';
import type { Outcome, Store } from '../../../src/store.js';
import { HOUR, itWhen, type Backend, type Env } from './backend.js';

/** The real store, with the batch sizes of its settle() calls recorded. */
function counted(store: Store): number[] {
  const batches: number[] = [];
  const settle = store.settle.bind(store);
  store.settle = (owner: string, outcomes: readonly Outcome[], now: number) => {
    batches.push(outcomes.length);
    return settle(owner, outcomes, now);
  };
  return batches;
}

const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });

export function batchingScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const itStore = itWhen(caps.store, 'needs store: calls the Store interface');
  const itBatches = itWhen(caps.batches, 'needs batches: scheduleMany() decides a batch whole');

  describe('batched outcomes and claims', () => {
    itStore('tasks finishing together share settle() calls, far fewer than tasks; each runs exactly once', async () => {
      const { open, time, db } = await setup();
      // The default prefetch adapts to how long claims and handlers take in real time, and how many tasks
      // claims bring decides where batches split (24 prefetched behind 16 workers: 16, 16, 8, ..., 28 batches).
      // Where the count is exact (a ManualClock), the prefetch is fixed: the workers' worth waits behind them.
      const store = db.store(time.exact ? { prefetch: 16 } : {});
      const batches = counted(store);
      const { scheduler, errors } = open({ store, workers: 16 });
      const N = 400;
      const runs = new Map<number, number>();
      scheduler.define('noop', (_ctx, payload: { i: number }) => void runs.set(payload.i, (runs.get(payload.i) ?? 0) + 1));
      await scheduler.scheduleMany(Array.from({ length: N }, (_, i) => ({ when: time.now(), name: 'noop', payload: { i } })));
      await scheduler.start();
      await time.until(
        async () => (await scheduler.listTasks({ state: 'succeeded', limit: 1_000 })).length === N,
        `${N} tasks recorded succeeded`,
        1_000,
      );
      expect(runs.size).toBe(N);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      expect(batches.reduce((a, b) => a + b, 0)).toBe(N);
      // One call per outcome was the old way; tasks started together finish together.
      expect(batches.length).toBeLessThan(N / 4);
      expect(Math.max(...batches)).toBeGreaterThan(1);
      // With a ManualClock, sixteen workers finish sixteen tasks per turn: sixteen outcomes per write.
      if (time.exact) expect(batches.length).toBeLessThanOrEqual(N / 16);
      expect(errors).toEqual([]);
    });

    itStore(
      'one settle() records a completion, a failure, a retry and a release together, and ignores tasks it does not hold',
      async () => {
        const { openStore } = await setup();
        const store = await openStore();
        const task = (key: string) =>
          store.addTask({ name: 'x', key, payload: '{}', runAt: Date.now() - 1_000, maxAttempts: 3, options: '{}' });
        const ids = [(await task('a')).id, (await task('b')).id, (await task('c')).id, (await task('d')).id, (await task('e')).id];
        const claimed = await store.claim({ owner: 'me', now: Date.now(), lease: 30_000, limit: 4, advance: none });
        expect(claimed.map((c) => c.id)).toEqual(ids.slice(0, 4));
        const theirs = await store.claim({ owner: 'them', now: Date.now(), lease: 30_000, limit: 4, advance: none });
        expect(theirs.map((c) => c.id)).toEqual([ids[4]]);
        const before = Date.now();
        await store.settle(
          'me',
          [
            { id: ids[0]!, kind: 'complete', state: 'succeeded', error: null },
            { id: ids[1]!, kind: 'complete', state: 'failed', error: 'Error: boom' },
            { id: ids[2]!, kind: 'retry', delay: 60_000, error: 'Error: again' },
            { id: ids[3]!, kind: 'release' },
            // Not ours: left alone.
            { id: ids[4]!, kind: 'complete', state: 'succeeded', error: null },
          ],
          Date.now(),
        );
        const found = (await store.listTasks({})).sort((a, b) => a.id - b.id);
        expect(found.map((row) => [row.state, row.attempts, row.lastError])).toEqual([
          ['succeeded', 1, null],
          ['failed', 1, 'Error: boom'],
          ['waiting', 1, 'Error: again'],
          ['waiting', 0, null],
          ['running', 1, null],
        ]);
        // The retry is due a minute after now (the store's or the server's: same machine).
        expect(found[2]!.runAt.getTime()).toBeGreaterThan(before + 55_000);
        expect(found[2]!.runAt.getTime()).toBeLessThan(Date.now() + 65_000);
      },
    );

    itWhen(caps.store && caps.clockDriven, 'needs store and clockDriven: a ManualClock drives the poll of a store')(
      'an idle worker asks the store one question per poll, and still finds work added behind its back within the poll',
      async () => {
        const { open, time, db } = await setup();
        const store = db.store();
        const calls = { claim: 0, nextDue: 0 };
        const claim = store.claim.bind(store);
        const nextDue = store.nextDue.bind(store);
        store.claim = (...args) => {
          calls.claim++;
          return claim(...args);
        };
        store.nextDue = (...args) => {
          calls.nextDue++;
          return nextDue(...args);
        };
        const { scheduler } = open({ store, workers: 4 });
        const start = time.now();
        const ran: number[] = [];
        scheduler.define('noop', () => void ran.push(time.now() - start));
        await scheduler.start();
        await time.pass(60_000);
        // Start-up: a claim and a nextDue; then one nextDue per 5 s poll, no claim (nothing was due).
        expect(calls).toEqual({ claim: 1, nextDue: 1 + 12 });
        // Another producer's task (no wake reaches this process): the next poll finds it due and claims it.
        await store.addTasks([{ name: 'noop', key: null, payload: 'null', runAt: start + 61_000, maxAttempts: 1, options: '{}' }]);
        await time.pass(5_000);
        expect(ran).toEqual([65_000]);
      },
    );

    itWhen(caps.clockDriven, 'needs clockDriven: due times by the scheduler clock')(
      'a retry in a batch is due from the time it failed, by the scheduler clock',
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open({ workers: 4 });
        const start = time.now();
        const seen: [number, number][] = [];
        scheduler.define('flaky', (ctx, i: number) => {
          seen.push([i, time.now() - start]);
          if (ctx.attempt === 1) throw new Error('first');
        });
        await scheduler.start();
        await scheduler.scheduleMany(
          [0, 1, 2].map((i) => ({
            when: start,
            name: 'flaky',
            payload: i,
            retry: { attempts: 2, delay: 1_000, backoff: 'fixed' as const },
          })),
        );
        await time.pass(5_000);
        expect(seen).toEqual([
          [0, 0],
          [1, 0],
          [2, 0],
          [0, 1_000],
          [1, 1_000],
          [2, 1_000],
        ]);
        expect((await scheduler.listTasks({ state: 'succeeded' })).map((t) => t.attempts)).toEqual([2, 2, 2]);
      },
    );

    itStore('claims only tasks of defined handlers: others stay waiting, not failed, and run once a process defines them', async () => {
      const { open, time, db } = await setup();
      const first = open();
      const ran: string[] = [];
      first.scheduler.define('mine', () => void ran.push('mine'));
      await first.scheduler.start();
      // schedule() checks the name against this process's handlers: another process's task goes in through the store.
      await first.store.addTask({ name: 'theirs', key: null, payload: '1', runAt: time.now(), maxAttempts: 1, options: '{}' });
      await first.scheduler.schedule(time.now(), 'mine');
      await time.until(() => ran.length === 1, 'mine runs', 10);
      // Give a wrong claim every chance to happen.
      await time.pass(300);
      expect(ran).toEqual(['mine']);
      expect((await first.scheduler.listTasks({ name: 'theirs' })).map((t) => [t.state, t.attempts])).toEqual([['waiting', 0]]);
      expect(first.errors).toEqual([]);
      await first.scheduler.close();
      const second = open({ store: db.store() });
      second.scheduler.define('theirs', (_ctx, p: number) => void ran.push(`theirs ${p}`));
      await second.scheduler.start();
      await time.until(() => ran.length === 2, 'theirs runs', 1_000);
      expect(ran).toEqual(['mine', 'theirs 1']);
    });

    itWhen(caps.multiProcess, 'needs multiProcess: one store per database')(
      "two processes running at once each claim only their own handlers' tasks; work nobody here runs stays waiting",
      async () => {
        const { open, time } = await setup();
        const a = open();
        const b = open();
        const ranA: number[] = [];
        const ranB: number[] = [];
        a.scheduler.define('alpha', (_ctx, p: { i: number }) => void ranA.push(p.i));
        b.scheduler.define('beta', (_ctx, p: { i: number }) => void ranB.push(p.i));
        // A producer that defines all three names, and never starts.
        const producer = open();
        for (const name of ['alpha', 'beta', 'gamma']) producer.scheduler.define(name, () => {});
        const items = Array.from({ length: 30 }, (_, i) => ({
          when: time.now(),
          name: ['alpha', 'beta', 'gamma'][i % 3]!,
          payload: { i },
        }));
        await producer.scheduler.scheduleMany(items);
        await Promise.all([a.scheduler.start(), b.scheduler.start()]);
        await time.until(async () => (await a.scheduler.listTasks({ state: 'succeeded' })).length === 20, 'alpha and beta tasks done');
        await time.pass(300);
        expect(ranA.sort((x, y) => x - y)).toEqual(items.map((item, i) => (item.name === 'alpha' ? i : -1)).filter((i) => i >= 0));
        expect(ranB.sort((x, y) => x - y)).toEqual(items.map((item, i) => (item.name === 'beta' ? i : -1)).filter((i) => i >= 0));
        const gamma = await a.scheduler.listTasks({ name: 'gamma' });
        expect(gamma.map((row) => [row.state, row.attempts])).toEqual(Array(10).fill(['waiting', 0]));
        expect([...a.errors, ...b.errors]).toEqual([]);
      },
    );

    itStore('claims ahead of free workers, and hands prefetched tasks back unrun (attempt not counted) on close', async () => {
      const { open, time, db } = await setup();
      const { scheduler } = open({ workers: 1 });
      let release: () => void = () => {};
      const started: number[] = [];
      scheduler.define('slow', (_ctx, p: { i: number }) => {
        started.push(p.i);
        return new Promise<void>((resolve) => (release = resolve));
      });
      await scheduler.scheduleMany([0, 1, 2].map((i) => ({ when: time.now(), name: 'slow', payload: { i } })));
      await scheduler.start();
      // One worker: one runs, one more is claimed ahead, the third waits in the database.
      // (A row says running from its claim on, a moment before its handler is called.)
      await time.until(
        async () => started.length > 0 && (await scheduler.listTasks({ state: 'running' })).length === 2,
        'two claimed, one started',
        10,
      );
      expect(started).toEqual([0]);
      const closing = scheduler.close();
      release();
      await closing;
      expect(started).toEqual([0]);
      // Reopened by a process without the handler: nothing is claimed, the rows are as close() left them.
      const reopened = open({ store: db.store() });
      await reopened.scheduler.start();
      const rows = await reopened.scheduler.listTasks({});
      expect(rows.map((row) => [row.payload, row.state, row.attempts])).toEqual([
        [{ i: 0 }, 'succeeded', 1],
        [{ i: 1 }, 'waiting', 0],
        [{ i: 2 }, 'waiting', 0],
      ]);
    });
  });

  describe('scheduleMany', () => {
    itBatches('adds every item, returning the stored rows in order, each with its own time, payload, key and retry', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('a', () => {});
      scheduler.define('b', () => {});
      await scheduler.start();
      const t = time.now() + 3_600_000;
      const added = await scheduler.scheduleMany([
        { when: t, name: 'a', payload: { n: 1 } },
        { when: t + 1_000, name: 'b', payload: { n: 2 }, key: 'k1', retry: { attempts: 3, delay: 10 } },
        { when: new Date(t + 2_000), name: 'a', payload: [3] },
      ]);
      expect(added.map((row) => [row.name, row.key, row.payload, row.runAt.getTime(), row.maxAttempts, row.state])).toEqual([
        ['a', null, { n: 1 }, t, 1, 'waiting'],
        ['b', 'k1', { n: 2 }, t + 1_000, 3, 'waiting'],
        ['a', null, [3], t + 2_000, 1, 'waiting'],
      ]);
      expect(new Set(added.map((row) => row.id)).size).toBe(3);
      expect(await scheduler.getTask(added[1]!.id)).toEqual(added[1]);
    });

    itBatches('a batch without keys returns each task as getTask() reads it back, its limits and priority too', async () => {
      // Such a batch reads back only each row's id and times: the rest is built from the items (issue 27).
      const { open, time } = await setup();
      const { scheduler } = open();
      const t = time.now() + 3_600_000;
      const added = await scheduler.scheduleMany([
        { when: t + 0.5, name: 'a', payload: { n: 1 } },
        { when: t, name: 'b', payload: 'two', priority: 7, serial: 's', queue: 'mail', retry: { attempts: 4, delay: 10 } },
        { when: t + 1, name: 'a', payload: null, rate: { limit: 2, interval: 1_000, group: 'r' } },
      ]);
      for (const task of added) expect(await scheduler.getTask(task.id)).toEqual(task);
      expect(added.map((task) => [task.name, task.priority, task.serial, task.queue, task.rate, task.maxAttempts, task.state])).toEqual([
        ['a', 0, null, 'default', null, 1, 'waiting'],
        ['b', 7, 's', 'mail', null, 4, 'waiting'],
        ['a', 0, null, 'default', { limit: 2, interval: 1_000, group: 'r' }, 1, 'waiting'],
      ]);
      // A batch whose tasks all leave an option at its usual value stores that value for each.
      const plain = await scheduler.scheduleMany([
        { when: t, name: 'a', payload: 1 },
        { when: t, name: 'b', payload: 2 },
      ]);
      for (const task of plain) expect(await scheduler.getTask(task.id)).toEqual(task);
      expect(plain.map((task) => [task.priority, task.serial, task.queue, task.rate])).toEqual([
        [0, null, 'default', null],
        [0, null, 'default', null],
      ]);
    });

    itBatches(
      'keys are idempotent within a call (the last item wins, reported at every index) and across calls (replaced, not added)',
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open();
        scheduler.define('a', () => {});
        await scheduler.start();
        const t = time.now() + 3_600_000;
        const rows = await scheduler.scheduleMany([
          { when: t + 10, name: 'a', payload: { n: 1 }, key: 'k' },
          { when: t + 20, name: 'a', payload: { n: 2 } },
          { when: t + 30, name: 'a', payload: { n: 3 }, key: 'k' },
        ]);
        expect(rows.map((row) => [row.key, row.payload, row.runAt.getTime()])).toEqual([
          ['k', { n: 3 }, t + 30],
          [null, { n: 2 }, t + 20],
          ['k', { n: 3 }, t + 30],
        ]);
        expect(rows[0]!.id).toBe(rows[2]!.id);
        const again = await scheduler.scheduleMany([{ when: t + 40, name: 'a', key: 'k', payload: 4 }]);
        expect(again[0]!.id).toBe(rows[0]!.id);
        expect(again[0]).toMatchObject({ payload: 4, key: 'k' });
        expect((await scheduler.listTasks({})).length).toBe(2);
      },
    );

    itBatches('a key whose task is running is left alone (reported as it is), while the other items are written', async () => {
      const { open, time } = await setup();
      const { scheduler, store } = open();
      scheduler.define('a', () => {});
      const [busy] = await scheduler.scheduleMany([{ when: time.now() - 1_000, name: 'a', key: 'busy', payload: 'old' }]);
      expect((await store.claim({ owner: 'elsewhere', now: time.now(), lease: 30_000, limit: 1, advance: none })).map((c) => c.id)).toEqual(
        [busy!.id],
      );
      const added = await scheduler.scheduleMany([
        { when: time.now() + 60_000, name: 'a', key: 'busy', payload: 'new' },
        { when: time.now() + 60_000, name: 'a', key: 'fresh', payload: 'new' },
      ]);
      expect(added.map((row) => [row.id === busy!.id, row.key, row.state, row.payload])).toEqual([
        [true, 'busy', 'running', 'old'],
        [false, 'fresh', 'waiting', 'new'],
      ]);
    });

    itBatches('a bad item throws at the call, naming its index, and nothing is written', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('a', () => {});
      await scheduler.start();
      const good = { when: time.now(), name: 'a' };
      expect(() => scheduler.scheduleMany([good, good, { when: time.now(), name: 'a', payload: () => {} }])).toThrow(
        /scheduleMany\(\) item 2: .*payload/,
      );
      expect(() => scheduler.scheduleMany([good, { when: time.now(), name: 'a', timeout: -1 }])).toThrow(/scheduleMany\(\) item 1: /);
      expect(() => scheduler.scheduleMany([good, { when: time.now(), name: 'nope' }])).toThrow(/item 1: No handler named "nope"/);
      expect(() => scheduler.scheduleMany([{ when: 'soon' as never, name: 'a' }])).toThrow(/item 0: /);
      expect(() => scheduler.scheduleMany([good, { when: Number.NaN, name: 'a' }])).toThrow(RangeError);
      expect(() => scheduler.scheduleMany([good, { when: time.now(), name: 'a', retry: { attempts: 0 } }])).toThrow(/item 1:/);
      expect(() => scheduler.scheduleMany([{ when: time.now(), name: 'a', colour: 'red' } as never])).toThrow(
        /item 0: Unknown durable task option `colour`/,
      );
      expect(() => scheduler.scheduleMany([good, null as never])).toThrow(/item 1: expected an object/);
      expect(() => scheduler.scheduleMany('a' as never)).toThrow(TypeError);
      expect(await scheduler.listTasks({})).toEqual([]);
      expect(await scheduler.scheduleMany([])).toEqual([]);
    });

    itBatches('all or nothing in the database too: a failing statement writes none of the items', async () => {
      const { open, time, db } = await setup();
      await db.refuseLongPayloads();
      const { scheduler } = open();
      scheduler.define('a', () => {});
      await expect(
        scheduler.scheduleMany([
          { when: time.now(), name: 'a', payload: 1 },
          { when: time.now(), name: 'a', payload: 2, key: 'k' },
          { when: time.now(), name: 'a', payload: 'x'.repeat(40) },
        ]),
      ).rejects.toThrow(/short_payload/);
      expect(await scheduler.listTasks({})).toEqual([]);
    });

    itBatches('wakes a started scheduler: tasks added in bulk run promptly', async () => {
      const { open, time, db } = await setup();
      // A poll of an hour: the tasks run only if adding them woke the scheduler (for their due time).
      const store = db.store({ poll: HOUR });
      let idle = false;
      const nextDue = store.nextDue.bind(store);
      store.nextDue = async (...args) => {
        const due = await nextDue(...args);
        idle = true;
        return due;
      };
      const { scheduler } = open({ store });
      const ran: number[] = [];
      scheduler.define('a', (_ctx, p: number) => void ran.push(p));
      await scheduler.start();
      // Its first claim found nothing and it asked when work is due: it sleeps for the poll now.
      await time.until(() => idle, 'the started scheduler goes idle');
      const at = time.now() + 200;
      await scheduler.scheduleMany([3, 1, 2].map((p) => ({ when: at, name: 'a', payload: p })));
      await time.until(() => ran.length === 3, 'three ran (woken by the add: the poll is an hour)', 200);
      expect(ran.sort()).toEqual([1, 2, 3]);
    });
  });
}
