// The PostgreSQL store behind PgBouncer in transaction pooling (issue 23):
// Debian's pgbouncer, started here on a free loopback port in front of a
// throwaway server, with a pool of 2 server connections (so every client
// session really is shared). Two schedulers with `pgbouncer: true` schedule,
// claim and complete work through it: plain tasks, tasks added in a caller's
// transaction (`client`), handlers completing in `ctx.transaction()`, a
// recurring job, `waitFor`; first by polling alone, then with
// `listenConnectionString` (a direct connection that LISTENs); and PgBouncer
// SIGKILLed and started again under load. Nothing is lost or run twice, and
// each scheduler then runs new work again (both-run.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore, type PostgresStoreOptions } from '../../../src/postgres.js';
import type { PgServer } from '../pg-server.js';
import { startPgBouncer, type PgBouncer } from './pgbouncer.js';
import { bothRunNewWork, GATE } from '../both-run.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
let admin: pg.Pool;
let bouncer: PgBouncer;

usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

beforeAll(async () => {
  // Never skipped: without a system pgbouncer it unpacks Debian's package (test/binaries.ts), and fails, saying why, if it cannot.
  bouncer = await startPgBouncer(server, { poolSize: 2 });
}, 60_000);

afterAll(async () => {
  await bouncer?.destroy();
});

const freshSchema = schemaNamer('b');
const LEASE = 6_000;
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

async function until(what: string, condition: () => boolean | Promise<boolean>, timeout = 40_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // PgBouncer or the server is away: look again
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}\n${bouncer.log()}`);
    await sleep(50);
  }
}

/** How many tasks (named `name`, or all) are in each state. */
async function states(schema: string, name?: string): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ state: string; n: string }>(
    `SELECT state, count(*) AS n FROM "${schema}".taskheap_tasks WHERE $1::text IS NULL OR name = $1 GROUP BY state`,
    [name ?? null],
  );
  return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
}

/** One "process" through PgBouncer: 'work' counts its starts in `starts` and writes its effect in ctx.transaction(). */
function open(schema: string, starts: Map<number, number>, ticks: number[], options: Partial<PostgresStoreOptions> = {}) {
  const errors: unknown[] = [];
  const ran = { n: 0 };
  const scheduler = new Scheduler({
    store: postgresStore({ connectionString: bouncer.url, pgbouncer: true, schema, lease: LEASE, poll: 200, timeout: 2_000, ...options }),
    onError: (error) => errors.push(error),
    workers: 4,
  });
  scheduler.define('work', async (ctx, payload: { ms: number }) => {
    starts.set(ctx.id, (starts.get(ctx.id) ?? 0) + 1);
    ran.n++;
    await sleep(payload.ms);
    return ctx.transaction(async (client) => {
      await client.query(`INSERT INTO "${schema}".effects (task_id) VALUES ($1)`, [ctx.id]);
      return { done: ctx.id };
    });
  });
  scheduler.define('tick', (ctx) => {
    ticks.push(ctx.scheduledAt.getTime());
  });
  opened.push(scheduler);
  return { scheduler, errors, ran };
}

async function effectsTable(schema: string): Promise<void> {
  await admin.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  await admin.query(`CREATE TABLE "${schema}".effects (task_id bigint NOT NULL)`);
}

/**
 * Every task of `schema` succeeded and left one effect (ctx.transaction()),
 * and started exactly as often as the store counted its attempts: once, or
 * (`retried`: PgBouncer killed under load) again only for an attempt whose
 * transaction failed, a retry; there an attempt may also be counted once
 * without a start: a claim the server committed whose answer PgBouncer's
 * death lost, taken over after its lease ran out (docs/delivery.md).
 */
async function exactlyOnce(schema: string, starts: Map<number, number>, expected: number, retried = false): Promise<void> {
  const { rows } = await admin.query<{ id: string; state: string; attempts: number; effects: string }>(
    `SELECT t.id, t.state, t.attempts, (SELECT count(*) FROM "${schema}".effects AS e WHERE e.task_id = t.id) AS effects
       FROM "${schema}".taskheap_tasks AS t WHERE t.name = 'work'`,
  );
  expect(rows).toHaveLength(expected);
  expect(rows.filter((row) => row.state !== 'succeeded')).toEqual([]);
  expect(rows.filter((row) => Number(row.effects) !== 1)).toEqual([]);
  const counted = (row: { id: string; attempts: number }) => Number(row.attempts) - (starts.get(Number(row.id)) ?? 0);
  expect(rows.filter((row) => counted(row) !== 0 && !(retried && counted(row) === 1))).toEqual([]);
  if (!retried) expect([...starts.values()].filter((n) => n !== 1)).toEqual([]);
  expect(starts.size).toBe(expected);
}

describe('PostgreSQL behind PgBouncer (pool_mode = transaction, 2 server connections)', () => {
  it('validates `pgbouncer` and `listenConnectionString` at the call', () => {
    expect(() => postgresStore({ pgbouncer: 'yes' as never })).toThrow(
      new TypeError('Expected `pgbouncer` to be a boolean, got "yes" (string)'),
    );
    expect(() => postgresStore({ listenConnectionString: '' })).toThrow(/Expected `listenConnectionString` to be a non-empty string/);
    expect(() => postgresStore({ listenConnectionString: 5 as never })).toThrow(TypeError);
    expect(() => postgresStore({ pgbouncr: true } as never)).toThrow(
      /Unknown postgresStore option `pgbouncr`; expected one of: .*pgbouncer, listenConnectionString/,
    );
    expect(postgresStore({ pgbouncer: true, listenConnectionString: 'postgres://db/x', lease: 9_000 })).toMatchObject({ lease: 9_000 });
  });

  it('without `pgbouncer: true` the store cannot connect through it, and says why (statement_timeout at connect time)', async () => {
    const scheduler = new Scheduler({ store: postgresStore({ connectionString: bouncer.url, schema: freshSchema(), timeout: 2_000 }) });
    opened.push(scheduler);
    await expect(scheduler.start()).rejects.toThrow(
      /unsupported startup parameter: (statement_timeout|idle_in_transaction_session_timeout)/,
    );
  });

  it('two schedulers polling through it: tasks, tasks added in a transaction, ctx.transaction(), a recurring job and waitFor, each once', async () => {
    const schema = freshSchema();
    await effectsTable(schema);
    const starts = new Map<number, number>();
    const ticks: number[] = [];
    const a = open(schema, starts, ticks);
    const b = open(schema, starts, ticks);
    // Two schedulers migrating at once: the migration's advisory lock is transaction-scoped.
    await Promise.all([a.scheduler.migrate(), b.scheduler.migrate()]);
    await a.scheduler.start();
    await b.scheduler.start();
    // A recurring job registered by both, under one key.
    const from = Date.now() + 500;
    const to = from + 2_000;
    for (const { scheduler } of [a, b])
      await scheduler.every(200).milliseconds().from(from).until(to).run('tick', { key: 'tick', misfire: 'all' });
    // Tasks from both, and ten added in a caller's transaction through PgBouncer (five committed, five rolled back).
    const ids: number[] = [];
    for (let i = 0; i < 60; i++) ids.push((await (i % 2 ? a : b).scheduler.schedule(Date.now(), 'work', { payload: { ms: 5 } })).id);
    const client = new pg.Client({ connectionString: bouncer.url });
    await client.connect();
    try {
      for (const commit of [true, false]) {
        await client.query('BEGIN');
        for (let i = 0; i < 5; i++) {
          const task = await a.scheduler.schedule(Date.now(), 'work', { payload: { ms: 5 }, client, key: `tx:${commit}:${i}` });
          if (commit) ids.push(task.id);
        }
        await client.query(commit ? 'COMMIT' : 'ROLLBACK');
      }
    } finally {
      await client.end();
    }
    // waitFor with no listener: woken by its sweep, every poll.
    const last = await b.scheduler.waitFor(ids.at(-1)!, { timeout: 30_000 });
    expect(last.state).toBe('succeeded');
    expect(last.result).toEqual({ done: last.id });
    await until('every task done and the job over', async () => {
      const counts = await states(schema);
      return counts.succeeded === 65 + new Set(ticks).size && Date.now() > to + 500 && (counts.waiting ?? 0) + (counts.running ?? 0) === 0;
    });
    await exactlyOnce(schema, starts, 65);
    // Every occurrence of the job ran once, each as a stored task.
    const { rows } = await admin.query<{ at: string }>(
      `SELECT (extract(epoch from run_at) * 1000)::float8 AS at FROM "${schema}".taskheap_tasks WHERE job_key = 'tick' ORDER BY run_at`,
    );
    expect(ticks.length).toBeGreaterThanOrEqual(5);
    expect([...ticks].sort((x, y) => x - y)).toEqual(rows.map((row) => Math.round(Number(row.at))));
    expect(new Set(ticks).size).toBe(ticks.length);
  }, 60_000);

  it('with `listenConnectionString` (direct): new work and final states reach the other scheduler well within its poll', async () => {
    const schema = freshSchema();
    await effectsTable(schema);
    const starts = new Map<number, number>();
    // A poll of 60 s: anything sooner came through LISTEN on the direct connection.
    const options = { listenConnectionString: server.url, poll: 60_000 };
    const worker = open(schema, starts, [], options);
    const producer = open(schema, starts, [], options);
    await worker.scheduler.start();
    await producer.scheduler.migrate();
    // A producer (not started) adds through PgBouncer; NOTIFY goes through it, LISTEN does not.
    await sleep(300); // the worker's first claim found nothing and it sleeps for its poll
    const began = Date.now();
    const task = await producer.scheduler.schedule(Date.now(), 'work', { payload: { ms: 5 } });
    const done = await producer.scheduler.waitFor(task.id, { timeout: 30_000 });
    expect(done.state).toBe('succeeded');
    expect(Date.now() - began).toBeLessThan(30_000);
    await exactlyOnce(schema, starts, 1);
  }, 60_000);

  it('PgBouncer SIGKILLed under load, down longer than the lease, started again on its port: workers reconnect by themselves, everything runs once', async () => {
    const schema = freshSchema();
    await effectsTable(schema);
    const starts = new Map<number, number>();
    const a = open(schema, starts, []);
    const b = open(schema, starts, []);
    await a.scheduler.start();
    await b.scheduler.start();
    // A handler whose ctx.transaction() PgBouncer's death cut fails that attempt (its writes rolled back): retried.
    const retry = { attempts: 5, delay: 100 };
    const items = Array.from({ length: 300 }, () => ({ when: Date.now(), name: 'work', payload: { ms: 20 }, retry }));
    await a.scheduler.scheduleMany(items);
    await until('a third done', async () => ((await states(schema)).succeeded ?? 0) >= 100);
    await bouncer.kill();
    const down = Date.now();
    // Down: both schedulers fail their queries, and retry.
    await until('both schedulers noticed', () => a.errors.length > 0 && b.errors.length > 0, 20_000);
    // Longer than the lease, the server up all along: every lease runs out on its clock.
    await sleep(Math.max(0, down + LEASE + 1_500 - Date.now()));
    await bouncer.start();
    await until('every task succeeded', async () => (await states(schema)).succeeded === 300).catch(async (error: Error) => {
      const late = (errors: unknown[]) => errors.slice(-3).map(String).join('; ');
      throw new Error(
        `${error.message}\nstates ${JSON.stringify(await states(schema))}; errors a: ${late(a.errors)}; b: ${late(b.errors)}`,
      );
    });
    await exactlyOnce(schema, starts, 300, true);
    // Both reconnected: each claims and runs new work again, within a bound
    // (its poll, 200 ms, or its backoff, at most the poll, after a claim that
    // failed; 30 s for a loaded machine), and nothing runs twice.
    const gates = await bothRunNewWork(
      [a.scheduler, b.scheduler],
      (count) => b.scheduler.scheduleMany(Array.from({ length: count }, () => ({ when: Date.now(), name: GATE }))),
      async () => (await states(schema, GATE)).waiting ?? 0,
    );
    await until('the gate tasks done', async () => {
      const { waiting = 0, running = 0 } = await states(schema, GATE);
      return waiting + running === 0;
    });
    expect(gates.ran.every((n) => n > 0)).toBe(true);
    expect(await states(schema, GATE)).toEqual({ succeeded: gates.starts.size });
    expect([...gates.starts.values()].filter((n) => n !== 1)).toEqual([]);
  }, 120_000);
});
