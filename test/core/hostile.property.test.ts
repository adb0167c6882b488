import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DateTime } from 'luxon';
import { TaskheapError, type Task } from '../../src/index.js';
import { START, setup } from '../helpers.js';

// Values a careless or hostile caller might pass anywhere.
const odd = fc.oneof(
  fc.anything(),
  fc.double(),
  fc.integer(),
  fc.string({ maxLength: 30 }),
  fc.constantFrom(
    1e300,
    -1e300,
    2 ** 53,
    -(2 ** 53),
    8.64e15,
    8.64e15 + 1,
    -0,
    NaN,
    Infinity,
    3e15,
    Number.MAX_SAFE_INTEGER,
    0,
    -1,
    1.5,
    '2026-12-24T18:00:00Z',
    '2026-12-24T18:00:00',
    '2026-13-01T00:00:00Z',
    'success',
    'sucess',
    'toString',
    '__proto__',
    'idle',
    new Date(NaN),
    new Date(START + 1_000),
    DateTime.invalid('hostile'),
    DateTime.fromMillis(START),
    null,
    undefined,
    Symbol('s'),
    10n,
  ),
);

// Task functions, including ones whose return value is hostile.
const fns = fc.constantFrom<unknown>(
  () => 1,
  async () => 1,
  () => {
    throw new Error('sync');
  },
  () => ({
    then() {
      throw new Error('then throws');
    },
  }),
  () => ({
    get then() {
      throw new Error('getter throws');
    },
  }),
  () => ({ then: 42 }),
  () => ({
    then(ok: (v: unknown) => void) {
      ok(1);
      ok(2);
    },
  }),
  () => Promise.reject(new Error('async')),
  'not a function',
  undefined,
  null,
);

// Listeners that do not throw: a throwing listener surfaces as an uncaught exception by design.
const listeners = fc.constantFrom<unknown>(() => {}, undefined, null, 'listener', 42);

const units = fc.constantFrom('milliseconds', 'seconds', 'minutes', 'hours', 'days', 'weeks', 'monday', 'weekday', 'weekend', 'nope');

const call = fc.oneof(
  fc.record({ kind: fc.constant('schedule' as const), when: odd, fn: fns, options: fc.option(odd) }),
  fc.record({ kind: fc.constant('after' as const), delay: odd, fn: fns }),
  fc.record({ kind: fc.constant('every' as const), n: odd, unit: units, fn: fns, options: fc.option(odd), nextRuns: odd }),
  fc.record({ kind: fc.constant('once' as const), when: odd, listener: fc.option(listeners) }),
  fc.record({ kind: fc.constant('on' as const), event: odd, listener: listeners }),
  fc.record({ kind: fc.constant('workers' as const), value: odd }),
);

function isClearError(error: unknown): boolean {
  return error instanceof TypeError || error instanceof RangeError || error instanceof TaskheapError;
}

describe('hostile calls against the public API', () => {
  it('either throw a clear error at the call or succeed, and never disturb already-scheduled work', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(call, { maxLength: 12 }), async (calls) => {
        const { clock, scheduler } = setup();
        const seen: [number, number][] = [];
        const sentinels: Task[] = [];
        for (let i = 0; i < 5; i++) {
          sentinels.push(scheduler.after((i + 1) * 60_000, () => void seen.push([i, clock.now()])));
        }
        for (const c of calls) {
          try {
            const s = scheduler as unknown as Record<string, (...args: unknown[]) => unknown>;
            if (c.kind === 'schedule') s.schedule!(c.when, c.fn, c.options ?? undefined);
            else if (c.kind === 'after') s.after!(c.delay, c.fn);
            else if (c.kind === 'every') {
              const builder = s.every!(c.n) as Record<string, () => { run(fn: unknown, o: unknown): { nextRuns(n: unknown): unknown } }>;
              const job = builder[c.unit]!().run(c.fn, c.options ?? undefined);
              job.nextRuns(c.nextRuns);
            } else if (c.kind === 'once') {
              if (c.listener === null) (s.once!(c.when) as { run(fn: unknown): unknown }).run(() => {});
              else s.once!(c.when, c.listener);
            } else if (c.kind === 'on') s.on!(c.event, c.listener);
            else scheduler.workers = c.value as number;
          } catch (error) {
            if (!isClearError(error)) throw error;
          }
        }
        expect(sentinels.map((task) => [task.state, task.runAt.getTime()])).toEqual(
          sentinels.map((_, i) => ['waiting', START + (i + 1) * 60_000]),
        );
        if (scheduler.workers < 1) throw new Error('workers broken');
        await clock.advance(5 * 60_000);
        expect(seen).toEqual([0, 1, 2, 3, 4].map((i) => [i, START + (i + 1) * 60_000]));
        await scheduler.close();
      }),
      { numRuns: 200, interruptAfterTimeLimit: 8_000 },
    );
  }, 30_000);
});
