// Steps of stored tasks on PostgreSQL, in real time (the server's clock): a
// sleeping task is a waiting row that another process resumes, its finished
// steps not run again; a producer (a scheduler that never starts) sends
// messages by key, before the wait and during it, each taken once by the
// worker that runs the task; a timeout resolves undefined. A transaction
// step's writes commit with its record, or neither does.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { until } from '../handler-gates.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

const schemaName = schemaNamer('steps_');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

function scheduler(schema: string, define?: (s: Scheduler) => void): Scheduler {
  const s = new Scheduler({ store: postgresStore({ connectionString: server.url, schema, poll: '1h' }), onError: () => {} });
  define?.(s);
  opened.push(s);
  return s;
}

describe('steps on PostgreSQL', () => {
  it('a sleeping task outlives its process: another resumes it after the sleep, finished steps not run again', async () => {
    const schema = schemaName();
    const calls: string[] = [];
    const define = (s: Scheduler) =>
      s.define('follow-up', async (ctx) => {
        await ctx.step('ask', () => calls.push('ask'));
        await ctx.sleep(1_500);
        await ctx.step('nudge', () => calls.push('nudge'));
        return ctx.attempt;
      });
    const first = scheduler(schema, define);
    await first.start();
    const { id } = await first.schedule(Date.now(), 'follow-up');
    await until(async () => (await first.getTask(id))?.steps?.length === 2, 'the task sleeps');
    const sleeping = (await first.getTask(id))!;
    expect([sleeping.state, sleeping.attempts]).toEqual(['waiting', 0]);
    await first.close();
    const second = scheduler(schema, define);
    await second.start();
    const done = await second.waitFor(id, { timeout: 20_000 });
    expect([done.state, done.result, done.attempts]).toEqual(['succeeded', 1, 1]);
    expect(calls).toEqual(['ask', 'nudge']);
  });

  it("a transaction step's writes commit with its record: rolled back when it throws, never run again once committed", async () => {
    const schema = schemaName();
    let runs = 0;
    const worker = scheduler(schema, (s) =>
      s.define('pay', async (ctx) => {
        runs++;
        const charged = await ctx.transactionStep('charge', async (client) => {
          await client.query(`INSERT INTO "${schema}".charges (task) VALUES ($1)`, [ctx.id]);
          if (runs === 1) throw new Error('card declined');
          const { rows } = await client.query(`SELECT count(*)::int AS n FROM "${schema}".charges`);
          return rows[0].n as number;
        });
        // After the step committed: the retry must not charge again.
        if (runs === 2) throw new Error('the receipt failed');
        return charged;
      }),
    );
    await worker.start();
    await admin.query(`CREATE TABLE "${schema}".charges (task bigint NOT NULL)`);
    const { id } = await worker.schedule(Date.now(), 'pay', { retry: { attempts: 3, delay: 10 } });
    const done = await worker.waitFor(id, { timeout: 20_000 });
    expect([done.state, done.result, done.attempts, runs]).toEqual(['succeeded', 1, 3, 3]);
    expect((await admin.query(`SELECT task FROM "${schema}".charges`)).rows).toEqual([{ task: String(id) }]);
    expect(done.steps?.map((step) => [step.name, step.state, step.attempts])).toEqual([['charge', 'done', 2]]);
  });

  it('a transaction step whose lease was lost rolls back, records nothing, and rejects with LeaseLostError', async () => {
    const schema = schemaName();
    let error: unknown;
    const worker = scheduler(schema, (s) =>
      s.define('pay', async (ctx) => {
        try {
          await ctx.transactionStep('charge', async (client) => {
            await client.query(`INSERT INTO "${schema}".charges (task) VALUES ($1)`, [ctx.id]);
            // Another process took the task over meanwhile.
            await admin.query(`UPDATE "${schema}".taskheap_tasks SET locked_by = 'another' WHERE id = $1`, [ctx.id]);
          });
        } catch (caught) {
          error = caught;
        }
      }),
    );
    await worker.start();
    await admin.query(`CREATE TABLE "${schema}".charges (task bigint NOT NULL)`);
    const { id } = await worker.schedule(Date.now(), 'pay');
    await until(() => error !== undefined, 'the step rejects');
    expect(error).toMatchObject({ name: 'LeaseLostError', code: 'ERR_LEASE_LOST' });
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".charges`)).rows).toEqual([{ n: 0 }]);
    expect((await admin.query(`SELECT steps FROM "${schema}".taskheap_tasks WHERE id = $1`, [id])).rows).toEqual([{ steps: null }]);
  });

  it('cancelling a sleeping task from another process ends it at once; cancelling one mid-step aborts its ctx.signal', async () => {
    const schema = schemaName();
    let aborted = false;
    const worker = scheduler(schema, (s) => {
      s.define('nap', async (ctx) => {
        await ctx.step('ask', () => 1);
        await ctx.sleep('1h');
      });
      s.define('long', async (ctx) => {
        await ctx.step(
          'wait',
          () =>
            new Promise<never>((_, reject) =>
              ctx.signal.addEventListener('abort', () => {
                aborted = true;
                reject(ctx.signal.reason);
              }),
            ),
        );
      });
    });
    const producer = scheduler(schema);
    await worker.start();
    const nap = await producer.schedule(Date.now(), 'nap');
    await until(async () => (await producer.getTask(nap.id))?.steps?.length === 2, 'the task sleeps');
    await expect(producer.cancelTask(nap.id)).resolves.toBe(true);
    expect((await producer.getTask(nap.id))?.state).toBe('cancelled');
    await expect(producer.send(nap.id, 'reply', 'late')).resolves.toBe(false);
    const long = await producer.schedule(Date.now(), 'long');
    await until(async () => (await producer.getTask(long.id))?.state === 'running', 'the step runs');
    await expect(producer.cancelTask(long.id)).resolves.toBe(true);
    await until(() => aborted, "the step's signal aborts");
    expect((await producer.waitFor(long.id, { timeout: 20_000 })).state).toBe('cancelled');
  });

  it("with queues, concurrency groups and flows: a waiting task frees its queue's slot, keeps its group's place, and its flow goes on after it", async () => {
    const schema = schemaName();
    const ran: string[] = [];
    const worker = new Scheduler({
      store: postgresStore({ connectionString: server.url, schema, poll: '1h' }),
      queues: { bots: { globalConcurrency: 1 } },
      onError: () => {},
    });
    opened.push(worker);
    worker.define('converse', async (ctx) => {
      await ctx.step('ask', () => ran.push('ask'));
      return await ctx.receive<string>('reply', { timeout: '1h' });
    });
    worker.define('other', (_ctx, { name }: { name: string }) => void ran.push(name));
    worker.define('summary', async (ctx) => `summary of ${(await ctx.dependencies()).map((dep) => dep.result).join()}`);
    await worker.start();
    const user = { group: 'user:1', limit: 1 };
    const flow = await worker.flows.add({
      tasks: {
        chat: { handler: 'converse', queue: 'bots', concurrency: user },
        sum: { handler: 'summary', after: ['chat'] },
      },
    });
    const chat = flow.tasks.chat!.id;
    await until(async () => (await worker.getTask(chat))?.steps?.length === 2, 'the conversation waits');
    // The queue's one slot is free while it waits; its concurrency group keeps its place, as a retry does.
    const queued = await worker.schedule(Date.now(), 'other', { queue: 'bots', payload: { name: 'queued' } });
    const grouped = await worker.schedule(Date.now(), 'other', { concurrency: user, payload: { name: 'grouped' } });
    expect((await worker.waitFor(queued.id, { timeout: 20_000 })).state).toBe('succeeded');
    expect((await worker.getTask(grouped.id))?.state).toBe('waiting');
    await expect(worker.send(chat, 'reply', '10:30')).resolves.toBe(true);
    expect((await worker.waitFor(flow.tasks.sum!.id, { timeout: 20_000 })).result).toBe('summary of 10:30');
    expect((await worker.waitFor(grouped.id, { timeout: 20_000 })).state).toBe('succeeded');
    expect(ran).toEqual(['ask', 'queued', 'grouped']);
  });

  it("an operator's retry of a failed task resumes it: its finished steps are not run again", async () => {
    const schema = schemaName();
    const calls: string[] = [];
    let down = true;
    const worker = scheduler(schema, (s) =>
      s.define('order', async (ctx) => {
        await ctx.step('charge', () => calls.push('charge'));
        await ctx.step('ship', () => {
          calls.push('ship');
          if (down) throw new Error('carrier down');
        });
        return 'shipped';
      }),
    );
    await worker.start();
    const { id } = await worker.schedule(Date.now(), 'order');
    expect((await worker.waitFor(id, { timeout: 20_000 })).state).toBe('failed');
    down = false;
    await worker.retryTask(id);
    const done = await worker.waitFor(id, { timeout: 20_000 });
    expect([done.state, done.result, calls]).toEqual(['succeeded', 'shipped', ['charge', 'ship', 'ship']]);
    expect(done.steps?.map((step) => [step.name, step.state, step.attempts])).toEqual([
      ['charge', 'done', 1],
      ['ship', 'done', 2],
    ]);
  });

  it('a producer sends by key: before the wait it is kept, during it the task is due at once; each taken once; late sends refused', async () => {
    const schema = schemaName();
    const worker = scheduler(schema, (s) =>
      s.define('chat', async (ctx) => {
        const first = await ctx.receive('reply', { timeout: '1h' });
        const second = await ctx.receive('reply', { timeout: '1h' });
        const third = await ctx.receive('reply', { timeout: 300 });
        return [first, second, third ?? 'timed out'];
      }),
    );
    const producer = scheduler(schema);
    const { id } = await producer.schedule(Date.now(), 'chat', { key: 'chat:7' });
    await expect(producer.send({ key: 'chat:7' }, 'reply', 'early')).resolves.toBe(true);
    await worker.start();
    await until(async () => (await worker.getTask(id))?.steps?.length === 2, 'the second wait');
    await expect(producer.send({ key: 'chat:7' }, 'reply', { n: 2 })).resolves.toBe(true);
    // Woken by the message's announcement: the wait's timeout and the worker's poll are an hour.
    const done = await producer.waitFor(id, { timeout: 20_000 });
    expect([done.state, done.result, done.attempts]).toEqual(['succeeded', ['early', { n: 2 }, 'timed out'], 1]);
    await expect(producer.send({ key: 'chat:7' }, 'reply', 'late')).resolves.toBe(false);
    await expect(producer.send(id, 'reply', 'late')).resolves.toBe(false);
  });

  it('the retention sweep takes a message whose task is gone (a send that raced a delete at retention 0), and no other', async () => {
    const schema = schemaName();
    const producer = scheduler(schema);
    const { id } = await producer.schedule(Date.now() + 3_600_000, 'chat', { key: 'chat:8' });
    await expect(producer.send(id, 'reply', 'kept')).resolves.toBe(true);
    await admin.query(`INSERT INTO "${schema}".taskheap_messages (task_id, topic, body) VALUES ($1, 'reply', '"left behind"')`, [
      id + 1_000,
    ]);
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    try {
      await store.prune(86_400_000, 86_400_000, 100);
    } finally {
      await store.close();
    }
    const { rows } = await admin.query(`SELECT task_id, body FROM "${schema}".taskheap_messages`);
    expect(rows.map((row) => [Number(row.task_id), row.body])).toEqual([[id, '"kept"']]);
  });
});

describe('steps on PostgreSQL, two workers and a producer', () => {
  it('messages by key reach the right conversation exactly once, whichever worker runs it', async () => {
    const schema = schemaName();
    const define = (s: Scheduler) =>
      s.define('talk', async (ctx, { n }: { n: number }) => {
        const first = await ctx.receive<string>('msg', { timeout: '1h' });
        const second = await ctx.receive<string>('msg', { timeout: 400 });
        const late = await ctx.receive<string>('msg', { timeout: '1h' });
        return { n, got: [first, second ?? 'timed out', late] };
      });
    const workers = [scheduler(schema, define), scheduler(schema, define)];
    const producer = scheduler(schema);
    const ids: number[] = [];
    for (let n = 0; n < 6; n++) ids.push((await producer.schedule(Date.now(), 'talk', { key: `talk:${n}`, payload: { n } })).id);
    // Before any worker runs them: kept for the first receive.
    for (let n = 0; n < 6; n++) await producer.send({ key: `talk:${n}` }, 'msg', `early ${n}`);
    for (const w of workers) await w.start();
    await until(async () => {
      const tasks = await Promise.all(ids.map((id) => producer.getTask(id)));
      return tasks.every((t) => t?.steps?.some((s) => s.name === 'msg#2' && s.state !== 'waiting'));
    }, 'every second wait timed out');
    // Sent after the second receive timed out: the third (a later receive of the topic) takes it, woken at once.
    for (let n = 0; n < 6; n++) await producer.send({ key: `talk:${n}` }, 'msg', `late ${n}`);
    const results = await Promise.all(ids.map((id) => producer.waitFor(id, { timeout: 20_000 })));
    expect(results.map((t) => [t.state, t.result])).toEqual(
      ids.map((_, n) => ['succeeded', { n, got: [`early ${n}`, 'timed out', `late ${n}`] }]),
    );
    expect(results.map((t) => t.attempts)).toEqual(ids.map(() => 1));
  });
});
