// The life of pool threads (issue 26): abort and timeout reaching a handler
// that listens and one that does not (grace, then the thread is terminated
// and replaced), crash, exit and out-of-memory isolation, resizing while
// busy, and close() with busy threads. Handlers are steered through a
// SharedArrayBuffer (helpers.ts): no assertion depends on machine speed.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { CancelledError, ClosedError, Scheduler, ThreadError, TimeoutError } from '../../src/index.js';
import { setup } from '../helpers.js';
import { board, fixture } from './helpers.js';

const open: Scheduler[] = [];
function make(options: ConstructorParameters<typeof Scheduler>[0] = {}): Scheduler {
  const scheduler = new Scheduler({ onError: () => {}, ...options });
  open.push(scheduler);
  return scheduler;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((scheduler) => scheduler.close({ abort: true })));
});

const threadOf = async (scheduler: Scheduler): Promise<number> =>
  ((await scheduler.after(0, fixture('cpu'), { payload: { rounds: 1 } }).result) as { threadId: number }).threadId;

describe('abort and timeout in a thread', () => {
  it('cancel() aborts ctx.signal inside the thread; a listening handler ends the task cancelled and keeps its thread', async () => {
    const scheduler = make({ threads: 1 });
    const before = await threadOf(scheduler);
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'listen' } });
    await steer.until(1);
    task.cancel();
    const reason = (await task.result.catch((e: unknown) => e)) as Error;
    expect(reason).toBeInstanceOf(CancelledError);
    expect(task.state).toBe('cancelled');
    expect(await threadOf(scheduler)).toBe(before);
  });

  it('a timeout aborts the signal in the thread with the TimeoutError (ManualClock)', async () => {
    const { scheduler, clock } = setup({ threads: 1 });
    open.push(scheduler);
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { timeout: 5_000, payload: { shared: steer.shared, mode: 'finish' } });
    await clock.advance(0);
    await steer.until(1);
    await clock.advance(5_000);
    await expect(task.result).rejects.toBeInstanceOf(TimeoutError);
    expect(task.state).toBe('timed-out');
    // The handler saw the abort and its reason, and the thread is free again.
    const next = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'finish' } });
    await clock.advance(0);
    await steer.until(2);
    next.cancel();
    await expect(next.result).resolves.toEqual({ aborted: true, reason: 'CancelledError' });
  });

  it('a handler that first reads ctx.signal after the task was cancelled finds it aborted with the reason', async () => {
    const scheduler = make({ threads: 1 });
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'late' } });
    await steer.until(1);
    task.cancel();
    // Time for the abort to reach the thread before the handler looks (were it late, the handler waits for it: same outcome).
    await sleep(50);
    steer.release();
    await expect(task.result).resolves.toMatchObject({ aborted: true, reason: 'CancelledError' });
  });

  it('a handler deaf to its signal is terminated after the grace period; the task ends cancelled and the thread is replaced', async () => {
    const scheduler = make({ threads: 1, threadOptions: { grace: 20 } });
    const before = await threadOf(scheduler);
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'spin' } });
    await steer.until(1);
    const reason = new Error('stop it');
    task.cancel(reason);
    await expect(task.result).rejects.toBe(reason);
    expect(task.state).toBe('cancelled');
    expect(await threadOf(scheduler)).not.toBe(before);
  });

  it('a deaf handler past its timeout: the task is timed-out at once, its thread terminated after the grace period', async () => {
    const { scheduler, clock } = setup({ threads: 1, threadOptions: { grace: 20 } });
    open.push(scheduler);
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { timeout: 1_000, payload: { shared: steer.shared, mode: 'spin' } });
    await clock.advance(0);
    await steer.until(1);
    await clock.advance(1_000);
    await expect(task.result).rejects.toBeInstanceOf(TimeoutError);
    // The next module task waits for the only thread to be replaced, then runs.
    const next = scheduler.after(0, fixture('cpu'), { payload: { rounds: 1 } });
    await clock.advance(0);
    await expect(next.result).resolves.toMatchObject({ x: 0 });
  });
});

describe('isolation', () => {
  for (const [how, code] of [
    ['uncaught', 'ERR_THREAD_CRASHED'],
    ['exit', 'ERR_THREAD_EXIT'],
    ['oom', 'ERR_THREAD_OUT_OF_MEMORY'],
  ] as const) {
    it(`${how}: fails that task alone with ThreadError ${code}; the thread is replaced`, async () => {
      const scheduler = make({
        threads: 2,
        threadOptions: { resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8 } },
      });
      const steer = board();
      const bystander = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
      await steer.until(1);
      const task = scheduler.after(0, fixture('crash'), { name: 'bad', payload: { how } });
      const error = (await task.result.catch((e: unknown) => e)) as ThreadError;
      expect(error).toBeInstanceOf(ThreadError);
      expect(error.code).toBe(code);
      expect(error.message).toContain('"bad"');
      expect(error.message).toContain('crash.js');
      expect(task.state).toBe('failed');
      // The other thread's task goes on undisturbed, and the pool runs new work.
      expect(bystander.state).toBe('running');
      steer.release();
      await expect(bystander.result).resolves.toEqual(expect.any(Number));
      await expect(scheduler.after(0, fixture('crash'), { payload: { how: 'none' } }).result).resolves.toBe('fine');
    });
  }
});

describe('threads that die idle or never start', () => {
  it('a thread that dies between tasks leaves the pool; the next task gets a new one', async () => {
    const scheduler = make({ threads: 1 });
    const steer = board();
    await expect(scheduler.after(0, fixture('crash'), { payload: { how: 'late', shared: steer.shared } }).result).resolves.toBe('returned');
    steer.release();
    await steer.until(1);
    // The thread is dying. Sent before the pool hears of it, a task may meet it and fail with ERR_THREAD_CRASHED: its retry then runs on a new one.
    const next = scheduler.after(0, fixture('crash'), { payload: { how: 'none' }, retry: { attempts: 3, delay: 0 } });
    await expect(next.result).resolves.toBe('fine');
    await expect(scheduler.after(0, fixture('crash'), { payload: { how: 'none' } }).result).resolves.toBe('fine');
  });

  it('a thread Node refuses to start (a flag threads may not take) fails the task with why', async () => {
    const scheduler = make({ threads: 1, threadOptions: { execArgv: ['--no-such-flag-for-threads'] } });
    const error = (await scheduler.after(0, fixture('echo')).result.catch((e: unknown) => e)) as Error & { code?: string };
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('ERR_WORKER_INVALID_EXEC_ARGV');
  });
});

describe('resizing', () => {
  it('grows at run time: more tasks run at once', async () => {
    const scheduler = make({ threads: 1 });
    const steer = board();
    const tasks = [1, 2, 3].map(() => scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } }));
    await steer.until(1);
    scheduler.threads = 3;
    expect(scheduler.threads).toBe(3);
    await steer.until(3);
    steer.release();
    await Promise.all(tasks.map((task) => task.result));
  });

  it('shrinks while busy: busy threads finish their task, then one thread is left', async () => {
    const scheduler = make({ threads: 3 });
    const steer = board();
    const tasks = [1, 2, 3].map(() => scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } }));
    await steer.until(3);
    scheduler.threads = 1;
    steer.release();
    const ids = (await Promise.all(tasks.map((task) => task.result))) as number[];
    expect(new Set(ids).size).toBe(3);
    const after = await Promise.all([1, 2, 3].map(() => threadOf(scheduler)));
    expect(new Set(after).size).toBe(1);
  });
});

describe('close()', () => {
  it('waits for running thread tasks, then terminates every thread', async () => {
    const scheduler = new Scheduler({ threads: 2 });
    const steer = board();
    const task = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'release' } });
    const pending = scheduler.after(60_000, fixture('echo'));
    await steer.until(1);
    let closed = false;
    const closing = scheduler.close().then(() => {
      closed = true;
    });
    await expect(pending.result).rejects.toBeInstanceOf(ClosedError);
    expect(closed).toBe(false);
    steer.release();
    await closing;
    expect(task.state).toBe('succeeded');
  });

  it('with abort: true aborts the signal in every thread; deaf handlers are terminated after the grace period', async () => {
    const scheduler = new Scheduler({ threads: 2, threadOptions: { grace: 20 }, onError: () => {} });
    const steer = board();
    const listening = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'listen' } });
    const deaf = scheduler.after(0, fixture('gate'), { payload: { shared: steer.shared, mode: 'spin' } });
    await steer.until(2);
    await scheduler.close({ abort: true });
    expect(listening.state).toBe('cancelled');
    expect(deaf.state).toBe('cancelled');
    await expect(deaf.result).rejects.toBeInstanceOf(ClosedError);
  });

  it('no thread keeps the process alive: a script that never closes its scheduler exits', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/threads/no-close.ts'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(out).toBe('42\n');
    expect(code).toBe(0);
  });
});
