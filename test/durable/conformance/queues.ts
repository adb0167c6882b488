// Issue 22, durable named queues, on any store: tasks belong to 'default'
// unless they (or their handler) name a queue; a queue's concurrency in one
// process is never exceeded and a full queue blocks no other; a paused
// queue's tasks stay waiting (nothing lost) and run on resume; a global
// concurrency holds across owners (claims at the store level); counts per
// state and the list of queues come from the store; bad values throw at the
// call and store nothing. A queue's rate: queue-rates.ts.
// In memory (no store) the queues are the loop's: counted while their tasks
// wait or run (a store also counts its finished ones), the default queue
// always listed; what is about claims and the store is skipped.
import { describe, expect } from 'vitest';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { Scheduler } from '../../../src/index.js';
import type { NewTask, Store } from '../../../src/durable/store.js';
import { Gate } from '../handler-gates.js';
import { itWhen, type Backend, type Env } from './backend.js';

function task(name: string, runAt: number, extra: Partial<NewTask> = {}): NewTask {
  return { name, key: null, payload: '{}', runAt, maxAttempts: 1, options: '{}', ...extra };
}

const claim = (store: Store, owner: string, limit = 10, rooms?: ReadonlyMap<string, number>) =>
  store.claim({ owner, now: Date.now(), lease: 30_000, limit, advance: advanceJob, rooms });

export function queueScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const it = itWhen(true, '');
  const itStore = itWhen(caps.store, 'needs store: calls the Store interface');
  /** How many tasks of `queue` succeeded (stored ones; in memory, the states of the tasks added). */
  const succeeded = async (scheduler: Scheduler, queue: string) =>
    (await scheduler.listTasks({ queue, state: 'succeeded', limit: 1_000 })).length;

  /** A scheduler whose 'step' handler records starts per queue and waits for its gate. */
  async function openSteps(options: Parameters<Env['open']>[0] = {}) {
    const env = await setup();
    const { scheduler, store, errors } = env.open({ workers: 8, ...options });
    const gate = new Gate();
    const running = new Map<string, number>();
    const most = new Map<string, number>();
    const started: string[] = [];
    scheduler.define('step', async (_ctx, payload: { id: string; queue: string }) => {
      started.push(payload.id);
      const now = (running.get(payload.queue) ?? 0) + 1;
      running.set(payload.queue, now);
      most.set(payload.queue, Math.max(most.get(payload.queue) ?? 0, now));
      try {
        await gate.wait(payload.id);
      } finally {
        running.set(payload.queue, running.get(payload.queue)! - 1);
      }
    });
    return { ...env, scheduler, store, errors, gate, running, most, started };
  }

  describe('named queues (issue 22)', () => {
    it("a task is in 'default' unless it or its handler names a queue; the option beats the handler's", async () => {
      const { open } = await setup();
      const { scheduler } = open();
      scheduler.define('plain', () => {});
      scheduler.define('mail', () => {}, { queue: 'emails' });
      const at = Date.now() + 3_600_000;
      expect((await scheduler.schedule(at, 'plain')).queue).toBe('default');
      expect((await scheduler.schedule(at, 'mail')).queue).toBe('emails');
      expect((await scheduler.schedule(at, 'mail', { queue: 'urgent' })).queue).toBe('urgent');
      const [many] = await scheduler.scheduleMany([{ when: at, name: 'plain', queue: 'bulk' }]);
      expect(many!.queue).toBe('bulk');
    });

    itWhen(caps.storedJobs, 'needs storedJobs: jobs of a handler name, by key')(
      "a stored job's occurrences are in its handler's queue",
      async () => {
        const { open } = await setup();
        const { scheduler } = open();
        scheduler.define('mail', () => {}, { queue: 'emails' });
        const job = await scheduler.every(1).hours().run('mail', { key: 'digest' });
        expect(job.key).toBe('digest');
        const occurrence = await scheduler.triggerJob('digest');
        expect(occurrence!.queue).toBe('emails');
        expect((await scheduler.getTask(occurrence!.id))!.queue).toBe('emails');
      },
    );

    it('keyed adds carry the queue in every dedupe mode (insert, replace, kept)', async () => {
      const { open } = await setup();
      const { scheduler } = open();
      scheduler.define('mail', () => {}, { queue: 'emails' });
      const at = Date.now() + 3_600_000;
      const first = await scheduler.schedule(at, 'mail', { key: 'k1' });
      expect([first.enqueued, first.queue]).toEqual(['inserted', 'emails']);
      const replaced = await scheduler.schedule(at, 'mail', { key: 'k1', queue: 'urgent' });
      expect([replaced.enqueued, replaced.queue]).toEqual(['replaced', 'urgent']);
      const kept = await scheduler.schedule(at, 'mail', { key: 'k1', queue: 'other', dedupe: 'keep' });
      expect([kept.enqueued, kept.queue]).toEqual(['existing', 'urgent']);
      for (const dedupe of [{ throttle: 1 }, { debounce: 1 }] as const) {
        const key = `k-${Object.keys(dedupe)[0]}`;
        const row = await scheduler.schedule(at, 'mail', { key, dedupe, queue: 'bulk' });
        expect([row.enqueued, row.queue]).toEqual(['inserted', 'bulk']);
      }
    });

    itWhen(caps.batches && caps.oneTaskPerKey, 'needs batches and oneTaskPerKey: scheduleMany() and one task per key')(
      'keyed adds carry the queue in batches, and a task added over a finished one takes the new one; queues() counts them',
      async () => {
        const { open } = await setup();
        const { scheduler } = open();
        scheduler.define('mail', () => {}, { queue: 'emails' });
        const at = Date.now() + 3_600_000;
        const first = await scheduler.schedule(at, 'mail', { key: 'k1', queue: 'urgent' });
        for (const dedupe of [{ throttle: 1 }, { debounce: 1 }] as const)
          await scheduler.schedule(at, 'mail', { key: `k-${Object.keys(dedupe)[0]}`, dedupe, queue: 'bulk' });
        const rows = await scheduler.scheduleMany([
          { when: at, name: 'mail', key: 'k2' },
          { when: at, name: 'mail', key: 'k3', queue: 'bulk', dedupe: 'keep' },
          { when: at, name: 'mail', key: 'k1', queue: 'again' },
          { when: at, name: 'mail', queue: 'keyless' },
        ]);
        expect(rows.map((row) => [row.enqueued, row.queue])).toEqual([
          ['inserted', 'emails'],
          ['inserted', 'bulk'],
          ['replaced', 'again'],
          ['inserted', 'keyless'],
        ]);
        for (const row of rows) expect((await scheduler.getTask(row.id))!.queue).toBe(row.queue);
        // Over a finished task of its key, a new task in the new queue; the cancelled one stays in its own.
        expect(await scheduler.cancelTask(first.id)).toBe(true);
        const added = await scheduler.schedule(at, 'mail', { key: 'k1', queue: 'late' });
        expect([added.enqueued, added.id === first.id, added.queue]).toEqual(['inserted', false, 'late']);
        expect((await scheduler.queues()).map((q) => [q.name, q.counts.waiting])).toEqual([
          ['again', 0],
          ['bulk', 3],
          ['emails', 1],
          ['keyless', 1],
          ['late', 1],
        ]);
      },
    );

    it("a queue's concurrency in this process is never exceeded, and its full queue blocks no other", async () => {
      const { scheduler, time, gate, most, running, started } = await openSteps({ queues: { slow: { concurrency: 2 } } });
      await scheduler.start();
      const t = time.now();
      const items = [];
      for (let i = 0; i < 6; i++) items.push({ when: t, name: 'step', queue: 'slow', payload: { id: `s${i}`, queue: 'slow' } });
      for (let i = 0; i < 3; i++) items.push({ when: t + 5, name: 'step', payload: { id: `d${i}`, queue: 'default' } });
      await scheduler.scheduleMany(items);
      await time.until(() => running.get('slow') === 2 && running.get('default') === 3, 'two slow tasks and every default one run', 50);
      await time.pass(30);
      expect(running.get('slow')).toBe(2);
      expect(await scheduler.queue('slow').counts()).toMatchObject({ waiting: 4, running: 2 });
      for (let i = 0; i < 6; i++) {
        gate.open(`s${i}`);
        await time.until(() => started.length >= Math.min(9, 6 + i), `slow task ${i + 2} starts`, 50);
      }
      for (let i = 0; i < 3; i++) gate.open(`d${i}`);
      await time.until(async () => (await succeeded(scheduler, 'slow')) === 6, 'every slow task succeeds', 50);
      expect(most.get('slow')).toBe(2);
      expect(most.get('default')).toBe(3);
    });

    itStore("the claim takes no more than a queue's room (no hoarding), and other queues fill the rest", async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      for (let i = 0; i < 5; i++) await store.addTask(task(`q${i}`, now - 100 + i, { queue: 'q' }));
      for (let i = 0; i < 2; i++) await store.addTask(task(`d${i}`, now - 50 + i));
      const claimed = await claim(store, 'me', 10, new Map([['q', 2]]));
      expect(claimed.map((c) => c.name).sort()).toEqual(['d0', 'd1', 'q0', 'q1']);
      expect(await claim(store, 'me', 10, new Map([['q', 0]]))).toEqual([]);
      // Nothing it may claim is due (only the leases it holds, in 30 s): the queue without room does not count.
      expect(await store.nextDue({ now: Date.now(), rooms: new Map([['q', 0]]) })).toBeGreaterThan(20_000);
      expect(await store.nextDue({ now: Date.now(), rooms: new Map([['q', 1]]) })).toBe(0);
    });

    itStore('a claim takes serial groups only for the tasks it claims (walking queues reads more than it keeps)', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      const now = Date.now();
      const late = await store.addTask(task('a-late', now - 1_000, { serial: 'a' }));
      await store.addTask(task('free', now - 2_000));
      await store.addTask(task('high', now - 2_000, { priority: 1 }));
      expect((await claim(store, 'me', 2)).map((c) => c.name)).toEqual(['high', 'free']);
      // Due before the key's other task: it is the key's head now, and the key was not taken by the one left unclaimed.
      const early = await store.addTask(task('a-early', now - 2_000, { serial: 'a' }));
      expect((await claim(store, 'me', 1)).map((c) => c.id)).toEqual([early.id]);
      expect(late.id).toBeLessThan(early.id);
    });

    itStore('a global concurrency holds across owners; a finished task gives its slot back', async () => {
      const { openStore } = await setup();
      const store = await openStore();
      await store.setQueue('g', { globalConcurrency: 2 });
      const now = Date.now();
      for (let i = 0; i < 5; i++) await store.addTask(task(`g${i}`, now - 100 + i, { queue: 'g' }));
      await store.addTask(task('free', now));
      const a = await claim(store, 'a', 1);
      const b = await claim(store, 'b', 10);
      expect([...a, ...b].map((c) => c.name).sort()).toEqual(['free', 'g0', 'g1']);
      expect(await claim(store, 'c', 10)).toEqual([]);
      expect(await store.nextDue({ now: Date.now() })).toBeGreaterThan(20_000);
      await store.settle('a', [{ id: a[0]!.id, kind: 'complete', state: 'succeeded', error: null }], Date.now());
      expect((await claim(store, 'c', 10)).map((c) => c.name)).toEqual(['g2']);
      // A retried task gives its slot back too (it waits again).
      const held = b.find((c) => c.name === 'g1')!;
      await store.settle('b', [{ id: held.id, kind: 'retry', delay: 0, error: 'again' }], Date.now());
      expect((await claim(store, 'c', 10)).map((c) => c.name)).toEqual(['g3']);
      expect(await claim(store, 'c', 10)).toEqual([]);
      // Removing the limit opens room at once.
      await store.setQueue('g', { globalConcurrency: null });
      expect((await claim(store, 'c', 10)).map((c) => c.name).sort()).toEqual(['g1', 'g4']);
      const [g] = await store.listQueues('g');
      expect(g).toMatchObject({ name: 'g', paused: false, globalConcurrency: null, counts: { running: 4, succeeded: 1 } });
    });

    it('a paused queue keeps its tasks waiting (nothing lost, nothing claimed) while others run; resume runs them', async () => {
      const { scheduler, time, gate, started } = await openSteps();
      await scheduler.start();
      const emails = scheduler.queue('emails');
      await emails.pause();
      expect((await emails.info()).paused).toBe(true);
      const t = time.now();
      for (let i = 0; i < 3; i++) await scheduler.schedule(t, 'step', { queue: 'emails', payload: { id: `e${i}`, queue: 'emails' } });
      await scheduler.schedule(t, 'step', { payload: { id: 'other', queue: 'default' } });
      await time.until(() => started.includes('other'), 'the default queue runs', 50);
      await time.pass(100);
      expect(started).toEqual(['other']);
      expect(await emails.counts()).toMatchObject({ waiting: 3, running: 0 });
      for (const id of ['e0', 'e1', 'e2', 'other']) gate.open(id);
      await emails.resume();
      await time.until(async () => (await succeeded(scheduler, 'emails')) === 3, 'the resumed queue runs its tasks', 50);
      expect(started.sort()).toEqual(['e0', 'e1', 'e2', 'other']);
      expect((await emails.info()).paused).toBe(false);
    });

    itWhen(caps.store, 'needs store: tasks claimed ahead of the workers')(
      'a pause hands back the tasks this process claimed but has not started; the running one finishes; nothing is lost',
      async () => {
        const { scheduler, time, gate, started } = await openSteps({ workers: 1 });
        await scheduler.start();
        const q = scheduler.queue('q');
        const t = time.now();
        await scheduler.scheduleMany([0, 1, 2].map((i) => ({ when: t, name: 'step', queue: 'q', payload: { id: `q${i}`, queue: 'q' } })));
        // One worker: one task runs, one more is claimed ahead of it (prefetch: the workers' worth).
        await time.until(() => started.length === 1, 'the first task starts', 50);
        await time.until(async () => (await q.counts()).running === 2, 'one more is claimed ahead', 50);
        await q.pause();
        await time.until(async () => (await q.counts()).waiting === 2, 'the unstarted claim is handed back', 50);
        gate.open('q0');
        await time.until(async () => (await q.counts()).succeeded === 1, 'the running task finishes', 50);
        await time.pass(100);
        expect(started).toEqual(['q0']);
        expect(await q.counts()).toMatchObject({ waiting: 2, running: 0, succeeded: 1, cancelled: 0 });
        const waiting = await scheduler.listTasks({ state: 'waiting' });
        expect(waiting.map((task) => task.attempts)).toEqual([0, 0]);
        gate.open('q1');
        gate.open('q2');
        await q.resume();
        await time.until(async () => (await q.counts()).succeeded === 3, 'the rest run after the resume', 50);
        expect(started.sort()).toEqual(['q0', 'q1', 'q2']);
      },
    );

    it('lists every queue with its settings and its tasks counted by state', async () => {
      const { open, time } = await setup();
      const { scheduler } = open({ queues: { idle: { concurrency: 3 }, shared: { globalConcurrency: 4 } } });
      scheduler.define('ok', () => {});
      scheduler.define('bad', () => {
        throw new Error('no');
      });
      await scheduler.start();
      const now = time.now();
      for (const name of ['ok', 'ok', 'bad']) await scheduler.schedule(now, name, { queue: 'work' });
      await scheduler.schedule(now + 3_600_000, 'ok', { queue: 'work' });
      await scheduler.schedule(now + 3_600_000, 'ok');
      // Finished, not merely claimed: a count of waiting ones would also be reached while they still run.
      // Finished: a store counts its finished tasks; in memory they are no longer the queue's.
      const finished = async () =>
        (await scheduler.listTasks({ queue: 'work', limit: 1_000 })).filter((t) => t.state === 'succeeded' || t.state === 'failed');
      await time.until(async () => (await finished()).length === 3, 'the due tasks finish', 50);
      const queues = await scheduler.queues();
      expect(queues.map((q) => q.name)).toEqual(['default', 'idle', 'shared', 'work']);
      const byName = Object.fromEntries(queues.map((q) => [q.name, q]));
      if (caps.store)
        expect(byName.work!.counts).toEqual({ blocked: 0, waiting: 1, running: 0, succeeded: 2, failed: 1, 'timed-out': 0, cancelled: 0 });
      else expect(byName.work!.counts).toMatchObject({ waiting: 1, running: 0 });
      expect(byName.default!.counts.waiting).toBe(1);
      expect(byName.idle).toMatchObject({ concurrency: 3, globalConcurrency: Infinity, paused: false, counts: { waiting: 0 } });
      expect(byName.shared).toMatchObject({ concurrency: Infinity, globalConcurrency: 4 });
      const none = { waiting: 0, running: 0 };
      if (caps.store)
        expect(await scheduler.queue('nothing').counts()).toEqual({
          ...none,
          blocked: 0,
          succeeded: 0,
          failed: 0,
          'timed-out': 0,
          cancelled: 0,
        });
      else expect(await scheduler.queue('nothing').counts()).toMatchObject(none);
    });

    it('bad values throw a TypeError or RangeError at the call, naming the value, and store nothing', async () => {
      const { open } = await setup();
      const { scheduler } = open();
      scheduler.define('ok', () => {});
      const at = Date.now() + 3_600_000;
      expect(() => scheduler.schedule(at, 'ok', { queue: 5 as never })).toThrow(/`queue`.*5/);
      expect(() => scheduler.schedule(at, 'ok', { queue: 'x'.repeat(10_000) })).toThrow(RangeError);
      expect(() =>
        scheduler
          .every(1)
          .hours()
          .run('ok', { queue: 7 as never }),
      ).toThrow(TypeError);
      const q = scheduler.queue('q');
      expect(() => (q.concurrency = 0)).toThrow(RangeError);
      expect(() => (q.concurrency = 1.5)).toThrow(/1\.5/);
      await expect(q.setRate({ limit: 0, interval: '1s' })).rejects.toThrow(RangeError);
      expect(q.concurrency).toBe(Infinity);
      expect((await q.info()).rate).toBeUndefined();
      await expect(q.setGlobalConcurrency(-1)).rejects.toThrow(RangeError);
      expect(() => open({ queues: { q: { concurrency: 0 } } })).toThrow(/`queues.q.concurrency`.*0/);
      expect(() => open({ queues: { q: { globalConcurrency: 'many' as never } } })).toThrow(RangeError);
      expect(() => open({ queues: { q: { rate: { limit: 1 } } as never } })).toThrow(TypeError);
      expect(() => open({ queues: [] as never })).toThrow(TypeError);
      expect(await scheduler.listTasks({})).toEqual([]);
      expect(await scheduler.listJobs()).toEqual([]);
    });

    itStore(
      "a store's own refusals: an empty or NUL queue name, define()'s options, `paused` in `queues`, a batch's bad item",
      async () => {
        const { open } = await setup();
        const { scheduler } = open();
        scheduler.define('ok', () => {});
        const at = Date.now() + 3_600_000;
        expect(() => scheduler.schedule(at, 'ok', { queue: '' })).toThrow(TypeError);
        expect(() => scheduler.schedule(at, 'ok', { queue: 'a\0b' })).toThrow(/NUL/);
        expect(() =>
          scheduler.scheduleMany([
            { when: at, name: 'ok' },
            { when: at, name: 'ok', queue: null as never },
          ]),
        ).toThrow(/item 1.*`queue`/);
        expect(() => scheduler.define('other', () => {}, { queue: '' })).toThrow(TypeError);
        expect(() => scheduler.define('other', () => {}, { queues: 'x' } as never)).toThrow(/Unknown define\(\) option "queues"/);
        expect(() => scheduler.queue('')).toThrow(TypeError);
        expect(() => open({ queues: { q: { paused: true } as never } })).toThrow(
          /Unknown `queues.q` option "paused" with a store.*await scheduler\.queue\("q"\)\.pause\(\)/,
        );
        expect(() => open({ queues: { '': {} } })).toThrow(TypeError);
        // Without a store the same option makes in-memory queues, where `paused` is meaningful.
        const memory = new (scheduler.constructor as typeof import('../../../src/index.js').Scheduler)({ queues: { q: { paused: true } } });
        expect((await memory.queue('q').info()).paused).toBe(true);
        await memory.close();
        expect(await scheduler.listTasks({})).toEqual([]);
        expect(await scheduler.queues()).toEqual([]);
      },
    );
  });
}
