import { DateTime } from 'luxon';
import { describe, expect, it, vi } from 'vitest';
import { ClosedError, QueueFullError, Scheduler, type Task } from '../../src/index.js';
import { START, flush, setup } from '../helpers.js';

describe('schedule ordering', () => {
  it('runs tasks at their due times, earliest first', async () => {
    const { clock, scheduler } = setup();
    const seen: [string, number][] = [];
    for (const [name, delay] of [
      ['c', 300],
      ['a', 100],
      ['b', 200],
    ] as const) {
      scheduler.after(delay, () => seen.push([name, clock.now() - START]));
    }
    await clock.advance(99);
    expect(seen).toEqual([]);
    await clock.advance(1_000);
    expect(seen).toEqual([
      ['a', 100],
      ['b', 200],
      ['c', 300],
    ]);
  });

  it('runs tasks with equal times in scheduling order', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const seen: number[] = [];
    for (let i = 0; i < 50; i++) scheduler.schedule(START + 10, () => seen.push(i));
    await clock.advance(10);
    expect(seen).toEqual([...Array(50).keys()]);
  });

  it('runs a task in the past as soon as a worker is free, earliest first', async () => {
    const { clock, scheduler } = setup();
    const seen: string[] = [];
    scheduler.schedule(START - 1_000, () => seen.push('late'));
    scheduler.schedule(START - 5_000, () => seen.push('later'));
    expect(seen).toEqual([]); // never synchronously inside schedule()
    await clock.advance(0);
    expect(seen).toEqual(['later', 'late']);
  });

  it('accepts Date, epoch ms and luxon DateTime', async () => {
    const { clock, scheduler } = setup();
    const a = scheduler.schedule(new Date(START + 1), () => 1);
    const b = scheduler.schedule(START + 2, () => 2);
    const c = scheduler.schedule(DateTime.fromMillis(START + 3, { zone: 'Asia/Tokyo' }), () => 3);
    expect([a.runAt.getTime(), b.runAt.getTime(), c.runAt.getTime()]).toEqual([START + 1, START + 2, START + 3]);
    await clock.advance(3);
    expect(await Promise.all([a.result, b.result, c.result])).toEqual([1, 2, 3]);
  });

  it('gives the task its context', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.schedule(
      START + 50,
      (ctx) => ({
        scheduledAt: ctx.scheduledAt.getTime(),
        startedAt: ctx.startedAt.getTime(),
        attempt: ctx.attempt,
        name: ctx.name,
        aborted: ctx.signal.aborted,
      }),
      { name: 'ctx' },
    );
    await clock.advance(50);
    expect(await task.result).toEqual({ scheduledAt: START + 50, startedAt: START + 50, attempt: 1, name: 'ctx', aborted: false });
  });

  it('reports task state through its life', async () => {
    const { clock, scheduler } = setup();
    let during = '';
    const task = scheduler.after(10, async () => {
      during = task.state;
      return 'done';
    });
    expect(task.state).toBe('waiting');
    await clock.advance(10);
    expect(during).toBe('running');
    expect(task.state).toBe('succeeded');
    expect(task.attempts).toBe(1);
    await expect(task.result).resolves.toBe('done');
  });

  it('result read after settling still settles', async () => {
    const { clock, scheduler } = setup();
    const ok = scheduler.after(1, () => 'v');
    const bad = scheduler.after(1, () => {
      throw new Error('x');
    });
    await clock.advance(1);
    await expect(ok.result).resolves.toBe('v');
    await expect(bad.result).rejects.toThrow('x');
    expect(ok.result).toBe(ok.result);
  });

  it('gives every task a distinct increasing id', () => {
    const { scheduler } = setup();
    const a = scheduler.after(5, () => {});
    const b = scheduler.after(1, () => {});
    expect(b.id).toBeGreaterThan(a.id);
  });
});

describe('bad input', () => {
  it('rejects invalid times with a clear error and schedules nothing', () => {
    const { scheduler } = setup();
    scheduler.after(10, () => {});
    expect(() => scheduler.schedule(NaN, () => {})).toThrow(RangeError);
    expect(() => scheduler.schedule(NaN, () => {})).toThrow(/NaN/);
    expect(() => scheduler.schedule(Infinity, () => {})).toThrow(RangeError);
    expect(() => scheduler.schedule(new Date('nope'), () => {})).toThrow(/Invalid Date/);
    expect(() => scheduler.schedule(DateTime.fromISO('nope'), () => {})).toThrow(RangeError);
    expect(() => scheduler.schedule('2026-01-01' as never, () => {})).toThrow(TypeError);
    expect(() => scheduler.after(-1, () => {})).toThrow(/-1/);
    expect(scheduler.size).toBe(1);
  });

  it('rejects non-function tasks and bad options at the call', () => {
    const { scheduler } = setup();
    expect(() => scheduler.after(1, 'nope' as never)).toThrow(TypeError);
    // No task at all: said as such, not as a handler name without a store.
    expect(() => (scheduler.after as (ms: number) => unknown)(100)).toThrow(
      /^Expected a task: a function, a module URL or \(with a store\) a handler name, got undefined/,
    );
    expect(() => scheduler.after(1, () => {}, { timeout: 0 })).toThrow(/timeout/);
    expect(() => scheduler.after(1, () => {}, { timout: 5 } as never)).toThrow(/Unknown task option `timout`/);
    expect(() => scheduler.after(1, () => {}, { signal: {} as never })).toThrow(/AbortSignal/);
    expect(() => scheduler.after(1, () => {}, { name: 5 as never })).toThrow(/name/);
    expect(() => scheduler.after(1, () => {}, { retry: { attempts: 0 } })).toThrow(/retry.attempts/);
    expect(() => scheduler.after(1, () => {}, { retry: { backoff: 'linear' as never } })).toThrow(/backoff/);
    expect(() => scheduler.after(1, () => {}, { retry: { tries: 3 } as never })).toThrow(/Unknown retry option/);
    expect(scheduler.size).toBe(0);
  });

  it('rejects bad constructor options', () => {
    expect(() => new Scheduler({ workers: 0 })).toThrow(/workers.*0 \(number\)/);
    expect(() => new Scheduler({ workers: -1 })).toThrow(RangeError);
    expect(() => new Scheduler({ workers: 1.5 })).toThrow(RangeError);
    expect(() => new Scheduler({ workers: NaN })).toThrow(RangeError);
    expect(() => new Scheduler({ maxWaiting: 0 })).toThrow(/maxWaiting/);
    // A number as a string is the wrong type, not a bad number.
    expect(() => new Scheduler({ workers: '4' as never })).toThrow(new TypeError('Expected `workers` to be a number, got "4" (string)'));
    expect(() => new Scheduler({ maxWaiting: '2' as never })).toThrow(
      new TypeError('Expected `maxWaiting` to be a number, got "2" (string)'),
    );
    expect(() => new Scheduler({ timezone: 'Mars/Olympus' })).toThrow(RangeError);
    expect(() => new Scheduler({ clock: {} as never })).toThrow(/clock/);
    expect(() => new Scheduler({ onError: 1 as never })).toThrow(/onError/);
    expect(() => new Scheduler({ concurrency: 2 } as never)).toThrow(/Unknown Scheduler option `concurrency`/);
  });

  it('rejects a bad workers value at runtime and keeps the old one', () => {
    const { scheduler } = setup({ workers: 3 });
    expect(() => {
      scheduler.workers = 0;
    }).toThrow(RangeError);
    expect(() => {
      scheduler.workers = '4' as never;
    }).toThrow(TypeError);
    expect(scheduler.workers).toBe(3);
  });
});

describe('maxWaiting', () => {
  it('throws QueueFullError at once, without disturbing what is scheduled', async () => {
    const { clock, scheduler } = setup({ maxWaiting: 2 });
    const ran: number[] = [];
    scheduler.after(10, () => ran.push(1));
    scheduler.after(20, () => ran.push(2));
    let error: unknown;
    try {
      scheduler.after(5, () => ran.push(3));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(QueueFullError);
    expect((error as QueueFullError).code).toBe('ERR_QUEUE_FULL');
    await clock.advance(20);
    expect(ran).toEqual([1, 2]);
  });

  it('lets a task schedule another without deadlock once its own slot is free', async () => {
    const { clock, scheduler } = setup({ maxWaiting: 1 });
    const ran: string[] = [];
    scheduler.after(10, () => {
      ran.push('first');
      scheduler.after(10, () => ran.push('second'));
    });
    await clock.advance(30);
    expect(ran).toEqual(['first', 'second']);
  });

  it('frees capacity when a waiting task is cancelled', () => {
    const { scheduler } = setup({ maxWaiting: 1 });
    const task = scheduler.after(10, () => {});
    expect(() => scheduler.after(10, () => {})).toThrow(QueueFullError);
    task.cancel();
    expect(() => scheduler.after(10, () => {})).not.toThrow();
  });
});

describe('error isolation', () => {
  it('a throwing or rejecting task never stops the others', async () => {
    const { clock, scheduler, errors } = setup();
    const ran: number[] = [];
    scheduler.after(1, () => {
      throw new Error('sync boom');
    });
    scheduler.after(1, async () => {
      throw new Error('async boom');
    });
    scheduler.after(2, () => ran.push(2));
    await clock.advance(5);
    expect(ran).toEqual([2]);
    expect(errors.map((e) => (e as Error).message).sort()).toEqual(['async boom', 'sync boom']);
    expect(scheduler.stats()).toMatchObject({ failed: 2, succeeded: 1 });
  });

  it("logs to console.error by default, unless the task's result was read, and leaves no unhandled rejection", async () => {
    const clockSetup = setup();
    const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    try {
      const scheduler = new Scheduler({ clock: clockSetup.clock });
      scheduler.after(1, () => Promise.reject(new Error('nobody listens')), { name: 'lonely' });
      // The caller reads the result and handles the failure: the default says nothing.
      const handled = scheduler.after(1, () => Promise.reject(new Error('handled')), { name: 'handled' });
      const caught = handled.result.catch((error: Error) => error.message);
      await clockSetup.clock.advance(1);
      await flush();
      expect(await caught).toBe('handled');
      expect(spy).toHaveBeenCalledTimes(1);
      expect(String(spy.mock.calls[0]![0])).toContain('"lonely"');
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', unhandled);
      spy.mockRestore();
    }
  });

  it('a throwing onError does not break the scheduler', async () => {
    const { clock, scheduler } = setup({
      onError: () => {
        throw new Error('bad handler');
      },
    });
    const uncaught: unknown[] = [];
    const listener = (error: unknown) => uncaught.push(error);
    process.prependListener('uncaughtException', listener);
    const ran: number[] = [];
    try {
      scheduler.after(1, () => {
        throw new Error('x');
      });
      scheduler.after(2, () => ran.push(2));
      await clock.advance(2);
      await flush();
    } finally {
      process.off('uncaughtException', listener);
    }
    expect(ran).toEqual([2]);
  });
});

describe('events and introspection', () => {
  it('emits start, success, failure, cancel and idle', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    scheduler.on('start', (task) => log.push(`start ${task.name}`));
    scheduler.on('success', (task, value) => log.push(`success ${task.name} ${String(value)}`));
    scheduler.on('failure', (task, error) => log.push(`failure ${task.name} ${(error as Error).message}`));
    scheduler.on('cancel', (task) => log.push(`cancel ${task.name}`));
    scheduler.once('idle', () => log.push('idle'));
    scheduler.after(1, () => 42, { name: 'ok' });
    scheduler.after(
      2,
      () => {
        throw new Error('no');
      },
      { name: 'bad' },
    );
    scheduler.after(3, () => {}, { name: 'gone' }).cancel();
    await clock.advance(5);
    expect(log).toEqual(['cancel gone', 'start ok', 'success ok 42', 'start bad', 'failure bad no', 'idle']);
  });

  it('off removes a listener', async () => {
    const { clock, scheduler } = setup();
    const seen: number[] = [];
    const listener = (task: { id: number }) => seen.push(task.id);
    scheduler.on('start', listener);
    scheduler.off('start', listener);
    scheduler.after(1, () => {});
    await clock.advance(1);
    expect(seen).toEqual([]);
  });

  it('onIdle resolves when nothing is waiting or running', async () => {
    const { clock, scheduler } = setup();
    await scheduler.onIdle();
    let idle = false;
    scheduler.after(100, async () => {});
    void scheduler.onIdle().then(() => (idle = true));
    await clock.advance(99);
    expect(idle).toBe(false);
    await clock.advance(1);
    expect(idle).toBe(true);
  });

  it('stats count outcomes and lateness', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    let release!: () => void;
    scheduler.after(0, () => new Promise<void>((resolve) => (release = resolve)));
    scheduler.after(10, () => {});
    await clock.advance(0);
    await clock.advance(40);
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 1, workers: 1, succeeded: 0 });
    release();
    await clock.advance(0);
    const stats = scheduler.stats();
    expect(stats).toMatchObject({ running: 0, waiting: 0, succeeded: 2 });
    expect(stats.lateness.max).toBe(30);
  });

  it('lists waiting tasks earliest first', () => {
    const { scheduler } = setup();
    const b = scheduler.after(20, () => {});
    const a = scheduler.after(10, () => {});
    scheduler.after(30, () => {}).cancel();
    expect(scheduler.waitingTasks()).toEqual([a, b]);
  });
});

describe('close', () => {
  it('cancels waiting tasks with ClosedError and waits for running ones', async () => {
    const { clock, scheduler } = setup();
    let finish!: () => void;
    let sawAbort = true;
    const running = scheduler.after(
      0,
      (ctx) =>
        new Promise<string>((resolve) => {
          finish = () => {
            sawAbort = ctx.signal.aborted;
            resolve('finished');
          };
        }),
    );
    const pending = scheduler.after(1_000, () => 'never');
    await clock.advance(0);
    let closed = false;
    const closing = scheduler.close().then(() => (closed = true));
    expect(pending.state).toBe('cancelled');
    await expect(pending.result).rejects.toBeInstanceOf(ClosedError);
    expect(() => scheduler.after(1, () => {})).toThrow(ClosedError);
    await flush();
    expect(closed).toBe(false);
    finish();
    await closing;
    expect(sawAbort).toBe(false);
    await expect(running.result).resolves.toBe('finished');
    expect(scheduler.close()).toBe(scheduler.close());
  });

  it('with abort: true aborts running tasks', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(
      0,
      (ctx) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    );
    await clock.advance(0);
    await scheduler.close({ abort: true });
    expect(task.state).toBe('cancelled');
    await expect(task.result).rejects.toBeInstanceOf(ClosedError);
  });

  it('can be called from inside a task', async () => {
    const { clock, scheduler } = setup();
    const ran: string[] = [];
    let closing: Promise<void> | undefined;
    scheduler.after(1, () => {
      closing = scheduler.close();
      ran.push('closer');
    });
    scheduler.after(2, () => ran.push('never'));
    await clock.advance(5);
    await closing;
    expect(ran).toEqual(['closer']);
    expect(scheduler.size).toBe(0);
  });

  it('await using closes the scheduler', async () => {
    const { clock } = setup();
    let task: Task<void>;
    {
      await using scheduler = new Scheduler({ clock });
      task = scheduler.after(10, () => {});
    }
    expect(task.state).toBe('cancelled');
  });
});
