import { afterEach, describe, expect, it, vi } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { START, setup } from '../helpers.js';
import { compiled } from '../compiled-fixture.js';

const DAY = 86_400_000;

describe('long delays', () => {
  it('runs a task due in 60 days (beyond setTimeout 2^31-1 ms), on time and not before', async () => {
    const { clock, scheduler } = setup();
    let ranAt = 0;
    scheduler.after(60 * DAY, () => (ranAt = clock.now()));
    await clock.advance(60 * DAY - 1);
    expect(ranAt).toBe(0);
    await clock.advance(1);
    expect(ranAt).toBe(START + 60 * DAY);
  });

  it('never arms a timer longer than 30 s', async () => {
    const clock = new ManualClock(START);
    const delays: number[] = [];
    const setTimer = clock.setTimer.bind(clock);
    clock.setTimer = (callback, delay) => {
      delays.push(delay);
      return setTimer(callback, delay);
    };
    const scheduler = new Scheduler({ clock });
    scheduler.after(365 * DAY, () => {});
    await clock.advance(DAY);
    expect(Math.max(...delays)).toBeLessThanOrEqual(30_000);
  });

  it('works with the system clock and fake timers beyond 2^31-1 ms', async () => {
    vi.useFakeTimers({ now: START });
    try {
      const scheduler = new Scheduler();
      let ran = false;
      scheduler.after(30 * DAY, () => {
        ran = true;
      });
      await vi.advanceTimersByTimeAsync(30 * DAY - 1);
      expect(ran).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(ran).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('wall-clock jumps', () => {
  afterEach(() => vi.useRealTimers());

  it('a clock jumping forward runs the tasks it passed within 30 s (system clock)', async () => {
    vi.useFakeTimers({ now: START });
    const scheduler = new Scheduler();
    let ranAt = 0;
    scheduler.schedule(START + 2 * 3_600_000, () => (ranAt = Date.now()));
    // Date.now() jumps 3 h ahead but no timer fires: a suspended laptop waking up.
    vi.setSystemTime(START + 3 * 3_600_000);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(ranAt).toBeGreaterThan(0);
    expect(ranAt - (START + 3 * 3_600_000)).toBeLessThanOrEqual(30_000);
    await scheduler.close();
  });

  it('a clock jumping backward never fires a task early (system clock)', async () => {
    vi.useFakeTimers({ now: START });
    const scheduler = new Scheduler();
    const due = START + 60_000;
    let ranAt = 0;
    scheduler.schedule(due, () => (ranAt = Date.now()));
    vi.setSystemTime(START - 3_600_000); // an hour back
    await vi.advanceTimersByTimeAsync(60_000 + 30_000);
    expect(ranAt).toBe(0); // 60 s of elapsed time passed, but the wall clock says 10:59:30
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(ranAt).toBeGreaterThanOrEqual(due);
    await scheduler.close();
  });

  it('ManualClock.set jumps the wall clock; the scheduler catches up at its next wake', async () => {
    const { clock, scheduler } = setup();
    const ran: number[] = [];
    scheduler.after(DAY, () => ran.push(clock.now() - START));
    await clock.advance(0); // the scheduler has armed its timer
    clock.set(START + 2 * DAY);
    expect(ran).toEqual([]);
    await clock.advance(30_000);
    expect(ran).toHaveLength(1);
    expect(ran[0]).toBeGreaterThan(2 * DAY);
    expect(ran[0]).toBeLessThanOrEqual(2 * DAY + 30_000);
  });
});

describe('ManualClock', () => {
  it('steps through due times in order, reading each due time', async () => {
    const clock = new ManualClock(1_000);
    const seen: number[] = [];
    clock.setTimer(() => seen.push(clock.now()), 30);
    clock.setTimer(() => seen.push(clock.now()), 10);
    clock.setTimer(() => {
      seen.push(clock.now());
      clock.setTimer(() => seen.push(clock.now()), 5);
    }, 20);
    await clock.advance(100);
    expect(seen).toEqual([1_010, 1_020, 1_025, 1_030]);
    expect(clock.now()).toBe(1_100);
  });

  it('lets async work settle between steps', async () => {
    const clock = new ManualClock(0);
    const seen: string[] = [];
    clock.setTimer(async () => {
      await Promise.resolve();
      await Promise.resolve();
      seen.push('async settled');
    }, 10);
    clock.setTimer(() => seen.push('next step'), 20);
    await clock.advance(20);
    expect(seen).toEqual(['async settled', 'next step']);
  });

  it('clearTimer cancels; advanceTo targets a wall time; bad input throws', async () => {
    const clock = new ManualClock(new Date(START));
    let fired = false;
    const timer = clock.setTimer(() => (fired = true), 10);
    clock.clearTimer(timer);
    await clock.advanceTo(new Date(START + 50));
    expect(fired).toBe(false);
    expect(clock.now()).toBe(START + 50);
    await expect(clock.advance(-1)).rejects.toThrow(RangeError);
    expect(() => new ManualClock(NaN)).toThrow(RangeError);
  });
});

describe('unref', () => {
  async function runFixture(unref: boolean, ms: number): Promise<{ out: string; ms: number }> {
    const { spawn } = await import('node:child_process');
    const started = Date.now();
    const child = spawn(process.execPath, [compiled('test/fixtures/unref.ts'), String(unref), String(ms)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise((resolve) => child.on('exit', resolve));
    return { out, ms: Date.now() - started };
  }

  it('waiting tasks keep the process alive by default, and do not with unref: true', async () => {
    // The released one is due in 10 s: the process must have exited long before (tsx may keep
    // the loop busy a moment after the module ran, writing its cache; a loaded machine is slow).
    const [kept, released] = await Promise.all([runFixture(false, 400), runFixture(true, 10_000)]);
    expect(kept.out).toBe('ran\n');
    expect(released.out).toBe('');
    expect(released.ms).toBeLessThan(10_000);
  }, 30_000);
});
