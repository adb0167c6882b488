// Issue 16 through the Scheduler, on any store: serial groups run one task at a
// time in due order, held through retries and let go of on a final state or a
// cancel; recurring jobs pass their key and priority on; the rate, serial and
// priority options are validated at the call and stored with the task.
// (Formerly only in the SQLite serial-key test, on a ManualClock.)
import { describe, expect } from 'vitest';
import type { StoredTask } from '../../../src/index.js';
import { Gate } from '../handler-gates.js';
import { HOUR, itWhen, type Backend, type Env, type StoreOptions } from './backend.js';

export function serialScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const it = itWhen(true, '');

  async function openSteps(store: StoreOptions = {}) {
    const env = await setup();
    const { scheduler, errors } = env.open({ workers: 4, store: env.db.store(store) });
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
    return { time: env.time, scheduler, gate, log, errors, open: env.open };
  }

  describe('serial groups through the scheduler', () => {
    it('runs one task per key at a time, in due order, while other keys go on', async () => {
      const { time, scheduler, gate, log } = await openSteps();
      await scheduler.start();
      const t = time.now();
      await scheduler.scheduleMany([
        { when: t + 30, name: 'step', payload: { id: 'a3' }, serial: 'a' },
        { when: t + 10, name: 'step', payload: { id: 'a1' }, serial: 'a' },
        { when: t + 20, name: 'step', payload: { id: 'a2' }, serial: 'a' },
        { when: t + 10, name: 'step', payload: { id: 'b1' }, serial: 'b' },
        { when: t + 15, name: 'step', payload: { id: 'b2' }, serial: 'b' },
      ]);
      await time.until(() => log.length === 2, 'a1 and b1 start', 30);
      await time.pass(50);
      expect(log.sort()).toEqual(['start a1', 'start b1']);
      log.length = 0;
      gate.open('b1');
      await time.until(() => log.includes('start b2'), 'b2 starts after b1');
      gate.open('a1');
      await time.until(() => log.includes('start a2'), 'a2 starts after a1');
      gate.open('a2');
      gate.open('b2');
      await time.until(() => log.includes('start a3'), 'a3 starts after a2');
      gate.open('a3');
      await time.until(() => log.includes('end a3'), 'a3 ends');
      const a = log.filter((line) => line.endsWith('a1') || line.endsWith('a2') || line.endsWith('a3'));
      expect(a).toEqual(['end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    });

    it('a task waiting for its retry keeps the key: the next task of the key waits for the retry to finish', async () => {
      const { time, scheduler, gate, log } = await openSteps();
      await scheduler.start();
      const t = time.now();
      // In real time the retry is 2 s away, so that noticing a1 waiting and the 200 ms after it stay within it.
      const delay = time.exact ? 400 : 2_000;
      const first = await scheduler.schedule(t, 'step', {
        payload: { id: 'a1', failFirst: true },
        serial: 'a',
        retry: { attempts: 2, delay },
      });
      await scheduler.schedule(t + 1, 'step', { payload: { id: 'a2' }, serial: 'a' });
      await time.until(() => log.includes('start a1'), 'a1 starts', 1);
      gate.open('a1');
      await time.until(async () => (await scheduler.getTask(first.id))?.state === 'waiting', 'a1 waits for its retry');
      await time.pass(200);
      expect(log).toEqual(['start a1', 'end a1']);
      await time.until(() => log.includes('start a2'), 'a2 starts after the retry of a1', delay);
      expect(log).toEqual(['start a1', 'end a1', 'start a1', 'end a1', 'start a2']);
      gate.open('a2');
    });

    it('cancelling the task holding a key (waiting for its retry) lets the next one run at once', async () => {
      // A poll of an hour, and a1's retry an hour away: nothing but the cancel's wake-up can start a2 in time.
      const { time, scheduler, gate, log } = await openSteps({ poll: HOUR });
      await scheduler.start();
      const t = time.now();
      const first = await scheduler.schedule(t, 'step', {
        payload: { id: 'a1', failFirst: true },
        serial: 'a',
        retry: { attempts: 2, delay: HOUR },
      });
      await scheduler.schedule(t + 1, 'step', { payload: { id: 'a2' }, serial: 'a' });
      gate.open('a1');
      // Waiting *again* (its first attempt failed): before its claim it was waiting too.
      await time.until(
        async () => {
          const task = await scheduler.getTask(first.id);
          return task?.state === 'waiting' && task.attempts === 1;
        },
        'a1 waits for its retry',
        1,
      );
      await time.pass(50);
      expect(log).toEqual(['start a1', 'end a1']);
      expect(await scheduler.cancelTask(first.id)).toBe(true);
      // No time passes on a ManualClock (advance(0) fires timers due now); in real time the wait has the
      // machine's slack, far below the hour of poll: a2 starts only if the cancel woke the claimer.
      await time.until(() => log.includes('start a2'), 'a2 starts once a1 is cancelled (woken by the cancel: the poll is an hour)', 0);
      gate.open('a2');
    });

    it('a final failure lets go of the key', async () => {
      const { time, scheduler, gate, log, errors } = await openSteps();
      await scheduler.start();
      await scheduler.schedule(time.now(), 'step', { payload: { id: 'a1', failFirst: true }, serial: 'a' });
      await scheduler.schedule(time.now(), 'step', { payload: { id: 'a2' }, serial: 'a' });
      await time.until(() => log.includes('start a1'), 'a1 starts');
      gate.open('a1');
      await time.until(() => log.includes('start a2'), 'a2 starts after a1 failed');
      expect(errors).toHaveLength(1);
      gate.open('a2');
    });

    it('a recurring job passes its serial group and priority to every occurrence: the next waits for the one running', async () => {
      const { time, scheduler, errors } = await (async () => {
        const env = await setup();
        return { time: env.time, ...env.open({ workers: 4 }) };
      })();
      const gate = new Gate();
      const started: number[] = [];
      scheduler.define('tick', async (ctx) => {
        started.push(ctx.scheduledAt.getTime());
        await gate.wait('tick');
      });
      await scheduler.start();
      const from = time.now();
      // misfire 'all': on a loaded machine the second occurrence may be inserted after the third
      // is due, and 'once' would then run the third alone (correctly, but not what this checks).
      // In memory a job has no key (caps.storedJobs) and no stored occurrences to read: its starts tell.
      await scheduler
        .every(300)
        .milliseconds()
        .from(from)
        .run('tick', { ...(caps.storedJobs ? { key: 'ticker' } : {}), serial: 'ticks', priority: 2, overlap: 'allow', misfire: 'all' });
      await time.until(() => started.length === 1 || errors.length > 0, 'the first occurrence starts', 300);
      expect(errors).toEqual([]);
      if (caps.storedJobs)
        await time.until(
          async () => (await scheduler.listTasks({ state: 'waiting', jobKey: 'ticker' })).length > 0,
          'the second occurrence is due',
          300,
        );
      else await time.pass(from + 600 - time.now());
      await time.pass(50);
      // The second occurrence is due but waits for the first: one serial group.
      expect(started).toEqual([from + 300]);
      if (caps.storedJobs) {
        const [waiting] = await scheduler.listTasks({ state: 'waiting', jobKey: 'ticker' });
        expect(waiting).toMatchObject({ serial: 'ticks', priority: 2 });
      }
      gate.open('tick');
      await time.until(() => started.length >= 2, 'the second occurrence starts once the first is over');
      expect(started.slice(0, 2)).toEqual([from + 300, from + 600]);
    });
  });

  describe('rate, serial and priority options', () => {
    it('refuses bad rate, serial and priority at the call, naming them; nothing is stored', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('work', () => {});
      await scheduler.start();
      const bad: [object, RegExp, ErrorConstructor][] = [
        [{ priority: 1.5 }, /`priority` to be an integer/, RangeError],
        [{ priority: 2 ** 31 }, /`priority` to be an integer from -2147483648 to 2147483647/, RangeError],
        [{ priority: '1' }, /`priority`/, RangeError],
        [{ rate: { limit: 1, interval: '1s' } }, /`rate.group`/, TypeError],
        [{ rate: { group: 'k', limit: 0, interval: '1s' } }, /`rate.limit` to be an integer from 1/, RangeError],
        [{ rate: { group: 'k', limit: 1, interval: 'soon' } }, /`rate.interval`/, Error],
        [{ rate: { group: 'k', limit: 1, interval: '1s', burst: 2 } }, /Unknown `rate` option "burst"|Unknown `rate` option/, TypeError],
        [{ rate: 5 }, /`rate` to be an object/, TypeError],
        // Issue 22: concurrency per key.
        [{ concurrency: 3 }, /`concurrency` to be an object like \{ group: 'tenant:1', limit: 2 \}, got 3/, TypeError],
        [{ concurrency: { group: 't', limit: 0 } }, /`concurrency.limit` to be an integer from 1 to 2147483647, got 0/, RangeError],
        [{ concurrency: { group: 't', limit: 2.5 } }, /`concurrency.limit` to be an integer/, RangeError],
        [{ concurrency: { group: '', limit: 2 } }, /`concurrency.group`/, RangeError],
        [{ concurrency: { group: 't', limit: 2, burst: 1 } }, /Unknown `concurrency` option "burst"/, TypeError],
        [{ concurrency: { group: 't', limit: 2 }, serial: 't' }, /`serial` or `concurrency`, not both/, TypeError],
        // A store's checks of the keys it keeps as text (no NUL); in memory test/core covers a key's own.
        ...((caps.store
          ? [
              [{ serial: '' }, /`serial` to be a non-empty string/, TypeError],
              [{ serial: 7 }, /`serial` to be a non-empty string, got 7/, TypeError],
              [{ serial: 'x'.repeat(513) }, /`serial` to be at most 512/, RangeError],
              [{ serial: 'a\0b' }, /`serial` to contain no NUL/, TypeError],
              [{ rate: { group: 'k\0', limit: 1, interval: '1s' } }, /`rate.group` to contain no NUL/, TypeError],
              [{ concurrency: { group: 't\0', limit: 2 } }, /`concurrency.group` to contain no NUL/, TypeError],
            ]
          : []) as [object, RegExp, ErrorConstructor][]),
      ];
      for (const [options, message, kind] of bad) {
        expect(() => scheduler.schedule(time.now(), 'work', options as never), JSON.stringify(options)).toThrow(message);
        expect(() => scheduler.schedule(time.now(), 'work', options as never)).toThrow(kind);
        expect(
          () =>
            scheduler
              .every(1_000)
              .milliseconds()
              .run('work', options as never),
          JSON.stringify(options),
        ).toThrow(message);
      }
      expect(await scheduler.listTasks()).toEqual([]);
      expect(await scheduler.listJobs()).toEqual([]);
    });

    itWhen(caps.batches, 'needs batches: scheduleMany() decides a batch whole')(
      'scheduleMany() refuses a bad priority, naming the item; nothing is stored',
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open();
        scheduler.define('work', () => {});
        expect(() =>
          scheduler.scheduleMany([
            { when: time.now(), name: 'work', serial: 'ok' },
            { when: time.now(), name: 'work', priority: -0.5 },
          ]),
        ).toThrow(/scheduleMany\(\) item 1: Expected `priority`/);
        expect(await scheduler.listTasks()).toEqual([]);
      },
    );

    it('stores the options with the task and the job; listTasks and getTask show them', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('work', () => {});
      // Not started: nothing runs while the rows are read.
      const t = time.now() + 3_600_000;
      const payload = { text: 'hello' };
      const one = await scheduler.schedule(t + 1_000, 'work', {
        payload,
        rate: { group: 'chat:1', limit: 1, interval: '1s' },
        serial: 'chat:1',
        priority: -3,
      });
      expect(payload).toEqual({ text: 'hello' });
      expect(one).toMatchObject({ serial: 'chat:1', priority: -3, rate: { group: 'chat:1', limit: 1, interval: 1_000 }, payload });
      const plain = await scheduler.schedule(t + 1_000, 'work');
      expect(plain).toMatchObject({ serial: null, priority: 0, rate: null });
      const [many] = await scheduler.scheduleMany([{ when: t, name: 'work', serial: 's', priority: 4 }]);
      expect(many).toMatchObject({ serial: 's', priority: 4 });
      expect(await scheduler.getTask(one.id)).toMatchObject({ serial: 'chat:1', priority: -3 });
      expect((await scheduler.listTasks()).map((task: StoredTask) => [task.serial, task.priority])).toEqual([
        ['s', 4],
        ['chat:1', -3],
        [null, 0],
      ]);
    });
  });
}
