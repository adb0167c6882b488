import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Queue, type RateLimit, Scheduler } from '../../src/index.js';
import { RateWindow } from '../../src/core/rate-window.js';
import { ManualClock } from '../../src/testing.js';

interface Spec {
  due: number;
  priority: number;
  serial: string | undefined;
  /** The rate group; its limit is the scenario's for that key. */
  rate: string | undefined;
  /** Failed attempts before one succeeds (attempts allowed: `attempts`). */
  fails: number;
  attempts: number;
  retryDelay: number;
}

interface Scenario {
  global: { limit: number; interval: number } | undefined;
  limits: Record<string, { limit: number; interval: number }>;
  tasks: Spec[];
}

const limit = fc.record({ limit: fc.integer({ min: 1, max: 3 }), interval: fc.integer({ min: 1, max: 30 }) });

// Any mix: serial groups and rate groups overlap (a rate group shared by tasks of
// several serial groups, a serial group with or without a rate group), and any task
// may fail and retry.
const spec: fc.Arbitrary<Spec> = fc.record({
  due: fc.integer({ min: 0, max: 40 }),
  priority: fc.integer({ min: -1, max: 2 }),
  serial: fc.constantFrom(undefined, 's1', 's2'),
  rate: fc.constantFrom(undefined, 's1', 'r1', 'r2'),
  fails: fc.integer({ min: 0, max: 2 }),
  attempts: fc.integer({ min: 1, max: 3 }),
  retryDelay: fc.integer({ min: 1, max: 20 }),
});

const scenario: fc.Arbitrary<Scenario> = fc.record({
  global: fc.option(limit, { nil: undefined }),
  limits: fc.record({ s1: limit, s2: limit, r1: limit, r2: limit }),
  tasks: fc.array(spec, { minLength: 1, maxLength: 25 }),
});

/**
 * The reference: at each millisecond, over and over, start the best eligible
 * due task (highest priority, then earliest due, then first scheduled), where
 * eligible means the scheduler-wide window has room, its serial group is free
 * (or held by itself) and it is the earliest due task of that key, and its
 * rate group's window has room and it is the earliest due task of that key
 * among those eligible so far. Tasks are synchronous: a run ends as it starts.
 */
function simulate(s: Scenario, horizon: number): [number, number][] {
  const tasks = s.tasks.map((spec, i) => ({ ...spec, i, tries: 0, done: false }));
  type T = (typeof tasks)[number];
  const holders = new Map<string, number>();
  const windows = new Map<string, number[]>();
  const starts: [number, number][] = [];
  const room = (key: string, rate: { limit: number; interval: number }, t: number) =>
    (windows.get(key) ?? []).filter((at) => at > t - rate.interval).length < rate.limit;
  const earliest = (list: T[]) =>
    list.reduce<T | undefined>(
      (best, x) => (best === undefined || x.due < best.due || (x.due === best.due && x.i < best.i) ? x : best),
      undefined,
    );
  for (let t = 0; t <= horizon; t++) {
    for (;;) {
      if (s.global !== undefined && !room('*', s.global, t)) break;
      const due = tasks.filter((x) => !x.done && x.due <= t);
      const serialOk = due.filter(
        (x) =>
          x.serial === undefined ||
          holders.get(x.serial) === x.i ||
          (!holders.has(x.serial) && earliest(due.filter((y) => y.serial === x.serial)) === x),
      );
      const ok = serialOk.filter(
        (x) => x.rate === undefined || (room(x.rate, s.limits[x.rate]!, t) && earliest(serialOk.filter((y) => y.rate === x.rate)) === x),
      );
      if (ok.length === 0) break;
      const best = ok.reduce((a, b) =>
        b.priority > a.priority || (b.priority === a.priority && (b.due < a.due || (b.due === a.due && b.i < a.i))) ? b : a,
      );
      starts.push([best.i, t]);
      for (const key of ['*', best.rate]) if (key !== undefined) windows.set(key, [...(windows.get(key) ?? []), t]);
      best.tries++;
      if (best.serial !== undefined) holders.set(best.serial, best.i);
      if (best.tries <= best.fails && best.tries < best.attempts) {
        best.due = t + best.retryDelay;
      } else {
        best.done = true;
        if (best.serial !== undefined) holders.delete(best.serial);
      }
    }
  }
  return starts;
}

describe('rate limits, serial groups and priorities against a reference model', () => {
  it('start the same tasks at the same virtual times, in the same order', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const clock = new ManualClock(0);
        const scheduler = new Scheduler({ clock, onError: () => {}, rate: s.global as RateLimit | undefined });
        const starts: [number, number][] = [];
        s.tasks.forEach((task, i) => {
          let tries = 0;
          scheduler.schedule(
            task.due,
            () => {
              starts.push([i, clock.now()]);
              if (++tries <= task.fails) throw new Error('planned failure');
            },
            {
              priority: task.priority,
              serial: task.serial,
              rate: task.rate === undefined ? undefined : { group: task.rate, ...s.limits[task.rate]! },
              retry: { attempts: task.attempts, delay: task.retryDelay, backoff: 'fixed' },
            },
          );
        });
        const horizon = 2_000;
        await clock.advance(horizon);
        expect(starts).toEqual(simulate(s, horizon));
        expect(scheduler.size).toBe(0);
        await scheduler.close();
      }),
      { numRuns: 300, interruptAfterTimeLimit: 20_000 },
    );
  });
});

describe('rate limits and serial groups under a limited pool, async tasks and cancellations', () => {
  it('never exceed a window, never overlap a serial group, keep due order within a serial group, and leave nothing behind', async () => {
    const task = fc.record({
      due: fc.integer({ min: 0, max: 60 }),
      duration: fc.integer({ min: 0, max: 30 }),
      priority: fc.integer({ min: -1, max: 1 }),
      serial: fc.constantFrom(undefined, 'a', 'b'),
      rate: fc.constantFrom(undefined, 'a', 'x'),
      cancelAt: fc.option(fc.integer({ min: 0, max: 80 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.option(limit, { nil: undefined }),
        limit,
        fc.array(task, { maxLength: 30 }),
        async (workers, global, keyed, specs) => {
          const clock = new ManualClock(0);
          const scheduler = new Scheduler({ clock, workers, onError: () => {}, rate: global });
          const starts: { i: number; at: number }[] = [];
          const holding = new Map<string, number>();
          let overlap = false;
          const handles = specs.map((spec, i) =>
            scheduler.schedule(
              spec.due,
              () => {
                starts.push({ i, at: clock.now() });
                if (spec.serial !== undefined) {
                  if (holding.has(spec.serial)) overlap = true;
                  holding.set(spec.serial, i);
                }
                const end = () => {
                  if (spec.serial !== undefined) holding.delete(spec.serial);
                };
                if (spec.duration === 0) return end();
                return new Promise<void>((resolve) =>
                  clock.setTimer(() => {
                    end();
                    resolve();
                  }, spec.duration),
                );
              },
              { priority: spec.priority, serial: spec.serial, rate: spec.rate === undefined ? undefined : { group: spec.rate, ...keyed } },
            ),
          );
          specs.forEach((spec, i) => {
            if (spec.cancelAt !== undefined) clock.setTimer(() => handles[i]!.cancel(), spec.cancelAt);
          });
          await clock.advance(5_000);
          expect(overlap).toBe(false);
          const within = (list: number[], rate: { limit: number; interval: number }) =>
            list.every((at, k) => k < rate.limit || list[k - rate.limit]! + rate.interval <= at);
          if (global !== undefined)
            expect(
              within(
                starts.map((s) => s.at),
                global,
              ),
            ).toBe(true);
          for (const key of ['a', 'x'])
            expect(
              within(
                starts.filter((s) => specs[s.i]!.rate === key).map((s) => s.at),
                keyed,
              ),
            ).toBe(true);
          for (const key of ['a', 'b']) {
            const order = starts.filter((s) => specs[s.i]!.serial === key).map((s) => s.i);
            const sorted = [...order].sort((p, q) => specs[p]!.due - specs[q]!.due || p - q);
            expect(order).toEqual(sorted);
          }
          // Every task ran or was cancelled; nothing waits, no state or timer is left.
          expect(handles.every((h) => h.state === 'succeeded' || h.state === 'cancelled')).toBe(true);
          expect(scheduler.stats()).toMatchObject({ waiting: 0, due: 0, running: 0 });
          expect(clock.pendingTimers).toBe(0);
        },
      ),
      { numRuns: 300, interruptAfterTimeLimit: 20_000 },
    );
  });
});

describe('a rate limit changed at run time against the exact count', () => {
  /** Allowed at `t` under `rate`: fewer than `limit` of `starts` in (t - interval, t]. */
  const room = (starts: number[], rate: { limit: number; interval: number }, t: number) => {
    let count = 0;
    for (const at of starts) if (at > t - rate.interval && at <= t) count++;
    return count < rate.limit;
  };
  const byTime = <T extends { at: number }>(list: T[]) => [...list].sort((a, b) => a.at - b.at);

  it('one change (larger or smaller limit, longer or shorter interval) with tasks waiting: starts come when the exact count allows', async () => {
    const change = fc.record({
      at: fc.integer({ min: 0, max: 150 }),
      limit: fc.integer({ min: 1, max: 5 }),
      interval: fc.integer({ min: 1, max: 80 }),
    });
    // The scheduler's rate, a queue's or a key's: one window, three ways to change it.
    const where = fc.constantFrom('scheduler', 'queue', 'key');
    await fc.assert(
      fc.asyncProperty(limit, change, where, async (first, { at, ...next }, where) => {
        // Enough that some still wait at the change (at most 3 start a millisecond before it); a key's
        // limit changes with a task naming it: one more.
        const many = 500;
        const tasks = where === 'key' ? many + 1 : many;
        const horizon = 400;
        // The reference: at each millisecond, start while the limit in force has room; the change comes
        // after the starts the old limit allowed at its millisecond, and its own follow.
        const expected: number[] = [];
        for (let t = 0; t <= horizon; t++) {
          while (expected.length < tasks && room(expected, t <= at ? first : next, t)) expected.push(t);
          if (t === at) while (expected.length < tasks && room(expected, next, t)) expected.push(t);
        }
        const clock = new ManualClock(0);
        const scheduler = new Scheduler({ clock, rate: where === 'scheduler' ? first : undefined });
        const queue = scheduler.queue('q') as Queue;
        if (where === 'queue') queue.rate = first;
        const starts: number[] = [];
        const run = () => void starts.push(clock.monotonic());
        const options = where === 'queue' ? { queue: 'q' } : where === 'key' ? { rate: { group: 'k', ...first } } : {};
        for (let i = 0; i < many; i++) scheduler.after(0, run, options);
        await clock.advance(at);
        if (where === 'scheduler') scheduler.rate = next;
        else if (where === 'queue') queue.rate = next;
        else scheduler.after(0, run, { rate: { group: 'k', ...next } });
        await clock.advance(horizon - at);
        expect(starts).toEqual(expected);
        await scheduler.close();
      }),
      { numRuns: 500, interruptAfterTimeLimit: 20_000 },
    );
  });

  it('with any starts and any changes (a limit removed too), a start never exceeds the limit in force', async () => {
    // Few limits and many changes, so that one comes back with another interval, starts sparse and dense.
    const at = fc.integer({ min: 0, max: 40 });
    const set = fc.record({ at, limit: fc.integer({ min: 1, max: 3 }), interval: fc.integer({ min: 1, max: 20 }) });
    const unset = fc.record({ at, limit: fc.constant(undefined), interval: fc.constant(0) });
    await fc.assert(
      fc.asyncProperty(
        fc.option(limit, { nil: undefined }),
        fc.array(fc.oneof({ arbitrary: set, weight: 4 }, { arbitrary: unset, weight: 1 }), { maxLength: 6 }),
        fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 30 }),
        async (first, unsorted, dues) => {
          const changes = byTime(unsorted);
          const clock = new ManualClock(0);
          const scheduler = new Scheduler({ clock, rate: first });
          let rate = first;
          // Each start with the limit in force when it was made.
          const starts: { at: number; rate: typeof rate }[] = [];
          for (const due of dues) scheduler.after(due, () => void starts.push({ at: clock.monotonic(), rate }));
          for (const { at, limit, interval } of changes) {
            await clock.advance(at - clock.monotonic());
            rate = limit === undefined ? undefined : { limit, interval };
            scheduler.rate = rate;
            await clock.advance(0);
          }
          await clock.advance(100_000);
          expect(starts).toHaveLength(dues.length);
          starts.forEach((start, k) => {
            if (start.rate === undefined) return;
            const before = starts.slice(0, k).map((s) => s.at);
            expect(room(before, start.rate, start.at), `start ${k} at ${start.at}`).toBe(true);
          });
          await scheduler.close();
        },
      ),
      { numRuns: 2_000, interruptAfterTimeLimit: 20_000 },
    );
  });
  it('the window alone: any starts (with room or not), any changes, never lets a start exceed the limit', () => {
    const step = fc.integer({ min: 0, max: 5 });
    const op = fc.oneof(
      // A start, made only with room unless `anyway` (a limit removed, or not enforced).
      fc.record({ step, anyway: fc.boolean() }),
      fc.record({ step, limit: fc.integer({ min: 1, max: 4 }), interval: fc.integer({ min: 1, max: 30 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3 }), fc.array(op, { maxLength: 120 }), (before, ops) => {
        // Starts counted before any limit (as a flow counts those made before it exists), at 0.
        const window = new RateWindow(0, 0, before, before > 0 ? 0 : -Infinity);
        const starts: number[] = new Array<number>(before).fill(0);
        let rate = { limit: 0, interval: 0 };
        let t = 0;
        for (const o of ops) {
          t += o.step;
          if ('limit' in o) {
            window.resize(o.limit, o.interval, t);
            rate = o;
            continue;
          }
          if (rate.limit > 0) {
            if (window.hasRoom(t)) expect(room(starts, rate, t), `a start at ${t}`).toBe(true);
            else expect(window.freeAt()).toBeGreaterThan(t);
          }
          if (o.anyway || rate.limit === 0 || window.hasRoom(t)) {
            window.record(t);
            starts.push(t);
          }
        }
      }),
      { numRuns: 3_000 },
    );
  });
});
