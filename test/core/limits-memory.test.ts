import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { heapUsed } from '../helpers.js';

describe('keys with no waiting work cost nothing', () => {
  it('100,000 rate, serial or concurrency, and dedupe keys, each used once: their state is gone once their windows expire', async () => {
    const clock = new ManualClock(0);
    const scheduler = new Scheduler({ clock, workers: Infinity });
    const noop = () => {};
    // Warm up: the gate exists from the first such task on, and a burst of
    // 100,000 plain tasks grows the heaps' arrays (8 B a slot) to their size.
    scheduler.after(0, noop, { serial: 'warm', rate: { group: 'warm', limit: 1, interval: 1 } });
    for (let i = 0; i < 100_000; i++) scheduler.after(0, noop);
    await clock.advance(10);
    const before = heapUsed();
    for (let i = 0; i < 100_000; i++) {
      const key = i % 2 === 0 ? { serial: `chat:${i}` } : { concurrency: { group: `chat:${i}`, limit: 2 } };
      const dedupe = i % 3 === 0 ? { throttle: 500 } : 'replace';
      scheduler.after(0, noop, {
        ...key,
        queue: `queue:${i % 4}`,
        key: `chat:${i}`,
        dedupe,
        rate: { group: `chat:${i}`, limit: 1, interval: 1_000 },
      });
    }
    await clock.advance(0);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, succeeded: 200_001 });
    // Within their windows the rate groups still count their starts.
    const held = heapUsed() - before;
    // Windows expired: a sweep (when new keys appear) drops them.
    await clock.advance(1_000);
    scheduler.after(0, noop, { rate: { group: 'new', limit: 1, interval: 1 } });
    await clock.advance(10);
    const after = heapUsed() - before;
    expect(held).toBeGreaterThan(5_000_000);
    // Under 20 B per key once dropped (they held hundreds each): what is left
    // is the engine's own noise, which differs by Node version (just over
    // 1 MB on Node 22 and 24, under it on 20).
    expect(after).toBeLessThan(2_000_000);
    expect(after).toBeLessThan(held / 20);
    await scheduler.close();
  });
});
