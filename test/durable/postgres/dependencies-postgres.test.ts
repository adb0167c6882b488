// Flows across real processes on PostgreSQL (issue 28): three worker
// processes (test/fixtures/pg-flow-worker.ts, which polls once a minute, so
// only NOTIFY gets dependents going in time) share a few hundred small flows
// (chains, fan-outs, fan-ins, some with a failing task), and one worker is
// SIGKILLed mid-way. Checked from the database: no task is left blocked,
// waiting or running; every flow ends as its rules say; a dependent never
// starts before each of its dependencies finished; and a task runs twice
// only if its first run was on the killed worker (its lease ran out: the
// at-least-once of SPEC §5), never because two processes saw it unblocked.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type FlowTask } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';
import { workerProcesses } from '../worker-process.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres((started, pool) => {
  server = started;
  admin = pool;
});
const freshSchema = schemaNamer('flows_mp_');
const spawnWorker = workerProcesses();

/** Flow `k`: one of four shapes, every seventh with a failing first task. */
function flowSpec(k: number): Record<string, FlowTask> {
  const fail = k % 7 === 0;
  const shape = k % 4;
  const node = (after: string[] = [], extra: object = {}): FlowTask => ({ handler: 'node', payload: { ...extra }, after });
  if (shape === 0) return { a: node([], { fail }), b: node(['a']), c: node(['b']), d: node(['c']) };
  if (shape === 1) return { a: node([], { fail }), b: node(['a']), c: node(['a']), d: node(['a']) };
  if (shape === 2) return { a: node([], { fail }), b: node(), c: node(), d: node(['a', 'b', 'c']) };
  return { a: node([], { fail }), b: node(['a']), c: { ...node(), after: [{ task: 'a', onFailure: 'continue' }] }, d: node(['b', 'c']) };
}

describe('flows across processes on PostgreSQL (issue 28)', () => {
  it('without a schema option (the search_path): the NOTIFY of the last dependency wakes an idle worker (a poll of an hour)', async () => {
    const database = `flows_path_${process.pid}`;
    await admin.query(`CREATE DATABASE ${database}`);
    const url = server.url.replace(/\/[^/]*$/, `/${database}`);
    // 'first' and 'second' run in different schedulers: only the NOTIFY of a's outcome can wake the one that runs b.
    const one = new Scheduler({ store: postgresStore({ connectionString: url, poll: 3_600_000 }), handlers: ['second'] });
    const two = new Scheduler({ store: postgresStore({ connectionString: url, poll: 3_600_000 }) });
    const ran: string[] = [];
    // a ends a second after it starts: by then the other scheduler has claimed (nothing) for the add's wake and sleeps.
    one.define('first', async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      ran.push('a');
    });
    two.define('second', () => void ran.push('b'));
    try {
      await one.start();
      await two.start();
      const flow = await one.flows.add({ tasks: { a: { handler: 'first' }, b: { handler: 'second', after: ['a'] } } });
      expect((await one.waitFor(flow.tasks.b!.id, { timeout: 30_000 })).state).toBe('succeeded');
      expect(ran).toEqual(['a', 'b']);
    } finally {
      await one.close();
      await two.close();
    }
  }, 60_000);

  it('three workers, one SIGKILLed mid-way, over 200 flows: none left waiting, every dependent after its dependencies, no double start but the killed one', async () => {
    const schema = freshSchema();
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }), handlers: ['node'] });
    await producer.migrate();
    await admin.query(`CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, task bigint NOT NULL, pid integer NOT NULL,
      started_at timestamptz NOT NULL, finished_at timestamptz)`);
    const workers = [0, 1, 2].map(() => spawnWorker('test/fixtures/pg-flow-worker.ts', [server.url, schema]));
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.next();
    const FLOWS = 200;
    const flows: { id: number; tasks: Record<string, { id: number }> }[] = [];
    for (let k = 0; k < FLOWS; k++) {
      flows.push(await producer.flows.add({ tasks: flowSpec(k) }));
      if (k === FLOWS / 2) workers[0]!.kill();
    }
    const T = `"${schema}".taskheap_tasks`;
    const deadline = Date.now() + 180_000;
    let left = -1;
    while (Date.now() < deadline) {
      left = Number((await admin.query(`SELECT count(*) AS n FROM ${T} WHERE state IN ('blocked', 'waiting', 'running')`)).rows[0].n);
      if (left === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(left, 'tasks left blocked, waiting or running').toBe(0);
    for (const w of workers.slice(1)) w.next();
    await Promise.all(workers.slice(1).map((w) => w.done));
    // Every flow ends as its rules say.
    for (const [k, flow] of flows.entries()) {
      const status = (await producer.flows.get(flow.id))!;
      const state = (name: string) => {
        const { task } = status.tasks.find((t) => t.task.id === flow.tasks[name]!.id)!;
        return task.state === 'failed' && !/told to fail|DependencyError/.test(task.lastError ?? '')
          ? `failed: ${task.lastError}`
          : task.state;
      };
      const failing = k % 7 === 0;
      const shape = k % 4;
      const expected = !failing
        ? { a: 'succeeded', b: 'succeeded', c: 'succeeded', d: 'succeeded' }
        : shape === 0
          ? { a: 'failed', b: 'failed', c: 'failed', d: 'failed' }
          : shape === 1
            ? { a: 'failed', b: 'failed', c: 'failed', d: 'failed' }
            : shape === 2
              ? { a: 'failed', b: 'succeeded', c: 'succeeded', d: 'failed' }
              : { a: 'failed', b: 'failed', c: 'succeeded', d: 'failed' };
      // Compared as text so that a failure names every state (and an unexpected error) in one line.
      const seen = { a: state('a'), b: state('b'), c: state('c'), d: state('d') };
      expect(JSON.stringify(seen), `flow ${k}`).toBe(JSON.stringify(expected));
    }
    // A dependent starts after each of its dependencies' runs finished.
    const early = await admin.query(`SELECT d.task_id, d.dep_id FROM "${schema}".taskheap_deps AS d
      JOIN "${schema}".runs AS r ON r.task = d.task_id JOIN "${schema}".runs AS q ON q.task = d.dep_id
      WHERE q.finished_at IS NOT NULL AND r.started_at < q.finished_at AND q.pid <> ${workers[0]!.pid}`);
    expect(early.rows, 'dependents started before a dependency finished').toEqual([]);
    // Two starts of a task only when the first was on the killed worker.
    const twice = await admin.query(
      `SELECT task, array_agg(pid ORDER BY id) AS pids FROM "${schema}".runs GROUP BY task HAVING count(*) > 1`,
    );
    for (const row of twice.rows as { task: string; pids: number[] }[]) {
      expect(
        row.pids.slice(0, -1).every((pid) => pid === workers[0]!.pid),
        `task ${row.task} ran on ${row.pids}`,
      ).toBe(true);
    }
    const ran = Number((await admin.query(`SELECT count(DISTINCT task) AS n FROM "${schema}".runs`)).rows[0].n);
    expect(ran).toBeGreaterThan(FLOWS * 3);
    await producer.close();
  }, 300_000);
});
