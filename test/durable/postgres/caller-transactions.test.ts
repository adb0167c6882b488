// A caller's open transaction never stalls a worker (PostgreSQL). Every add
// that takes a caller's `client` (schedule, scheduleMany, flows.add) is made
// inside one transaction that stays open for more than two leases, over the
// rows workers hold: a flow depending on a running task, keyed adds over a
// running task (dedupe answers it), tasks naming the concurrency and rate
// keys of running tasks, one changing a key's limit. Meanwhile two worker
// schedulers (two owners) run tasks that outlive the lease and must be
// renewed, and tasks that finish while the transaction is open. Nothing runs
// twice, every outcome is written while the transaction is still open (within
// a lease of the task's end), and after the commit the added work runs once.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { Gate } from '../handler-gates.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres(
  (started, pool) => {
    server = started;
    admin = pool;
  },
  { adminConnections: 3 },
);

const LEASE = 3_000;
const schemaName = schemaNamer('caller_tx_');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A worker: 'hold' (payload { id }) runs until the gate of its id opens, 'quick' ends at once; each run counted by task id. */
function worker(schema: string, runs: Map<number, number>, gate: Gate): Scheduler {
  const scheduler = new Scheduler({
    store: postgresStore({ connectionString: server.url, schema, lease: LEASE, poll: 200, timeout: 1_000 }),
    onError: () => {},
    workers: 8,
  });
  const count = (id: number) => runs.set(id, (runs.get(id) ?? 0) + 1);
  scheduler.define('hold', async (ctx, payload: { id: string }) => {
    count(ctx.id);
    await gate.wait(payload.id);
  });
  scheduler.define('quick', (ctx) => {
    count(ctx.id);
  });
  opened.push(scheduler);
  return scheduler;
}

async function statesOf(schema: string, ids: readonly number[]): Promise<string[]> {
  const { rows } = await admin.query<{ id: string; state: string }>(`SELECT id, state FROM "${schema}".taskheap_tasks WHERE id = ANY($1)`, [
    ids,
  ]);
  const byId = new Map(rows.map((row) => [Number(row.id), row.state]));
  return ids.map((id) => byId.get(id) ?? 'missing');
}

async function until(what: string, condition: () => Promise<boolean>, timeout: number): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(50);
  }
}

describe("a caller's open transaction on PostgreSQL", () => {
  it('held past two leases over the rows workers hold, stalls no renewal and no outcome: nothing runs twice', async () => {
    const schema = schemaName();
    const runs = new Map<number, number>();
    const gate = new Gate();
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    opened.push(producer);
    await producer.migrate();
    const now = Date.now();
    const limits = { concurrency: { group: 'c', limit: 1 }, rate: { group: 'r', limit: 100, interval: '1s' } };
    // Running while the transaction is open: one the flow depends on (keyed, holding the limits), one holding
    // a key whose limit the transaction changes, and plain ones; 'long' ones outlive the lease, 'short' end in it.
    const busy = await producer.schedule(now, 'hold', { key: 'busy', payload: { id: 'long' }, ...limits });
    const wide = await producer.schedule(now, 'hold', { payload: { id: 'long' }, concurrency: { group: 'c2', limit: 2 } });
    const plain = await producer.scheduleMany(
      Array.from({ length: 6 }, (_, i) => ({ when: now, name: 'hold', payload: { id: i < 3 ? 'long' : 'short' } })),
    );
    const held = [busy.id, wide.id, ...plain.map((task) => task.id)];
    await worker(schema, runs, gate).start();
    await until('every task runs', async () => (await statesOf(schema, held)).every((s) => s === 'running'), 20_000);
    // A second owner, ready to take over any lease that runs out.
    await worker(schema, runs, gate).start();

    const client = await admin.connect();
    let added: number[];
    let flowTask: number;
    try {
      await client.query('BEGIN');
      const flow = await producer.flows.add({ client, tasks: { then: { handler: 'quick', after: [busy.id] } } });
      flowTask = flow.tasks.then!.id;
      const answered = await producer.schedule(Date.now(), 'quick', { key: 'busy', client });
      expect([answered.enqueued, answered.id]).toEqual(['existing', busy.id]);
      const many = await producer.scheduleMany([
        { when: Date.now(), name: 'quick', key: 'busy', client },
        { when: Date.now(), name: 'quick', key: 'fresh', client },
      ]);
      expect(many.map((task) => task.enqueued)).toEqual(['existing', 'inserted']);
      const keyed = await producer.schedule(Date.now(), 'quick', { client, ...limits });
      const changed = await producer.schedule(Date.now(), 'quick', { client, concurrency: { group: 'c2', limit: 3 } });
      added = [flowTask, many[1]!.id, keyed.id, changed.id];

      // Held open: the short tasks end at once, the long ones after two leases; every outcome is written meanwhile.
      const shortOnes = plain.slice(3).map((task) => task.id);
      gate.open('short');
      await until('the short tasks succeed', async () => (await statesOf(schema, shortOnes)).every((s) => s === 'succeeded'), LEASE);
      await sleep(2 * LEASE);
      expect(
        await statesOf(
          schema,
          held.filter((id) => !shortOnes.includes(id)),
        ),
      ).toEqual(Array(5).fill('running'));
      gate.open('long');
      await until('the long tasks succeed', async () => (await statesOf(schema, held)).every((s) => s === 'succeeded'), LEASE);
      expect(await statesOf(schema, added)).toEqual(['missing', 'missing', 'missing', 'missing']);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    // Committed: the flow's task (its dependency ended while the transaction was open) and the rest run, once.
    await until('the added tasks succeed', async () => (await statesOf(schema, added)).every((s) => s === 'succeeded'), 20_000);
    const twice = [...runs].filter(([, n]) => n > 1).map(([id]) => id);
    expect({ twice, ran: [...held, ...added].filter((id) => runs.get(id) === 1).length }).toEqual({ twice: [], ran: 12 });
  }, 60_000);

  it("start() readies its connections without waiting on a caller's lock of the meta row", async () => {
    const schema = schemaName();
    const first = postgresStore({ connectionString: server.url, schema });
    const second = postgresStore({ connectionString: server.url, schema, timeout: 40_000, lease: 120_000 });
    await first.migrate();
    await second.migrate();
    // The first start marks the server (committed); the claims of nothing that ready connections then write nothing.
    await first.warm({ owner: 'first', lease: LEASE, names: ['quick'], ownLimits: true });
    const client = await admin.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT * FROM "${schema}".taskheap_meta FOR UPDATE`);
      // Either set of statements: the plain claim's, and the full claim's of a process with limits of its own.
      for (const ownLimits of [false, true]) {
        const warmed = second.warm({ owner: 'second', lease: LEASE, names: ['quick'], ownLimits }).then(() => 'ready');
        expect(await Promise.race([warmed, sleep(20_000).then(() => 'waiting for the row lock')])).toBe('ready');
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
      await Promise.all([first.close(), second.close()]);
    }
  });
});
