// A durable queue's rate, on any store (issue 22): a bucket on the queue's
// row that every claim draws from, whichever owner (process) claims. At most
// `limit` of the queue's tasks start in a window, keyed ones included; a new
// limit keeps the starts made; a retry and the takeover of an expired lease
// are starts; nextDue says when the bucket refills; the queue's tasks are
// claimed only into free workers; one claim updates a queue row with a rate
// and a global concurrency once. At the scheduler level: the `queues` option
// stores it at start(), `setRate()` changes it for every scheduler sharing
// the store, bad values store nothing. Windows are an hour long at the store
// level, so no assertion there depends on speed.
import { describe, expect } from 'vitest';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { ClaimLimits, NewTask, Store } from '../../../src/durable/store.js';
import { Gate } from '../handler-gates.js';
import { itWhen, TAKEOVER_TIMEOUT, type Backend, type Env } from './backend.js';

const HOUR = 3_600_000;

function task(name: string, runAt: number, extra: Partial<NewTask> = {}): NewTask {
  return { name, key: null, payload: '{}', runAt, maxAttempts: 3, options: '{}', ...extra };
}

const claim = (store: Store, owner: string, limit = 10, limits?: ClaimLimits) =>
  store.claim({ owner, now: Date.now(), lease: 30_000, limit, advance: advanceJob, limits });
const names = (claimed: { name: string }[]) => claimed.map((c) => c.name).sort();
const done = (id: number) => ({ id, kind: 'complete' as const, state: 'succeeded' as const, error: null });

export function queueRateScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const it = itWhen(true, '');
  const itStore = itWhen(backend.caps.store, 'needs store: calls the Store interface');
  const shared = itWhen(backend.caps.multiProcess, 'needs multiProcess: one process owns a SQLite file');

  describe("a queue's rate across owners (issue 22)", () => {
    itStore('owners claiming at once never take more than the bucket holds, keyed tasks included; other queues go on', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      await store.setQueue('sms', { rate: { limit: 3, interval: HOUR } });
      const now = Date.now();
      for (let i = 0; i < 6; i++) await store.addTask(task(`s${i}`, now - 1_000 + i, { queue: 'sms' }));
      const keyed = JSON.stringify({ concurrency: { group: 'chat', limit: 5 }, queue: 'sms' });
      await store.addTask(task('k0', now - 990, { queue: 'sms', serial: 'chat', options: keyed }));
      const bucket = JSON.stringify({ rate: { group: 'b', limit: 100, interval: HOUR }, queue: 'sms' });
      await store.addTask(task('r0', now - 980, { queue: 'sms', rateGroup: 'b', options: bucket }));
      for (let i = 0; i < 4; i++) await store.addTask(task(`d${i}`, now - 500 + i));
      // Six owners at once, twice (on PostgreSQL each on a connection of its own): three of sms in all.
      const claimed = [];
      for (let round = 0; round < 2; round++) {
        const answers = await Promise.all(['a', 'b', 'c', 'd', 'e', 'f'].map((owner) => claim(store, `${owner}${round}`, 2)));
        claimed.push(...answers.flat());
      }
      // Then one owner until nothing is left (a claim skips tasks another holds locked, so racing ones may leave some).
      for (let more = await claim(store, 'g'); more.length > 0; more = await claim(store, 'g')) claimed.push(...more);
      expect(names(claimed).filter((name) => !name.startsWith('d'))).toHaveLength(3);
      expect(names(claimed).filter((name) => name.startsWith('d'))).toEqual(['d0', 'd1', 'd2', 'd3']);
      const [row] = await store.listQueues('sms');
      expect(row).toMatchObject({ rate: { limit: 3, interval: HOUR }, counts: { running: 3, waiting: 5 } });
    });

    itStore('a new limit keeps the starts made; a retry is a start; removing the rate opens the queue', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      await store.setQueue('q', { rate: { limit: 2, interval: HOUR } });
      const now = Date.now();
      for (let i = 0; i < 3; i++) await store.addTask(task(`q${i}`, now - 1_000 + i, { queue: 'q' }));
      const first = await claim(store, 'a');
      expect(names(first)).toEqual(['q0', 'q1']);
      // q0 fails and waits for its retry: the retry waits for a token like any start.
      await store.settle('a', [{ id: first[0]!.id, kind: 'retry', delay: 0, error: 'once' }], Date.now());
      expect(await claim(store, 'b')).toEqual([]);
      // Raised to 3: one more start in the window (the two made count), not three; q2 is due before the retry.
      await store.setQueue('q', { rate: { limit: 3, interval: HOUR } });
      expect(names(await claim(store, 'b'))).toEqual(['q2']);
      expect(await claim(store, 'b')).toEqual([]);
      // Raised to 4: the retry starts, and takes the token: q3, due before every other, waits.
      await store.setQueue('q', { rate: { limit: 4, interval: HOUR } });
      expect(names(await claim(store, 'b'))).toEqual(['q0']);
      await store.addTask(task('q3', now - 2_000, { queue: 'q' }));
      expect(await claim(store, 'b')).toEqual([]);
      // Other settings leave the rate alone.
      await store.setQueue('q', { paused: false, globalConcurrency: null });
      expect(await claim(store, 'b')).toEqual([]);
      expect((await store.listQueues('q'))[0]!.rate).toEqual({ limit: 4, interval: HOUR });
      await store.setQueue('q', { rate: null });
      expect(names(await claim(store, 'c'))).toEqual(['q3']);
      expect((await store.listQueues('q'))[0]!.rate).toBeNull();
    });

    itStore('nextDue says when an empty bucket refills, not sooner; a paused queue does not count', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      await store.setQueue('q', { rate: { limit: 1, interval: HOUR } });
      const now = Date.now();
      for (let i = 0; i < 2; i++) await store.addTask(task(`q${i}`, now - 1_000 + i, { queue: 'q' }));
      const [one] = await claim(store, 'a');
      expect(one!.name).toBe('q0');
      expect(await store.nextDue({ now: Date.now() })).toBeGreaterThan(20_000); // the lease of q0 (30 s)
      await store.settle('a', [done(one!.id)], Date.now());
      // No lease left: the next thing due is the bucket's refill, an hour after the start.
      const wait = await store.nextDue({ now: Date.now() });
      expect(wait).toBeGreaterThan(HOUR - 60_000);
      expect(wait).toBeLessThanOrEqual(HOUR);
      await store.setQueue('q', { paused: true });
      expect(await store.nextDue({ now: Date.now() })).toBeUndefined();
      await store.setQueue('q', { paused: false, rate: { limit: 2, interval: HOUR } });
      expect(await store.nextDue({ now: Date.now() })).toBe(0);
    });

    itStore(
      "a queue's tasks are claimed only into free workers (nothing hoarded); a takeover of an expired lease is a start",
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore();
        await store.setQueue('q', { rate: { limit: 2, interval: HOUR } });
        const now = Date.now();
        for (let i = 0; i < 3; i++) await store.addTask(task(`q${i}`, now - 1_000 + i, { queue: 'q' }));
        // q0 is claimed by a process that dies holding it: its run again is a start, and takes the last token.
        expect(names(await claim(store, 'a', 1))).toEqual(['q0']);
        await db.ownerDies(store);
        store = await openStore();
        expect(names(await claim(store, 'b'))).toEqual(['q0']);
        expect(await claim(store, 'b')).toEqual([]);

        await store.setQueue('f', { rate: { limit: 10, interval: HOUR } });
        for (let i = 0; i < 4; i++) await store.addTask(task(`f${i}`, now - 900 + i, { queue: 'f' }));
        await store.addTask(task('plain', now - 500));
        // One free worker: one task of the queue; plain ones may be prefetched.
        expect(names(await claim(store, 'c', 10, { free: 1, rate: undefined }))).toEqual(['f0', 'plain']);
        expect(await claim(store, 'd', 10, { free: 0, rate: undefined })).toEqual([]);
        expect(names(await claim(store, 'd', 10, { free: 5, rate: undefined }))).toEqual(['f1', 'f2', 'f3']);
      },
      TAKEOVER_TIMEOUT,
    );

    itStore(
      'a claim that takes slots and tokens of one queue, and fails a task of it for good, counts all of them',
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore({ maxLeaseExpiries: 1 });
        await store.setQueue('g', { globalConcurrency: 2, rate: { limit: 4, interval: HOUR } });
        const now = Date.now();
        await store.addTask(task('a1', now - 300, { queue: 'g' }));
        // Two processes claim a1 in turn and die holding it (two starts): the second expiry fails it.
        for (const owner of ['p1', 'p2']) {
          expect(names(await claim(store, owner))).toEqual(['a1']);
          await db.ownerDies(store);
          store = await openStore({ maxLeaseExpiries: 1 });
        }
        for (let i = 2; i <= 4; i++) await store.addTask(task(`a${i}`, now - 300 + i, { queue: 'g' }));
        // Claims fail a1 (its slot back; on SQLite the reopened store did) and take the two tokens left (two slots).
        const claimed = [];
        for (let i = 0; i < 4; i++) claimed.push(...(await claim(store, 'p3')));
        // A claim returns the task it failed (for its process to report); SQLite's recovery failed it before.
        const failed = claimed.filter((c) => c.failedAfterExpiries !== undefined).map((c) => c.name);
        expect(failed).toEqual(backend.caps.multiProcess ? ['a1'] : []);
        claimed.splice(0, claimed.length, ...claimed.filter((c) => c.failedAfterExpiries === undefined));
        expect(names(claimed)).toEqual(['a2', 'a3']);
        await store.settle(
          'p3',
          claimed.map((c) => done(c.id)),
          Date.now(),
        );
        // Slots are free again, tokens are not: a4 waits for the window.
        expect(await claim(store, 'p4')).toEqual([]);
        const [g] = await store.listQueues('g');
        expect(g).toMatchObject({ counts: { running: 0, waiting: 1, failed: 1, succeeded: 2 } });
        if (db.peek) {
          const sql = `SELECT running, (SELECT sum(c)::int FROM unnest(rate_counts) AS c) AS n FROM {s}taskheap_queues WHERE name = 'g'`;
          expect(await db.peek(sql)).toEqual([{ running: 0, n: 4 }]);
        }
      },
      TAKEOVER_TIMEOUT,
    );
  });

  describe("a queue's rate on schedulers (issue 22)", () => {
    it('the `queues` option stores it at start(): at most `limit` start per window, other queues not held back; info() reads it', async () => {
      const env = await setup();
      const { time } = env;
      const { scheduler } = env.open({ workers: 8, queues: { sms: { rate: { limit: 2, interval: 1_000 } } } });
      const gate = new Gate();
      const started: string[] = [];
      scheduler.define('step', async (_ctx, payload: { id: string }) => {
        started.push(payload.id);
        await gate.wait(payload.id);
      });
      await scheduler.start();
      expect((await scheduler.queue('sms').info()).rate).toEqual({ limit: 2, interval: 1_000 });
      const t = time.now();
      for (let i = 0; i < 5; i++) gate.open(`m${i}`);
      gate.open('other');
      const items = [];
      for (let i = 0; i < 5; i++) items.push({ when: t, name: 'step', queue: 'sms', payload: { id: `m${i}` } });
      items.push({ when: t, name: 'step', payload: { id: 'other' } });
      await scheduler.scheduleMany(items);
      await time.until(() => started.length === 3, 'two sms and the other task start', 50);
      const first = time.now();
      // The process sleeps until the bucket refills (nextDue), then claims: two windows more.
      await time.until(() => started.length === 6, 'every sms starts, two per second', 2_500);
      expect(time.now() - first).toBeGreaterThanOrEqual(time.exact ? 1_000 : 900);
      expect(started.filter((id) => id.startsWith('m'))).toHaveLength(5);
      const stored = await scheduler.listTasks({ state: 'succeeded' });
      const starts = stored
        .filter((row) => row.queue === 'sms')
        .map((row) => row.startedAt!.getTime())
        .sort((a, b) => a - b);
      // No three starts in one window, by the store's clock (PostgreSQL's times are cut to ms here).
      for (let i = 2; i < starts.length; i++) expect(starts[i]! - starts[i - 2]!).toBeGreaterThanOrEqual(999);
    });

    shared('one scheduler sets it, another obeys it; setRate() from either changes it for both', async () => {
      const { open, time } = await setup();
      const a = open({ workers: 4, queues: { sms: { rate: { limit: 3, interval: HOUR } } } }).scheduler;
      const b = open({ workers: 4 }).scheduler;
      const started: string[] = [];
      for (const s of [a, b]) s.define('send', (_ctx, payload: { id: string }) => void started.push(payload.id));
      await a.start();
      await b.start();
      const t = time.now();
      await b.scheduleMany(Array.from({ length: 8 }, (_, i) => ({ when: t, name: 'send', queue: 'sms', payload: { id: `s${i}` } })));
      await time.until(() => started.length === 3, 'three start', 1_000);
      await time.pass(300);
      expect(started).toHaveLength(3);
      expect((await b.queue('sms').info()).rate).toEqual({ limit: 3, interval: HOUR });
      // Raised to 5 from the scheduler that never set it: two more start, the starts made count.
      await b.queue('sms').setRate({ limit: 5, interval: '1h' });
      await time.until(() => started.length === 5, 'two more start', 1_000);
      await time.pass(300);
      expect(started).toHaveLength(5);
      await a.queue('sms').setRate(undefined);
      await time.until(() => started.length === 8, 'the rest start', 1_000);
      expect((await a.queue('sms').info()).rate).toBeUndefined();
    });

    it('bad values reject with a TypeError or RangeError naming the value, and store nothing', async () => {
      const { open } = await setup();
      const { scheduler } = open();
      const q = scheduler.queue('q');
      await expect(q.setRate({ limit: 0, interval: '1s' })).rejects.toThrow(/`rate.limit`.*0/);
      await expect(q.setRate({ limit: 1.5, interval: 1_000 })).rejects.toThrow(RangeError);
      await expect(q.setRate({ limit: 1, interval: 'soon' as never })).rejects.toThrow(/`rate.interval`.*soon/);
      await expect(q.setRate({ limit: 1, interval: 2 * 86_400_000 })).rejects.toThrow(/at most a day/);
      await expect(q.setRate(null as never)).rejects.toThrow(TypeError);
      await expect(q.setRate({ group: 'k', limit: 1, interval: 1 } as never)).rejects.toThrow(/Unknown `rate` option "group"/);
      expect(() => open({ queues: { q: { rate: { limit: -1, interval: '1s' } } } })).toThrow(/`queues.q.rate.limit`.*-1/);
      expect(() => open({ queues: { q: { rate: 'fast' as never } } })).toThrow(TypeError);
      expect((await q.info()).rate).toBeUndefined();
      // A store lists the queues its tasks name or that have settings: none; memory always lists the default one.
      expect((await scheduler.queues()).map((info) => info.name)).toEqual(backend.caps.store ? [] : ['default']);
    });
  });
}
