// Issue 22 against models: concurrency groups (serial included), queue rate
// limits and pauses in an exact step-by-step reference model (synchronous
// tasks: a key's places are held through retry waits), and invariants with
// async tasks of random lengths, a small pool, queue concurrency and
// cancellations.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Scheduler, type RateLimit } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';

type Limit = { limit: number; interval: number };

interface Spec {
  due: number;
  priority: number;
  /** Concurrency group and the limit this task gives it (1: scheduled with `serial`). */
  key: string | undefined;
  keyLimit: number;
  rate: string | undefined;
  queue: string | undefined;
  fails: number;
  attempts: number;
  retryDelay: number;
}

interface Scenario {
  global: Limit | undefined;
  rates: Record<string, Limit>;
  /** Queue rate limits (q1, q2) and q1's pause: [pauseAt, resumeAt), odd times. */
  queueRates: Record<string, Limit | undefined>;
  pause: [number, number] | undefined;
  tasks: Spec[];
}

// Due times, intervals and retry delays are even, pause and resume odd: no
// start coincides with a pause or a resume before the resume (then there is
// no other), so the order of events at one instant never matters.
const even = (min: number, max: number) => fc.integer({ min: min / 2, max: max / 2 }).map((n) => n * 2);
const limit = fc.record({ limit: fc.integer({ min: 1, max: 3 }), interval: even(2, 30) });

const spec: fc.Arbitrary<Spec> = fc.record({
  due: even(0, 40),
  priority: fc.integer({ min: -1, max: 2 }),
  key: fc.constantFrom(undefined, 'k1', 'k2'),
  keyLimit: fc.integer({ min: 1, max: 3 }),
  rate: fc.constantFrom(undefined, 'r1', 'k1'),
  queue: fc.constantFrom(undefined, 'q1', 'q2'),
  fails: fc.integer({ min: 0, max: 2 }),
  attempts: fc.integer({ min: 1, max: 3 }),
  retryDelay: even(2, 20),
});

const scenario: fc.Arbitrary<Scenario> = fc.record({
  global: fc.option(limit, { nil: undefined }),
  rates: fc.record({ r1: limit, k1: limit }),
  queueRates: fc.record({ q1: fc.option(limit, { nil: undefined }), q2: fc.option(limit, { nil: undefined }) }),
  pause: fc.option(
    fc
      .tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 1, max: 60 }))
      .map(([a, b]): [number, number] => [2 * a + 1, 2 * (a + b) + 1]),
    { nil: undefined },
  ),
  tasks: fc.array(spec, { minLength: 1, maxLength: 25 }),
});

/**
 * The reference: at each millisecond, over and over, start the best
 * eligible due task (highest priority, then earliest due, then first
 * scheduled). Eligible: the scheduler-wide window has room; its queue is not
 * paused and its window has room; its concurrency group: it started before (it
 * holds a place through its retries), or fewer than the key's limit (the
 * last scheduled task's) hold one and it is the key's earliest due task that
 * has not started; its rate group: room, and it is the earliest due of the
 * key's tasks eligible so far.
 */
function simulate(s: Scenario, horizon: number): [number, number][] {
  const tasks = s.tasks.map((spec, i) => ({ ...spec, i, tries: 0, done: false }));
  type T = (typeof tasks)[number];
  const keyLimits = new Map<string, number>();
  for (const task of tasks) if (task.key !== undefined) keyLimits.set(task.key, task.keyLimit);
  const windows = new Map<string, number[]>();
  const starts: [number, number][] = [];
  const room = (key: string, rate: Limit | undefined, t: number) =>
    rate === undefined || (windows.get(key) ?? []).filter((at) => at > t - rate.interval).length < rate.limit;
  const earliest = (list: T[]) =>
    list.reduce<T | undefined>(
      (best, x) => (best === undefined || x.due < best.due || (x.due === best.due && x.i < best.i) ? x : best),
      undefined,
    );
  const paused = (queue: string | undefined, t: number) => queue === 'q1' && s.pause !== undefined && t >= s.pause[0] && t < s.pause[1];
  for (let t = 0; t <= horizon; t++) {
    for (;;) {
      if (!room('*', s.global, t)) break;
      const due = tasks.filter((x) => !x.done && x.due <= t);
      const keyOk = due.filter((x) => {
        if (x.key === undefined || x.tries > 0) return true;
        const holding = tasks.filter((y) => y.key === x.key && !y.done && y.tries > 0).length;
        return holding < keyLimits.get(x.key)! && earliest(due.filter((y) => y.key === x.key && y.tries === 0)) === x;
      });
      const queueOk = keyOk.filter(
        (x) => !paused(x.queue, t) && (x.queue === undefined || room(`queue:${x.queue}`, s.queueRates[x.queue], t)),
      );
      const ok = queueOk.filter(
        (x) => x.rate === undefined || (room(x.rate, s.rates[x.rate], t) && earliest(keyOk.filter((y) => y.rate === x.rate)) === x),
      );
      if (ok.length === 0) break;
      const best = ok.reduce((a, b) =>
        b.priority > a.priority || (b.priority === a.priority && (b.due < a.due || (b.due === a.due && b.i < a.i))) ? b : a,
      );
      starts.push([best.i, t]);
      for (const key of ['*', best.rate, best.queue === undefined ? undefined : `queue:${best.queue}`]) {
        if (key !== undefined) windows.set(key, [...(windows.get(key) ?? []), t]);
      }
      best.tries++;
      if (best.tries <= best.fails && best.tries < best.attempts) best.due = t + best.retryDelay;
      else best.done = true;
    }
  }
  return starts;
}

describe('concurrency groups and queues against a reference model', () => {
  it('start the same tasks at the same virtual times, in the same order', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const clock = new ManualClock(0);
        const queues: Record<string, { rate?: RateLimit }> = {};
        for (const name of ['q1', 'q2']) if (s.queueRates[name] !== undefined) queues[name] = { rate: s.queueRates[name] };
        const scheduler = new Scheduler({ clock, onError: () => {}, rate: s.global as RateLimit | undefined, queues });
        if (s.pause !== undefined) {
          const [pauseAt, resumeAt] = s.pause;
          clock.setTimer(() => scheduler.queue('q1').pause(), pauseAt);
          clock.setTimer(() => scheduler.queue('q1').resume(), resumeAt);
        }
        const starts: [number, number][] = [];
        s.tasks.forEach((task, i) => {
          let tries = 0;
          const key =
            task.key === undefined
              ? {}
              : task.keyLimit === 1
                ? { serial: task.key }
                : { concurrency: { group: task.key, limit: task.keyLimit } };
          scheduler.schedule(
            task.due,
            () => {
              starts.push([i, clock.now()]);
              if (++tries <= task.fails) throw new Error('planned failure');
            },
            {
              ...key,
              priority: task.priority,
              queue: task.queue,
              rate: task.rate === undefined ? undefined : { group: task.rate, ...s.rates[task.rate]! },
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

describe('concurrency groups and queues with async tasks, a small pool and cancellations', () => {
  it('never exceed a key or queue limit, keep due order within a key, start nothing in a paused queue, hold back no unrelated task, and leave nothing behind', async () => {
    const task = fc.record({
      due: fc.integer({ min: 0, max: 60 }),
      duration: fc.integer({ min: 0, max: 30 }),
      priority: fc.integer({ min: -1, max: 1 }),
      key: fc.constantFrom(undefined, 'a', 'b'),
      queue: fc.constantFrom(undefined, 'q1', 'q2'),
      cancelAt: fc.option(fc.integer({ min: 0, max: 80 }), { nil: undefined }),
    });
    const settings = fc.record({
      workers: fc.constantFrom(1, 2, 3, Infinity),
      keyLimits: fc.record({ a: fc.integer({ min: 1, max: 3 }), b: fc.integer({ min: 1, max: 3 }) }),
      q1: fc.integer({ min: 1, max: 3 }),
      q2rate: fc.option(fc.record({ limit: fc.integer({ min: 1, max: 3 }), interval: fc.integer({ min: 1, max: 30 }) }), {
        nil: undefined,
      }),
      pause: fc.option(fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 60 })), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(settings, fc.array(task, { maxLength: 30 }), async (set, specs) => {
        const clock = new ManualClock(0);
        const scheduler = new Scheduler({
          clock,
          workers: set.workers,
          onError: () => {},
          queues: { q1: { concurrency: set.q1 }, q2: { rate: set.q2rate } },
        });
        const running = new Map<string, number>();
        const violations: string[] = [];
        const starts: { i: number; at: number }[] = [];
        let q1Paused = false;
        const enter = (name: string, limit: number) => {
          const n = (running.get(name) ?? 0) + 1;
          running.set(name, n);
          if (n > limit) violations.push(`${name}: ${n} > ${limit}`);
        };
        const leave = (name: string) => running.set(name, running.get(name)! - 1);
        const handles = specs.map((spec, i) =>
          scheduler.schedule(
            spec.due,
            () => {
              starts.push({ i, at: clock.now() });
              if (spec.queue === 'q1' && q1Paused) violations.push(`task ${i} started in paused q1 at ${clock.now()}`);
              const names: [string, number][] = [];
              if (spec.key !== undefined) names.push([`key:${spec.key}`, set.keyLimits[spec.key]]);
              if (spec.queue === 'q1') names.push(['queue:q1', set.q1]);
              for (const [name, max] of names) enter(name, max);
              const end = () => names.forEach(([name]) => leave(name));
              if (spec.duration === 0) return end();
              return new Promise<void>((resolve) =>
                clock.setTimer(() => {
                  end();
                  resolve();
                }, spec.duration),
              );
            },
            {
              priority: spec.priority,
              queue: spec.queue,
              concurrency: spec.key === undefined ? undefined : { group: spec.key, limit: set.keyLimits[spec.key] },
            },
          ),
        );
        specs.forEach((spec, i) => {
          if (spec.cancelAt !== undefined) clock.setTimer(() => handles[i]!.cancel(), spec.cancelAt);
        });
        if (set.pause !== undefined) {
          const [at, length] = set.pause;
          clock.setTimer(() => {
            void scheduler.queue('q1').pause();
            q1Paused = true;
          }, at);
          clock.setTimer(() => {
            q1Paused = false;
            void scheduler.queue('q1').resume();
          }, at + length);
        }
        await clock.advance(5_000);
        expect(violations).toEqual([]);
        for (const key of ['a', 'b']) {
          const order = starts.filter((s) => specs[s.i]!.key === key).map((s) => s.i);
          expect(order).toEqual([...order].sort((p, q) => specs[p]!.due - specs[q]!.due || p - q));
        }
        const q2 = starts.filter((s) => specs[s.i]!.queue === 'q2').map((s) => s.at);
        if (set.q2rate !== undefined) {
          const { limit: max, interval } = set.q2rate;
          expect(q2.every((at, k) => k < max || q2[k - max]! + interval <= at)).toBe(true);
        }
        // With workers to spare, a task with no key in a queue with no limits starts when due, whatever the others wait for.
        if (set.workers === Infinity) {
          for (const s of starts) if (specs[s.i]!.key === undefined && specs[s.i]!.queue === undefined) expect(s.at).toBe(specs[s.i]!.due);
        }
        expect(handles.every((h) => h.state === 'succeeded' || h.state === 'cancelled')).toBe(true);
        expect(scheduler.stats()).toMatchObject({ waiting: 0, due: 0, running: 0 });
        expect((await scheduler.queues()).every((q) => q.counts.waiting === 0 && q.counts.running === 0)).toBe(true);
        expect(clock.pendingTimers).toBe(0);
      }),
      { numRuns: 300, interruptAfterTimeLimit: 20_000 },
    );
  });
});
