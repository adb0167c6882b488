// Throughput machinery of the PostgreSQL store alone, against a real server:
// the settle statement's plan, completion announcements (NOTIFY), claims and
// outcomes on their way together, and the prefetch option. What every store
// shares (batched outcomes, claims of defined handlers only, prefetched claims
// handed back on close, scheduleMany) is in the conformance suite
// (test/durable/conformance/batching.ts). No mocks: a counting wrapper around
// the real store only records how many calls were made.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import type { ClaimParams, NextDueParams, Outcome, Store } from '../../../src/store.js';
import { postgresStore } from '../../../src/postgres.js';
import { statements } from '../../../src/durable/postgres/store.js';
import { nextDueParams } from '../../../src/durable/postgres/claim.js';
import type { PgServer } from '../pg-server.js';
import { gate } from '../../helpers.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

const freshSchema = schemaNamer('b');

const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

/** The real store, with the batch sizes of its settle() calls recorded. */
function counted(store: Store): { store: Store; batches: number[] } {
  const batches: number[] = [];
  const settle = store.settle.bind(store);
  store.settle = (owner: string, outcomes: readonly Outcome[], now: number) => {
    batches.push(outcomes.length);
    return settle(owner, outcomes, now);
  };
  return { store, batches };
}

function open(schema: string, workers?: number, prefetch?: number) {
  const errors: unknown[] = [];
  const { store, batches } = counted(
    postgresStore({ connectionString: server.url, schema, ...(prefetch === undefined ? {} : { prefetch }) }),
  );
  const scheduler = new Scheduler({ store, onError: (error) => errors.push(error), ...(workers === undefined ? {} : { workers }) });
  opened.push(scheduler);
  return { scheduler, errors, batches, store };
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeout = 15_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(20);
  }
}

async function rows(
  schema: string,
): Promise<{ id: number; name: string; state: string; attempts: number; last_error: string | null; run_at: Date }[]> {
  const { rows: found } = await admin.query(
    `SELECT id::int, name, state, attempts, last_error, run_at FROM "${schema}".taskheap_tasks ORDER BY id`,
  );
  return found;
}

describe('postgresStore: batched outcomes', () => {
  it('a settle is driven from the batch through the primary key, whatever the statistics say (no scan of the table)', async () => {
    // ANALYZE while every row waits (as autovacuum does after a bulk
    // enqueue): the statistics then say no row is held by anyone. A planner
    // that counted the batch chose a scan of the whole table, re-reading the
    // batch for every row held: 26 ms for 256 outcomes instead of 3.
    const schema = freshSchema();
    const { store } = open(schema);
    await store.migrate();
    await store.addTasks(
      Array.from({ length: 5_000 }, (_, i) => ({
        name: 'x',
        key: null,
        payload: `${i}`,
        runAt: Date.now() - 1_000,
        maxAttempts: 1,
        options: '{}',
      })),
    );
    await admin.query(`ANALYZE "${schema}".taskheap_tasks`);
    const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });
    const claimed = await store.claim({ owner: 'me', now: Date.now(), lease: 30_000, limit: 256, advance: none });
    expect(claimed).toHaveLength(256);
    const ids = claimed.map((claim) => claim.id);
    const params = [
      ids,
      ids.map(() => 'complete'),
      ids.map(() => 'succeeded'),
      ids.map(() => null),
      ids.map(() => null),
      'me',
      '',
      ids.map(() => null),
      ids.map(() => false),
    ];
    const {
      rows: [plan],
    } = await admin.query(`EXPLAIN (FORMAT JSON) ${statements(schema).settle}`, params);
    const scans: string[] = [];
    const walk = (node: { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: unknown[] }) => {
      if (node['Relation Name'] === 'taskheap_tasks') scans.push(`${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
      for (const child of node.Plans ?? []) walk(child as typeof node);
    };
    walk((plan as { 'QUERY PLAN': [{ Plan: Parameters<typeof walk>[0] }] })['QUERY PLAN'][0].Plan);
    // The next task of each freed serial group is looked up through the serial index (once per freed key).
    // The delete of the rows nothing keeps (retention 0) and the update of the others, each through the primary key.
    expect(scans.filter((scan) => !scan.endsWith('taskheap_tasks_serial'))).toEqual([
      'ModifyTable',
      'Index Scan taskheap_tasks_pkey',
      'ModifyTable',
      'Index Scan taskheap_tasks_pkey',
    ]);
    expect(scans.every((scan) => scan === 'ModifyTable' || scan.includes('Index'))).toBe(true);
    // And it does what it says.
    await store.settle(
      'me',
      claimed.map((claim) => ({ id: claim.id, kind: 'complete', state: 'succeeded', error: null })),
      Date.now(),
    );
    const {
      rows: [count],
    } = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_tasks WHERE state = 'succeeded'`);
    expect(count.n).toBe(256);
    await store.close();
  });
});

describe('postgresStore: one settle, mixed outcomes', () => {
  it('writes each row its own outcome (the columns a batch leaves at their usual values are sent empty, the others whole)', async () => {
    const schema = freshSchema();
    const { store } = open(schema);
    await store.migrate();
    await store.addTasks(
      Array.from({ length: 6 }, (_, i) => ({
        name: 'x',
        key: null,
        payload: `${i}`,
        runAt: Date.now() - 1_000,
        maxAttempts: 3,
        options: '{}',
      })),
    );
    const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });
    const ids = (await store.claim({ owner: 'me', now: Date.now(), lease: 30_000, limit: 6, advance: none })).map((claim) => claim.id);
    expect(ids).toHaveLength(6);
    const [a, b, c, d, e, f] = ids as [number, number, number, number, number, number];
    const read = async () =>
      (
        await admin.query(
          `SELECT state, attempts, last_error, result, run_at > now() + interval '50 seconds' AS later FROM "${schema}".taskheap_tasks ORDER BY id`,
        )
      ).rows;
    // A batch of plain successes: every column but the ids at its usual value.
    await store.settle('me', [{ id: a, kind: 'complete', state: 'succeeded', error: null }], Date.now());
    await store.settle(
      'me',
      [
        { id: b, kind: 'complete', state: 'succeeded', error: null, result: '"r"' },
        { id: c, kind: 'complete', state: 'failed', error: 'boom' },
        { id: d, kind: 'retry', delay: 60_000, error: 'again' },
        { id: e, kind: 'release' },
        { id: f, kind: 'complete', state: 'timed-out', error: 'slow' },
      ],
      Date.now(),
    );
    expect(await read()).toEqual([
      { state: 'succeeded', attempts: 1, last_error: null, result: null, later: false },
      { state: 'succeeded', attempts: 1, last_error: null, result: '"r"', later: false },
      { state: 'failed', attempts: 1, last_error: 'boom', result: null, later: false },
      { state: 'waiting', attempts: 1, last_error: 'again', result: null, later: true },
      { state: 'waiting', attempts: 0, last_error: null, result: null, later: false },
      { state: 'timed-out', attempts: 1, last_error: 'slow', result: null, later: false },
    ]);
    // A release alone (no state at all in the batch) and a retry alone (no result, no final state).
    await store.claim({ owner: 'me', now: Date.now(), lease: 30_000, limit: 1, advance: none });
    await store.settle('me', [{ id: e, kind: 'release' }], Date.now());
    expect((await read())[4]).toEqual({ state: 'waiting', attempts: 0, last_error: null, result: null, later: false });
    await store.close();
  });
});

describe('postgresStore: completion announcements', () => {
  it("a batch's final states go out in one notification per 300 tasks at most; a waiter in another process wakes for each", async () => {
    const schema = freshSchema();
    const worker = open(schema, 16, 500);
    worker.scheduler.define('noop', () => {});
    await worker.store.migrate();
    // Another process that only adds work and waits: it looks by itself only once an hour, so
    // each of its waits ends because a notification named the task.
    const waiter = new Scheduler({ store: postgresStore({ connectionString: server.url, schema, poll: 3_600_000 }) });
    opened.push(waiter);
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    const payloads: string[] = [];
    listener.on('notification', (message) => {
      if (message.channel === 'taskheap_done') payloads.push(message.payload ?? '');
    });
    await listener.query('LISTEN taskheap_done');
    try {
      const tasks = await waiter.scheduleMany(Array.from({ length: 700 }, (_, i) => ({ when: Date.now(), name: 'noop', payload: { i } })));
      const waits = Promise.all(tasks.map((task) => waiter.waitFor(task.id, { timeout: '30s' })));
      await worker.scheduler.start();
      const done = await waits;
      expect(done.every((task) => task.state === 'succeeded')).toBe(true);
      await waitFor('every id announced', () => payloads.flatMap((payload) => payload.split(',')).length >= 700);
      const lists = payloads.map((payload) => payload.slice(`${schema}:`.length).split(',').map(Number));
      expect(lists.flat().sort((a, b) => a - b)).toEqual(tasks.map((task) => task.id).sort((a, b) => a - b));
      expect(Math.max(...lists.map((list) => list.length))).toBeLessThanOrEqual(300);
      expect(payloads.length).toBeLessThan(700 / 10);
    } finally {
      await listener.end();
    }
  }, 60_000);
});

/**
 * The real store, with the answers of its claim() and settle() calls held
 * back while `hold` says so (the database has done the work; the answer has
 * not reached the runner yet), and what is on its way counted.
 */
function held(store: Store) {
  const state = {
    hold: { claim: false, settle: false },
    /** Claims on their way, and the tasks they asked for. */
    claims: 0,
    asked: 0,
    maxClaims: 0,
    maxAsked: 0,
    /** What each claim asked for. */
    limits: [] as number[],
    /** Settles on their way, and claims that went out while one was. */
    settles: 0,
    claimsDuringSettle: 0,
    waiting: [] as (() => void)[],
    release() {
      for (const go of state.waiting.splice(0)) go();
    },
  };
  const claim = store.claim.bind(store);
  store.claim = async (params: ClaimParams) => {
    const { limit } = params;
    state.limits.push(limit);
    state.claims++;
    state.asked += limit;
    state.maxClaims = Math.max(state.maxClaims, state.claims);
    state.maxAsked = Math.max(state.maxAsked, state.asked);
    if (state.settles > 0) state.claimsDuringSettle++;
    try {
      const answer = await claim(params);
      if (state.hold.claim) await new Promise<void>((resolve) => state.waiting.push(resolve));
      return answer;
    } finally {
      state.claims--;
      state.asked -= limit;
    }
  };
  const settle = store.settle.bind(store);
  store.settle = async (...args: Parameters<Store['settle']>) => {
    state.settles++;
    try {
      if (state.hold.settle) await new Promise<void>((resolve) => state.waiting.push(resolve));
      return await settle(...args);
    } finally {
      state.settles--;
    }
  };
  return state;
}

describe('postgresStore: claims and outcomes on their way together', () => {
  it('a second claim goes out while one is on its way, for the room the first did not ask for; never more than two, nor more than the room', async () => {
    const schema = freshSchema();
    // Two workers and two prefetched: room for 4, a claim is worth it once 2 are free.
    const { scheduler, store, errors } = open(schema, 2, 2);
    const flight = held(store);
    await store.migrate();
    const gates = new Map<number, () => void>();
    const runs = new Map<number, number>();
    scheduler.define('slow', (_ctx, p: { i: number }) => {
      runs.set(p.i, (runs.get(p.i) ?? 0) + 1);
      return new Promise<void>((resolve) => gates.set(p.i, resolve));
    });
    await scheduler.scheduleMany(Array.from({ length: 12 }, (_, i) => ({ when: Date.now(), name: 'slow', payload: { i } })));
    await scheduler.start();
    // The first claim fills the room: 2 run, 2 wait in memory.
    await waitFor('two running', () => gates.size === 2);
    flight.hold.claim = true;
    // Two finish: the next two start from memory, and a claim for 2 goes out (its answer held).
    gates.get(0)!();
    gates.get(1)!();
    await waitFor('a claim on its way', () => flight.claims === 1);
    expect(flight.asked).toBe(2);
    // Two more finish while it is on its way: a second claim, for the other 2.
    await waitFor('the next two running', () => gates.size === 4);
    gates.get(2)!();
    gates.get(3)!();
    await waitFor('a second claim on its way', () => flight.claims === 2);
    expect(flight.asked).toBe(4);
    // New work wakes the process: no third claim while two are out.
    await scheduler.schedule(Date.now(), 'slow', { payload: { i: 12 } });
    await sleep(200);
    expect(flight.maxClaims).toBe(2);
    expect(flight.maxAsked).toBe(4);
    // The answers arrive: everything runs, each once. Not in the order of i: two claims on their way
    // at once take tasks past each other (SKIP LOCKED), and the one answered first starts first.
    flight.hold.claim = false;
    flight.release();
    const finished = new Set([0, 1, 2, 3]);
    await waitFor('all 13 running in turn', () => {
      for (const [i, finish] of gates) {
        if (finished.has(i)) continue;
        finished.add(i);
        finish();
      }
      return finished.size === 13;
    });
    await waitFor('13 succeeded', async () => (await rows(schema)).filter((row) => row.state === 'succeeded').length === 13);
    expect([...runs.values()]).toEqual(Array(13).fill(1));
    expect(flight.maxClaims).toBe(2);
    expect(flight.maxAsked).toBeLessThanOrEqual(4);
    expect(errors).toEqual([]);
  }, 30_000);

  it('a claim goes out while outcomes are on their way; those tasks stay held under lease until the store confirms them', async () => {
    const schema = freshSchema();
    const { scheduler, store, errors } = open(schema, 2, 0);
    const flight = held(store);
    await store.migrate();
    const ran: number[] = [];
    scheduler.define('quick', (_ctx, p: { i: number }) => void ran.push(p.i));
    await scheduler.scheduleMany(Array.from({ length: 2 }, (_, i) => ({ when: Date.now(), name: 'quick', payload: { i } })));
    flight.hold.settle = true;
    await scheduler.start();
    await waitFor('both ran', () => ran.length === 2);
    await waitFor('their outcomes on their way', () => flight.settles === 1);
    // Room is free again: the next claim does not wait for the outcomes.
    await scheduler.scheduleMany([2, 3].map((i) => ({ when: Date.now(), name: 'quick', payload: { i } })));
    await waitFor('the next two ran', () => ran.length === 4);
    expect(flight.claimsDuringSettle).toBeGreaterThan(0);
    // Not confirmed yet: still running, still ours, their leases renewed.
    const before = await admin.query(
      `SELECT state, locked_by IS NOT NULL AS held FROM "${schema}".taskheap_tasks WHERE payload::jsonb->>'i' IN ('0', '1')`,
    );
    expect(before.rows).toEqual([
      { state: 'running', held: true },
      { state: 'running', held: true },
    ]);
    flight.hold.settle = false;
    flight.release();
    await waitFor('all four succeeded', async () => (await rows(schema)).every((row) => row.state === 'succeeded'));
    expect(ran.sort()).toEqual([0, 1, 2, 3]);
    expect(errors).toEqual([]);
  }, 30_000);

  it('work due now that arrives while one round is on its way (its next-due query unanswered) gets a claim of its own at once', async () => {
    // A chain of dependent tasks pays this at every step: the settle that
    // unblocks the next step wakes the process while the round that claimed
    // the last step still asks when work is due next. Waiting for that answer
    // cost a round trip or two per step (issue 28).
    const schema = freshSchema();
    const { scheduler, store, errors } = open(schema, 4, 0);
    await store.migrate();
    const asking = { hold: false, waiting: [] as (() => void)[], out: 0, calls: 0 };
    const nextDue = store.nextDue.bind(store);
    store.nextDue = async (asked: NextDueParams) => {
      // The claimer reuses its params object: a store reads it at the call.
      const params = { ...asked };
      asking.calls++;
      asking.out++;
      try {
        if (asking.hold) await new Promise<void>((resolve) => asking.waiting.push(resolve));
        return await nextDue(params);
      } finally {
        asking.out--;
      }
    };
    const started: string[] = [];
    const first = gate();
    scheduler.define('step', async (_ctx, p: { name: string }) => {
      started.push(p.name);
      if (p.name === 'first') await first.promise;
    });
    await scheduler.start();
    await waitFor('the first round over', () => asking.calls > 0 && asking.out === 0);
    asking.hold = true;
    try {
      // The round that claims the first task then asks when work is due next: its answer is held.
      await scheduler.schedule(Date.now(), 'step', { payload: { name: 'first' } });
      await waitFor('the first running, its round asking what is due next', () => started.length === 1 && asking.out === 1);
      await scheduler.schedule(Date.now(), 'step', { payload: { name: 'second' } });
      await waitFor('the second running while that answer is still held', () => started.length === 2);
      expect(asking.waiting.length).toBeGreaterThan(0);
    } finally {
      asking.hold = false;
      for (const go of asking.waiting.splice(0)) go();
      first.open();
    }
    expect(errors).toEqual([]);
  }, 30_000);

  it('both claims, both next-due queries and the settle are named statements, parsed once per connection', async () => {
    // Parsed and planned on every call, the claim cost 25-60 ms of server CPU on a loaded
    // machine, for 1 ms of work: the whole cost of a step of a chain.
    // A keyed task puts a limit in play: the plain claim says so, and the full one is sent.
    const names = new Map<string, string | undefined>();
    const pool = new pg.Pool({ connectionString: server.url });
    // Every statement of every connection, the pool's own query() and a checked-out client's alike.
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (config: unknown, ...rest: unknown[]) => unknown;
      (client as { query: unknown }).query = (config: unknown, ...rest: unknown[]) => {
        if (typeof config === 'object' && config !== null && 'text' in config) {
          const { text, name } = config as { text: string; name?: string };
          names.set(text, name);
        }
        return query(config, ...rest);
      };
    });
    const schema = freshSchema();
    const scheduler = new Scheduler({ store: postgresStore({ pool, schema }) });
    opened.push(scheduler);
    const sql = statements(schema);
    scheduler.define('x', () => {});
    await scheduler.start();
    await scheduler.waitFor((await scheduler.schedule(Date.now(), 'x')).id);
    await waitFor('the plain claim and a next-due query sent', () => names.has(sql.claimPlain) && names.has(sql.nextDuePlain));
    expect(names.has(sql.claimUnlessJobsDue) || names.has(sql.nextDue)).toBe(false);
    await scheduler.waitFor((await scheduler.schedule(Date.now(), 'x', { serial: 'k' })).id);
    await scheduler.close();
    await pool.end();
    expect(names.get(sql.claimPlain)).toMatch(/^taskheap_/);
    expect(names.get(sql.claimUnlessJobsDue)).toMatch(/^taskheap_/);
    expect(names.get(sql.nextDue)).toMatch(/^taskheap_/);
    expect(names.get(sql.nextDuePlain)).toMatch(/^taskheap_/);
    expect(names.get(sql.settle)).toMatch(/^taskheap_/);
  }, 30_000);

  it("start() readies three of its own pool's connections for the first claims; a caller's pool, even of one connection, is left alone", async () => {
    // A cold connection's first claim (catalog caches, the first plan) took about 30 ms, and jobs due just
    // after start were that late, once per connection the first burst opened (issue 27's delayed jobs).
    const schema = freshSchema();
    const { scheduler } = open(schema);
    scheduler.define('x', () => {});
    await scheduler.start();
    const { rows: own } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'taskheap'`,
    );
    expect(own[0]!.n).toBeGreaterThanOrEqual(3);
    await scheduler.close();

    // Waiting for three connections from a pool of one would wait forever.
    const pool = new pg.Pool({ connectionString: server.url, max: 1 });
    const small = new Scheduler({ store: postgresStore({ pool, schema }) });
    opened.push(small);
    small.define('x', () => 'ran');
    await small.start();
    const { id } = await small.schedule(Date.now(), 'x');
    await expect(small.waitFor(id)).resolves.toMatchObject({ state: 'succeeded' });
    await small.close();
    await pool.end();
  }, 30_000);

  it('start() readies the claims and next-due questions its process will send: the full ones only where a limit is in play or the process has limits of its own', async () => {
    // The full claim and next-due are the dearest statements to plan (about 40 and 25 ms on a cold
    // connection, on each of three): most of a start's server CPU, for statements a process without
    // limits never sends.
    const schema = freshSchema();
    const sql = statements(schema);
    const readied = async (options: {
      queues?: Record<string, { concurrency?: number; globalConcurrency?: number }>;
      rate?: { limit: number; interval: string };
    }) => {
      // Every named statement any connection sends while start() runs (its connections are the store's own).
      const texts = new Set<string>();
      const query = pg.Client.prototype.query;
      pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
        if (typeof config === 'object' && config !== null && 'name' in config) texts.add((config as unknown as { text: string }).text);
        return (query as (...args: unknown[]) => unknown).call(this, config, ...rest);
      } as typeof query;
      const scheduler = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }), ...options });
      opened.push(scheduler);
      scheduler.define('x', () => {});
      try {
        await scheduler.start();
      } finally {
        pg.Client.prototype.query = query;
      }
      await scheduler.close();
      const has = (text: string) => (texts.has(text) ? 'readied' : '-');
      return { claim: [has(sql.claimPlain), has(sql.claimUnlessJobsDue)], nextDue: [has(sql.nextDuePlain), has(sql.nextDue)] };
    };
    // Which are readied, the plain statement and the full one, of each.
    const plain = { claim: ['readied', '-'], nextDue: ['readied', '-'] };
    const full = { claim: ['-', 'readied'], nextDue: ['-', 'readied'] };
    expect(await readied({})).toEqual(plain);
    // Limits of its own: every claim it sends is the full one.
    expect(await readied({ queues: { q: { concurrency: 1 } } })).toEqual(full);
    expect(await readied({ rate: { limit: 10, interval: '1s' } })).toEqual(full);
    // A limit in play in the database (this start stores a queue's global concurrency), and for the next process too:
    // the plain claim says so, and the full statements follow.
    const limited = { claim: ['readied', 'readied'], nextDue: ['-', 'readied'] };
    expect(await readied({ queues: { q: { globalConcurrency: 2 } } })).toEqual(limited);
    expect(await readied({})).toEqual(limited);
  }, 30_000);

  it('the plain next-due answers as the full one wherever nothing is limited, and says so, answering nothing, where something is', async () => {
    const schema = freshSchema();
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    const sql = statements(schema);
    const T = `"${schema}".taskheap_tasks`;
    const task = (name: string, inMs: number, extra: object = {}) =>
      store.addTask({ name, key: null, payload: '{}', runAt: Date.now() + inMs, maxAttempts: 1, options: '{}', ...extra });
    // Both questions in one transaction: one now(), so equal answers are equal to the ms. Names: any, then 'x' alone.
    const answers = async () => {
      const client = await admin.connect();
      try {
        await client.query('BEGIN');
        const both = [];
        for (const names of [null, ['x']]) {
          const full = await client.query(sql.nextDue, nextDueParams({ names: names ?? undefined }, 30_000, 0));
          const plain = await client.query(sql.nextDuePlain, [names]);
          both.push({ full: full.rows[0].t, plain: plain.rows[0].t, limited: plain.rows[0].limited });
        }
        return both;
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const agree = async (step: string) => {
      for (const { full, plain, limited } of await answers())
        expect({ step, plain, limited }).toEqual({ step, plain: full, limited: false });
    };
    try {
      await agree('nothing at all');
      await task('x', 60_000);
      await agree('a plain task');
      // A paused queue's tasks count in neither.
      await store.setQueue('held', { paused: true });
      await task('x', 30_000, { queue: 'held' });
      await agree('a paused queue');
      await task('y', 50_000, { priority: 5, queue: 'other' });
      await agree('another queue and priority, another name');
      await task('x', 40_000, { fairGroup: 'g', options: JSON.stringify({ fair: { group: 'g' } }) });
      await agree('a shared task, its turn not given yet');
      await task('y', 0);
      await admin.query(
        `UPDATE ${T} SET state = 'running', locked_by = 'w', locked_until = now() + interval '20 s' WHERE name = 'y' AND priority = 0`,
      );
      await agree('a lease running out');
      await admin.query(`INSERT INTO "${schema}".taskheap_jobs (key, name, payload, rule, next_run_at, options)
        VALUES ('j', 'x', '{}', '{}', now() + interval '10 s', '{}')`);
      await agree('a recurring job');
      // A keyed task puts a limit in play: only the full question answers.
      await task('x', 5_000, { key: null, serial: 's', options: JSON.stringify({ serial: 's' }) });
      for (const { plain, limited } of await answers()) expect({ plain, limited }).toEqual({ plain: null, limited: true });
    } finally {
      await store.close();
    }
  });

  it('close() waits for both claims on their way and hands back, unrun and uncounted, what they bring', async () => {
    const schema = freshSchema();
    const { scheduler, store, errors } = open(schema, 2, 2);
    const flight = held(store);
    await store.migrate();
    const gates = new Map<number, () => void>();
    const ran: number[] = [];
    scheduler.define('slow', (_ctx, p: { i: number }) => {
      ran.push(p.i);
      return new Promise<void>((resolve) => gates.set(p.i, resolve));
    });
    await scheduler.scheduleMany(Array.from({ length: 10 }, (_, i) => ({ when: Date.now(), name: 'slow', payload: { i } })));
    await scheduler.start();
    await waitFor('two running', () => gates.size === 2);
    flight.hold.claim = true;
    for (const i of [0, 1]) gates.get(i)!();
    await waitFor('the next two running', () => gates.size === 4);
    for (const i of [2, 3]) gates.get(i)!();
    await waitFor('two claims on their way', () => flight.claims === 2);
    let closed = false;
    const closing = scheduler.close().then(() => (closed = true));
    await sleep(200);
    // Their answers have not arrived: close() waits for them.
    expect(closed).toBe(false);
    flight.hold.claim = false;
    flight.release();
    await closing;
    const found = await rows(schema);
    // 0-3 ran; the 4 the held claims brought back went back unrun, attempt not counted; the rest never left.
    expect(found.filter((row) => row.state === 'succeeded').map((row) => row.id)).toHaveLength(4);
    expect(found.filter((row) => row.state !== 'succeeded').map((row) => [row.state, row.attempts])).toEqual(Array(6).fill(['waiting', 0]));
    expect(ran.sort()).toEqual([0, 1, 2, 3]);
    expect(errors).toEqual([]);
  }, 30_000);
});

describe('postgresStore: prefetch', () => {
  it('prefetch sets how many tasks are claimed beyond the free workers; 0 claims only what the workers can start', async () => {
    for (const [prefetch, held] of [
      [0, 1],
      [3, 4],
    ] as const) {
      const schema = freshSchema();
      const { scheduler, store } = open(schema, 1, prefetch);
      await store.migrate();
      const gates: (() => void)[] = [];
      scheduler.define('slow', () => new Promise<void>((resolve) => gates.push(resolve)));
      await scheduler.scheduleMany(Array.from({ length: 8 }, () => ({ when: Date.now(), name: 'slow' })));
      await scheduler.start();
      await waitFor(`${held} claimed`, async () => (await rows(schema)).filter((row) => row.state === 'running').length === held);
      await sleep(200);
      expect((await rows(schema)).filter((row) => row.state === 'running').length).toBe(held);
      const closing = scheduler.close();
      for (const gate of gates) gate();
      await closing;
    }
  }, 30_000);

  it('without the option, short tasks are claimed up to 32 times the workers ahead, long ones not ahead at all once measured', async () => {
    const short = freshSchema();
    const fast = open(short, 2);
    const fastFlight = held(fast.store);
    fast.scheduler.define('quick', () => {});
    await fast.scheduler.scheduleMany(Array.from({ length: 400 }, (_, i) => ({ when: Date.now(), name: 'quick', payload: { i } })));
    await fast.scheduler.start();
    await waitFor('400 succeeded', async () => (await rows(short)).every((row) => row.state === 'succeeded'));
    // Before any task has finished: the workers' worth ahead (4 in all); then a round trip is long next to a task.
    expect(fastFlight.limits[0]).toBe(4);
    expect(Math.max(...fastFlight.limits)).toBeGreaterThan(4);
    expect(Math.max(...fastFlight.limits)).toBeLessThanOrEqual(2 + 2 * 32);

    const long = freshSchema();
    const slow = open(long, 2);
    const slowFlight = held(slow.store);
    // A second per task: the prefetch would claim one ahead only if a claim took a quarter of
    // that on average (a loaded machine's claims take tens of ms, not hundreds).
    slow.scheduler.define('slow', () => sleep(1_000));
    await slow.scheduler.scheduleMany(Array.from({ length: 6 }, (_, i) => ({ when: Date.now(), name: 'slow', payload: { i } })));
    await slow.scheduler.start();
    await waitFor('6 succeeded', async () => (await rows(long)).every((row) => row.state === 'succeeded'));
    // Before a task has finished, the workers' worth ahead; after, a round trip is short next to
    // a second: only what the free workers can start (issue 23: an idle process gets the rest).
    expect(Math.max(...slowFlight.limits)).toBeLessThanOrEqual(4);
    expect(slowFlight.limits.length).toBeGreaterThan(1);
    expect(Math.max(...slowFlight.limits.slice(1))).toBeLessThanOrEqual(2);
    expect([...fast.errors, ...slow.errors]).toEqual([]);
  }, 30_000);

  it('rejects a prefetch that is not an integer from 0 to 10,000', () => {
    for (const bad of [-1, 1.5, 10_001, '5', Number.NaN]) {
      expect(() => postgresStore({ connectionString: server.url, prefetch: bad as never })).toThrow(
        /Expected `prefetch` to be an integer from 0 to 10000/,
      );
    }
  });
});
