// Limits across real processes on PostgreSQL (issue 22): three worker
// processes (test/fixtures/pg-limits-worker.ts) and a producer share one
// schedule. A bot with Telegram's limits (30/s overall, 1/s per chat over 50
// chats, 20/min per group): no window over any limit, by the database's
// clock; the overall limit achieved (within 5% on an idle machine: bench/limits.ts); a SIGKILLed worker loses
// nothing. Concurrency N per key: never more than N of a key at once across
// the processes, a killed worker's slots freed when its lease runs out.
// Every start time is the claim's, read from the database.
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type DurableTaskItem } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { fullClaimParams, nextDueParams, plainClaimParams, simpleAsk, type ClaimSettings } from '../../../src/durable/postgres/claim.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';
import { workerProcesses, type WorkerProcess } from '../worker-process.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres((started, pool) => {
  server = started;
  admin = pool;
});
const freshSchema = schemaNamer('lim');

type Worker = WorkerProcess;
const spawnWorker = workerProcesses();

function worker(schema: string, rate: number): Worker {
  return spawnWorker('test/fixtures/pg-limits-worker.ts', [server.url, schema, String(rate)]);
}

async function prepare(schema: string): Promise<void> {
  const store = postgresStore({ connectionString: server.url, schema });
  await store.migrate();
  await store.close();
  await admin.query(`CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, task bigint NOT NULL, attempt integer NOT NULL, pid integer NOT NULL,
    started_at timestamptz NOT NULL, finished_at timestamptz)`);
}

/** Polls `query` (one row, column n) until it reaches `n`, or the deadline. */
async function until(query: string, n: number, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = Number((await admin.query<{ n: string }>(query)).rows[0]!.n);
    if (found >= n || Date.now() > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The most starts in any window of `interval` ms (each window opening at a start), starts in ms sorted. */
function busiestWindow(starts: number[], interval: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (starts[j]! <= starts[i]! - interval) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('limits across processes on PostgreSQL (issue 22)', () => {
  it("a bot with Telegram's limits on three processes: no window over any limit, a SIGKILLed worker loses nothing", async () => {
    const schema = freshSchema();
    await prepare(schema);
    const workers = [worker(schema, 30), worker(schema, 30), worker(schema, 30)];
    await Promise.all(workers.map((w) => w.ready));
    // 60 messages to 50 chats (ten chats get two) and 21 to each of two groups: 100 may start within
    // the minute (each group's 21st waits for the next), more than three seconds' worth at 30/s.
    const items: DurableTaskItem[] = [];
    const now = Date.now();
    for (let i = 0; i < 60; i++)
      items.push({ when: now, name: 'send', payload: { i }, rate: { group: `chat:${i % 50}`, limit: 1, interval: '1s' } });
    for (let i = 0; i < 42; i++)
      items.push({ when: now, name: 'send', payload: { i }, rate: { group: `group:${i % 2}`, limit: 20, interval: '1m' } });
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    await producer.scheduleMany(items);
    await producer.close();
    for (const w of workers) w.next();
    // One worker dies once three windows are measured: what it held runs again elsewhere once its lease (1.5 s) ran out.
    await until(`SELECT count(*) AS n FROM "${schema}".runs`, 95, 60_000);
    workers[2]!.kill();
    // Bounded for a stuck run, not by speed: 60 chat messages need 2 s at 1/s per chat.
    const chats = await until(
      `SELECT count(*) AS n FROM "${schema}".taskheap_tasks WHERE state = 'succeeded' AND rate_key LIKE 'chat:%'`,
      60,
      120_000,
    );
    if (chats < 60) {
      // What to look at when it fails: the chat messages not done, and who held them.
      const { rows: left } = await admin.query(`SELECT id, state, rate_key, locked_by, locked_until - now() AS left, attempts, expiries
        FROM "${schema}".taskheap_tasks WHERE state <> 'succeeded' AND rate_key LIKE 'chat:%'`);
      expect.fail(
        `${chats} of 60 chat messages succeeded; the others: ${JSON.stringify(left)}; workers ${workers.map((w) => w.pid)} (the last killed)`,
      );
    }
    await until(`SELECT 1 - count(*) AS n FROM "${schema}".taskheap_tasks WHERE state = 'running' AND locked_until > now()`, 1, 60_000);
    for (const w of workers.slice(0, 2)) w.next();
    const outputs = await Promise.all(workers.slice(0, 2).map((w) => w.done));
    // A claim the killed worker sent before it died may still commit after the check above (the
    // server finishes a statement whose client is gone, one that waited on a lock long after): its
    // lease then runs out too.
    await until(`SELECT 1 - count(*) AS n FROM "${schema}".taskheap_tasks WHERE state = 'running' AND locked_until > now()`, 1, 60_000);

    // Nothing lost: every task succeeded, or is a group's message waiting for the group's window (a
    // minute): never started, or started by the killed worker, its lease run out, and its restart
    // waiting for a token (a killed worker's runs took the group's tokens too: a restart is a start).
    const { rows: tasks } = await admin.query<{ id: string; state: string; key: string; expired: boolean }>(`SELECT id, state,
        rate_key AS key, locked_until < now() AS expired FROM "${schema}".taskheap_tasks WHERE state <> 'succeeded'`);
    for (const task of tasks) {
      if ((task.state === 'waiting' || (task.state === 'running' && task.expired)) && task.key.startsWith('group:')) continue;
      // What to look at when it fails: who held the task, its runs, and what the live workers said on closing.
      const held = await admin.query(
        `SELECT t.locked_by, t.attempts, t.locked_until - now() AS left, t.started_at, r.pid, r.attempt, r.started_at AS run
         FROM "${schema}".taskheap_tasks AS t LEFT JOIN "${schema}".runs AS r ON r.task = t.id WHERE t.id = $1`,
        [task.id],
      );
      const pids = workers.map((w) => w.pid);
      expect.fail(`${JSON.stringify(task)} held: ${JSON.stringify(held.rows)}; workers ${pids} (the last killed); ${outputs.join(' | ')}`);
    }
    expect(tasks.length).toBeGreaterThanOrEqual(2);
    // Every start, a killed worker's included (each run logs the claim's time of its attempt).
    const { rows } = await admin.query<{
      key: string;
      at: number;
    }>(`SELECT t.rate_key AS key, (extract(epoch from r.started_at) * 1000)::float8 AS at
      FROM "${schema}".runs AS r JOIN "${schema}".taskheap_tasks AS t ON t.id = r.task ORDER BY r.started_at`);
    const all = rows.map((row) => row.at);
    expect(busiestWindow(all, 1_000)).toBeLessThanOrEqual(30);
    const byKey = new Map<string, number[]>();
    for (const row of rows) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row.at]);
    for (const [key, starts] of byKey)
      expect(busiestWindow(starts, key.startsWith('chat:') ? 1_000 : 60_000), key).toBeLessThanOrEqual(key.startsWith('chat:') ? 1 : 20);
    // The overall limit binds for three seconds from the first start: at most 90 starts. How close
    // to 90 it gets depends on how fast the machine is (each window's tokens come back about a
    // claim's round trip late), so the achieved rate is measured by bench/limits.ts on a quiet
    // machine, not asserted here; that nothing is hoarded is the claims' conformance scenarios.
    const first = all[0]!;
    expect(all.filter((at) => at < first + 3_000).length).toBeLessThanOrEqual(90);
  }, 240_000);

  it("concurrency N per key across three processes: never more than N of a key at once; a SIGKILLed worker's slots come back", async () => {
    const schema = freshSchema();
    await prepare(schema);
    const workers = [worker(schema, 0), worker(schema, 0), worker(schema, 0)];
    await Promise.all(workers.map((w) => w.ready));
    const items: DurableTaskItem[] = [];
    const now = Date.now();
    for (let i = 0; i < 36; i++)
      items.push({ when: now + i, name: 'hold', payload: { i }, concurrency: { group: `tenant:${i % 3}`, limit: 2 } } as DurableTaskItem);
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    await producer.scheduleMany(items);
    await producer.close();
    for (const w of workers) w.next();
    await until(`SELECT count(*) AS n FROM "${schema}".runs`, 6, 60_000);
    workers[2]!.kill();
    const finished = await until(`SELECT count(*) AS n FROM "${schema}".taskheap_tasks WHERE state = 'succeeded'`, 36, 120_000);
    for (const w of workers.slice(0, 2)) w.next();
    await Promise.all(workers.slice(0, 2).map((w) => w.done));
    expect(finished).toBe(36);
    // Runs by the database's clock; a killed run holds its task's slot until the task's next run starts.
    const { rows } = await admin.query<{ task: string; key: string; start: number; end: number }>(`SELECT r.task, t.serial AS key,
        (extract(epoch from r.started_at) * 1000)::float8 AS start,
        (extract(epoch from COALESCE(r.finished_at,
          (SELECT min(n.started_at) FROM "${schema}".runs AS n WHERE n.task = r.task AND n.started_at > r.started_at))) * 1000)::float8 AS end
      FROM "${schema}".runs AS r JOIN "${schema}".taskheap_tasks AS t ON t.id = r.task`);
    const most = new Map<string, number>();
    for (const run of rows) {
      const during = new Set(
        rows.filter((other) => other.key === run.key && other.start <= run.start && other.end > run.start).map((other) => other.task),
      );
      most.set(run.key, Math.max(most.get(run.key) ?? 0, during.size));
    }
    for (const [key, n] of most) expect(n, key).toBeLessThanOrEqual(2);
    expect(
      [...most.values()].some((n) => n === 2),
      'the limit is reached, not merely respected',
    ).toBe(true);
    expect((await admin.query(`SELECT key, held_by FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([]);
  }, 240_000);
});

/** Every node's rows read (actual rows times loops) in a JSON plan. */
function rowsRead(plan: { 'Actual Rows'?: number; 'Actual Loops'?: number; Plans?: unknown[] }): number[] {
  const own = (plan['Actual Rows'] ?? 0) * (plan['Actual Loops'] ?? 0);
  return [own, ...(plan.Plans ?? []).flatMap((child) => rowsRead(child as typeof plan))];
}

/**
 * A claim for an EXPLAIN: 16 tasks for owner 'explain' for 30 s, any handler, no scheduler-wide
 * bucket, 16 free workers, no queue rooms, no takeover wait, no lease announcement; a task fails
 * after 1 expiry.
 */
const EXPLAIN_ASK = simpleAsk('explain', 30_000, 16);
const EXPLAIN_SETTINGS: ClaimSettings = { prefix: '', maxExpiries: 1, expiredText: 'expired' };
const FULL_CLAIM = fullClaimParams(EXPLAIN_ASK, EXPLAIN_SETTINGS);

/** The most rows any node of `sql`'s plan read, run with `params` (EXPLAIN ANALYZE, rolled back). */
async function mostRowsRead(sql: string, params: unknown[]): Promise<number> {
  const client = await admin.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: Parameters<typeof rowsRead>[0] }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
      params,
    );
    return Math.max(...rowsRead(rows[0]!['QUERY PLAN'][0].Plan));
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

describe('a claim with blocked work (issue 22)', () => {
  it('reads none of the tasks behind a held concurrency group or an empty rate bucket (EXPLAIN ANALYZE: no plan node reads them)', async () => {
    const schema = freshSchema();
    const store = postgresStore({ connectionString: server.url, schema });
    try {
      await store.migrate();
      const past = Date.now() - 60_000;
      const { advanceJob } = await import('../../../src/durable/advance-job.js');
      const { statements } = await import('../../../src/durable/postgres/store.js');
      await store.addTask({
        name: 'x',
        key: null,
        payload: '{}',
        runAt: past,
        maxAttempts: 1,
        options: '{"serial":"busy"}',
        serial: 'busy',
      });
      const bucket = '{"rate":{"key":"empty","limit":1,"interval":3600000}}';
      await store.addTask({ name: 'x', key: null, payload: '{}', runAt: past, maxAttempts: 1, options: bucket, rateGroup: 'empty' });
      expect(await store.claim({ owner: 'holder', now: Date.now(), lease: 600_000, limit: 10, advance: advanceJob })).toHaveLength(2);
      await admin.query(
        `INSERT INTO "${schema}".taskheap_tasks (name, payload, run_at, serial, rate_key, options)
        SELECT 'x', '{}', now() - interval '1 minute', CASE WHEN i % 2 = 0 THEN 'busy' END, CASE WHEN i % 2 = 1 THEN 'empty' END,
          CASE WHEN i % 2 = 0 THEN '{"serial":"busy"}' ELSE $2 END
        FROM generate_series(1, $1) AS i`,
        [5_000, bucket],
      );
      await admin.query(`ANALYZE "${schema}".taskheap_tasks`);
      const most = await mostRowsRead(statements(schema).claim, FULL_CLAIM);
      expect(most, 'the most rows a plan node read').toBeLessThan(100);
    } finally {
      await store.close();
    }
  });
});

describe('a claim on a table not analyzed yet', () => {
  // A bulk add into a new table: until autovacuum analyzes it, the planner takes the waiting tasks
  // for one row, and chose among indexes of the same rows by their height. With two such indexes
  // (until schema version 12) every claim and next-due read all 40,000 to find their queues.
  it('reads a few rows per plan node, not every waiting task (the claims and next-due, EXPLAIN ANALYZE)', async () => {
    const schema = freshSchema();
    const store = postgresStore({ connectionString: server.url, schema });
    try {
      await store.migrate();
      await admin.query(
        `INSERT INTO "${schema}".taskheap_tasks (name, payload, run_at, options)
        SELECT 'x', '{}', now() - interval '1 minute', '{}' FROM generate_series(1, 40000)`,
      );
      const { statements } = await import('../../../src/durable/postgres/store.js');
      const sql = statements(schema);
      const plain = await mostRowsRead(sql.claimPlain, plainClaimParams(EXPLAIN_ASK, EXPLAIN_SETTINGS));
      const full = await mostRowsRead(sql.claimUnlessJobsDue, FULL_CLAIM);
      const nextDue = await mostRowsRead(sql.nextDue, nextDueParams({}, 30_000, 0));
      const plainNextDue = await mostRowsRead(sql.nextDuePlain, [null]);
      const most = { plain, full, nextDue, plainNextDue };
      expect(Math.max(...Object.values(most)), `the most rows a plan node read: ${JSON.stringify(most)}`).toBeLessThan(100);
    } finally {
      await store.close();
    }
  });
});
