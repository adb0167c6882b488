// Module tasks in real worker threads (issue 26): what crosses the boundary
// (context, payload, results and errors by structured clone), CPU-bound work
// off the main thread, and the checks at the call.
import { isMainThread } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { CancelledError, Scheduler, ThreadError } from '../../src/index.js';
import { START, setup } from '../helpers.js';
import { board, fixture } from './helpers.js';

const open: Scheduler[] = [];
function track<T extends { scheduler: Scheduler }>(made: T): T {
  open.push(made.scheduler);
  return made;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((scheduler) => scheduler.close({ abort: true })));
});

describe('module tasks in threads', () => {
  it('runs the default export in a thread with the task context and the payload (ManualClock)', async () => {
    const { scheduler, clock } = track(setup({ threads: 1 }));
    const task = scheduler.schedule(START + 1_000, fixture('echo'), { name: 'echo', payload: { file: 'cat.png', sizes: [1, 2] } });
    expect(task.state).toBe('waiting');
    await clock.advance(1_000);
    const value = (await task.result) as Record<string, unknown>;
    expect(isMainThread).toBe(true);
    expect(value).toMatchObject({
      payload: { file: 'cat.png', sizes: [1, 2] },
      attempt: 1,
      name: 'echo',
      scheduledAt: START + 1_000,
      startedAt: START + 1_000,
      signal: true,
      isMainThread: false,
    });
    expect(value.id).toBeUndefined();
    expect(task.state).toBe('succeeded');
  });

  it('runs CPU-bound tasks on several threads at once, each result its own', async () => {
    const scheduler = new Scheduler({ threads: 2 });
    open.push(scheduler);
    const tasks = [1, 2, 3, 4].map((n) => scheduler.after(0, fixture('cpu'), { payload: { rounds: 200_000 * n } }));
    const results = (await Promise.all(tasks.map((task) => task.result))) as { x: number; threadId: number }[];
    const expected = [1, 2, 3, 4].map((n) => {
      let x = 0;
      for (let i = 0; i < 200_000 * n; i++) x = (x * 31 + i) % 1_000_003;
      return x;
    });
    expect(results.map((r) => r.x)).toEqual(expected);
    const threads = new Set(results.map((r) => r.threadId));
    expect(threads.has(0)).toBe(false);
    expect(threads.size).toBeLessThanOrEqual(2);
  });

  it('keeps threads warm: one thread runs task after task', async () => {
    const scheduler = new Scheduler({ threads: 1 });
    open.push(scheduler);
    const ids: number[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(((await scheduler.after(0, fixture('cpu'), { payload: { rounds: 10 } }).result) as { threadId: number }).threadId);
    expect(new Set(ids).size).toBe(1);
  });

  it('brings a thrown error back with its class name, message, stack and cloneable fields', async () => {
    const { scheduler, errors } = track(setup({ threads: 1 }));
    const task = scheduler.after(0, fixture('crash'), { payload: { how: 'throw' } });
    const error = (await task.result.catch((e: unknown) => e)) as Error & { code?: string; detail?: unknown };
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('RangeError');
    expect(error.message).toBe('bad size');
    expect(error.code).toBe('E_SIZE');
    expect(error.detail).toEqual({ width: -1 });
    expect(error.stack).toContain('crash.js');
    expect(task.state).toBe('failed');
    expect(errors).toEqual([error]);
    const thrown = scheduler.after(0, fixture('crash'), { payload: { how: 'throw-string' } });
    await expect(thrown.result).rejects.toBe('just a string');
  });

  it('retries a module task like any other, with the attempt number in the thread', async () => {
    const { scheduler, clock } = track(setup({ threads: 1 }));
    const task = scheduler.after(0, fixture('crash'), { payload: { how: 'throw' }, retry: { attempts: 2, delay: 1_000 } });
    await expect.poll(() => task.attempts === 1 && task.state === 'waiting').toBe(true);
    await clock.advance(1_000);
    await expect(task.result).rejects.toThrow('bad size');
    expect(task.attempts).toBe(2);
  });

  it('a recurring job given a module runs each occurrence in a thread (ManualClock)', async () => {
    const { scheduler, clock } = track(setup({ threads: 1 }));
    const values: unknown[] = [];
    scheduler.on('success', (_task, value) => values.push(value));
    const job = scheduler
      .every(1)
      .seconds()
      .times(2)
      .run(fixture('echo'), { name: 'tick', payload: { n: 7 } });
    await clock.advance(1_000);
    await expect.poll(() => values.length).toBe(1);
    await clock.advance(1_000);
    await expect.poll(() => values.length).toBe(2);
    expect(values).toMatchObject([
      { payload: { n: 7 }, name: 'tick', scheduledAt: START + 1_000, isMainThread: false },
      { payload: { n: 7 }, name: 'tick', scheduledAt: START + 2_000, isMainThread: false },
    ]);
    expect(job.state).toBe('done');
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fixture('echo'), { payload: () => 1 }),
    ).toThrow(/`payload`/);
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(() => 1, { payload: 1 } as never),
    ).toThrow(TypeError);
  });

  it('refuses a payload that cannot be cloned at the call, naming it', () => {
    const scheduler = new Scheduler({ threads: 1 });
    open.push(scheduler);
    expect(() => scheduler.after(0, fixture('echo'), { payload: { fn: () => 1 } })).toThrow(TypeError);
    expect(() => scheduler.after(0, fixture('echo'), { payload: { fn: () => 1 } })).toThrow(/`payload`.*structured-cloneable/);
    expect(scheduler.size).toBe(0);
  });

  it('fails a task whose result cannot be cloned with ERR_THREAD_CLONE naming the module', async () => {
    const scheduler = new Scheduler({ threads: 1, onError: () => {} });
    open.push(scheduler);
    const task = scheduler.after(0, fixture('crash'), { name: 'render', payload: { how: 'unclonable' } });
    const error = (await task.result.catch((e: unknown) => e)) as ThreadError;
    expect(error).toBeInstanceOf(ThreadError);
    expect(error.code).toBe('ERR_THREAD_CLONE');
    expect(error.message).toContain('"render"');
    expect(error.message).toContain('crash.js');
    // The thread is fine: the next task runs on it.
    await expect(scheduler.after(0, fixture('crash'), { payload: { how: 'none' } }).result).resolves.toBe('fine');
  });

  it('fails a task whose module has no default export function, naming the module', async () => {
    const scheduler = new Scheduler({ threads: 1, onError: () => {} });
    open.push(scheduler);
    const error = (await scheduler.after(0, fixture('no-default')).result.catch((e: unknown) => e)) as Error;
    expect(error.name).toBe('TypeError');
    expect(error.message).toMatch(/no-default\.js has no default export function/);
    const missing = (await scheduler.after(0, fixture('does-not-exist')).result.catch((e: unknown) => e)) as Error;
    expect(missing.message).toContain('does-not-exist.js');
  });

  it('checks `threads` and `threadOptions`, naming the value', () => {
    expect(() => new Scheduler({ threads: 0 })).toThrow(RangeError);
    expect(() => new Scheduler({ threads: 1.5 })).toThrow('Expected `threads` to be an integer >= 1, got 1.5 (number)');
    expect(() => new Scheduler({ threadOptions: { grace: '1 s' } })).toThrow(RangeError);
    expect(() => new Scheduler({ threadOptions: { nope: 1 } as never })).toThrow(TypeError);
    expect(() => new Scheduler({ threadOptions: { execArgv: 'tsx' as never } })).toThrow('threadOptions.execArgv');
    expect(() => new Scheduler({ threadOptions: { resourceLimits: { maxOldGenerationSizeMb: -1 } } })).toThrow(
      'threadOptions.resourceLimits.maxOldGenerationSizeMb',
    );
    const scheduler = new Scheduler();
    expect(scheduler.threads).toBeGreaterThanOrEqual(1);
    expect(() => {
      scheduler.threads = 0;
    }).toThrow(RangeError);
  });

  it('applies `workers` and serial groups before a task reaches a thread', async () => {
    const { scheduler } = track(setup({ threads: 4, workers: 1 }));
    const steer = board();
    const first = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
    const second = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
    await steer.until(1);
    expect(scheduler.running).toBe(1);
    expect(second.state).toBe('waiting');
    steer.release();
    await first.result;
    await second.result;
    expect(steer.started()).toBe(2);
  });

  it('a task cancelled while it waits for a thread never starts in one', async () => {
    const scheduler = new Scheduler({ threads: 1, workers: 2 });
    open.push(scheduler);
    const steer = board();
    const busy = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
    const waiting = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
    await steer.until(1);
    await expect.poll(() => waiting.state).toBe('running');
    waiting.cancel();
    await expect(waiting.result).rejects.toBeInstanceOf(CancelledError);
    steer.release();
    await busy.result;
    expect(steer.started()).toBe(1);
  });
});
