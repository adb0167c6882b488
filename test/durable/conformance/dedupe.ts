// Deduplication of keyed tasks (the `dedupe` option) on every backend:
// 'replace' (the default), 'keep', 'rerun', throttle and debounce, what
// each add reports (`enqueued`), a running task left alone, finished ones
// left as they ended beside a new task, concurrent adds of one key from many stores, and bad values
// refused at the call. Periods are exact on a ManualClock (SQLite); in real
// time (PostgreSQL, the server's clock) a period that must not pass is long
// (a minute) and one that must pass is short and waited out, so a slow
// machine changes nothing.
// In memory (a scheduler without a store) a key meets its last task and
// adds beside a running one, under a new id: where that differs
// (docs/dedupe.md, "Beside the in-memory keys") a scenario expects what
// `caps.oneTaskPerKey` says, and the id a store keeps is a new one in memory.
import { describe, expect } from 'vitest';
import type { EnqueuedTask, Scheduler } from '../../../src/index.js';
import { advanceJob } from '../../../src/durable/advance-job.js';
import { itWhen, type Backend, type Env } from './backend.js';

const MINUTE = 60_000;

/** A handler that holds its run until `release()`: the task stays `running`. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { wait: () => opened, release: () => open() };
}

/** Starts `scheduler`, runs the task keyed `key` with a handler held at a gate, and resolves once it is running. */
async function running(env: Env, scheduler: Scheduler, name: string, key: string): Promise<{ task: EnqueuedTask; release: () => void }> {
  const held = gate();
  scheduler.define(name, () => held.wait());
  await scheduler.start();
  const task = await scheduler.schedule(env.time.now(), name, { key, payload: 'first' });
  await env.time.until(async () => (await scheduler.getTask(task.id))?.state === 'running', `task ${key} runs`, 0);
  return { task, release: held.release };
}

export function dedupeScenarios(backend: Backend, setup: () => Promise<Env>): void {
  const { caps } = backend;
  const it = itWhen(true, '');
  const itShared = itWhen(caps.multiProcess, 'no two stores share a database');
  const itStore = itWhen(caps.store, 'needs store: calls the Store interface');
  const itBatches = itWhen(caps.batches, 'needs batches: scheduleMany() decides a batch whole');
  /** Whether an add kept the id of the task its key named: one task per key (a store); a new task in memory. */
  const sameTask = (task: { id: number }, before: { id: number }) => expect(task.id === before.id).toBe(caps.oneTaskPerKey);
  /** An add over a finished task of its key is a new task; the finished one stays as it ended (a store moves the key to the new one). */
  const afresh = async (scheduler: Scheduler, task: { id: number }, finished: { id: number }) => {
    expect(task.id).not.toBe(finished.id);
    const old = (await scheduler.getTask(finished.id))!;
    expect(old.state).toBe('succeeded');
    if (caps.oneTaskPerKey) expect(old.key).toBeNull();
  };

  describe('dedupe (keyed tasks)', () => {
    it("'replace' (the default): replaces a waiting task, returns a running one unchanged (in memory: adds one beside it), adds a new task over a finished one (which stays as it ended); each add says what it did", async () => {
      const env = await setup();
      const { scheduler } = env.open();
      const t = env.time.now() + MINUTE;
      scheduler.define('idle', () => {});
      const first = await scheduler.schedule(t, 'idle', { key: 'r', payload: 1 });
      expect(first.enqueued).toBe('inserted');
      const second = await scheduler.schedule(t + 1, 'idle', { key: 'r', payload: 2, dedupe: 'replace' });
      expect([second.enqueued, second.payload, second.runAt.getTime()]).toEqual(['replaced', 2, t + 1]);
      sameTask(second, first);
      // In memory the replaced task is cancelled.
      if (!caps.oneTaskPerKey) expect((await scheduler.getTask(first.id))!.state).toBe('cancelled');
      // Not part of the record: the task still equals what getTask reads, which has no `enqueued`.
      const read = await scheduler.getTask(second.id);
      expect(read).toEqual(second);
      expect(read).not.toHaveProperty('enqueued');
      expect(Object.keys(second)).not.toContain('enqueued');

      const { task, release } = await running(env, scheduler, 'held', 'busy');
      const again = await scheduler.schedule(env.time.now(), 'held', { key: 'busy', payload: 'second' });
      if (caps.oneTaskPerKey)
        expect([again.enqueued, again.id, again.state, again.payload]).toEqual(['existing', task.id, 'running', 'first']);
      // In memory a task is added beside the running one.
      else expect([again.enqueued, again.state, again.payload]).toEqual(['inserted', 'waiting', 'second']);
      release();
      for (const done of new Set([task.id, again.id]))
        await env.time.until(async () => (await scheduler.getTask(done))?.state === 'succeeded', `task ${done} succeeds`, 0);
      const rerun = await scheduler.schedule(env.time.now() + MINUTE, 'held', { key: 'busy', payload: 'third' });
      expect([rerun.enqueued, rerun.state, rerun.payload]).toEqual(['inserted', 'waiting', 'third']);
      await afresh(scheduler, rerun, task);
    });

    itStore(
      'a task added over a finished one of its key is a new task, with no result, errors or lease expiries; the finished one keeps them, and gives up its key',
      async () => {
        const { openStore } = await setup();
        const store = await openStore();
        const add = (payload: string) =>
          store.addTask({
            name: 'x',
            key: 'k',
            payload,
            runAt: Date.now() - 1_000,
            maxAttempts: 2,
            options: '{}',
            dedupe: { mode: 'replace', period: 0 },
          });
        const first = await add('"one"');
        const claim = () => store.claim({ owner: 'p', now: Date.now(), lease: 30_000, limit: 10, advance: advanceJob });
        await claim();
        await store.settle('p', [{ id: first.id, kind: 'retry', delay: 0, error: 'Error: first attempt' }], Date.now());
        await claim();
        await store.settle('p', [{ id: first.id, kind: 'complete', state: 'succeeded', error: null, result: '{"v":1}' }], Date.now());
        expect(await store.getTask(first.id)).toMatchObject({ state: 'succeeded', result: { v: 1 }, errors: [{ attempt: 1 }] });
        const again = await add('"two"');
        expect(again.enqueued).toBe('inserted');
        expect(again.id).not.toBe(first.id);
        const fresh = (await store.getTask(again.id))!;
        expect(fresh).toMatchObject({
          state: 'waiting',
          key: 'k',
          payload: 'two',
          attempts: 0,
          result: undefined,
          errors: [],
          lastError: null,
        });
        expect(fresh.startedAt ?? null).toBeNull();
        // The finished one stays as it ended, but for its key.
        expect(await store.getTask(first.id)).toMatchObject({
          state: 'succeeded',
          key: null,
          payload: 'one',
          result: { v: 1 },
          errors: [{ attempt: 1 }],
        });
      },
    );

    it("'keep': a waiting or running task is returned unchanged; over a finished one a new task is added, the finished one left as it ended", async () => {
      const env = await setup();
      const { scheduler } = env.open();
      const t = env.time.now() + MINUTE;
      scheduler.define('idle', () => {});
      const first = await scheduler.schedule(t, 'idle', { key: 'k', payload: 1, dedupe: 'keep' });
      const kept = await scheduler.schedule(t + 5, 'idle', { key: 'k', payload: 2, dedupe: 'keep' });
      expect(first.enqueued).toBe('inserted');
      expect([kept.enqueued, kept.id, kept.payload, kept.runAt.getTime(), kept.updatedAt]).toEqual([
        'existing',
        first.id,
        1,
        t,
        first.updatedAt,
      ]);

      const { task, release } = await running(env, scheduler, 'held', 'busy');
      const again = await scheduler.schedule(env.time.now(), 'held', { key: 'busy', payload: 'second', dedupe: 'keep' });
      expect([again.enqueued, again.id, again.state, again.payload]).toEqual(['existing', task.id, 'running', 'first']);
      release();
      await env.time.until(async () => (await scheduler.getTask(task.id))?.state === 'succeeded', 'the held task succeeds', 0);
      const next = await scheduler.schedule(env.time.now() + MINUTE, 'held', { key: 'busy', payload: 'third', dedupe: 'keep' });
      expect([next.enqueued, next.state, next.payload, next.attempts]).toEqual(['inserted', 'waiting', 'third', 0]);
      await afresh(scheduler, next, task);
      // The finished task is a task of its own beside the new one, in memory as in a store.
      expect(await scheduler.listTasks()).toHaveLength(3);
    });

    it('throttle: within the period (from the add that wrote the task) the task is returned, finished or not; after it, a new one', async () => {
      const env = await setup();
      const { time } = env;
      const { scheduler } = env.open();
      const seen: unknown[] = [];
      scheduler.define('digest', (_ctx, payload) => void seen.push(payload));
      await scheduler.start();
      const first = await scheduler.schedule(time.now(), 'digest', { key: 'd', payload: 1, dedupe: { throttle: '1m' } });
      expect(first.enqueued).toBe('inserted');
      if (time.exact) expect(first.createdAt.getTime()).toBe(time.now());
      await time.until(async () => (await scheduler.getTask(first.id))?.state === 'succeeded', 'the first digest runs', 0);
      if (time.exact) await time.pass(MINUTE - 1);
      // Finished, but created less than a minute ago: returned as it is, nothing runs.
      const within = await scheduler.schedule(time.now(), 'digest', { key: 'd', payload: 2, dedupe: { throttle: '1m' } });
      expect([within.enqueued, within.id, within.state, within.payload]).toEqual(['existing', first.id, 'succeeded', 1]);
      // A waiting one is returned too (a long period: a slow machine cannot outlast it).
      const later = await scheduler.schedule(time.now() + 10 * MINUTE, 'digest', { key: 'w', payload: 1, dedupe: { throttle: '1m' } });
      const kept = await scheduler.schedule(time.now(), 'digest', { key: 'w', payload: 2, dedupe: { throttle: '1m' } });
      expect([kept.enqueued, kept.id, kept.payload, kept.state]).toEqual(['existing', later.id, 1, 'waiting']);
      expect(seen).toEqual([1]);

      // Past the period: a new task is added (the finished one left as it ended), and its period starts at this add.
      const period = time.exact ? MINUTE : 300;
      const short = await scheduler.schedule(time.now(), 'digest', { key: 's', payload: 1, dedupe: { throttle: period } });
      await time.until(async () => (await scheduler.getTask(short.id))?.state === 'succeeded', 'the short one runs', 0);
      await time.pass(period);
      const before = Date.now();
      const renewed = await scheduler.schedule(time.now(), 'digest', { key: 's', payload: 2, dedupe: { throttle: period } });
      expect([renewed.enqueued, renewed.payload]).toEqual(['inserted', 2]);
      await afresh(scheduler, renewed, short);
      if (time.exact) expect(renewed.createdAt.getTime()).toBe(time.now());
      else expect(renewed.createdAt.getTime()).toBeGreaterThanOrEqual(before - 50);
      await time.until(() => seen.length === 3, 'the renewed one runs', 0);
      expect(seen).toEqual([1, 1, 2]);
    });

    it('throttle: past the period a waiting task is replaced (its period starts again); a running one is returned (in memory: a task is added beside either)', async () => {
      const env = await setup();
      const { time } = env;
      const { scheduler } = env.open();
      scheduler.define('idle', () => {});
      const period = time.exact ? MINUTE : 300;
      const first = await scheduler.schedule(time.now() + 10 * MINUTE, 'idle', { key: 'w', payload: 1, dedupe: { throttle: period } });
      await time.pass(period);
      const replaced = await scheduler.schedule(time.now() + 10 * MINUTE, 'idle', { key: 'w', payload: 2, dedupe: { throttle: period } });
      // In memory a new task is added beside the waiting one, which goes on.
      expect([replaced.enqueued, replaced.payload]).toEqual([caps.oneTaskPerKey ? 'replaced' : 'inserted', 2]);
      sameTask(replaced, first);
      if (!caps.oneTaskPerKey) expect((await scheduler.getTask(first.id))!.state).toBe('waiting');
      expect(replaced.createdAt.getTime()).toBeGreaterThan(first.createdAt.getTime());
      // The replacement started a period: the next add within it is turned away.
      const turned = await scheduler.schedule(time.now(), 'idle', { key: 'w', payload: 3, dedupe: { throttle: MINUTE } });
      expect([turned.enqueued, turned.payload]).toEqual(['existing', 2]);

      const { task, release } = await running(env, scheduler, 'held', 'busy');
      await time.pass(period);
      const again = await scheduler.schedule(time.now(), 'held', { key: 'busy', payload: 'second', dedupe: { throttle: period } });
      if (caps.oneTaskPerKey)
        expect([again.enqueued, again.id, again.state, again.payload]).toEqual(['existing', task.id, 'running', 'first']);
      // In memory a task is added beside the running one.
      else expect([again.enqueued, again.state, again.payload]).toEqual(['inserted', 'waiting', 'second']);
      release();
    });

    it('debounce: due its period after its `when`; each add replaces the waiting task and pushes it back; the last one runs once, after a quiet period', async () => {
      const env = await setup();
      const { time } = env;
      const { scheduler } = env.open();
      const seen: unknown[] = [];
      scheduler.define('reindex', (_ctx, payload) => void seen.push([payload, time.now()]));
      // Not started: nothing runs while the adds come (in real time they may be far apart on a slow machine).
      const period = time.exact ? 10_000 : 2_000;
      const at = time.now();
      const first = await scheduler.schedule(at, 'reindex', { key: 'doc', payload: 1, dedupe: { debounce: period } });
      expect([first.enqueued, first.runAt.getTime()]).toEqual(['inserted', at + period]);
      await time.pass(3_000);
      const second = await scheduler.schedule(time.now(), 'reindex', { key: 'doc', payload: 2, dedupe: { debounce: period } });
      expect([second.enqueued, second.payload]).toEqual(['replaced', 2]);
      sameTask(second, first);
      expect(second.runAt.getTime()).toBeGreaterThanOrEqual(first.runAt.getTime() + 3_000);
      // A later \`when\` is pushed back the same way.
      const far = time.now() + 10 * MINUTE;
      const third = await scheduler.schedule(far, 'reindex', { key: 'doc', payload: 3, dedupe: { debounce: period } });
      expect([third.enqueued, third.runAt.getTime()]).toEqual(['replaced', far + period]);
      const lastAt = time.now();
      const last = await scheduler.schedule(lastAt, 'reindex', { key: 'doc', payload: 4, dedupe: { debounce: '2s' } });
      expect([last.enqueued, last.runAt.getTime()]).toEqual(['replaced', lastAt + 2_000]);
      expect((await scheduler.listTasks({ state: 'waiting' })).map((task) => task.id)).toEqual([last.id]);
      // In memory each replaced task was cancelled.
      expect(await scheduler.listTasks()).toHaveLength(caps.oneTaskPerKey ? 1 : 4);

      // The last one wins, once, after the quiet period.
      await scheduler.start();
      if (time.exact) {
        await time.pass(last.runAt.getTime() - time.now() - 1);
        expect(seen).toEqual([]);
      }
      await time.until(() => seen.length === 1, 'the debounced task runs', 2_000);
      expect((seen[0] as [number, number])[0]).toBe(4);
      expect((seen[0] as [number, number])[1]).toBeGreaterThanOrEqual(last.runAt.getTime());
      if (time.exact) expect(seen[0]).toEqual([4, last.runAt.getTime()]);
      // The handler has returned; the outcome is stored a moment later (until then the task is running).
      await time.until(async () => (await scheduler.getTask(last.id))?.state === 'succeeded', 'the debounced task is stored succeeded', 0);
      // Finished: the next add is a new task, debounced again.
      const nextAt = time.now();
      const next = await scheduler.schedule(nextAt, 'reindex', { key: 'doc', payload: 5, dedupe: { debounce: period } });
      expect([next.enqueued, next.runAt.getTime()]).toEqual(['inserted', nextAt + period]);
      await afresh(scheduler, next, last);
    });

    it('debounce: a running task is left alone and returned (in memory: one is added beside it)', async () => {
      const env = await setup();
      const { scheduler } = env.open();
      const { task, release } = await running(env, scheduler, 'held', 'busy');
      const again = await scheduler.schedule(env.time.now(), 'held', { key: 'busy', payload: 'second', dedupe: { debounce: '1m' } });
      if (caps.oneTaskPerKey)
        expect([again.enqueued, again.id, again.state, again.payload]).toEqual(['existing', task.id, 'running', 'first']);
      // In memory a task is added beside the running one, due its period after its time.
      else
        expect([again.enqueued, again.state, again.payload, again.runAt.getTime()]).toEqual([
          'inserted',
          'waiting',
          'second',
          env.time.now() + MINUTE,
        ]);
      release();
    });

    itBatches(
      'scheduleMany: each item meets its key as its mode says, items of one key in order, each reporting the final row and its own add',
      async () => {
        const env = await setup();
        const { scheduler } = env.open();
        scheduler.define('idle', () => {});
        const t = env.time.now() + MINUTE;
        await scheduler.schedule(t, 'idle', { key: 'a', payload: 'a0' });
        const rows = await scheduler.scheduleMany([
          { when: t, name: 'idle', key: 'a', payload: 'a1', dedupe: 'keep' },
          { when: t, name: 'idle', key: 'b', payload: 'b1', dedupe: 'keep' },
          { when: t, name: 'idle', payload: 'none' },
          { when: t, name: 'idle', key: 'b', payload: 'b2', dedupe: 'keep' },
          { when: t, name: 'idle', key: 'c', payload: 'c1' },
          { when: t + 1, name: 'idle', key: 'c', payload: 'c2', dedupe: 'replace' },
          { when: t, name: 'idle', key: 'd', payload: 'd1', dedupe: { throttle: '1h' } },
          { when: t, name: 'idle', key: 'd', payload: 'd2', dedupe: { throttle: '1h' } },
        ]);
        expect(rows.map((row) => [row.key, row.payload, row.enqueued])).toEqual([
          ['a', 'a0', 'existing'],
          ['b', 'b1', 'inserted'],
          [null, 'none', 'inserted'],
          ['b', 'b1', 'existing'],
          ['c', 'c2', 'inserted'],
          ['c', 'c2', 'replaced'],
          ['d', 'd1', 'inserted'],
          ['d', 'd1', 'existing'],
        ]);
        expect(rows[3]!.id).toBe(rows[1]!.id);
        expect(await scheduler.getTask(rows[4]!.id)).toEqual(rows[4]);
        expect(await scheduler.listTasks()).toHaveLength(5);
      },
    );

    itShared(
      'ten stores adding one new key at once end as the mode promises: one task, one insert, the rest as the mode says',
      async () => {
        const env = await setup();
        const stores = await Promise.all(Array.from({ length: 10 }, () => env.openStore()));
        const at = Date.now() + MINUTE;
        const add = (mode: 'replace' | 'keep' | { throttle: number } | { debounce: number }, key: string) =>
          Promise.all(
            stores.map((store, i) =>
              store.addTask({
                name: 'w',
                key,
                payload: `${i}`,
                runAt: at,
                maxAttempts: 1,
                options: '{}',
                dedupe:
                  typeof mode === 'string'
                    ? { mode, period: 0 }
                    : 'throttle' in mode
                      ? { mode: 'throttle', period: mode.throttle }
                      : { mode: 'debounce', period: mode.debounce },
              }),
            ),
          );
        for (const [mode, replaced, existing] of [
          ['replace', 9, 0],
          ['keep', 0, 9],
          [{ throttle: MINUTE }, 0, 9],
          [{ debounce: MINUTE }, 9, 0],
        ] as const) {
          const key = `race:${JSON.stringify(mode)}`;
          const rows = await add(mode, key);
          const count = (what: string) => rows.filter((row) => row.enqueued === what).length;
          expect([count('inserted'), count('replaced'), count('existing')], key).toEqual([1, replaced, existing]);
          expect(new Set(rows.map((row) => row.id)).size).toBe(1);
          const [stored] = await stores[0]!.listTasks({ keyPrefix: key });
          // keep and throttle: the inserted one stays; replace and debounce: the last writer's payload.
          const inserted = rows.find((row) => row.enqueued === 'inserted')!;
          if (existing === 9) expect(stored!.payload).toBe(inserted.payload);
          expect(rows.filter((row) => row.enqueued === 'existing').every((row) => row.payload === inserted.payload)).toBe(true);
        }
        expect(await stores[0]!.listTasks({})).toHaveLength(4);
      },
    );

    it("'rerun': an add while the key's task runs adds one task that starts after that run ends, never beside it; later adds replace it (the last payload runs, once); with none running it replaces", async () => {
      const env = await setup();
      const { scheduler } = env.open();
      const held = gate();
      const runs: string[] = [];
      let active = 0;
      let most = 0;
      scheduler.define('sync', async (_ctx, payload: string) => {
        most = Math.max(most, ++active);
        runs.push(payload);
        if (payload === 'first') await held.wait();
        active--;
      });
      await scheduler.start();
      const rerun = (payload: string, when = env.time.now()) => scheduler.schedule(when, 'sync', { key: 's', dedupe: 'rerun', payload });
      const first = await rerun('first');
      await env.time.until(() => runs.length === 1, 'the first run starts', 0);
      const second = await rerun('second');
      const third = await rerun('third');
      expect([first.enqueued, second.enqueued, third.enqueued]).toEqual(['inserted', 'inserted', 'replaced']);
      expect(second.id).not.toBe(first.id);
      sameTask(third, second);
      // A store shows it blocked, waiting for the run it follows; in memory it is waiting.
      expect(third.state).toBe(caps.store ? 'blocked' : 'waiting');
      if (caps.store) expect((await scheduler.getTask(third.id))!.key).toBe('s');
      await env.time.pass(100);
      expect(runs).toEqual(['first']);
      held.release();
      await env.time.until(async () => (await scheduler.getTask(third.id))?.state === 'succeeded', 'the follower runs', 100);
      await env.time.pass(100);
      expect({ runs, most }).toEqual({ runs: ['first', 'third'], most: 1 });
      expect((await scheduler.getTask(first.id))!.state).toBe('succeeded');
      // None running: as 'replace'.
      const later = env.time.now() + MINUTE;
      const a = await rerun('a', later);
      const b = await rerun('b', later);
      expect([a.enqueued, b.enqueued]).toEqual(['inserted', 'replaced']);
      sameTask(b, a);
      if (caps.transactionsWithClient && env.db.connect !== undefined) {
        // Following writes the running task's row, which a caller's open transaction would lock until it ends.
        const client = await env.db.connect();
        try {
          expect(() => scheduler.schedule(later, 'sync', { key: 's', dedupe: 'rerun', payload: 'c', client } as never)).toThrow(
            /Expected no `client` with `dedupe: 'rerun'`/,
          );
        } finally {
          client.release();
        }
      }
    });

    itShared(
      "'rerun' from two stores at once (as two processes): triggers during a run give exactly one more run, never two at once",
      async () => {
        const env = await setup();
        const held = gate();
        const runs: string[] = [];
        let active = 0;
        let most = 0;
        const open = () => {
          const { scheduler } = env.open();
          scheduler.define('sync', async (_ctx, payload: string) => {
            most = Math.max(most, ++active);
            runs.push(payload);
            if (payload === 'first') await held.wait();
            active--;
          });
          return scheduler;
        };
        const [one, two] = [open(), open()];
        await Promise.all([one.start(), two.start()]);
        const rerun = (scheduler: Scheduler, payload: string) =>
          scheduler.schedule(env.time.now(), 'sync', { key: 'sync', dedupe: 'rerun', payload });
        await rerun(one, 'first');
        await env.time.until(() => runs.length === 1, 'the first run starts', 0);
        const added = await Promise.all(Array.from({ length: 10 }, (_, i) => rerun(i % 2 === 0 ? one : two, `trigger ${i}`)));
        expect(new Set(added.map((task) => task.id)).size).toBe(1);
        expect(added.filter((task) => task.enqueued === 'inserted')).toHaveLength(1);
        const follower = (await one.getTask(added[0]!.id))!;
        expect(follower.state).toBe('blocked');
        held.release();
        await env.time.until(async () => (await one.getTask(follower.id))?.state === 'succeeded', 'the follower runs', 100);
        await env.time.pass(200);
        expect(most).toBe(1);
        expect(runs).toHaveLength(2);
        expect(runs[1]).toBe(JSON.parse(JSON.stringify(follower.payload)));
      },
    );

    it('refuses bad dedupe values at the call, naming them; nothing is stored or disturbed', async () => {
      const env = await setup();
      const { scheduler } = env.open();
      scheduler.define('work', () => {});
      const t = env.time.now() + MINUTE;
      const kept = await scheduler.schedule(t, 'work', { key: 'k', payload: 1 });
      const bad: [object, RegExp, ErrorConstructor][] = [
        [{ dedupe: 'keep' }, /Expected a `key` with `dedupe: 'keep'`: deduplication is by key/, TypeError],
        [{ dedupe: { throttle: '1s' } }, /a `key` with `dedupe: \{ throttle: 1000 \}`/, TypeError],
        [
          { key: 'k', dedupe: 'skip' },
          /`dedupe` to be 'replace', 'keep', 'rerun', \{ throttle: duration \} or \{ debounce: duration \}, got "skip"/,
          RangeError,
        ],
        [{ key: 'k', dedupe: 5 }, /`dedupe` to be 'replace', 'keep'/, TypeError],
        [{ key: 'k', dedupe: null }, /`dedupe` to be 'replace', 'keep'/, TypeError],
        [{ key: 'k', dedupe: {} }, /`dedupe` to be .* \(one of them\), got an object with no key/, TypeError],
        [{ key: 'k', dedupe: { ttl: 5 } }, /got an object with keys `ttl`/, TypeError],
        [{ key: 'k', dedupe: { throttle: 5, debounce: 5 } }, /keys `throttle`, `debounce`/, TypeError],
        [{ key: 'k', dedupe: { throttle: 0 } }, /`dedupe.throttle` to be a finite duration of at least 1 ms, got 0/, RangeError],
        [{ key: 'k', dedupe: { debounce: -5 } }, /`dedupe.debounce`/, RangeError],
        [{ key: 'k', dedupe: { debounce: 'soon' } }, /`dedupe.debounce`/, RangeError],
        [{ key: 'k', dedupe: { throttle: Infinity } }, /`dedupe.throttle`/, RangeError],
        // A store's periods go up to ten years, its times to the year 9999; in memory, a day and the Date range.
        [
          { key: 'k', dedupe: { throttle: 1e12 } },
          caps.store ? /`dedupe.throttle` to be at most ten years/ : /`dedupe.throttle` to be at most a day/,
          RangeError,
        ],
        [
          { key: 'k', dedupe: { debounce: '1d' }, when: caps.store ? 253_402_300_000_000 : 8.64e15 },
          caps.store
            ? /the due time of a debounce \(when \+ dedupe.debounce\) of a stored task to be between years 1 and 9999/
            : /the debounced time to be within the Date range/,
          RangeError,
        ],
      ];
      for (const [{ when = t + 1, ...options }, message, kind] of bad as [{ when?: number }, RegExp, ErrorConstructor][]) {
        expect(() => scheduler.schedule(when, 'work', { payload: 2, ...options } as never), JSON.stringify(options)).toThrow(message);
        expect(() => scheduler.schedule(when, 'work', { payload: 2, ...options } as never)).toThrow(kind);
      }
      expect(await scheduler.listTasks()).toEqual([kept]);
    });

    itWhen(caps.batches && caps.storedJobs, 'needs batches and storedJobs: scheduleMany() and jobs by key')(
      'refuses a bad dedupe in a batch, naming the item, and on a stored job (one row per key already); nothing is stored',
      async () => {
        const env = await setup();
        const { scheduler } = env.open();
        scheduler.define('work', () => {});
        const t = env.time.now() + MINUTE;
        expect(() =>
          scheduler.scheduleMany([
            { when: t, name: 'work', key: 'k', payload: 3 },
            { when: t, name: 'work', key: 'j', dedupe: 'later' as never },
          ]),
        ).toThrow(/scheduleMany\(\) item 1: Expected `dedupe`/);
        // A stored job has one row per key already: dedupe is a task option.
        expect(() =>
          scheduler
            .every(1_000)
            .milliseconds()
            .run('work', { key: 'job', dedupe: 'keep' } as never),
        ).toThrow(/Unknown durable job option `dedupe`/);
        expect(await scheduler.listTasks()).toEqual([]);
        expect(await scheduler.listJobs()).toEqual([]);
      },
    );
  });
}
