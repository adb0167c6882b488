import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { setup } from '../helpers.js';

describe('waitingTasks(limit or filter)', () => {
  it('gives the same tasks, in the same order, as the first `limit` of the full sorted list', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ delay: fc.integer({ min: 0, max: 50 }), cancel: fc.boolean() }), { maxLength: 200 }),
        fc.integer({ min: 0, max: 250 }),
        (plan, limit) => {
          const { scheduler } = setup();
          const tasks = plan.map(({ delay }) => scheduler.after(delay, () => {}));
          plan.forEach(({ cancel }, i) => cancel && tasks[i]!.cancel());
          const all = scheduler.waitingTasks().map((task) => task.id);
          expect(scheduler.waitingTasks(limit).map((task) => task.id)).toEqual(all.slice(0, limit));
          void scheduler.close();
        },
      ),
      { numRuns: 200 },
    );
  });

  it('rejects a limit that is not a whole number, and a filter with a bad or unknown field', () => {
    const { scheduler } = setup();
    expect(() => scheduler.waitingTasks(-1)).toThrow(RangeError);
    expect(() => scheduler.waitingTasks(1.5)).toThrow(/`limit` to be an integer >= 0, got 1.5/);
    expect(() => scheduler.waitingTasks({ limit: -1 })).toThrow(/`limit` to be an integer >= 0, got -1/);
    expect(() => scheduler.waitingTasks({ keyPrefix: 7 as never })).toThrow(/`keyPrefix` to be a string, got 7/);
    expect(() => scheduler.waitingTasks({ prefix: 'a' } as never)).toThrow(TypeError);
  });

  it('with keyPrefix: the waiting tasks whose key starts with it, earliest first, at most `limit`; a task shows its key', () => {
    const { scheduler } = setup();
    const snooze = (chat: number, id: number, delay: number) => scheduler.after(delay, () => {}, { key: `remind:${chat}:${id}` });
    const late = snooze(1, 1, 3_000);
    const other = snooze(2, 1, 1_000);
    const early = snooze(1, 2, 2_000);
    const keyless = scheduler.after(500, () => {});
    expect(early.key).toBe('remind:1:2');
    expect(keyless.key).toBeUndefined();
    expect(scheduler.waitingTasks({ keyPrefix: 'remind:1:' })).toEqual([early, late]);
    expect(scheduler.waitingTasks({ keyPrefix: 'remind:1:', limit: 1 })).toEqual([early]);
    expect(scheduler.waitingTasks({ keyPrefix: '' })).toEqual([other, early, late]);
    // A snooze: the same key, a later time, replaces the waiting task.
    const snoozed = snooze(1, 2, 5_000);
    expect(snoozed.enqueued).toBe('replaced');
    expect(scheduler.waitingTasks({ keyPrefix: 'remind:1:' })).toEqual([late, snoozed]);
    void scheduler.close();
  });
});
