// The edges of flows when their tasks are deleted (PostgreSQL, whose edges
// have no foreign keys: the statements that delete tasks take them). A
// deleted task leaves no edge behind, at either end; a stored dependency a
// flow names in a caller's open transaction is kept from deletion until the
// commit, and the flow then runs after it.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let url: string;
let admin: pg.Pool;
usePostgres((started, pool) => {
  url = started.url;
  admin = pool;
});
const schemaName = schemaNamer('edges_');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

function scheduler(schema: string): Scheduler {
  const made = new Scheduler({ store: postgresStore({ connectionString: url, schema, poll: 200 }), onError: () => {} });
  made.define('step', () => 'done');
  opened.push(made);
  return made;
}

async function edges(schema: string): Promise<{ task: number; dep: number }[]> {
  const { rows } = await admin.query<{ task: string; dep: string }>(
    `SELECT task_id AS task, dep_id AS dep FROM "${schema}".taskheap_deps ORDER BY 1, 2`,
  );
  return rows.map((row) => ({ task: Number(row.task), dep: Number(row.dep) }));
}

describe('flow edges when tasks are deleted (PostgreSQL)', () => {
  it('deleteTasks and the retention sweep take the edges of the tasks they delete, at either end, and no other', async () => {
    const schema = schemaName();
    const worker = scheduler(schema);
    await worker.start();
    // a → b → c, and d → e: deleting b takes both of its edges, and leaves d → e.
    const chain = await worker.flows.add({
      tasks: { a: { handler: 'step' }, b: { handler: 'step', after: ['a'] }, c: { handler: 'step', after: ['b'] } },
    });
    const pair = await worker.flows.add({ tasks: { d: { handler: 'step' }, e: { handler: 'step', after: ['d'] } } });
    const [a, b, c, d, e] = [chain.tasks.a!, chain.tasks.b!, chain.tasks.c!, pair.tasks.d!, pair.tasks.e!].map((task) => task.id);
    // Read until they end, not waited for: a waiter's mark would keep them from the sweep below a while.
    for (const id of [c!, e!]) {
      const deadline = Date.now() + 20_000;
      while ((await worker.getTask(id))?.state !== 'succeeded') {
        if (Date.now() > deadline) throw new Error(`task ${id} did not succeed within 20 s`);
        await sleep(20);
      }
    }
    expect(await edges(schema)).toEqual([
      { task: b, dep: a },
      { task: c, dep: b },
      { task: e, dep: d },
    ]);

    await admin.query(`UPDATE "${schema}".taskheap_tasks SET name = 'middle' WHERE id = $1`, [b]);
    expect(await worker.deleteTasks({ name: 'middle' })).toBe(1);
    expect(await edges(schema)).toEqual([{ task: e, dep: d }]);

    // The sweep (retention of 0 for succeeded tasks, as `npx taskheap prune` asks) deletes the rest.
    const store = postgresStore({ connectionString: url, schema });
    await store.migrate();
    try {
      expect(await store.prune(0, null, 500)).toBe(4);
    } finally {
      await store.close();
    }
    expect(await edges(schema)).toEqual([]);
  });

  it("a stored dependency named by a flow in a caller's open transaction is not deleted before the commit; the flow then runs after it", async () => {
    const schema = schemaName();
    const worker = scheduler(schema);
    await worker.start();
    const first = await worker.schedule(Date.now(), 'step');
    await worker.waitFor(first.id, { timeout: 20_000 });

    const client = await admin.connect();
    let then: number;
    try {
      await client.query('BEGIN');
      const flow = await worker.flows.add({ client, tasks: { then: { handler: 'step', after: [first.id] } } });
      then = flow.tasks.then!.id;
      // Another connection deletes every finished task meanwhile: not the one the open flow depends on.
      expect(await worker.deleteTasks({})).toBe(0);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await worker.waitFor(then, { timeout: 20_000 })).state).toBe('succeeded');
    expect(await edges(schema)).toEqual([{ task: then, dep: first.id }]);
    expect(await worker.deleteTasks({})).toBe(2);
    expect(await edges(schema)).toEqual([]);
  });
});
