import { describe, expect, it } from 'vitest';
import { CancelledError } from '../../src/index.js';
import { START, setup } from '../helpers.js';

describe('cancel', () => {
  it('a cancelled waiting task leaves the heap at once and never runs', async () => {
    const { clock, scheduler } = setup();
    const ran: string[] = [];
    const task = scheduler.after(10, () => ran.push('cancelled'));
    scheduler.after(20, () => ran.push('kept'));
    expect(task.cancel()).toBe(true);
    expect(scheduler.size).toBe(1);
    expect(task.state).toBe('cancelled');
    await expect(task.result).rejects.toBeInstanceOf(CancelledError);
    expect(task.cancel()).toBe(false);
    await clock.advance(30);
    expect(ran).toEqual(['kept']);
  });

  it('rejects result with the given reason', async () => {
    const { scheduler } = setup();
    const task = scheduler.after(10, () => {});
    task.cancel('changed my mind');
    await expect(task.result).rejects.toBe('changed my mind');
  });

  it('aborts the signal of a running task; it ends cancelled if it gives up', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(
      1,
      (ctx) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    );
    await clock.advance(1);
    expect(task.state).toBe('running');
    expect(task.cancel('stop')).toBe(true);
    expect(task.cancel('again')).toBe(false);
    await clock.advance(0);
    expect(task.state).toBe('cancelled');
    await expect(task.result).rejects.toBe('stop');
    expect(scheduler.running).toBe(0);
  });

  it('a running task that ignores cancellation finishes normally', async () => {
    const { clock, scheduler } = setup();
    let release!: () => void;
    const task = scheduler.after(1, () => new Promise<string>((resolve) => (release = () => resolve('done anyway'))));
    await clock.advance(1);
    task.cancel();
    release();
    await clock.advance(0);
    expect(task.state).toBe('succeeded');
  });

  it('cancel after success returns false', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(1, () => 1);
    await clock.advance(1);
    expect(task.cancel()).toBe(false);
    expect(task.state).toBe('succeeded');
  });

  it('cancelling the earliest task lets the next one run on time', async () => {
    const { clock, scheduler } = setup();
    const at: number[] = [];
    const first = scheduler.after(10, () => at.push(clock.now() - START));
    scheduler.after(20, () => at.push(clock.now() - START));
    await clock.advance(5);
    first.cancel();
    await clock.advance(20);
    expect(at).toEqual([20]);
  });
});

describe('AbortSignal', () => {
  it('an already-aborted signal throws its reason and schedules nothing', () => {
    const { scheduler } = setup();
    const controller = new AbortController();
    controller.abort(new Error('too late'));
    expect(() => scheduler.after(1, () => {}, { signal: controller.signal })).toThrow('too late');
    expect(scheduler.size).toBe(0);
  });

  it('aborting a signal cancels every waiting task that shares it', async () => {
    const { clock, scheduler } = setup();
    const controller = new AbortController();
    const ran: number[] = [];
    const tasks = Array.from({ length: 100 }, (_, i) => scheduler.after(10 + i, () => ran.push(i), { signal: controller.signal }));
    scheduler.after(5, () => ran.push(-1));
    controller.abort('shutdown');
    expect(scheduler.size).toBe(1);
    await clock.advance(200);
    expect(ran).toEqual([-1]);
    expect(tasks.every((task) => task.state === 'cancelled')).toBe(true);
    await expect(tasks[0]!.result).rejects.toBe('shutdown');
  });

  it('puts one listener on a shared signal, and removes it when the tasks leave', async () => {
    const { clock, scheduler } = setup();
    const controller = new AbortController();
    const signal = controller.signal;
    let added = 0;
    let removed = 0;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = ((...args: Parameters<typeof add>) => {
      added++;
      add(...args);
    }) as typeof add;
    signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
      removed++;
      remove(...args);
    }) as typeof remove;
    const tasks = Array.from({ length: 1_000 }, (_, i) => scheduler.after(i % 10, () => {}, { signal }));
    expect(added).toBe(1);
    tasks[0]!.cancel();
    await clock.advance(10);
    expect(tasks.filter((task) => task.state === 'succeeded')).toHaveLength(999);
    expect(removed).toBe(1);
  });

  it('aborts the run signal of a running task', async () => {
    const { clock, scheduler } = setup();
    const controller = new AbortController();
    let seen: unknown;
    scheduler.after(
      1,
      (ctx) =>
        new Promise<void>((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            seen = ctx.signal.reason;
            resolve();
          });
        }),
      { signal: controller.signal },
    );
    await clock.advance(1);
    controller.abort('user left');
    expect(seen).toBe('user left');
  });

  it('works with AbortSignal.timeout-style signals that abort later', async () => {
    const { clock, scheduler } = setup();
    const controller = new AbortController();
    const a = scheduler.after(10, () => 'a', { signal: controller.signal });
    const b = scheduler.after(1_000, () => 'b', { signal: controller.signal });
    await clock.advance(10);
    controller.abort();
    expect(a.state).toBe('succeeded');
    expect(b.state).toBe('cancelled');
  });
});

describe('memory of cancelled tasks', () => {
  it('cancelling most tasks compacts the heap and keeps the rest in order', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const ran: number[] = [];
    const tasks = Array.from({ length: 10_000 }, (_, i) => scheduler.after(10_000 - i, () => ran.push(i)));
    for (const task of tasks) if (task.id % 100 !== 0) task.cancel();
    expect(scheduler.size).toBe(100);
    await clock.advance(10_000);
    const expected = tasks.filter((task) => task.id % 100 === 0).map((_, k, kept) => kept.length - 1 - k);
    expect(ran).toHaveLength(100);
    expect(ran).toEqual([...ran].sort((x, y) => y - x));
    expect(expected).toHaveLength(100);
  });
});
