import { describe, expect, it } from 'vitest';
import { gate, setup, worker } from '../helpers.js';

/** The most entries of `log` (`x+t` / `x-t`) whose label starts with `prefix` running at once. */
function peak(log: string[], prefix: string): number {
  let now = 0;
  let max = 0;
  for (const entry of log) {
    if (!entry.startsWith(prefix)) continue;
    now += entry.includes('+') ? 1 : -1;
    max = Math.max(max, now);
  }
  return max;
}

describe('concurrency groups', () => {
  it('at most `limit` tasks of a key run at once; a full key holds back neither other keys nor other tasks', async () => {
    const { clock, scheduler } = setup({ workers: 10 });
    const log: string[] = [];
    const task = worker(clock, log);
    for (let i = 0; i < 6; i++) scheduler.after(0, task(`a${i}`, 100), { concurrency: { group: 'tenant:a', limit: 2 } });
    for (let i = 0; i < 2; i++) scheduler.after(0, task(`b${i}`, 100), { concurrency: { group: 'tenant:b', limit: 2 } });
    scheduler.after(0, task('u', 100));
    await clock.advance(0);
    expect(log).toEqual(['a0+0', 'a1+0', 'b0+0', 'b1+0', 'u+0']);
    expect(scheduler.stats()).toMatchObject({ running: 5, waiting: 4 });
    await clock.advance(1_000);
    expect(log.filter((e) => e.startsWith('a') && e.includes('+'))).toEqual(['a0+0', 'a1+0', 'a2+100', 'a3+100', 'a4+200', 'a5+200']);
    expect(peak(log, 'a')).toBe(2);
  });

  it("a key's tasks start in due order (then scheduling order); priority does not reorder them", async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const order: string[] = [];
    const hold = gate();
    scheduler.after(0, () => hold.promise);
    const key = { group: 'k', limit: 2 };
    scheduler.after(30, () => void order.push('k30'), { concurrency: key, priority: 9 });
    scheduler.after(10, () => void order.push('k10'), { concurrency: key, priority: -5 });
    scheduler.after(20, () => void order.push('k20'), { concurrency: key, priority: 5 });
    scheduler.after(10, () => void order.push('k10b'), { concurrency: key });
    scheduler.after(15, () => void order.push('other'), { priority: 1 });
    await clock.advance(50);
    hold.open();
    await clock.advance(0);
    // The key's next task competes by its own priority (-5 < 1): 'other' first, then the key in due order.
    expect(order).toEqual(['other', 'k10', 'k10b', 'k20', 'k30']);
  });

  it('a task keeps its place through its retries; a final failure or a timeout frees it', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const key = { group: 'k', limit: 2 };
    scheduler.after(0, task('a', 10, 1), { concurrency: key, retry: { attempts: 2, delay: 100, backoff: 'fixed' } });
    scheduler.after(0, task('b', 1_000), { concurrency: key, timeout: 50 });
    scheduler.after(0, task('c', 10), { concurrency: key });
    scheduler.after(0, task('d', 10), { concurrency: key });
    await clock.advance(1_000);
    // a waits 100 ms for its retry without giving up its place; b times out at 50 and c takes its place;
    // d goes when c ends (a still holds one).
    expect(log.filter((e) => e.includes('+'))).toEqual(['a+0', 'b+0', 'c+50', 'd+60', 'a+110']);
    expect(
      peak(
        log.filter((e) => !e.startsWith('b-')),
        '',
      ),
    ).toBeLessThanOrEqual(2);
  });

  it('serial is the same as concurrency with limit 1, and shares its keys', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    scheduler.after(0, task('s1', 100), { serial: 'k' });
    scheduler.after(0, task('s2', 100), { serial: 'k' });
    scheduler.after(0, task('s3', 100), { serial: 'k' });
    await clock.advance(0);
    expect(log).toEqual(['s1+0']);
    // A task naming the key with limit 2, scheduled last, sets the key's limit for all of them.
    scheduler.after(0, task('c', 100), { concurrency: { group: 'k', limit: 2 } });
    await clock.advance(0);
    expect(log).toEqual(['s1+0', 's2+0']);
    await clock.advance(1_000);
    expect(log.filter((e) => e.includes('+'))).toEqual(['s1+0', 's2+0', 's3+100', 'c+100']);
  });

  it('the limit of the most recently scheduled task applies: a lower one lets running tasks finish', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`a${i}`, 100), { concurrency: { group: 'k', limit: 3 } });
    await clock.advance(0);
    scheduler.after(0, task('b0', 100), { concurrency: { group: 'k', limit: 1 } });
    scheduler.after(0, task('b1', 100), { concurrency: { group: 'k', limit: 1 } });
    await clock.advance(1_000);
    expect(log.filter((e) => e.includes('+'))).toEqual(['a0+0', 'a1+0', 'a2+0', 'b0+100', 'b1+200']);
  });

  it('cancelling a waiting task, or the next one of a key, lets the one after go', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const log: string[] = [];
    const task = worker(clock, log);
    const key = { group: 'k', limit: 1 };
    scheduler.after(0, task('x', 100));
    const a = scheduler.after(0, task('a', 10), { concurrency: key });
    const b = scheduler.after(0, task('b', 10), { concurrency: key });
    scheduler.after(0, task('c', 10), { concurrency: key });
    await clock.advance(10);
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 3 });
    // a is the key's next (waiting for the one worker), b is parked behind it.
    expect(b.cancel()).toBe(true);
    expect(a.cancel()).toBe(true);
    expect(scheduler.stats()).toMatchObject({ waiting: 1, cancelled: 2 });
    await clock.advance(1_000);
    expect(log).toEqual(['x+0', 'x-100', 'c+100', 'c-110']);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, due: 0, running: 0 });
  });

  it('jobs take a concurrency group: each occurrence holds a place', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const key = { group: 'api', limit: 1 };
    const job = scheduler.every(100).milliseconds().run(task('j', 150), { concurrency: key, overlap: 'allow' });
    scheduler.after(0, task('t', 250), { concurrency: key });
    await clock.advance(600);
    job.cancel();
    // t holds the key until 250: the occurrence due at 100 waits for it; each later one waits for the run before it.
    expect(log.filter((e) => e.includes('+'))).toEqual(['t+0', 'j+250', 'j+400', 'j+550']);
    expect(peak(log, '')).toBe(1);
  });

  it('refuses bad values and serial together with concurrency, naming them; nothing is scheduled', async () => {
    const { clock, scheduler } = setup();
    const fn = () => {};
    const { length } = scheduler.waitingTasks();
    expect(() => scheduler.after(0, fn, { serial: 'k', concurrency: { group: 'k', limit: 2 } })).toThrow(
      /either `serial` or `concurrency`, not both/,
    );
    expect(() => scheduler.after(0, fn, { concurrency: 'k' as never })).toThrow(TypeError);
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k' } as never })).toThrow(/`concurrency.limit`.*got undefined/);
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k', limit: 0 } })).toThrow(RangeError);
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k', limit: 1.5 } })).toThrow(/`concurrency.limit`.*1.5/);
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k', limit: Infinity } })).toThrow(/`concurrency.limit`.*Infinity/);
    expect(() => scheduler.after(0, fn, { concurrency: { group: '', limit: 1 } })).toThrow(/`concurrency.group`.*""/);
    expect(() => scheduler.after(0, fn, { concurrency: { group: 7, limit: 1 } as never })).toThrow(
      /`concurrency.group` to be a string, got 7/,
    );
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k', limit: 1, burst: 1 } as never })).toThrow(
      /Unknown `concurrency` option "burst"/,
    );
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fn, { concurrency: { group: 'k', limit: -1 } }),
    ).toThrow(/`concurrency.limit`.*-1/);
    expect(scheduler.waitingTasks()).toHaveLength(length);
    expect(scheduler.jobs()).toEqual([]);
    // A key a refused task named keeps the limit of the last task accepted.
    const log: string[] = [];
    const task = worker(clock, log);
    scheduler.after(0, task('a', 10), { concurrency: { group: 'k', limit: 1 } });
    expect(() => scheduler.after(0, fn, { concurrency: { group: 'k', limit: 5 }, priority: 0.5 })).toThrow(/priority/);
    scheduler.after(0, task('b', 10), { concurrency: { group: 'k', limit: 1 } });
    await clock.advance(100);
    expect(log).toEqual(['a+0', 'a-10', 'b+10', 'b-20']);
  });

  it('a key with no unfinished task keeps no state: the next task of the key starts at once', async () => {
    const { clock, scheduler } = setup({ workers: Infinity });
    for (let i = 0; i < 5_000; i++) scheduler.after(i % 7, () => {}, { concurrency: { group: `tenant:${i % 50}`, limit: 1 } });
    await clock.advance(10);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, succeeded: 5_000 });
    expect(clock.pendingTimers).toBe(0);
  });
});
