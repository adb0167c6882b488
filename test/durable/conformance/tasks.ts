// Durable tasks through the Scheduler, on any store: a named handler run at
// its time with its payload, keys, retries, timeouts, cancels, recurring jobs
// and their misfire policy, validation at the call, and a newer schema refused.
// (Formerly copied between sqlite.test.ts and postgres.test.ts.)
import { describe, expect } from 'vitest';
import { JobKeyError, SchemaVersionError, TaskNotFoundError, UnknownHandlerError, type SkipInfo } from '../../../src/index.js';
import { ManualClock } from '../../../src/testing.js';
import { HOUR, itWhen, type Backend, type Env } from './backend.js';

export function taskScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const it = itWhen(true, '');
  const itStore = itWhen(caps.store, 'needs store: calls the Store interface');
  const itJobs = itWhen(caps.storedJobs, 'needs storedJobs: jobs of a handler name, by key');

  describe('durable tasks', () => {
    it('runs a named handler with its payload at its time and records the outcome', async () => {
      const { open, time } = await setup();
      const { scheduler, errors } = open();
      const seen: [string, number, number, number][] = [];
      scheduler.define('remind', (ctx, payload: { text: string }) => {
        seen.push([payload.text, ctx.attempt, time.now(), ctx.scheduledAt.getTime()]);
      });
      await scheduler.start();
      // On the real clock, far enough ahead that a loaded machine reads it back before it runs.
      const ahead = time.exact ? 300 : 2_000;
      const runAt = time.now() + ahead;
      const task = await scheduler.schedule(runAt, 'remind', { payload: { text: 'stretch' } });
      expect(task).toMatchObject({ name: 'remind', state: 'waiting', attempts: 0, payload: { text: 'stretch' }, key: null, jobKey: null });
      expect(task.runAt).toEqual(new Date(runAt));
      expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'waiting' });
      if (time.exact) {
        await time.pass(299);
        expect(seen).toEqual([]);
      }
      await time.until(async () => (await scheduler.getTask(task.id))?.state === 'succeeded', 'the task succeeds', ahead);
      expect(seen).toHaveLength(1);
      const [text, attempt, ranAt, scheduledAt] = seen[0]!;
      expect([text, attempt, scheduledAt]).toEqual(['stretch', 1, runAt]);
      if (time.exact) expect(ranAt).toBe(runAt);
      else expect(ranAt).toBeGreaterThanOrEqual(runAt);
      expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'succeeded', attempts: 1, lastError: null });
      expect(await scheduler.getTask(123_456)).toBeUndefined();
      expect(errors).toEqual([]);
    });

    itWhen(caps.oneTaskPerKey, 'needs oneTaskPerKey: one row per key (in memory see the dedupe scenarios)')(
      'a key makes scheduling idempotent; a finished task scheduled again by key is a new task, the finished one left as it ended',
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open();
        const seen: number[] = [];
        scheduler.define('remind', (_ctx, payload: number) => void seen.push(payload));
        await scheduler.start();
        // On the real clock, far enough ahead that the first is still waiting when the second comes.
        const ahead = time.exact ? 300 : 2_000;
        const first = await scheduler.schedule(time.now() + ahead, 'remind', { payload: 1, key: 'remind:42' });
        const second = await scheduler.schedule(time.now() + ahead + 100, 'remind', { payload: 2, key: 'remind:42' });
        expect(second.id).toBe(first.id);
        expect(second.payload).toBe(2);
        expect(await scheduler.listTasks()).toHaveLength(1);
        await time.until(async () => (await scheduler.getTask(first.id))?.state === 'succeeded', 'the task succeeds', ahead + 100);
        expect(seen).toEqual([2]);
        const third = await scheduler.schedule(time.now(), 'remind', { payload: 3, key: 'remind:42' });
        expect(third.id).not.toBe(first.id);
        await time.until(() => seen.length === 2, 'the rerun', 0);
        expect(seen).toEqual([2, 3]);
        // The finished one is as it ended; the key names the new one.
        expect(await scheduler.getTask(first.id)).toMatchObject({ state: 'succeeded', payload: 2, key: null });
        expect((await scheduler.listTasks({ keyPrefix: 'remind:' })).map((task) => task.id)).toEqual([third.id]);
      },
    );

    it('retries failures with backoff through the store, then records the error', async () => {
      const { open, time, db } = await setup();
      // A poll of an hour: each retry runs because its due time woke a claim, not because a poll came round.
      const { scheduler, errors } = open({ store: db.store({ poll: HOUR }) });
      const attempts: [number, number][] = [];
      scheduler.define('flaky', (ctx) => {
        attempts.push([ctx.attempt, time.now()]);
        throw new Error(`attempt ${ctx.attempt} failed`);
      });
      await scheduler.start();
      const at = time.now();
      const task = await scheduler.schedule(at, 'flaky', { retry: { attempts: 3, delay: 250, backoff: 'fixed' } });
      await time.until(async () => (await scheduler.getTask(task.id))?.state === 'failed', 'the task fails for good', 600);
      expect(attempts.map(([attempt]) => attempt)).toEqual([1, 2, 3]);
      if (time.exact) {
        expect(attempts.map(([, when]) => when - at)).toEqual([0, 250, 500]);
      } else {
        expect(attempts[1]![1] - attempts[0]![1]).toBeGreaterThanOrEqual(240);
        expect(attempts[2]![1] - attempts[1]![1]).toBeGreaterThanOrEqual(240);
      }
      const stored = await scheduler.getTask(task.id);
      expect(stored).toMatchObject({ state: 'failed', attempts: 3, maxAttempts: 3 });
      expect(stored!.lastError).toContain('attempt 3 failed');
      expect(errors.length).toBeGreaterThan(0);
    });

    it('times out a run and records timed-out', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('slow', () => new Promise(() => {}));
      await scheduler.start();
      const task = await scheduler.schedule(time.now(), 'slow', { timeout: 200 });
      await time.until(async () => (await scheduler.getTask(task.id))?.state === 'timed-out', 'the task times out', 1_000);
      expect((await scheduler.getTask(task.id))!.lastError).toMatch(/Timeout/);
    });

    it('cancel(id) stops a waiting task and aborts a running one', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      let started = false;
      let aborted = false;
      scheduler.define(
        'long',
        (ctx) =>
          new Promise<void>((resolve) => {
            started = true;
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              resolve();
            });
          }),
      );
      const later: number[] = [];
      scheduler.define('later', () => void later.push(time.now()));
      await scheduler.start();
      // Cancelled at once, well before its time (in real time, only a round trip has to beat it).
      const waiting = await scheduler.schedule(time.now() + (time.exact ? 1_000 : 2_000), 'later');
      expect(await scheduler.cancelTask(waiting.id)).toBe(true);
      const running = await scheduler.schedule(time.now(), 'long');
      await time.until(() => started, 'the long task starts', 10);
      expect(await scheduler.cancelTask(running.id)).toBe(true);
      await time.until(() => aborted, 'the running task sees its signal abort');
      expect(await scheduler.cancelTask(running.id)).toBe(false);
      expect(await scheduler.cancelTask(999_999)).toBe(false);
      expect((await scheduler.getTask(waiting.id))!.state).toBe('cancelled');
      // Cooperative in memory: a run that finishes once aborted succeeded.
      await time.until(async () => (await scheduler.getTask(running.id))!.state !== 'running', 'the cancelled task ends');
      expect((await scheduler.getTask(running.id))!.state).toBe(caps.cancelIsFinal ? 'cancelled' : 'succeeded');
      await time.pass(Math.max(0, waiting.runAt.getTime() - time.now()) + 200); // past the cancelled task's time: it must not run
      expect(later).toEqual([]);
      expect((await scheduler.getTask(waiting.id))!.state).toBe('cancelled');
    });

    itWhen(caps.store, "needs store: ctx.id is a stored task's id")(
      'gives handlers the stored task id, the same on every delivery',
      async () => {
        const { open, time } = await setup();
        const { scheduler } = open();
        const ids: number[] = [];
        scheduler.define('flaky', (ctx) => {
          ids.push(ctx.id);
          if (ctx.attempt === 1) throw new Error('again');
        });
        await scheduler.start();
        const task = await scheduler.schedule(time.now(), 'flaky', { retry: { attempts: 2, delay: 10 } });
        await time.until(() => ids.length === 2, 'the retry', 100);
        expect(ids).toEqual([task.id, task.id]);
      },
    );

    itStore('rejects bad input at the call: unknown handler, non-JSON payload, bad options; payloads round-trip exactly', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('known', () => {});
      await scheduler.start();
      await expect(async () => scheduler.schedule(time.now(), 'unknown')).rejects.toBeInstanceOf(UnknownHandlerError);
      await expect(async () => scheduler.every().second().run('unknown')).rejects.toBeInstanceOf(UnknownHandlerError);
      expect(() => scheduler.schedule(time.now(), 'known', { payload: { n: 1n } })).toThrow(/JSON/);
      expect(() => scheduler.schedule(time.now(), 'known', { payload: () => {} })).toThrow(/JSON/);
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      expect(() => scheduler.schedule(time.now(), 'known', { payload: circular })).toThrow(/JSON/);
      expect(() => scheduler.schedule(time.now(), 'known', { colour: 1 } as never)).toThrow(/Unknown durable task option/);
      expect(() =>
        scheduler
          .every()
          .second()
          .run('known', { overlap: 'queue' as never }),
      ).toThrow(/overlap/);
      expect(await scheduler.listTasks()).toEqual([]);
      expect(() => scheduler.define('', () => {})).toThrow(TypeError);
      // Payloads round-trip exactly, including ones jsonb would refuse or reorder.
      // biome-ignore lint/correctness/noPrecisionLoss: a number past 2^53 on purpose: it must come back as the same double
      const odd = { z: 1, a: 'nul \u0000 and emoji 🎉', big: 12345678901234567890, nested: [null, true, { b: 2 }] };
      const stored = await scheduler.schedule(time.now() + 60_000, 'known', { payload: odd });
      expect(stored.payload).toEqual(JSON.parse(JSON.stringify(odd)));
      expect(Object.keys(stored.payload as object)).toEqual(['z', 'a', 'big', 'nested']);
      expect((await scheduler.getTask(stored.id))!.payload).toEqual(JSON.parse(JSON.stringify(odd)));
    });

    itWhen(caps.multiProcess && caps.notify, 'needs multiProcess and notify: one store per database, no announcements')(
      'cancel(id) through another instance reaches the running task at once, not at its next lease renewal',
      async () => {
        const { open, db, time } = await setup();
        // A lease of an hour and a poll of an hour: a renewal (every lease / 3) would notice the
        // cancellation too, but only after 20 minutes; so only the cancel's announcement can abort the task in time.
        const a = open({ store: db.store({ lease: HOUR, poll: HOUR }) });
        const long = { started: false, abortedAt: 0 };
        a.scheduler.define(
          'long',
          (ctx) =>
            new Promise<void>((resolve) => {
              long.started = true;
              ctx.signal.addEventListener('abort', () => {
                long.abortedAt = Date.now();
                resolve();
              });
            }),
        );
        const ranLater: number[] = [];
        a.scheduler.define('later', () => void ranLater.push(Date.now()));
        await a.scheduler.start();
        // The other instance only cancels (it runs nothing, so it cannot claim the work itself), and its
        // store is open before the work is added: only the long task's start stands between adding
        // `waiting` and cancelling it, far less than the 3 s until it is due.
        const b = open({ store: db.store({ lease: HOUR, poll: HOUR }) });
        await b.scheduler.migrate();
        const running = await a.scheduler.schedule(time.now(), 'long');
        const waiting = await a.scheduler.schedule(time.now() + 3_000, 'later');
        await time.until(() => long.started, 'the long task starts');
        expect(await b.scheduler.cancelTask(running.id)).toBe(true);
        expect(await b.scheduler.cancelTask(waiting.id)).toBe(true);
        await time.until(
          () => long.abortedAt > 0,
          'the running task in the other instance aborts (told by the cancel: no renewal comes in time)',
        );
        expect((await a.scheduler.getTask(running.id))!.state).toBe('cancelled');
        await time.pass(Math.max(0, waiting.runAt.getTime() - time.now()) + 200); // past its time: it must not run
        expect(ranLater).toEqual([]);
        expect((await b.scheduler.getTask(waiting.id))!.state).toBe('cancelled');
      },
    );

    itWhen(caps.transactionsWithClient, 'needs transactionsWithClient')(
      "schedule({ client }) writes through the caller's transaction: rolled back, nothing; committed, stored and run",
      async () => {
        const { open, db, time } = await setup();
        const { scheduler } = open();
        const ran: number[] = [];
        scheduler.define('double', (_ctx, p: { n: number }) => void ran.push(p.n * 2));
        await scheduler.start();
        const client = await db.connect!();
        try {
          await client.query('BEGIN');
          await scheduler.schedule(time.now(), 'double', { payload: { n: 1 }, client: client as never });
          await client.query('ROLLBACK');
          await client.query('BEGIN');
          const task = await scheduler.schedule(time.now(), 'double', { payload: { n: 2 }, client: client as never, key: 'tx:2' });
          expect(await scheduler.getTask(task.id)).toBeUndefined(); // not committed yet
          await client.query('COMMIT');
          await time.until(() => ran.length > 0, 'the committed task runs');
        } finally {
          client.release();
        }
        await time.pass(100);
        expect(ran).toEqual([4]);
        expect((await scheduler.listTasks()).map((t) => t.key)).toEqual(['tx:2']);
      },
    );

    itWhen(
      caps.store && !caps.transactionsWithClient,
      caps.store ? "the store shares the caller's transaction (see the scenario above)" : 'needs store: a transaction to share',
    )("a store that cannot share the caller's transaction refuses schedule({ client }), saying why", async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      scheduler.define('x', () => {});
      await scheduler.start();
      await expect(scheduler.schedule(time.now(), 'x', { client: { query: async () => ({ rows: [] }) } })).rejects.toThrow(/postgresStore/);
      expect(await scheduler.listTasks()).toEqual([]);
    });

    itStore('refuses a schema from a newer version with a clear error, creating nothing next to it', async () => {
      const { open, db } = await setup();
      await db.writeNewerSchema(99);
      const { scheduler } = open();
      await expect(scheduler.start()).rejects.toBeInstanceOf(SchemaVersionError);
      await expect(scheduler.start()).rejects.toThrow(/version 99/);
      await scheduler.close();
      expect(await db.tables()).toEqual(['taskheap_meta']);
    });
  });

  describe('recurring jobs', () => {
    itJobs("runs once per occurrence, on the rule's phase; re-registering by key does not duplicate; cancelJob stops it", async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      const seen: number[] = [];
      scheduler.define('tick', (ctx) => void seen.push(ctx.scheduledAt.getTime()));
      await scheduler.start();
      // Registered on a running scheduler; in real time the first occurrence is a second away,
      // so that it cannot come due before the test registers it again (a loaded machine).
      const from = time.now() + (time.exact ? 300 : 800);
      const job = await scheduler.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
      expect(job).toMatchObject({ key: 'ticker', state: 'scheduled', runs: 0 });
      const first = from + 200; // interval rules run at start + k * interval, k >= 1
      expect(job.nextRunAt).toEqual(new Date(first));
      const again = await scheduler.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
      expect(again.nextRunAt).toEqual(new Date(first));
      await time.until(() => seen.length >= 3, 'three occurrences', 1_000);
      if (time.exact) expect(seen).toEqual([first, first + 200, first + 400]);
      expect(await scheduler.cancelJob('ticker')).toBe(true);
      expect(await scheduler.cancelJob('ticker')).toBe(false);
      await time.until(
        async () => (await scheduler.listTasks({ jobKey: 'ticker', state: 'running' })).length === 0,
        'running occurrences finish',
      );
      const count = seen.length;
      await time.pass(600);
      expect(seen.length).toBe(count);
      expect(new Set(seen).size).toBe(seen.length); // no occurrence ran twice
      expect(seen[0]).toBe(first);
      for (const at of seen) expect((at - first) % 200).toBe(0);
      const tasks = await scheduler.listTasks({ jobKey: 'ticker' });
      expect(tasks).toHaveLength(seen.length);
      expect(tasks.every((t) => t.jobKey === 'ticker' && t.name === 'tick' && t.state === 'succeeded')).toBe(true);
    });

    itWhen(caps.multiProcess, 'needs multiProcess: one store per database')(
      'runs each occurrence once across two instances that both register the job',
      async () => {
        const { open, time } = await setup();
        const seen: { at: number; by: string }[] = [];
        const from = time.now() + 300;
        const instances = ['a', 'b'].map((by) => {
          const { scheduler } = open();
          scheduler.define('tick', (ctx) => void seen.push({ at: ctx.scheduledAt.getTime(), by }));
          return scheduler;
        });
        // Both register it (as every deploy does) before either starts, so nothing comes due in between.
        await instances[0]!.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
        const again = await instances[1]!.every(200).milliseconds().from(from).run('tick', { key: 'ticker' });
        expect(again.nextRunAt).toEqual(new Date(from + 200));
        for (const scheduler of instances) await scheduler.start();
        await time.until(() => seen.length >= 5, 'five occurrences', 1_500);
        expect(await instances[1]!.cancelJob('ticker')).toBe(true);
        await time.until(
          async () => (await instances[0]!.listTasks({ jobKey: 'ticker', state: 'running' })).length === 0,
          'running occurrences finish',
        );
        const count = seen.length;
        await time.pass(600);
        expect(seen.length).toBe(count);
        const times = seen.map((s) => s.at).sort((x, y) => x - y);
        expect(new Set(times).size).toBe(times.length); // no occurrence ran twice
        expect(times[0]).toBe(from + 200);
        for (const at of times) expect((at - from - 200) % 200).toBe(0);
        expect(await instances[0]!.listTasks({ jobKey: 'ticker', state: 'succeeded' })).toHaveLength(seen.length);
      },
    );

    itJobs('re-registering an interval job keeps its place and count (as a restart would); a new rule starts afresh', async () => {
      const { open, time } = await setup();
      // Due times may be the server's: registered an hour ahead of now, by a
      // scheduler that is never started (so nothing claims while the test re-registers).
      const base = Math.ceil(time.now() / 1000) * 1000 + 3_600_000;
      const clock = new ManualClock(base);
      const { scheduler } = open({ clock });
      scheduler.define('tick', () => {});
      await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
      await clock.advance(5_000);
      const again = await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
      expect(again.nextRunAt).toEqual(new Date(base + 10_000));
      const changed = await scheduler.every(7).seconds().run('tick', { key: 'k' });
      expect(changed.nextRunAt).toEqual(new Date(base + 5_000 + 7_000));
    });

    itJobs(
      "without a key a job's key is its handler's name: three restarts that register it leave one job; a second keyless job of the handler throws ERR_JOB_KEY and changes nothing",
      async () => {
        const { open } = await setup();
        // Three deploys in a row, each registering the daily report at start (and never starting: nothing claims).
        for (let deploy = 1; deploy <= 3; deploy++) {
          const { scheduler } = open();
          scheduler.define('report', () => {});
          const job = await scheduler.every().day().at('06:00', 'UTC').run('report', { payload: { deploy } });
          expect([job.key, job.name, job.payload]).toEqual(['report', 'report', { deploy }]);
          // In the same process a second keyless job of the handler would replace the first: refused at the call.
          let refused: unknown;
          try {
            await scheduler.every().hour().run('report');
          } catch (error) {
            refused = error;
          }
          expect(refused).toBeInstanceOf(JobKeyError);
          expect(refused).toMatchObject({ code: 'ERR_JOB_KEY', message: expect.stringMatching(/handler 'report' needs a `key`/) });
          // A key of its own adds one beside it.
          await scheduler.every().hour().run('report', { key: 'report:hourly' });
          const jobs = await scheduler.listJobs({});
          expect(jobs.map((stored) => [stored.key, stored.payload])).toEqual([
            ['report', { deploy }],
            ['report:hourly', null],
          ]);
          await scheduler.close();
        }
      },
    );

    itWhen(
      caps.storedJobs && caps.clockDriven,
      caps.storedJobs ? 'needs clockDriven: runs at ManualClock times' : 'needs storedJobs: jobs of a handler name, by key',
    )('re-registered while running, an interval job keeps its count and phase: a times(3) job runs three times', async () => {
      const { open, time } = await setup();
      const { scheduler } = open();
      const start = time.now();
      const seen: number[] = [];
      scheduler.define('tick', (ctx) => void seen.push((ctx.scheduledAt.getTime() - start) / 1_000));
      await scheduler.start();
      await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
      await time.pass(15_000);
      const again = await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
      expect(again.nextRunAt).toEqual(new Date(start + 20_000));
      await time.pass(60_000);
      expect(seen).toEqual([10, 20, 30]);
      const changed = await scheduler.every(7).seconds().run('tick', { key: 'k' });
      expect(changed.nextRunAt).toEqual(new Date(time.now() + 7_000));
    });

    itJobs('overdue occurrences at start-up follow the misfire policy; what is dropped is reported by key', async () => {
      const { open, time } = await setup();
      // Registered by a process whose (manual, never advanced) clock reads ten and a half
      // minutes ago, and that never starts: it claims nothing, so it cannot advance the jobs.
      const base = time.now() - 10 * 60_000 - 30_000;
      const first = open({ clock: new ManualClock(base) });
      await first.scheduler.every(1).minute().run('tick', { key: 'once' });
      await first.scheduler.every(1).minute().run('tick', { key: 'skip', misfire: 'skip' });
      await first.scheduler.every(1).minute().run('tick', { key: 'all', misfire: 'all' });
      await first.scheduler.every(1).minute().run('tick', { key: 'capped', misfire: 'all', catchUp: 3 });
      expect(() => first.scheduler.every(1).minute().run('tick', { key: 'bad', misfire: 'all', catchUp: 0 })).toThrow(
        /`catchUp` to be an integer from 1/,
      );
      await first.scheduler.close();
      const second = open();
      const skips: SkipInfo[] = [];
      second.scheduler.on('skip', (info) => skips.push(info));
      second.scheduler.define('tick', () => {});
      await second.scheduler.start();
      const count = async (key: string) => (await second.scheduler.listTasks({ jobKey: key })).length;
      // All are due in the same claim, in one transaction.
      await time.until(
        async () => (await count('once')) === 1 && (await count('all')) === 10 && skips.length === 2,
        'the overdue jobs are materialized',
      );
      expect({ once: await count('once'), skip: await count('skip'), all: await count('all'), capped: await count('capped') }).toEqual({
        once: 1,
        skip: 0,
        all: 10,
        capped: 3,
      });
      const all = await second.scheduler.listTasks({ jobKey: 'all' });
      expect(all.map((t) => (t.runAt.getTime() - base) / 60_000)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      // One event per job, by key (a stored job has no Job object): misfire 'skip' from its
      // first missed occurrence, the capped catch-up from the first beyond the cap.
      expect(skips.sort((a, b) => a.key!.localeCompare(b.key!))).toEqual([
        { job: undefined, name: 'tick', key: 'capped', scheduledAt: new Date(base + 4 * 60_000), reason: 'misfire' },
        { job: undefined, name: 'tick', key: 'skip', scheduledAt: new Date(base + 60_000), reason: 'misfire' },
      ]);
    });

    itStore(
      'retention 0: a task leaves the store as it ends, unless it has a key or a waiter; the waiter gets its outcome, a later waitFor() a TaskNotFoundError',
      async () => {
        const { open, time } = await setup();
        const { scheduler, errors } = open({ retention: { succeeded: 0, failed: 0 } });
        let runs = 0;
        scheduler.define('ok', (_ctx, n: number) => {
          runs++;
          return n * 2;
        });
        scheduler.define('bad', () => {
          runs++;
          throw new Error('no');
        });
        await scheduler.start();
        // On the real clock, far enough ahead that the waiter is waiting before the tasks run.
        const ahead = time.exact ? 100 : 1_500;
        const at = time.now() + ahead;
        const plain = await scheduler.schedule(at, 'ok', { payload: 1 });
        const keyed = await scheduler.schedule(at, 'ok', { payload: 2, key: 'kept' });
        const waited = await scheduler.schedule(at, 'ok', { payload: 3 });
        const failed = await scheduler.schedule(at, 'bad');
        const outcome = scheduler.waitFor(waited.id);
        await time.until(() => runs === 4, 'the four tasks run', ahead);
        expect(await outcome).toMatchObject({ id: waited.id, state: 'succeeded', result: 6 });
        await time.until(
          async () => (await scheduler.getTask(plain.id)) === undefined && (await scheduler.getTask(failed.id)) === undefined,
          'the plain and the failed task are deleted',
        );
        expect(await scheduler.getTask(keyed.id)).toMatchObject({ state: 'succeeded', result: 4 });
        expect(await scheduler.getTask(waited.id)).toMatchObject({ state: 'succeeded', result: 6 });
        await expect(scheduler.waitFor(plain.id)).rejects.toThrow(TaskNotFoundError);
        expect(errors).toHaveLength(1);
      },
    );

    itStore('retention 0: a deleted task lets go of its serial group and its place in a queue limited across processes', async () => {
      const { open, time } = await setup();
      const { scheduler } = open({ retention: { succeeded: 0 }, queues: { one: { globalConcurrency: 1 } } });
      const ran: string[] = [];
      scheduler.define('ok', (_ctx, id: string) => void ran.push(id));
      await scheduler.start();
      const at = time.now() + (time.exact ? 0 : 300);
      const tasks = await scheduler.scheduleMany([
        ...['s1', 's2', 's3'].map((id) => ({ when: at, name: 'ok', payload: id, serial: 'g' })),
        ...['q1', 'q2', 'q3'].map((id) => ({ when: at, name: 'ok', payload: id, queue: 'one' })),
      ]);
      await time.until(() => ran.length === 6, 'the six tasks run, one at a time in their group and in their queue', 300);
      expect(ran.filter((id) => id.startsWith('s'))).toEqual(['s1', 's2', 's3']);
      await time.until(async () => (await scheduler.listTasks({ limit: 10 })).length === 0, 'every task is deleted');
      expect(await scheduler.getTask(tasks[0]!.id)).toBeUndefined();
    });

    itWhen(caps.multiProcess, 'needs multiProcess: one store per database')(
      'retention 0: a waitFor() in another process keeps the task it waits for (and the sweep leaves it to its waiter a while)',
      async () => {
        const { open, openStore, db, time } = await setup();
        const { scheduler } = open({ retention: { succeeded: 0 } });
        scheduler.define('ok', (_ctx, n: number) => n + 1);
        await scheduler.start();
        // A process that adds and waits (a web request), polling once an hour.
        const waiter = open({ store: db.store({ poll: HOUR }) }).scheduler;
        const at = time.now() + 1_500;
        const waited = await waiter.schedule(at, 'ok', { payload: 1 });
        const plain = await waiter.schedule(at, 'ok', { payload: 2 });
        const keyed = await waiter.schedule(at, 'ok', { payload: 3, key: 'kept' });
        expect(await waiter.waitFor(waited.id, { timeout: 60_000 })).toMatchObject({ state: 'succeeded', result: 2 });
        await time.until(async () => (await waiter.getTask(plain.id)) === undefined, 'the task nobody waits for is deleted');
        expect(await waiter.getTask(keyed.id)).toMatchObject({ state: 'succeeded' });
        // A sweep that keeps nothing: the keyed task goes, the waited one stays for its waiter.
        const store = await openStore();
        expect(await store.prune(0, 0, 100)).toBe(1);
        expect(await waiter.getTask(keyed.id)).toBeUndefined();
        expect(await waiter.getTask(waited.id)).toMatchObject({ state: 'succeeded', result: 2 });
      },
    );
  });
}
