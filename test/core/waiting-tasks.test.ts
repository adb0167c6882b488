import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { setup } from '../helpers.js';

describe('waitingTasks(limit)', () => {
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

  it('rejects a limit that is not a whole number', () => {
    const { scheduler } = setup();
    expect(() => scheduler.waitingTasks(-1)).toThrow(RangeError);
    expect(() => scheduler.waitingTasks(1.5)).toThrow(/`limit` to be an integer >= 0, got 1.5/);
  });
});
