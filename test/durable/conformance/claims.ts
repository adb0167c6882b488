// The claim at the store level, on any store: due tasks by priority, then due
// time, then id; a serial group lets one task run at a time, the head first,
// held through a retry and let go of when final; a lease that ran out is
// taken over a bounded number of times, then the task fails saying so.
// Times are real (Date.now()): a store may compare due times on its server's
// clock, so due tasks lie in the past and the others an hour ahead.
// (Formerly copied between the SQLite and PostgreSQL serial-key tests, and the lease
// bound of postgres-delivery.)
import { describe, expect } from 'vitest';
import { advanceJob } from '../../../src/durable/advance-job.js';
import { LeaseExpiredError } from '../../../src/index.js';
import type { ClaimedTask, NewTask, Store } from '../../../src/durable/store.js';
import { HOUR, itWhen, TAKEOVER_TIMEOUT, type Backend, type Env } from './backend.js';

function task(name: string, runAt: number, extra: Partial<NewTask> = {}): NewTask {
  return { name, key: null, payload: '{}', runAt, maxAttempts: 1, options: '{}', ...extra };
}

const claim = (store: Store, owner: string, limit = 10, now = Date.now()) =>
  store.claim({ owner, now, lease: 30_000, limit, advance: advanceJob });
/** The tasks a claim took, without those it failed for their lease expiries. */
const taken = (claims: ClaimedTask[]) => claims.filter((c) => c.failedAfterExpiries === undefined);
/** The tasks a claim failed for their lease expiries (returned for its process to report): [id, expiries]. */
const failedBy = (claims: ClaimedTask[]) =>
  claims.filter((c) => c.failedAfterExpiries !== undefined).map((c) => [c.id, c.failedAfterExpiries]);

export function claimScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  // Every scenario here drives the Store interface.
  const it = itWhen(caps.store, 'needs store: calls the Store interface');

  describe('claim order and serial groups (store level)', () => {
    it('claims by priority (highest first), then due time, then id; future tasks of a higher priority wait; nextDue says when', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      const ids: Record<string, number> = {};
      for (const [name, at, priority] of [
        ['low-early', now - 3_000, -1],
        ['zero-late', now - 1_000, 0],
        ['zero-early', now - 2_000, 0],
        ['high-late', now - 500, 7],
        ['high-early', now - 600, 7],
        ['high-future', now + 10_000, 9],
        ['mid', now - 100, 3],
      ] as const) {
        ids[name] = (await store.addTask(task(name, at, { priority }))).id;
      }
      expect((await claim(store, 'me', 3)).map((c) => c.name)).toEqual(['high-early', 'high-late', 'mid']);
      expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['zero-early', 'zero-late', 'low-early']);
      expect(await claim(store, 'me')).toEqual([]);
      // The future task (due at now + 10 s), not the held leases (30 s), is what comes due next: as
      // seen by a clock read between `asked` and `answered` (the server's, on the same machine).
      const asked = Date.now();
      const next = await store.nextDue({ now: asked });
      const answered = Date.now();
      expect(next).toBeGreaterThanOrEqual(now + 10_000 - answered - 5);
      expect(next).toBeLessThanOrEqual(now + 10_000 - asked + 5);
      if (caps.clockDriven) {
        // The store answers for the `now` it is given.
        expect(await store.nextDue({ now })).toBe(10_000);
        expect((await claim(store, 'me', 10, now + 10_000)).map((c) => c.id)).toEqual([ids['high-future']]);
      }
    });

    it('one task per serial group at a time, the head first whatever its priority; held through a retry, let go of when final', async () => {
      const { openStore, db } = await setup();
      const store = await openStore();
      const now = Date.now();
      const a1 = await store.addTask(task('a1', now - 300, { serial: 'a' }));
      const b1 = await store.addTask(task('b1', now - 250, { serial: 'b' }));
      const a2 = await store.addTask(task('a2', now - 200, { serial: 'a', priority: 5 }));
      const free = await store.addTask(task('free', now - 100));
      expect(free.serial).toBeNull();
      expect(a2).toMatchObject({ serial: 'a', priority: 5, rate: null });
      // a2's priority does not put it before a1: within a key, due order.
      const claimedAt = Date.now();
      expect((await claim(store, 'me', 10, claimedAt)).map((c) => c.name)).toEqual(['a1', 'b1', 'free']);
      const claimedBy = Date.now();
      expect(await claim(store, 'me', 10, claimedAt)).toEqual([]);
      // Nothing can run before a key is let go of: a held key's tasks do not make work due, only the
      // leases do (30 s from the claim, which was written between `claimedAt` and `claimedBy`).
      const asked = Date.now();
      const next = await store.nextDue({ now: asked });
      const answered = Date.now();
      expect(next).toBeGreaterThanOrEqual(claimedAt + 30_000 - answered - 5);
      expect(next).toBeLessThanOrEqual(claimedBy + 30_000 - asked + 5);
      if (caps.clockDriven) expect(await store.nextDue({ now: claimedAt })).toBe(30_000);
      if (caps.clockDriven) {
        // a1 fails and will be retried in 1 s: it keeps the key; b1 succeeds: b is free again.
        const at = Date.now();
        await store.settle(
          'me',
          [
            { id: a1.id, kind: 'retry', delay: 1_000, error: 'boom' },
            { id: b1.id, kind: 'complete', state: 'succeeded', error: null },
          ],
          at,
        );
        expect(await claim(store, 'me', 10, at + 500)).toEqual([]);
        expect((await claim(store, 'me', 10, at + 1_000)).map((c) => [c.name, c.attempts])).toEqual([['a1', 2]]);
      } else {
        await store.settle(
          'me',
          [
            { id: a1.id, kind: 'retry', delay: 0, error: 'boom' },
            { id: b1.id, kind: 'complete', state: 'succeeded', error: null },
          ],
          Date.now(),
        );
        if (db.peek)
          expect(await db.peek('SELECT key, held_by::text AS held_by FROM {s}taskheap_serial_keys')).toEqual([
            { key: 'a', held_by: String(a1.id) },
          ]);
        expect((await claim(store, 'me')).map((c) => [c.name, c.attempts])).toEqual([['a1', 2]]);
      }
      await store.settle('me', [{ id: a1.id, kind: 'complete', state: 'failed', error: 'boom again' }], Date.now() + 1_000);
      expect((await claim(store, 'me', 10, Date.now() + 1_000)).map((c) => c.id)).toEqual([a2.id]);
      if (db.peek) expect(await db.peek('SELECT count(*)::int AS n FROM {s}taskheap_serial_keys')).toEqual([{ n: 1 }]);
    });

    it('a released task keeps its place; replacing the task holding a key (same idempotency key) starts it over, due after the next', async () => {
      const { openStore, db } = await setup();
      const store = await openStore();
      const now = Date.now();
      const a1 = await store.addTask(task('a1', now - 300, { serial: 'a', key: 'first' }));
      const a2 = await store.addTask(task('a2', now - 200, { serial: 'a' }));
      expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a1.id]);
      await store.settle('me', [{ id: a1.id, kind: 'release' }], Date.now());
      expect((await claim(store, 'other')).map((c) => c.id)).toEqual([a1.id]);
      await store.settle('other', [{ id: a1.id, kind: 'retry', delay: 60_000, error: 'later' }], Date.now());
      // Waiting for its retry, a1 holds the key; replacing it starts it over, due later than a2.
      // Far enough ahead that a loaded machine claims a2 before a1-again is due.
      const due = Date.now() + 2_000;
      await store.addTask(task('a1-again', due, { serial: 'a', key: 'first' }));
      expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a2.id]);
      await store.settle('me', [{ id: a2.id, kind: 'complete', state: 'succeeded', error: null }], Date.now());
      if (db.peek) expect(await db.peek('SELECT count(*)::int AS n FROM {s}taskheap_serial_keys')).toEqual([{ n: 0 }]);
      const at = Math.max(Date.now(), due);
      if (!caps.clockDriven) await new Promise((resolve) => setTimeout(resolve, at - Date.now() + 20));
      expect((await claim(store, 'me', 10, at)).map((c) => c.name)).toEqual(['a1-again']);
    });

    it('a finished or cancelled job registered again with the same rule (every deploy does) stays so; a new rule registers it anew', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const job = (key: string, interval: number) => ({
        key,
        name: 'tick',
        payload: '{}',
        rule: JSON.stringify({ type: 'interval', start: Date.now() - 10_000, interval }),
        nextRunAt: Date.now() - 1_000,
        remaining: 1,
        until: null,
        options: '{}',
      });
      await store.addJob(job('once', 3_600_000));
      await store.addJob(job('stopped', 3_600_000));
      expect(await store.cancelJob('stopped')).toBe(true);
      // The claim materializes the one occurrence of 'once': its times are used up.
      const [first] = await claim(store, 'me');
      expect(first).toMatchObject({ name: 'tick' });
      await store.settle('me', [{ id: first!.id, kind: 'complete', state: 'succeeded', error: null }], Date.now());
      expect(await store.getJob('once')).toMatchObject({ state: 'done', nextRunAt: null });
      // The next deploy registers both again, with a new start point: nothing comes back.
      expect(await store.addJob(job('once', 3_600_000))).toMatchObject({ state: 'done', nextRunAt: null });
      expect(await store.addJob(job('stopped', 3_600_000))).toMatchObject({ state: 'cancelled' });
      expect(await claim(store, 'me')).toEqual([]);
      // A changed rule is a new schedule: it runs again.
      expect(await store.addJob(job('once', 1_800_000))).toMatchObject({ state: 'scheduled' });
      expect(await store.addJob(job('stopped', 1_800_000))).toMatchObject({ state: 'scheduled' });
      expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['tick', 'tick']);
    });

    it('a recurring job gives its occurrences its serial group, priority and rate; cancelling the job lets go of a key an occurrence held', async () => {
      const { openStore, db } = await setup();
      const store = await openStore();
      const options = JSON.stringify({ serial: 'job-key', priority: 3, rate: { group: 'r', limit: 1, interval: 1_000 } });
      await store.addJob({
        key: 'job',
        name: 'tick',
        payload: '{}',
        rule: JSON.stringify({ type: 'interval', start: Date.now() - 10_000, interval: 3_600_000 }),
        nextRunAt: Date.now() - 1_000,
        remaining: null,
        until: null,
        options,
      });
      await store.addTask(task('behind', Date.now() - 500, { serial: 'job-key' }));
      const [occurrence] = await claim(store, 'me');
      expect(occurrence).toMatchObject({ name: 'tick', priority: 3 });
      expect(await store.getTask(occurrence!.id)).toMatchObject({
        serial: 'job-key',
        priority: 3,
        rate: { group: 'r', limit: 1, interval: 1_000 },
      });
      await store.settle('me', [{ id: occurrence!.id, kind: 'retry', delay: 60_000, error: 'later' }], Date.now());
      expect(await claim(store, 'me')).toEqual([]);
      expect(await store.cancelJob('job')).toBe(true);
      if (db.peek) expect(await db.peek('SELECT count(*)::int AS n FROM {s}taskheap_serial_keys')).toEqual([{ n: 0 }]);
      expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['behind']);
    });
  });

  describe('claimers racing (store level)', () => {
    itWhen(caps.multiProcess, 'needs multiProcess: one store per database')(
      'six stores claiming the same keys at once: never two runs of a key at once, each key in due order, retries held',
      async () => {
        const { openStore, db } = await setup();
        const claimers: Store[] = [];
        for (let i = 0; i < 6; i++) claimers.push(await openStore());
        const keys = 12;
        const perKey = 8;
        const base = Date.now() - 60_000;
        const failFirst = new Set<number>();
        const items: NewTask[] = [];
        // Interleaved due times; within a key they increase with n, and insertion order is shuffled against due order.
        for (let n = perKey - 1; n >= 0; n--) {
          for (let k = 0; k < keys; k++)
            items.push(task('step', base + n * 100 + k, { serial: `chat:${k}`, payload: JSON.stringify({ k, n }), maxAttempts: 2 }));
        }
        for (let i = 0; i < 40; i++) items.push(task('loose', base + i * 7));
        const stored = await claimers[0]!.addTasks(items);
        const expected = new Map<string, number[]>();
        for (const row of stored) {
          if (row.serial === null) continue;
          expected.set(row.serial, [...(expected.get(row.serial) ?? []), row.id]);
          if (row.id % 3 === 0) failFirst.add(row.id);
        }
        // Ids were given in insertion order (reverse due order within a key): expected in due order.
        const due = new Map(stored.map((row) => [row.id, row.runAt.getTime()]));
        for (const list of expected.values()) list.sort((a, b) => due.get(a)! - due.get(b)!);
        const serialOf = new Map(stored.map((row) => [row.id, row.serial]));
        const running = new Map<string, number>();
        const starts = new Map<string, number[]>();
        const violations: string[] = [];
        let finished = 0;
        const total = stored.length;
        const deadline = Date.now() + 40_000;
        await Promise.all(
          claimers.map(async (store, i) => {
            const owner = `claimer-${i}`;
            while (finished < total && Date.now() < deadline) {
              const claimed = await store.claim({ owner, now: Date.now(), lease: 30_000, limit: 3, advance: advanceJob });
              if (claimed.length === 0) {
                await new Promise((resolve) => setImmediate(resolve));
                continue;
              }
              const seen = new Set<string>();
              for (const c of claimed) {
                const key = serialOf.get(c.id);
                if (key === null || key === undefined) continue;
                if (seen.has(key)) violations.push(`${owner} claimed two tasks of ${key} at once`);
                seen.add(key);
                if (running.has(key)) violations.push(`${key}: ${c.id} started while ${running.get(key)} runs`);
                running.set(key, c.id);
                starts.set(key, [...(starts.get(key) ?? []), c.id]);
              }
              // "Run": yield so that the other claimers get to race meanwhile.
              await new Promise((resolve) => setTimeout(resolve, 1));
              const outcomes = claimed.map((c) => {
                const key = serialOf.get(c.id);
                if (key !== null && key !== undefined) running.delete(key);
                return failFirst.has(c.id) && c.attempts === 1
                  ? { id: c.id, kind: 'retry' as const, delay: 0, error: 'first attempt fails' }
                  : { id: c.id, kind: 'complete' as const, state: 'succeeded' as const, error: null };
              });
              await store.settle(owner, outcomes, Date.now());
              finished += outcomes.filter((o) => o.kind === 'complete').length;
            }
          }),
        );
        expect(finished).toBe(total);
        expect(violations).toEqual([]);
        for (const [key, ids] of expected) {
          // A retried task runs again before anything else of its key.
          expect(starts.get(key), key).toEqual(ids.flatMap((id) => (failFirst.has(id) ? [id, id] : [id])));
        }
        if (db.peek) expect(await db.peek('SELECT count(*)::int AS n FROM {s}taskheap_serial_keys')).toEqual([{ n: 0 }]);
      },
      60_000,
    );
  });

  describe('leases that run out', () => {
    it(
      "a dead owner's task is taken over, attempt and expiry counted, at most maxLeaseExpiries times; then it fails saying so and lets go of its key",
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore({ maxLeaseExpiries: 2 });
        const now = Date.now();
        const a1 = await store.addTask(task('a1', now - 300, { serial: 'a' }));
        const a2 = await store.addTask(task('a2', now - 200, { serial: 'a' }));
        // Three "processes" claim in turn and die holding it.
        for (const [owner, expected] of [
          ['p1', 1],
          ['p2', 2],
          ['p3', 3],
        ] as const) {
          expect((await claim(store, owner)).map((c) => [c.id, c.attempts])).toEqual([[a1.id, expected]]);
          await db.ownerDies(store);
          store = await openStore({ maxLeaseExpiries: 2 });
        }
        // The third expiry is one too many: failed (at recovery, or by this claim), and the key let go of.
        // A claim returns what it failed (for its process to report); a recovery (SQLite) fails it before.
        const first = await claim(store, 'p4');
        expect(failedBy(first)).toEqual(caps.multiProcess ? [[a1.id, 3]] : []);
        const next = first.length > failedBy(first).length ? first : await claim(store, 'p4');
        expect(taken(next).map((c) => [c.id, c.attempts])).toEqual([[a2.id, 1]]);
        const failed = (await store.getTask(a1.id))!;
        expect(failed).toMatchObject({ state: 'failed', attempts: 3 });
        expect(failed.lastError).toMatch(/the lease of this task expired 3 times.*maxLeaseExpiries is 2/);
      },
      TAKEOVER_TIMEOUT,
    );

    it(
      'a lease that runs out counts only against a task that started: prefetched tasks of dead processes never fail for it',
      async () => {
        const { openStore, db } = await setup();
        // No expiry allowed at all: a task that started in a process that died fails.
        let store = await openStore({ maxLeaseExpiries: 0 });
        const now = Date.now();
        const ids: number[] = [];
        for (let i = 0; i < 5; i++) ids.push((await store.addTask(task(`t${i}`, now - 1_000 + i))).id);
        // Three processes in turn claim with one free worker and die: each time the first task claimed
        // started (in the free worker), the others were prefetched and never ran.
        const started: number[] = [];
        for (const owner of ['p1', 'p2', 'p3']) {
          const claimed = taken(
            await store.claim({
              owner,
              now: Date.now(),
              lease: 30_000,
              limit: 10,
              advance: advanceJob,
              limits: { free: 1, rate: undefined },
            }),
          );
          expect(claimed[0]?.started).toBe(true);
          expect(claimed.slice(1).every((c) => !c.started)).toBe(true);
          started.push(claimed[0]!.id);
          await db.ownerDies(store);
          store = await openStore({ maxLeaseExpiries: 0 });
        }
        // The three that started are failed by their expiry; the two never started come back as first attempts.
        const rest: { id: number; attempts: number }[] = [];
        for (let round = 0; round < 3; round++)
          rest.push(...taken(await store.claim({ owner: 'p4', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob })));
        expect(rest.map((c) => [c.id, c.attempts])).toEqual(ids.filter((id) => !started.includes(id)).map((id) => [id, 1]));
        for (const id of started) {
          expect(await store.getTask(id)).toMatchObject({
            state: 'failed',
            attempts: 1,
            lastError: expect.stringMatching(/lease of this task expired/),
          });
        }
      },
      TAKEOVER_TIMEOUT,
    );

    it(
      'a prefetched task marked started by a renewal counts a lease that runs out, as one claimed into a free worker does',
      async () => {
        const { openStore, db } = await setup();
        let store = await openStore({ maxLeaseExpiries: 0 });
        const now = Date.now();
        const a = await store.addTask(task('a', now - 1_000));
        const b = await store.addTask(task('b', now - 900));
        const c = await store.addTask(task('c', now - 800));
        const claimed = await store.claim({
          owner: 'p1',
          now: Date.now(),
          lease: 30_000,
          limit: 10,
          advance: advanceJob,
          limits: { free: 1, rate: undefined },
        });
        expect(claimed.map((t) => [t.name, t.started])).toEqual([
          ['a', true],
          ['b', false],
          ['c', false],
        ]);
        // b starts (the process tells the store with its next renewal); c never does.
        expect(
          await store.renew({ owner: 'p1', ids: [a.id, b.id, c.id], now: Date.now(), lease: 30_000, handBack: true, started: [b.id] }),
        ).toEqual([]);
        await db.ownerDies(store);
        store = await openStore({ maxLeaseExpiries: 0 });
        // No expiry allowed: the two that started fail at once; c is claimed again as its first attempt.
        const first = await store.claim({ owner: 'p2', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob });
        expect(failedBy(first)).toEqual(caps.multiProcess ? [a.id, b.id].map((id) => [id, 1]) : []);
        const again =
          taken(first).length > 0
            ? taken(first)
            : await store.claim({ owner: 'p2', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob });
        expect(again.map((t) => [t.name, t.attempts])).toEqual([['c', 1]]);
        expect((await store.getTask(a.id))!.state).toBe('failed');
        expect((await store.getTask(b.id))!.state).toBe('failed');
      },
      TAKEOVER_TIMEOUT,
    );

    it(
      'a task failed by its lease expiries is reported once, by the process that decided it (`failure`, onError: LeaseExpiredError), and never runs',
      async () => {
        const { openStore, db, open, time } = await setup();
        const store = await openStore({ maxLeaseExpiries: 0 });
        const a = await store.addTask(task('work', Date.now() - 1_000));
        expect(
          (await store.claim({ owner: 'p1', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob })).map((c) => c.id),
        ).toEqual([a.id]);
        await db.ownerDies(store);
        // The next process fails it: at its recovery (SQLite) or by its claim (PostgreSQL), which waits a
        // lease after reaching the server before it takes leases over (half the default: the shortest the suite's `timeout` allows).
        const { scheduler, errors } = open({ store: db.store({ maxLeaseExpiries: 0, lease: 15_000 }) });
        let runs = 0;
        const failures: unknown[] = [];
        scheduler.define('work', () => {
          runs++;
        });
        scheduler.on('failure', (_task, error) => failures.push(error));
        await scheduler.start();
        await time.until(async () => (await scheduler.getTask(a.id))?.state === 'failed', 'the task is failed', 30_000);
        await time.until(() => failures.length > 0, 'the failure is reported', 1_000);
        expect(failures).toHaveLength(1);
        expect(failures[0]).toBeInstanceOf(LeaseExpiredError);
        expect(failures[0]).toMatchObject({ id: a.id, expiries: 1, code: 'ERR_LEASE_EXPIRED' });
        expect(errors).toEqual(failures);
        expect(scheduler.stats().failed).toBe(1);
        expect(runs).toBe(0);
      },
      TAKEOVER_TIMEOUT,
    );

    itWhen(caps.multiProcess && caps.notify, 'needs multiProcess and notify: announcements between processes')(
      "waitFor() in another process hears at once of a task a claim failed for its lease expiries (not at its safety sweep's minute)",
      async () => {
        const { openStore, db, open, time } = await setup();
        const store = await openStore({ maxLeaseExpiries: 0 });
        const a = await store.addTask(task('work', Date.now() - 1_000));
        await store.claim({ owner: 'p1', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob });
        await db.ownerDies(store);
        // A process that only waits (a web request), polling once an hour: announcements alone can tell it.
        const waiter = open({ store: db.store({ poll: HOUR }) }).scheduler;
        let heard: number | undefined;
        const waited = waiter.waitFor(a.id).then((done) => {
          heard = Date.now();
          return done;
        });
        // Its first read is over before the task can fail: from then on it waits for an announcement or its sweep.
        await time.until(async () => (await waiter.getTask(a.id))?.state === 'running', 'the waiter reads the task', 0);
        // Half the default lease, as above.
        const { scheduler } = open({ store: db.store({ maxLeaseExpiries: 0, lease: 15_000 }) });
        scheduler.define('work', () => {});
        await scheduler.start();
        await time.until(async () => (await scheduler.getTask(a.id))?.state === 'failed', 'the task is failed', 30_000);
        const failedSeen = Date.now();
        expect((await waited).state).toBe('failed');
        // The sweep would take up to a minute; the announcement takes a round trip.
        expect(heard! - failedSeen).toBeLessThan(15_000);
      },
      TAKEOVER_TIMEOUT,
    );
  });
}
