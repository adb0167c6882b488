import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { heapUsed } from '../helpers.js';

describe('memory', () => {
  it('scheduling then cancelling 1,000,000 tasks gives their memory back', () => {
    const clock = new ManualClock(0);
    const scheduler = new Scheduler({ clock });
    const noop = () => {};
    const before = heapUsed();
    const controller = new AbortController();
    // Far-future tasks, half cancelled one by one and half through one shared signal.
    for (let i = 0; i < 1_000_000; i++) {
      const task = scheduler.after(86_400_000 + i, noop, i % 2 === 0 ? undefined : { signal: controller.signal });
      if (i % 2 === 0) task.cancel();
    }
    const loaded = heapUsed();
    controller.abort();
    expect(scheduler.size).toBe(0);
    const after = heapUsed();
    // While they were waiting the tasks held tens of MB; afterwards less than 2 MB may remain.
    expect(loaded - before).toBeGreaterThan(20_000_000);
    expect(after - before).toBeLessThan(2_000_000);
  });
});
