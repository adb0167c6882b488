// Steps of stored tasks on SQLite, on a ManualClock (the store's clock): a
// finished step is not run again after a retry or a restart, a sleeping
// task is a waiting row (no worker, no lease) that survives the process,
// messages sent by key before and during a wait are each taken once, a
// timeout resolves undefined, and a changed handler fails without retries.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type StoredTask } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { ManualClock } from '../../../src/testing.js';
import { dashboard } from '../../../src/dashboard.js';
import { record } from '../../../src/cli/format.js';
import { START } from '../../helpers.js';
import { until } from '../handler-gates.js';

const HOUR = 3_600_000;
const opened: Scheduler[] = [];
afterEach(async () => {
  for (const scheduler of opened.splice(0)) await scheduler.close();
});

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-steps-')), 'store.db');
}

/** A started scheduler on `path` with `define` applied. */
async function worker(path: string, clock: ManualClock, define: (scheduler: Scheduler) => void): Promise<Scheduler> {
  const scheduler = new Scheduler({ clock, store: sqliteStore(path), onError: () => {} });
  opened.push(scheduler);
  define(scheduler);
  await scheduler.start();
  return scheduler;
}

async function stateOf(scheduler: Scheduler, id: number): Promise<StoredTask> {
  return (await scheduler.getTask(id))!;
}

describe('steps on SQLite', () => {
  it('a sleep is a waiting row that outlives the process: the next process resumes after it, finished steps not run again', async () => {
    const path = tempDb();
    const clock = new ManualClock(START);
    const calls: string[] = [];
    const define = (scheduler: Scheduler) =>
      scheduler.define('follow-up', async (ctx, { user }: { user: string }) => {
        await ctx.step('ask', () => calls.push(`ask ${user}`));
        await ctx.sleep('1h');
        await ctx.step('nudge', () => calls.push(`nudge ${user}`));
        return { attempt: ctx.attempt };
      });
    const first = await worker(path, clock, define);
    const { id } = await first.schedule(START, 'follow-up', { payload: { user: 'ada' } });
    await clock.advance(0);
    await until(async () => (await stateOf(first, id)).runAt.getTime() === START + HOUR, 'the task sleeps');
    const sleeping = await stateOf(first, id);
    expect([sleeping.state, sleeping.attempts, first.running]).toEqual(['waiting', 0, 0]);
    expect(calls).toEqual(['ask ada']);
    // What getTask(), the dashboard's task detail and the CLI's `task <id>` show of its steps.
    const steps = [
      {
        name: 'ask',
        kind: 'step',
        state: 'done',
        attempts: 1,
        startedAt: new Date(START),
        endedAt: new Date(START),
        until: null,
        resultSize: 1,
      },
      {
        name: 'sleep',
        kind: 'sleep',
        state: 'sleeping',
        attempts: 1,
        startedAt: new Date(START),
        endedAt: null,
        until: new Date(START + HOUR),
        resultSize: 0,
      },
    ];
    expect(sleeping.steps).toEqual(steps);
    const detail = await dashboard(first, { authorize: () => true }).fetch(new Request(`http://localhost/api/task?id=${id}`));
    expect(((await detail.json()) as { steps: unknown }).steps).toEqual(JSON.parse(JSON.stringify(steps)));
    expect(record(sleeping as unknown as Record<string, unknown>)).toMatch(
      /^steps: +\[.*"name":"sleep","kind":"sleep","state":"sleeping"/m,
    );
    await first.close();

    const second = await worker(path, clock, define);
    await clock.advance(HOUR);
    const done = await second.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.result, done.attempts]).toEqual(['succeeded', { attempt: 1 }, 1]);
    expect(calls).toEqual(['ask ada', 'nudge ada']);
  });

  it('a failed step is retried by the task policy; the steps before it are not run again', async () => {
    const clock = new ManualClock(START);
    const calls: string[] = [];
    const scheduler = await worker(tempDb(), clock, (s) =>
      s.define('order', async (ctx) => {
        const charged = await ctx.step('charge', () => {
          calls.push('charge');
          return { receipt: 7 };
        });
        await ctx.step('email', () => {
          calls.push(`email ${ctx.attempt}`);
          if (ctx.attempt === 1) throw new Error('mail server down');
        });
        return charged;
      }),
    );
    const { id } = await scheduler.schedule(START, 'order', { retry: { attempts: 3, delay: 1_000 } });
    await clock.advance(0);
    await until(
      async () => (await stateOf(scheduler, id)).attempts === 1 && (await stateOf(scheduler, id)).state === 'waiting',
      'the retry',
    );
    // Between the runs, the failed step is recorded unfinished, counted.
    expect((await stateOf(scheduler, id)).steps?.map((step) => [step.name, step.state, step.attempts])).toEqual([
      ['charge', 'done', 1],
      ['email', 'failed', 1],
    ]);
    await clock.advance(1_000);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.result, done.attempts]).toEqual(['succeeded', { receipt: 7 }, 2]);
    expect(calls).toEqual(['charge', 'email 1', 'email 2']);
    expect(done.steps?.map((step) => [step.name, step.state, step.attempts])).toEqual([
      ['charge', 'done', 1],
      ['email', 'done', 2],
    ]);
  });

  it('messages by key: one sent before the wait is taken at it, one sent during it makes the task due at once, each once', async () => {
    const clock = new ManualClock(START);
    const scheduler = await worker(tempDb(), clock, (s) =>
      s.define('chat', async (ctx) => {
        const first = await ctx.receive('reply', { timeout: '1h' });
        const second = await ctx.receive('reply', { timeout: '1h' });
        return [first, second];
      }),
    );
    const { id } = await scheduler.schedule(START + 1_000, 'chat', { key: 'chat:1' });
    await expect(scheduler.send({ key: 'chat:1' }, 'reply', 'first')).resolves.toBe(true);
    await clock.advance(1_000);
    await until(async () => (await stateOf(scheduler, id)).runAt.getTime() === START + 1_000 + HOUR, 'the second wait');
    // By id, during the wait: due now, not at the timeout.
    await expect(scheduler.send(id, 'reply', { text: 'second' })).resolves.toBe(true);
    expect((await stateOf(scheduler, id)).runAt.getTime()).toBe(START + 1_000);
    await clock.advance(0);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.result, done.attempts]).toEqual(['succeeded', ['first', { text: 'second' }], 1]);
    await expect(scheduler.send({ key: 'chat:1' }, 'reply', 'late')).resolves.toBe(false);
    await expect(scheduler.send(id, 'reply', 'late')).resolves.toBe(false);
    await expect(scheduler.send(999_999, 'reply', 'nobody')).resolves.toBe(false);
  });

  it('a receive resolves undefined after its timeout; a message that comes later waits for the next receive of its topic', async () => {
    const clock = new ManualClock(START);
    const scheduler = await worker(tempDb(), clock, (s) =>
      s.define('nudge', async (ctx) => {
        const reply = await ctx.receive('reply', { timeout: '10m' });
        await ctx.sleep('1h');
        const late = await ctx.receive('reply', { timeout: 0 });
        return [reply ?? 'no reply', late];
      }),
    );
    const { id } = await scheduler.schedule(START, 'nudge');
    await clock.advance(0);
    await until(async () => (await stateOf(scheduler, id)).runAt.getTime() === START + 600_000, 'the wait');
    await clock.advance('10m');
    await until(async () => (await stateOf(scheduler, id)).runAt.getTime() === START + 600_000 + HOUR, 'the sleep');
    await expect(scheduler.send(id, 'reply', 'sorry, late')).resolves.toBe(true);
    await clock.advance(HOUR);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect(done.result).toEqual(['no reply', 'sorry, late']);
  });

  it('a step that threw and was caught is run again by the next run; the steps after it are not', async () => {
    const clock = new ManualClock(START);
    const calls: string[] = [];
    const scheduler = await worker(tempDb(), clock, (s) =>
      s.define('careful', async (ctx) => {
        const flaky = await ctx
          .step('flaky', () => {
            calls.push('flaky');
            if (calls.length === 1) throw new Error('once');
            return 'ok';
          })
          .catch(() => 'caught');
        await ctx.step('after', () => calls.push('after'));
        await ctx.sleep('1m');
        return flaky;
      }),
    );
    const { id } = await scheduler.schedule(START, 'careful');
    await clock.advance(0);
    await until(async () => (await stateOf(scheduler, id)).runAt.getTime() === START + 60_000, 'the sleep');
    await clock.advance(60_000);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.result]).toEqual(['succeeded', 'ok']);
    expect(calls).toEqual(['flaky', 'after', 'flaky']);
  });

  it('a handler whose steps changed fails with ERR_STEP_MISMATCH, not retried', async () => {
    const path = tempDb();
    const clock = new ManualClock(START);
    const first = await worker(path, clock, (s) =>
      s.define('flow', async (ctx) => {
        await ctx.step('one', () => 1);
        await ctx.sleep('1h');
      }),
    );
    const { id } = await first.schedule(START, 'flow', { retry: { attempts: 5, delay: 1_000 } });
    await clock.advance(0);
    await until(async () => (await stateOf(first, id)).runAt.getTime() === START + HOUR, 'the sleep');
    await first.close();
    const second = await worker(path, clock, (s) =>
      s.define('flow', async (ctx) => {
        await ctx.step('renamed', () => 1);
      }),
    );
    await clock.advance(HOUR);
    const done = await second.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.attempts]).toEqual(['failed', 1]);
    expect(done.lastError).toMatch(/step 'renamed'.*step 'one'/);
  });
  it('ctx.transactionStep() rejects with a TypeError (SQLite hands out no connection), and the run goes on to the next step', async () => {
    const path = tempDb();
    const clock = new ManualClock(START);
    const scheduler = await worker(path, clock, (s) =>
      s.define('pay', async (ctx) => {
        const refused = await ctx.transactionStep('charge', async () => 1).catch((error: unknown) => error);
        return [String(refused), await ctx.step('fallback', () => 2)];
      }),
    );
    const { id } = await scheduler.schedule(START, 'pay');
    await clock.advance(0);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect(done.result).toEqual(['TypeError: ctx.transactionStep() needs postgresStore(): only PostgreSQL hands out its connection', 2]);
    expect(done.steps?.map((step) => step.name)).toEqual(['fallback']);
  });
  it("with queues, concurrency groups and flows: a waiting task frees its queue's slot, keeps its group's place, and its flow goes on after it", async () => {
    const ran: string[] = [];
    const scheduler = new Scheduler({ store: sqliteStore(tempDb()), queues: { bots: { concurrency: 1 } }, onError: () => {} });
    opened.push(scheduler);
    scheduler.define('converse', async (ctx) => {
      await ctx.step('ask', () => ran.push('ask'));
      return await ctx.receive<string>('reply', { timeout: '1h' });
    });
    scheduler.define('other', (_ctx, { name }: { name: string }) => void ran.push(name));
    scheduler.define('summary', async (ctx) => `summary of ${(await ctx.dependencies()).map((dep) => dep.result).join()}`);
    await scheduler.start();
    const user = { group: 'user:1', limit: 1 };
    const flow = await scheduler.flows.add({
      tasks: {
        chat: { handler: 'converse', queue: 'bots', concurrency: user },
        sum: { handler: 'summary', after: ['chat'] },
      },
    });
    const chat = flow.tasks.chat!.id;
    await until(async () => (await stateOf(scheduler, chat)).steps?.length === 2, 'the conversation waits');
    const queued = await scheduler.schedule(Date.now(), 'other', { queue: 'bots', payload: { name: 'queued' } });
    const grouped = await scheduler.schedule(Date.now(), 'other', { concurrency: user, payload: { name: 'grouped' } });
    expect((await scheduler.waitFor(queued.id, { timeout: 20_000 })).state).toBe('succeeded');
    expect((await stateOf(scheduler, grouped.id)).state).toBe('waiting');
    await expect(scheduler.send(chat, 'reply', '10:30')).resolves.toBe(true);
    expect((await scheduler.waitFor(flow.tasks.sum!.id, { timeout: 20_000 })).result).toBe('summary of 10:30');
    expect((await scheduler.waitFor(grouped.id, { timeout: 20_000 })).state).toBe('succeeded');
    expect(ran).toEqual(['ask', 'queued', 'grouped']);
  });
  it("an operator's retry of a failed task resumes it: its finished steps are not run again", async () => {
    const clock = new ManualClock(START);
    const calls: string[] = [];
    let down = true;
    const scheduler = await worker(tempDb(), clock, (s) =>
      s.define('order', async (ctx) => {
        await ctx.step('charge', () => calls.push('charge'));
        await ctx.step('ship', () => {
          calls.push('ship');
          if (down) throw new Error('carrier down');
        });
        return 'shipped';
      }),
    );
    const { id } = await scheduler.schedule(START, 'order');
    await clock.advance(0);
    expect((await scheduler.waitFor(id, { timeout: 10_000 })).state).toBe('failed');
    down = false;
    await scheduler.retryTask(id);
    await clock.advance(0);
    const done = await scheduler.waitFor(id, { timeout: 10_000 });
    expect([done.state, done.result]).toEqual(['succeeded', 'shipped']);
    expect(calls).toEqual(['charge', 'ship', 'ship']);
    expect(done.steps?.map((step) => [step.name, step.state, step.attempts])).toEqual([
      ['charge', 'done', 1],
      ['ship', 'done', 2],
    ]);
  });
});
