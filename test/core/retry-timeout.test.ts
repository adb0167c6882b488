import { describe, expect, it } from 'vitest';
import { TimeoutError } from '../../src/index.js';
import { START, gate, setup } from '../helpers.js';

describe('timeout', () => {
  it('aborts the run with TimeoutError, ends timed-out and frees the slot', async () => {
    const { clock, scheduler, errors } = setup({ workers: 1 });
    let reason: unknown;
    const slow = scheduler.after(
      0,
      (ctx) =>
        new Promise(() => {
          ctx.signal.addEventListener('abort', () => (reason = ctx.signal.reason));
        }),
      { timeout: 100, name: 'slow' },
    );
    const next = scheduler.after(0, (ctx) => ctx.startedAt.getTime() - START);
    await clock.advance(99);
    expect(slow.state).toBe('running');
    expect(next.state).toBe('waiting');
    await clock.advance(1);
    expect(slow.state).toBe('timed-out');
    expect(reason).toBeInstanceOf(TimeoutError);
    expect((reason as TimeoutError).code).toBe('ERR_TASK_TIMEOUT');
    expect((reason as TimeoutError).message).toContain('"slow"');
    await expect(slow.result).rejects.toBeInstanceOf(TimeoutError);
    expect(await next.result).toBe(100);
    expect(scheduler.stats().timedOut).toBe(1);
    expect(errors).toHaveLength(1);
  });

  it('a run that finishes in time is not affected, and its timer is cleared', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(0, async () => 'quick', { timeout: 100 });
    await clock.advance(0);
    expect(task.state).toBe('succeeded');
    expect(clock.pendingTimers).toBe(0);
  });

  it('a late settle after the timeout is ignored', async () => {
    const { clock, scheduler } = setup();
    const hold = gate<string>();
    const task = scheduler.after(0, () => hold.promise, { timeout: 10 });
    await clock.advance(10);
    hold.open('too late');
    await clock.advance(0);
    expect(task.state).toBe('timed-out');
    expect(scheduler.stats()).toMatchObject({ succeeded: 0, timedOut: 1, running: 0 });
  });
});

describe('retry', () => {
  it('re-queues a failed run at its backoff time, through the heap', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const attempts: [number, number][] = [];
    const task = scheduler.after(
      0,
      (ctx) => {
        attempts.push([ctx.attempt, clock.now() - START]);
        if (ctx.attempt < 4) throw new Error(`fail ${ctx.attempt}`);
        return 'ok';
      },
      { retry: { attempts: 5, delay: 100, backoff: 'exponential' } },
    );
    const retries: number[] = [];
    scheduler.on('retry', (_task, _error, delay) => retries.push(delay));
    await clock.advance(10_000);
    expect(attempts).toEqual([
      [1, 0],
      [2, 100],
      [3, 300],
      [4, 700],
    ]);
    expect(retries).toEqual([100, 200, 400]);
    expect(task.state).toBe('succeeded');
    expect(task.attempts).toBe(4);
    await expect(task.result).resolves.toBe('ok');
  });

  it('a waiting retry does not hold a worker', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const ran: string[] = [];
    scheduler.after(
      0,
      (ctx) => {
        ran.push(`flaky ${ctx.attempt}`);
        if (ctx.attempt === 1) throw new Error('x');
      },
      { retry: { attempts: 2, delay: 1_000, backoff: 'fixed' } },
    );
    scheduler.after(10, () => ran.push('other'));
    await clock.advance(20);
    expect(ran).toEqual(['flaky 1', 'other']);
    expect(scheduler.size).toBe(1);
    await clock.advance(1_000);
    expect(ran).toEqual(['flaky 1', 'other', 'flaky 2']);
  });

  it('gives up after the last attempt with the last error; onError fires once', async () => {
    const { clock, scheduler, errors } = setup();
    const task = scheduler.after(
      0,
      (ctx) => {
        throw new Error(`attempt ${ctx.attempt}`);
      },
      { retry: 3 },
    );
    await clock.advance(60_000);
    expect(task.state).toBe('failed');
    await expect(task.result).rejects.toThrow('attempt 3');
    expect(errors).toHaveLength(1);
  });

  it('caps the delay at maxDelay and retries timed-out runs too', async () => {
    const { clock, scheduler } = setup();
    const starts: number[] = [];
    const task = scheduler.after(
      0,
      (ctx) => {
        starts.push(clock.now() - START);
        return ctx.attempt < 3 ? new Promise(() => {}) : 'third time';
      },
      { timeout: 50, retry: { attempts: 3, delay: 1_000, maxDelay: 1_500 } },
    );
    await clock.advance(10_000);
    expect(starts).toEqual([0, 1_050, 2_600]);
    expect(task.state).toBe('succeeded');
  });

  it('adds up to `jitter` ms of random delay', async () => {
    const { clock, scheduler } = setup();
    const starts: number[] = [];
    scheduler.after(
      0,
      (ctx) => {
        starts.push(clock.now() - START);
        if (ctx.attempt === 1) throw new Error('x');
      },
      { retry: { attempts: 2, delay: 100, jitter: 50 } },
    );
    await clock.advance(1_000);
    expect(starts[1]).toBeGreaterThanOrEqual(100);
    expect(starts[1]).toBeLessThan(150);
  });

  it('a task cancelled while waiting for its retry never runs again', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const task = scheduler.after(
      0,
      () => {
        runs++;
        throw new Error('x');
      },
      { retry: { attempts: 5, delay: 100 } },
    );
    await clock.advance(0);
    expect(task.state).toBe('waiting');
    task.cancel();
    await clock.advance(10_000);
    expect(runs).toBe(1);
    expect(task.state).toBe('cancelled');
  });
});
