// The adaptive prefetch's policy (src/durable/prefetch.ts), fed the real
// time measurements it would get from the claimer and the dispatcher: what
// a process holds beyond its free workers decides whether an idle process
// can run work another has claimed (issue 23) and whether short tasks wait
// for the database (issue 27).
import { describe, expect, it } from 'vitest';
import type { TaskLoop } from '../../src/core/loop.js';
import { Prefetch } from '../../src/durable/prefetch.js';
import type { Store } from '../../src/durable/store.js';

function policy(workers: number, prefetch?: number): Prefetch {
  return new Prefetch({ workers } as TaskLoop, { prefetch } as Store);
}

describe('the adaptive prefetch', () => {
  it("holds the workers' worth ahead until a task has finished", () => {
    expect(policy(4).capacity()).toBe(8);
  });

  it('claims none ahead for tasks long next to a claim: only what the workers can start', () => {
    const prefetch = policy(4);
    prefetch.claimed(2);
    prefetch.ran(300);
    expect(prefetch.capacity()).toBe(4);
    expect(prefetch.refill()).toBe(2);
  });

  it('claims two round trips of short tasks ahead, at most 32 × workers and 1,000', () => {
    const prefetch = policy(16);
    prefetch.claimed(5);
    prefetch.ran(0.5);
    // 2 round trips × 16 workers × 5 ms / 0.5 ms = 320 ahead.
    expect(prefetch.capacity()).toBe(16 + 320);
    prefetch.claimed(5_000);
    expect(prefetch.capacity()).toBe(16 + 512);
    const many = policy(64);
    many.claimed(50);
    many.ran(0.1);
    expect(many.capacity()).toBe(64 + 1_000);
  });

  it('a prefetch given is kept, whatever it measures', () => {
    const prefetch = policy(4, 0);
    prefetch.claimed(5);
    prefetch.ran(0.1);
    expect(prefetch.capacity()).toBe(4);
    expect(policy(4, 100).capacity()).toBe(104);
  });
});
