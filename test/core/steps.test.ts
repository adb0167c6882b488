// ctx.step(), ctx.sleep(), ctx.receive() and scheduler.send() in memory, on a
// ManualClock: a finished step is not run again (retries, sleeps, waits),
// a sleeping or waiting task holds no worker, messages are kept for the
// wait and taken once, a changed handler stops at the step its record
// contradicts, and bad input is refused at the call.
import { describe, expect, it } from 'vitest';
import { Scheduler, StepSuspended, TaskheapError, type TaskContext } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';

function setup(workers = 4) {
  const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
  const scheduler = new Scheduler({ clock, workers, onError: () => {} });
  return { clock, scheduler };
}

describe('steps in memory', () => {
  it('a retry runs only the steps that did not finish, and each returns its kept JSON value', async () => {
    const { clock, scheduler } = setup();
    const calls: string[] = [];
    const seen: unknown[] = [];
    const task = scheduler.after(
      0,
      async (ctx) => {
        const order = await ctx.step('charge', () => {
          calls.push('charge');
          return { id: 7, at: new Date(0) };
        });
        seen.push(order);
        await ctx.step('email', () => {
          calls.push(`email ${ctx.attempt}`);
          if (ctx.attempt === 1) throw new Error('mail server down');
        });
        return order;
      },
      { retry: { attempts: 3, delay: 1_000 } },
    );
    await clock.advance(0);
    expect(task.state).toBe('waiting');
    await clock.advance(1_000);
    // The value as JSON, on the first run as on the replay: the Date is its string.
    await expect(task.result).resolves.toEqual({ id: 7, at: '1970-01-01T00:00:00.000Z' });
    expect(calls).toEqual(['charge', 'email 1', 'email 2']);
    expect(seen).toEqual([
      { id: 7, at: '1970-01-01T00:00:00.000Z' },
      { id: 7, at: '1970-01-01T00:00:00.000Z' },
    ]);
    expect(task.attempts).toBe(2);
  });

  it('the same name in a loop is told apart by its count', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const calls: number[] = [];
    const task = scheduler.after(
      0,
      async (ctx) => {
        runs++;
        const sums: number[] = [];
        for (let i = 0; i < 3; i++) {
          sums.push(
            await ctx.step('page', () => {
              calls.push(i);
              return i * 10;
            }),
          );
        }
        if (runs === 1) throw new Error('once');
        return sums;
      },
      { retry: { attempts: 2, delay: 0 } },
    );
    await clock.advance(0);
    await clock.advance(0);
    await expect(task.result).resolves.toEqual([0, 10, 20]);
    expect(calls).toEqual([0, 1, 2]);
  });

  it('sleep lets go of the worker: the handler runs again from its start when due, its steps kept, the attempt the same', async () => {
    const { clock, scheduler } = setup(1);
    const calls: string[] = [];
    const attempts: number[] = [];
    const task = scheduler.after(0, async (ctx) => {
      attempts.push(ctx.attempt);
      await ctx.step('ask', () => calls.push('ask'));
      await ctx.sleep('1h');
      await ctx.step('nudge', () => calls.push('nudge'));
      return 'done';
    });
    const other = scheduler.after(1_000, () => 'ran while it slept');
    await clock.advance(0);
    expect(task.state).toBe('waiting');
    expect(task.runAt.toISOString()).toBe('2026-01-01T01:00:00.000Z');
    expect(scheduler.running).toBe(0);
    // One worker, and the sleeping task does not hold it.
    await clock.advance(1_000);
    await expect(other.result).resolves.toBe('ran while it slept');
    await clock.advance(3_600_000 - 1_000);
    await expect(task.result).resolves.toBe('done');
    expect(calls).toEqual(['ask', 'nudge']);
    expect(attempts).toEqual([1, 1]);
    expect(task.attempts).toBe(1);
  });

  it("with queues, concurrency groups and flows: a waiting task frees its queue's slot, keeps its group's place, and its flow goes on after it", async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock, queues: { bots: { concurrency: 1 } }, onError: () => {} });
    const ran: string[] = [];
    const user = { group: 'user:1', limit: 1 };
    const flow = await scheduler.flows.add({
      tasks: {
        first: { handler: () => ran.push('first') },
        chat: {
          handler: async (ctx) => {
            await ctx.step('ask', () => ran.push('ask'));
            return [await ctx.receive<string>('early', { timeout: '1h' }), await ctx.receive<string>('reply', { timeout: '1h' })];
          },
          queue: 'bots',
          concurrency: user,
          after: ['first'],
        },
        sum: { handler: async (ctx) => `summary of ${(await ctx.dependencies()).map((dep) => dep.result).join()}`, after: ['chat'] },
      },
    });
    // Sent by id while the task waits for its dependency: kept for its wait.
    await expect(scheduler.send(flow.tasks.chat!.id, 'early', 'hello')).resolves.toBe(true);
    await clock.advance(0);
    const queued = scheduler.after(0, () => void ran.push('queued'), { queue: 'bots' });
    const grouped = scheduler.after(0, () => void ran.push('grouped'), { concurrency: user });
    await clock.advance(0);
    await queued.result;
    expect(grouped.state).toBe('waiting');
    await expect(scheduler.send(flow.tasks.chat!.id, 'reply', '10:30')).resolves.toBe(true);
    await clock.advance(0);
    await expect(scheduler.waitFor(flow.tasks.sum!.id)).resolves.toMatchObject({ result: 'summary of hello,10:30' });
    await grouped.result;
    expect(ran).toEqual(['first', 'ask', 'queued', 'grouped']);
    await expect(scheduler.send(flow.tasks.chat!.id, 'reply', 'late')).resolves.toBe(false);
  });

  it("an operator's retry of a failed flow task resumes it: its finished steps are not run again", async () => {
    const { clock, scheduler } = setup();
    const calls: string[] = [];
    let down = true;
    const flow = await scheduler.flows.add({
      tasks: {
        order: {
          handler: async (ctx) => {
            await ctx.step('charge', () => calls.push('charge'));
            await ctx.step('ship', () => {
              calls.push('ship');
              if (down) throw new Error('carrier down');
            });
            return 'shipped';
          },
        },
      },
    });
    const id = flow.tasks.order!.id;
    await clock.advance(0);
    expect((await scheduler.waitFor(id)).state).toBe('failed');
    down = false;
    await scheduler.retryTask(id);
    await clock.advance(0);
    expect(await scheduler.waitFor(id)).toMatchObject({ state: 'succeeded', result: 'shipped' });
    expect(calls).toEqual(['charge', 'ship', 'ship']);
  });

  it('sleep until a time; a sleeping task cancelled ends at once', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(0, async (ctx) => {
      await ctx.sleep({ until: new Date('2026-01-02T00:00:00Z') });
      return 'woke';
    });
    await clock.advance(0);
    expect(task.runAt.toISOString()).toBe('2026-01-02T00:00:00.000Z');
    expect(task.cancel()).toBe(true);
    expect(task.state).toBe('cancelled');
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  });

  it('a handler that catches StepSuspended still suspends: its outcome is not taken', async () => {
    const { clock, scheduler } = setup();
    let caught: unknown;
    let first: TaskContext | undefined;
    const task = scheduler.after(0, async (ctx) => {
      try {
        await ctx.sleep(500);
      } catch (error) {
        caught = error;
        first = ctx;
        // Later calls in the suspended run suspend too.
        await expect(ctx.step('after', () => 1)).rejects.toBeInstanceOf(StepSuspended);
        return 'swallowed';
      }
      return 'woke';
    });
    await clock.advance(0);
    expect(caught).toBeInstanceOf(StepSuspended);
    expect(task.state).toBe('waiting');
    // And after it ended, while the task sleeps: nothing runs.
    let ran = false;
    await expect(first!.step('late', () => (ran = true))).rejects.toBeInstanceOf(StepSuspended);
    expect(ran).toBe(false);
    await clock.advance(500);
    await expect(task.result).resolves.toBe('woke');
  });

  it('receive takes a message sent during the wait at once, one sent before the wait at the wait, each once', async () => {
    const { clock, scheduler } = setup();
    const got: unknown[] = [];
    const conversation = async (ctx: TaskContext) => {
      await ctx.step('ask', () => 'asked');
      got.push(await ctx.receive('reply', { timeout: '1h' }));
      got.push(await ctx.receive('reply', { timeout: '1h' }));
      return 'over';
    };
    const task = scheduler.after(0, conversation, { key: 'chat:1' });
    // Sent before the task reaches its wait: kept for it.
    await expect(scheduler.send(task, 'reply', 'first')).resolves.toBe(true);
    await clock.advance(0);
    expect(got).toEqual(['first']);
    expect(task.state).toBe('waiting');
    // Sent by key while it waits: due at once, not at the timeout.
    await expect(scheduler.send({ key: 'chat:1' }, 'reply', { text: 'second' })).resolves.toBe(true);
    await clock.advance(0);
    await expect(task.result).resolves.toBe('over');
    expect(got).toEqual(['first', 'first', { text: 'second' }]);
    // A message without a value is null, not a timeout's undefined.
    const bare = scheduler.after(0, (ctx) => ctx.receive('ping', { timeout: 1_000 }));
    await clock.advance(0);
    await scheduler.send(bare, 'ping');
    await clock.advance(0);
    await expect(bare.result).resolves.toBeNull();
    // Ended: nothing to send to.
    await expect(scheduler.send(task, 'reply', 'late')).resolves.toBe(false);
    await expect(scheduler.send({ key: 'chat:1' }, 'reply', 'late')).resolves.toBe(false);
  });

  it('receive resolves undefined once its timeout passed without a message; a message after it waits for a later receive', async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(0, async (ctx) => {
      // Code outside steps runs again on every run: what the handler returns is built from the steps' values.
      const first = await ctx.receive('reply', { timeout: 60_000 });
      await ctx.sleep(10_000);
      const second = await ctx.receive('reply', { timeout: 0 });
      return [first, second];
    });
    await clock.advance(0);
    expect(task.runAt.getTime() - Date.parse('2026-01-01T00:00:00Z')).toBe(60_000);
    await clock.advance(60_000);
    expect(task.state).toBe('waiting');
    await scheduler.send(task, 'reply', 'after the timeout');
    await clock.advance(10_000);
    await expect(task.result).resolves.toEqual([undefined, 'after the timeout']);
  });

  it('a handler whose steps changed stops with ERR_STEP_MISMATCH at the step its record contradicts', async () => {
    const { clock, scheduler } = setup();
    let version = 1;
    const task = scheduler.after(
      0,
      async (ctx) => {
        await ctx.step('ask', () => 'asked');
        if (version === 1) {
          await ctx.step('remind', () => 'reminded');
          throw new Error('crash after remind');
        }
        await ctx.step('nudge', () => 'nudged');
        return 'unreachable';
      },
      { retry: { attempts: 5, delay: 1_000 } },
    );
    await clock.advance(0);
    version = 2;
    await clock.advance(1_000);
    // Not retried: the same record contradicts the same handler every time.
    expect(task.state).toBe('failed');
    expect(task.attempts).toBe(2);
    const error = await task.result.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskheapError);
    expect(error).toMatchObject({ code: 'ERR_STEP_MISMATCH' });
    expect(String((error as Error).message)).toMatch(/step 'nudge'.*step 'remind'/);
  });

  it('refuses bad input at the call and leaves what is scheduled alone', async () => {
    const { clock, scheduler } = setup();
    const errors: unknown[] = [];
    const task = scheduler.after(0, async (ctx) => {
      for (const call of [
        () => ctx.step('', () => 1),
        () => ctx.step('x'.repeat(201), () => 1),
        () => ctx.step('bad', 'not a function' as never),
        () =>
          ctx.step('cycle', () => {
            const value: Record<string, unknown> = {};
            value.self = value;
            return value;
          }),
        () => ctx.sleep(-1),
        () => ctx.sleep({ until: 'soon' as never }),
        () => ctx.receive('reply', {} as never),
        () => ctx.receive('nul\0', { timeout: 1 }),
      ]) {
        errors.push(await call().catch((e: unknown) => (e as Error).constructor.name));
      }
      return 'ok';
    });
    await clock.advance(0);
    await expect(task.result).resolves.toBe('ok');
    expect(errors).toEqual(['TypeError', 'TypeError', 'TypeError', 'TypeError', 'RangeError', 'TypeError', 'TypeError', 'TypeError']);
    const waiting = scheduler.after(1_000, () => 'still here');
    // Without a store an id is an in-memory flow's task: none has this one.
    await expect(scheduler.send(42, 'reply', 1)).resolves.toBe(false);
    expect(() => scheduler.send(0, 'reply', 1)).toThrow(TypeError);
    expect(() => scheduler.send(waiting, '', 1)).toThrow(TypeError);
    expect(() => scheduler.send(waiting, 'reply', 10n)).toThrow(/The message is not JSON/);
    await clock.advance(1_000);
    await expect(waiting.result).resolves.toBe('still here');
  });

  it("a recurring job's occurrence uses steps too", async () => {
    const { clock, scheduler } = setup();
    const calls: string[] = [];
    const job = scheduler
      .every(1)
      .hour()
      .run(async (ctx) => {
        await ctx.step('tick', () => calls.push('tick'));
        await ctx.sleep('1m');
        calls.push('after sleep');
      });
    await clock.advance('1h');
    await clock.advance('1m');
    expect(calls).toEqual(['tick', 'after sleep']);
    job.cancel();
  });
});
