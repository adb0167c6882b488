// Limits at the store level, on any store (issue 22): concurrency N per key
// (a full key never blocks other keys; a slot held from the start to the
// final state, retries included), rate buckets (a retry is a start; a new
// limit keeps the starts already made), the scheduler-wide bucket of the
// processes that apply it, and limited tasks claimed only into free
// workers. Windows are an hour long, so no assertion depends on speed.
import { describe, expect } from 'vitest';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { ClaimLimits, NewTask, Store } from '../../../src/durable/store.js';
import { itWhen, TAKEOVER_TIMEOUT, type Backend, type Env } from './backend.js';

const HOUR = 3_600_000;

function task(
  name: string,
  runAt: number,
  extra: Partial<NewTask> & { concurrency?: { group: string; limit: number }; rate?: { group: string; limit: number } } = {},
): NewTask {
  const { concurrency, rate, ...rest } = extra;
  const options = JSON.stringify({
    concurrency,
    rate: rate === undefined ? undefined : { ...rate, interval: HOUR },
    serial: rest.serial ?? undefined,
  });
  return {
    name,
    key: null,
    payload: '{}',
    runAt,
    maxAttempts: 3,
    options,
    serial: rest.serial ?? concurrency?.group ?? null,
    rateGroup: rate?.group ?? null,
    ...rest,
  };
}

const claim = (store: Store, owner: string, limit = 10, limits?: ClaimLimits) =>
  store.claim({ owner, now: Date.now(), lease: 30_000, limit, advance: advanceJob, limits });
const names = (claimed: { name: string }[]) => claimed.map((c) => c.name).sort();
const done = (id: number) => ({ id, kind: 'complete' as const, state: 'succeeded' as const, error: null });

/** \`store\` as a store of one's own without fair shares would be: its capabilities say so, everything else is its own. */
function withoutFairShares(store: Store): Store {
  const capabilities = { ...store.capabilities, fairShares: false };
  return new Proxy(store, {
    get(target, property) {
      if (property === 'capabilities') return capabilities;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A scheduler of one worker whose handler 'work' records each run's payload `t`, in start order (the fair-share scenarios). */
async function oneWorker(setup: () => Promise<Env>) {
  const { open, time } = await setup();
  const { scheduler, errors } = open({ workers: 1 });
  const ran: string[] = [];
  scheduler.define('work', (_ctx, p: { t: string }) => void ran.push(p.t));
  return { time, scheduler, errors, ran };
}

export function limitScenarios(backend: Backend, setup: () => Promise<Env>): void {
  // Every scenario here drives the Store interface.
  const it = itWhen(backend.caps.store, 'needs store: calls the Store interface');
  // The fair-share scenarios drive a scheduler, in memory too.
  const everywhere = itWhen(true, '');

  describe('limits across processes (store level, issue 22)', () => {
    it('concurrency N: at most N of a key at once, in due order; a full key blocks no other; a retry keeps its slot', async () => {
      const { openStore, db } = await setup();
      const store = await openStore();
      const now = Date.now();
      const t: number[] = [];
      for (let i = 0; i < 5; i++)
        t.push((await store.addTask(task(`t${i}`, now - 1_000 + i, { concurrency: { group: 'tenant', limit: 2 } }))).id);
      await store.addTask(task('u0', now - 900, { concurrency: { group: 'other', limit: 1 } }));
      await store.addTask(task('plain', now - 800));
      const first = await claim(store, 'a');
      expect(names(first)).toEqual(['plain', 't0', 't1', 'u0']);
      // Another process: the key is full; nothing of it, however many are due.
      expect(await claim(store, 'b')).toEqual([]);
      if (db.peek) expect(await db.peek(`SELECT count(*)::int AS n FROM {s}taskheap_serial_keys WHERE key = 'tenant'`)).toEqual([{ n: 2 }]);
      // t0 ends: its slot goes to the next in due order.
      await store.settle('a', [done(t[0]!)], Date.now());
      expect(names(await claim(store, 'b'))).toEqual(['t2']);
      // t1 fails and waits for its retry: it keeps its slot, so t3 waits; the retry runs.
      await store.settle('a', [{ id: t[1]!, kind: 'retry', delay: 0, error: 'once' }], Date.now());
      expect(names(await claim(store, 'b'))).toEqual(['t1']);
      await store.settle('b', [done(t[1]!), done(t[2]!)], Date.now());
      expect(names(await claim(store, 'c'))).toEqual(['t3', 't4']);
      const stored = await store.getTask(t[3]!);
      expect(stored).toMatchObject({ serial: null, concurrency: { group: 'tenant', limit: 2 } });
      expect(stored!.startedAt).toBeInstanceOf(Date);
    });

    it('a rate bucket: at most `limit` starts in the window, a retry is one; a new limit keeps the starts made', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) ids.push((await store.addTask(task(`r${i}`, now - 1_000 + i, { rate: { group: 'chat', limit: 2 } }))).id);
      await store.addTask(task('plain', now - 500));
      expect(names(await claim(store, 'a'))).toEqual(['plain', 'r0', 'r1']);
      expect(await claim(store, 'b')).toEqual([]);
      // Nothing of the bucket is due before a start leaves the window (an hour): the next thing due is a lease (30 s).
      expect(await store.nextDue({ now: Date.now() })).toBeGreaterThan(20_000);
      // A retried task waits for a token like any other.
      await store.settle('a', [{ id: ids[0]!, kind: 'retry', delay: 0, error: 'once' }], Date.now());
      expect(await claim(store, 'b')).toEqual([]);
      // The limit raised to 3 (the most recent task's): one more start, not three.
      await store.addTask(task('r5', now, { rate: { group: 'chat', limit: 3 } }));
      expect(await claim(store, 'b')).toHaveLength(1);
      expect(await claim(store, 'b')).toEqual([]);
    });

    it(
      "a lease that ran out on a task whose bucket is empty is due at the bucket's refill, not at once (no claim loop)",
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore();
        const now = Date.now();
        await store.addTask(task('r0', now - 1_000, { rate: { group: 'chat', limit: 1 } }));
        expect(names(await claim(store, 'a'))).toEqual(['r0']);
        // Its process dies: the lease runs out, but the task's start spent the bucket's one token for the hour.
        await db.ownerDies(store);
        store = await openStore();
        expect(await claim(store, 'b')).toEqual([]);
        expect(await store.nextDue({ now: Date.now() })).toBeGreaterThan(20 * 60_000);
      },
      TAKEOVER_TIMEOUT,
    );

    it('the scheduler-wide bucket holds for the processes that apply it; limited tasks are claimed only into free workers', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      for (let i = 0; i < 5; i++) await store.addTask(task(`p${i}`, now - 1_000 + i));
      await store.setRate!({ limit: 3, interval: HOUR });
      const rate = { limit: 3, interval: HOUR };
      expect(await claim(store, 'a', 10, { free: 10, rate })).toHaveLength(3);
      expect(await claim(store, 'b', 10, { free: 10, rate })).toEqual([]);
      // A process that does not apply it claims the rest.
      expect(await claim(store, 'c', 10)).toHaveLength(2);

      for (let i = 0; i < 4; i++) await store.addTask(task(`k${i}`, now - 900 + i, { concurrency: { group: `k${i}`, limit: 1 } }));
      await store.addTask(task('plain', now - 800));
      // One free worker: one keyed task (nothing hoarded); plain ones may be prefetched.
      expect(names(await claim(store, 'd', 10, { free: 1, rate: undefined }))).toEqual(['k0', 'plain']);
      expect(names(await claim(store, 'e', 10, { free: 0, rate: undefined }))).toEqual([]);
      expect(names(await claim(store, 'e', 10, { free: 5, rate: undefined }))).toEqual(['k1', 'k2', 'k3']);
    });

    it(
      'a claim that fails a task for good (its lease ran out too often) and claims the next of its key and queue counts both',
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore({ maxLeaseExpiries: 1 });
        await store.setQueue('g', { globalConcurrency: 2 });
        const now = Date.now();
        const a1 = await store.addTask(task('a1', now - 300, { concurrency: { group: 'k', limit: 2 }, queue: 'g' }));
        // Two processes claim a1 in turn and die holding it: one expiry is allowed, the second fails it.
        for (const owner of ['p1', 'p2']) {
          expect(names(await claim(store, owner))).toEqual(['a1']);
          await db.ownerDies(store);
          store = await openStore({ maxLeaseExpiries: 1 });
        }
        await store.addTask(task('a2', now - 200, { concurrency: { group: 'k', limit: 2 }, queue: 'g' }));
        // One claim fails a1 (giving back its key slot and queue slot) and takes a2 (taking one of each).
        // (PostgreSQL: the claim returns a1 as failed, for the process to report; SQLite's recovery failed it.)
        const first = await claim(store, 'p3');
        const failed = first.filter((c) => c.failedAfterExpiries !== undefined);
        expect(failed.map((c) => [c.id, c.failedAfterExpiries])).toEqual(backend.caps.multiProcess ? [[a1.id, 2]] : []);
        const taken = first.filter((c) => c.failedAfterExpiries === undefined);
        const next = taken.length > 0 ? taken : await claim(store, 'p3');
        expect(names(next)).toEqual(['a2']);
        expect((await store.getTask(a1.id))!.state).toBe('failed');
        // So the key and the queue each have exactly one slot left: a3 (keyed) runs, then a4 (plain) waits for the queue.
        await store.addTask(task('a3', now - 100, { concurrency: { group: 'k', limit: 2 }, queue: 'g' }));
        await store.addTask(task('a4', now - 50, { queue: 'g' }));
        expect(names(await claim(store, 'p4'))).toEqual(['a3']);
        expect(await claim(store, 'p4')).toEqual([]);
        const [g] = await store.listQueues('g');
        expect(g).toMatchObject({ name: 'g', counts: { running: 2, waiting: 1, failed: 1 } });
      },
      TAKEOVER_TIMEOUT,
    );

    it('cancelling, replacing or failing a task that holds a slot lets go of it', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      const a = await store.addTask(task('a', now - 300, { concurrency: { group: 'k', limit: 1 }, key: 'job:a' }));
      await store.addTask(task('b', now - 200, { concurrency: { group: 'k', limit: 1 } }));
      expect(names(await claim(store, 'x'))).toEqual(['a']);
      await store.settle('x', [{ id: a.id, kind: 'retry', delay: HOUR, error: 'later' }], Date.now());
      expect(await claim(store, 'x')).toEqual([]);
      // Replaced by its idempotency key: it starts over and lets go; b (earlier now) goes first.
      await store.addTask(task('a', now - 100, { concurrency: { group: 'k', limit: 1 }, key: 'job:a' }));
      const b = await claim(store, 'x');
      expect(names(b)).toEqual(['b']);
      expect(await store.cancel(b[0]!.id)).toBe(true);
      expect(names(await claim(store, 'x'))).toEqual(['a']);
    });

    it('retention deletes the limit rows that limit nothing now; a new task of the key makes its row again, its limit whole', async () => {
      const { openStore, db } = await setup();
      const store = await openStore();
      const now = Date.now();
      const done1 = await store.addTask(task('done', now - 500, { concurrency: { group: 'k-done', limit: 1 } }));
      const never = await store.addTask(task('never', now + HOUR, { rate: { group: 'r-never', limit: 1 } }));
      await store.addTask(task('waits', now + HOUR, { concurrency: { group: 'k-waits', limit: 1 } }));
      await store.addTask(task('rated', now + HOUR, { rate: { group: 'r-waits', limit: 1 } }));
      const spent = await store.addTask(task('spent', now - 400, { rate: { group: 'r-spent', limit: 1 } }));
      expect(names(await claim(store, 'a'))).toEqual(['done', 'spent']);
      await store.settle('a', [done(done1.id), done(spent.id)], Date.now());
      expect(await store.cancel(never.id)).toBe(true);
      const rows = async () =>
        (await db.peek!(`SELECT kind, key FROM {s}taskheap_limits WHERE key <> '' ORDER BY kind, key`)).map((r) => `${r.kind}:${r.key}`);
      if (db.peek)
        expect(await rows()).toEqual(['concurrency:k-done', 'concurrency:k-waits', 'rate:r-never', 'rate:r-spent', 'rate:r-waits']);
      // Retention kept nothing else (null: every finished task kept), yet the idle rows go: a key no task
      // holds or waits for, a bucket with no start in its window and no task of it left.
      expect(await store.prune(null, null, 500)).toBe(2);
      if (db.peek) expect(await rows()).toEqual(['concurrency:k-waits', 'rate:r-spent', 'rate:r-waits']);
      // The key is used again: its row comes back with the new task's limit, and holds.
      await store.addTask(task('again1', now - 300, { concurrency: { group: 'k-done', limit: 1 } }));
      await store.addTask(task('again2', now - 200, { concurrency: { group: 'k-done', limit: 1 } }));
      expect(names(await claim(store, 'b'))).toEqual(['again1']);
      expect(await store.prune(null, null, 500)).toBe(0);
      expect(await claim(store, 'b')).toEqual([]);
    });

    it("replacing a task that holds a slot with one that changes its key's limit lets go and sets the limit in one add", async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      const a = await store.addTask(task('a', now - 300, { concurrency: { group: 'k', limit: 1 }, key: 'job:a' }));
      expect(names(await claim(store, 'x'))).toEqual(['a']);
      await store.settle('x', [{ id: a.id, kind: 'retry', delay: HOUR, error: 'later' }], Date.now());
      await store.addTask(task('b', now - 200, { concurrency: { group: 'k', limit: 1 } }));
      // The replacement raises the key's limit to 2 and starts over: a and b both run.
      await store.addTask(task('a', now - 100, { concurrency: { group: 'k', limit: 2 }, key: 'job:a' }));
      expect(names(await claim(store, 'x'))).toEqual(['a', 'b']);
      expect(await claim(store, 'x')).toEqual([]);
    });

    everywhere(
      'fair shares: with one worker, starts go round the groups with due work, `weight` starts each, in due order within a group',
      async () => {
        const { time, scheduler, errors, ran } = await oneWorker(setup);
        // A flood from 'big' (weight 2), added first, then 'small' (weight 1): all due at once.
        const at = time.now() + 1_000;
        for (let i = 0; i < 6; i++) await scheduler.schedule(at, 'work', { payload: { t: `b${i}` }, fair: { group: 'big', weight: 2 } });
        for (let i = 0; i < 3; i++) await scheduler.schedule(at, 'work', { payload: { t: `s${i}` }, fair: { group: 'small' } });
        await scheduler.start();
        await time.until(() => ran.length === 9, 'every task ran', 2_000);
        // Stride order: each start moves its group on by 1 / weight, the lowest goes next (ties: due order).
        expect(ran).toEqual(['b0', 's0', 'b1', 'b2', 's1', 'b3', 'b4', 's2', 'b5']);
        expect(errors).toEqual([]);
      },
    );

    everywhere('fair shares: a group with nothing due saves no turns: it comes back where the latest start left the others', async () => {
      const { time, scheduler, errors, ran } = await oneWorker(setup);
      const first = time.now() + 1_000;
      for (let i = 0; i < 4; i++) await scheduler.schedule(first, 'work', { payload: { t: `a${i}` }, fair: { group: 'a' } });
      await scheduler.start();
      await time.until(() => ran.length === 4, "a's first four ran", 2_000);
      // 'b' was idle while 'a' took four turns: it comes back level with the latest start, not four turns ahead.
      const second = time.now() + 1_000;
      for (let i = 4; i < 8; i++) await scheduler.schedule(second, 'work', { payload: { t: `a${i}` }, fair: { group: 'a' } });
      for (let i = 0; i < 4; i++) await scheduler.schedule(second, 'work', { payload: { t: `b${i}` }, fair: { group: 'b' } });
      await time.until(() => ran.length === 12, 'every task ran', 2_000);
      expect(ran.slice(4)).toEqual(['b0', 'a4', 'b1', 'a5', 'b2', 'a6', 'b3', 'a7']);
      expect(errors).toEqual([]);
    });

    everywhere("fair shares: a queue's tasks without `fair` take turns as one group beside the groups", async () => {
      const { time, scheduler, errors, ran } = await oneWorker(setup);
      const at = time.now() + 1_000;
      for (let i = 0; i < 4; i++) await scheduler.schedule(at, 'work', { payload: { t: `b${i}` }, fair: { group: 'big' } });
      for (let i = 0; i < 3; i++) await scheduler.schedule(at, 'work', { payload: { t: `u${i}` } });
      await scheduler.start();
      await time.until(() => ran.length === 7, 'every task ran', 2_000);
      expect(ran).toEqual(['b0', 'u0', 'b1', 'u1', 'b2', 'u2', 'b3']);
      expect(errors).toEqual([]);
    });

    everywhere('fair shares are among tasks of one priority: a higher one goes first, and its start counts for its group', async () => {
      const { time, scheduler, errors, ran } = await oneWorker(setup);
      const at = time.now() + 1_000;
      for (let i = 0; i < 4; i++) await scheduler.schedule(at, 'work', { payload: { t: `b${i}` }, fair: { group: 'big' } });
      for (let i = 0; i < 2; i++) await scheduler.schedule(at, 'work', { payload: { t: `s${i}` }, fair: { group: 'small' } });
      await scheduler.schedule(at, 'work', { payload: { t: 'urgent' }, fair: { group: 'small' }, priority: 5 });
      await scheduler.start();
      await time.until(() => ran.length === 7, 'every task ran', 2_000);
      // 'small' took the first turn (urgent): 'big' goes next, then they alternate, ties in due order.
      expect(ran).toEqual(['urgent', 'b0', 'b1', 's0', 'b2', 's1', 'b3']);
      expect(errors).toEqual([]);
    });

    itWhen(backend.caps.storedJobs, 'needs storedJobs')(
      "a stored task, a stored job's occurrences and a flow's tasks keep their fair share, as they read back",
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open();
        scheduler.define('work', () => {});
        const task = await scheduler.schedule(time.now() + 60_000, 'work', { fair: { group: 'tenant:1', weight: 3 } });
        expect((await scheduler.getTask(task.id))!.fair).toEqual({ group: 'tenant:1', weight: 3 });
        await scheduler
          .every(1)
          .hours()
          .run('work', { key: 'digest', fair: { group: 'tenant:2' } });
        const occurrence = await scheduler.triggerJob('digest');
        expect(occurrence!.fair).toEqual({ group: 'tenant:2', weight: 1 });
        const flow = await scheduler.flows.add({
          tasks: { a: { handler: 'work', when: time.now() + 60_000, fair: { group: 'tenant:3' } } },
        });
        expect((await scheduler.getTask(flow.tasks.a!.id))!.fair).toEqual({ group: 'tenant:3', weight: 1 });
      },
    );

    it('a store whose capabilities say it has no fair shares (a store of your own) refuses `fair` at the call; nothing is stored', async () => {
      const env = await setup();
      const store = withoutFairShares(env.db.store());
      const { scheduler } = env.open({ store });
      scheduler.define('work', () => {});
      const message = /Expected no `fair`: this store does not share starts between groups/;
      expect(() => scheduler.schedule(Date.now(), 'work', { fair: { group: 't' } })).toThrow(message);
      expect(() =>
        scheduler
          .every(1_000)
          .milliseconds()
          .run('work', { key: 'j', fair: { group: 't' } }),
      ).toThrow(message);
      expect(() => scheduler.flows.add({ tasks: { a: { handler: 'work', fair: { group: 't' } } } })).toThrow(message);
      expect(await scheduler.listTasks()).toEqual([]);
    });
  });
}
