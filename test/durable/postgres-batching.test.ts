// Throughput machinery of the PostgreSQL store, against a real server:
// outcomes written in batches (one statement each), claims only of the
// handlers a process defines, prefetched claims handed back on close, and
// scheduleMany() all or nothing. No mocks: a counting wrapper around the
// real store only records how many calls were made.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Outcome, type Store } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { statements } from '../../src/durable/postgres/sql.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

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
  const { store, batches } = counted(postgresStore({ connectionString: server.url, schema, ...(prefetch === undefined ? {} : { prefetch }) }));
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

async function rows(schema: string): Promise<{ id: number; name: string; state: string; attempts: number; last_error: string | null; run_at: Date }[]> {
  const { rows: found } = await admin.query(`SELECT id::int, name, state, attempts, last_error, run_at FROM "${schema}".taskheap_tasks ORDER BY id`);
  return found;
}

describe('postgresStore: batched outcomes', () => {
  it('writes the outcomes of tasks finishing together in far fewer calls than tasks, each run exactly once', async () => {
    const schema = freshSchema();
    const { scheduler, batches, errors, store } = open(schema, 16);
    // Until producers (issue 13) the store opens through start() or migrate().
    await store.migrate();
    const runs = new Map<number, number>();
    scheduler.define('noop', (_ctx, payload: { i: number }) => void runs.set(payload.i, (runs.get(payload.i) ?? 0) + 1));
    await scheduler.scheduleMany(Array.from({ length: 400 }, (_, i) => ({ when: Date.now(), name: 'noop', payload: { i } })));
    await scheduler.start();
    await waitFor('400 tasks recorded succeeded', async () => (await rows(schema)).every((row) => row.state === 'succeeded'));
    expect(runs.size).toBe(400);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    const written = batches.reduce((a, b) => a + b, 0);
    expect(written).toBe(400);
    // One call per outcome was the old way; tasks started together finish together.
    expect(batches.length).toBeLessThan(400 / 4);
    expect(Math.max(...batches)).toBeGreaterThan(1);
    expect(errors).toEqual([]);
  }, 30_000);

  it('one settle() records a completion, a failure, a retry and a release together, and ignores tasks it does not hold', async () => {
    const schema = freshSchema();
    const { store } = open(schema);
    await store.migrate();
    const task = (key: string) => store.addTask({ name: 'x', key, payload: '{}', runAt: Date.now() - 1_000, maxAttempts: 3, options: '{}' });
    const ids = [(await task('a')).id, (await task('b')).id, (await task('c')).id, (await task('d')).id, (await task('e')).id];
    const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });
    const claimed = await store.claim('me', Date.now(), 30_000, 4, none);
    expect(claimed.map((c) => c.id)).toEqual(ids.slice(0, 4));
    const theirs = await store.claim('them', Date.now(), 30_000, 4, none);
    expect(theirs.map((c) => c.id)).toEqual([ids[4]]);
    const before = Date.now();
    await store.settle('me', [
      { id: ids[0]!, kind: 'complete', state: 'succeeded', error: null },
      { id: ids[1]!, kind: 'complete', state: 'failed', error: 'Error: boom' },
      { id: ids[2]!, kind: 'retry', delay: 60_000, error: 'Error: again' },
      { id: ids[3]!, kind: 'release' },
      // Not ours: left alone.
      { id: ids[4]!, kind: 'complete', state: 'succeeded', error: null },
    ], Date.now());
    const found = await rows(schema);
    expect(found.map((row) => [row.state, row.attempts, row.last_error])).toEqual([
      ['succeeded', 1, null],
      ['failed', 1, 'Error: boom'],
      ['waiting', 1, 'Error: again'],
      ['waiting', 0, null],
      ['running', 1, null],
    ]);
    // The retry is due a minute after the server's now (same machine: close to ours).
    expect(found[2]!.run_at.getTime()).toBeGreaterThan(before + 55_000);
    expect(found[2]!.run_at.getTime()).toBeLessThan(Date.now() + 65_000);
    await store.close();
  });

  it('a settle is driven from the batch through the primary key, whatever the statistics say (no scan of the table)', async () => {
    // ANALYZE while every row waits (as autovacuum does after a bulk
    // enqueue): the statistics then say no row is held by anyone. A planner
    // that counted the batch chose a scan of the whole table, re-reading the
    // batch for every row held: 26 ms for 256 outcomes instead of 3.
    const schema = freshSchema();
    const { store } = open(schema);
    await store.migrate();
    await store.addTasks(Array.from({ length: 5_000 }, (_, i) => ({ name: 'x', key: null, payload: `${i}`, runAt: Date.now() - 1_000, maxAttempts: 1, options: '{}' })));
    await admin.query(`ANALYZE "${schema}".taskheap_tasks`);
    const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });
    const claimed = await store.claim('me', Date.now(), 30_000, 256, none);
    expect(claimed).toHaveLength(256);
    const ids = claimed.map((claim) => claim.id);
    const params = [ids, ids.map(() => 'complete'), ids.map(() => 'succeeded'), ids.map(() => null), ids.map(() => null), 'me', '', ids.map(() => null)];
    const { rows: [plan] } = await admin.query(`EXPLAIN (FORMAT JSON) ${statements(schema).settle}`, params);
    const scans: string[] = [];
    const walk = (node: { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: unknown[] }) => {
      if (node['Relation Name'] === 'taskheap_tasks') scans.push(`${node['Node Type']} ${node['Index Name'] ?? ''}`.trim());
      for (const child of node.Plans ?? []) walk(child as typeof node);
    };
    walk((plan as { 'QUERY PLAN': [{ Plan: Parameters<typeof walk>[0] }] })['QUERY PLAN'][0].Plan);
    // The next task of each freed serial key is looked up through the serial index (once per freed key).
    expect(scans.filter((scan) => !scan.endsWith('taskheap_tasks_serial'))).toEqual(['ModifyTable', 'Index Scan taskheap_tasks_pkey']);
    expect(scans.every((scan) => scan === 'ModifyTable' || scan.includes('Index'))).toBe(true);
    // And it does what it says.
    await store.settle('me', claimed.map((claim) => ({ id: claim.id, kind: 'complete', state: 'succeeded', error: null })), Date.now());
    const { rows: [count] } = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_tasks WHERE state = 'succeeded'`);
    expect(count.n).toBe(256);
    await store.close();
  });
});

describe('postgresStore: completion announcements', () => {
  it('a batch\'s final states go out in one notification per 300 tasks at most; a waiter in another process wakes for each', async () => {
    const schema = freshSchema();
    const worker = open(schema, 16, 500);
    worker.scheduler.define('noop', () => {});
    await worker.store.migrate();
    // Another process that only adds work and waits: it looks by itself only once a minute.
    const waiter = new Scheduler({ store: postgresStore({ connectionString: server.url, schema, poll: 60_000 }) });
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
      const started = Date.now();
      const waits = Promise.all(tasks.map((task) => waiter.waitFor(task.id, { timeout: '30s' })));
      await worker.scheduler.start();
      const done = await waits;
      expect(Date.now() - started).toBeLessThan(20_000);
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

describe('postgresStore: claims', () => {
  it('a process claims only tasks of handlers it defines; work nobody here runs stays waiting', async () => {
    const schema = freshSchema();
    const a = open(schema);
    const b = open(schema);
    const ranA: number[] = [];
    const ranB: number[] = [];
    a.scheduler.define('alpha', (_ctx, p: { i: number }) => void ranA.push(p.i));
    b.scheduler.define('beta', (_ctx, p: { i: number }) => void ranB.push(p.i));
    // A producer that defines all three names, and never starts.
    const producer = open(schema);
    await producer.store.migrate();
    for (const name of ['alpha', 'beta', 'gamma']) producer.scheduler.define(name, () => {});
    const items = Array.from({ length: 30 }, (_, i) => ({ when: Date.now(), name: ['alpha', 'beta', 'gamma'][i % 3]!, payload: { i } }));
    await producer.scheduler.scheduleMany(items);
    await Promise.all([a.scheduler.start(), b.scheduler.start()]);
    await waitFor('alpha and beta tasks done', async () => (await rows(schema)).filter((row) => row.state === 'succeeded').length === 20);
    // Give a wrong claim every chance to happen.
    await sleep(300);
    expect(ranA.sort((x, y) => x - y)).toEqual(items.map((item, i) => (item.name === 'alpha' ? i : -1)).filter((i) => i >= 0));
    expect(ranB.sort((x, y) => x - y)).toEqual(items.map((item, i) => (item.name === 'beta' ? i : -1)).filter((i) => i >= 0));
    const gamma = (await rows(schema)).filter((row) => row.name === 'gamma');
    expect(gamma.map((row) => [row.state, row.attempts])).toEqual(Array(10).fill(['waiting', 0]));
    expect([...a.errors, ...b.errors]).toEqual([]);
  }, 30_000);

  it('claims ahead of free workers, and hands prefetched tasks back unrun (attempt not counted) on close', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema, 1);
    await store.migrate();
    let release: () => void = () => {};
    const started: number[] = [];
    scheduler.define('slow', (_ctx, p: { i: number }) => {
      started.push(p.i);
      return new Promise<void>((resolve) => (release = resolve));
    });
    await scheduler.scheduleMany([0, 1, 2].map((i) => ({ when: Date.now(), name: 'slow', payload: { i } })));
    await scheduler.start();
    // One worker: one runs, one more is claimed ahead (twice the workers), the third waits in the database.
    await waitFor('two claimed', async () => (await rows(schema)).filter((row) => row.state === 'running').length === 2);
    expect(started).toEqual([0]);
    const closing = scheduler.close();
    release();
    await closing;
    const found = await rows(schema);
    expect(found.map((row) => [row.state, row.attempts])).toEqual([['succeeded', 1], ['waiting', 0], ['waiting', 0]]);
    expect(started).toEqual([0]);
  }, 30_000);
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
    claims: 0, asked: 0, maxClaims: 0, maxAsked: 0,
    /** What each claim asked for. */
    limits: [] as number[],
    /** Settles on their way, and claims that went out while one was. */
    settles: 0, claimsDuringSettle: 0,
    waiting: [] as (() => void)[],
    release() {
      for (const go of state.waiting.splice(0)) go();
    },
  };
  const claim = store.claim.bind(store);
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const limit = args[3];
    state.limits.push(limit);
    state.claims++;
    state.asked += limit;
    state.maxClaims = Math.max(state.maxClaims, state.claims);
    state.maxAsked = Math.max(state.maxAsked, state.asked);
    if (state.settles > 0) state.claimsDuringSettle++;
    try {
      const answer = await claim(...args);
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
    // The answers arrive: everything runs, each once.
    flight.hold.claim = false;
    flight.release();
    for (let done = 4; done < 13; done++) {
      await waitFor(`task ${done} running`, () => gates.has(done));
      gates.get(done)!();
    }
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
    const before = await admin.query(`SELECT state, locked_by IS NOT NULL AS held FROM "${schema}".taskheap_tasks WHERE payload::jsonb->>'i' IN ('0', '1')`);
    expect(before.rows).toEqual([{ state: 'running', held: true }, { state: 'running', held: true }]);
    flight.hold.settle = false;
    flight.release();
    await waitFor('all four succeeded', async () => (await rows(schema)).every((row) => row.state === 'succeeded'));
    expect(ran.sort()).toEqual([0, 1, 2, 3]);
    expect(errors).toEqual([]);
  }, 30_000);

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
    for (const [prefetch, held] of [[0, 1], [3, 4]] as const) {
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

  it('without the option, short tasks are claimed up to 32 times the workers ahead, long ones only the workers\' worth', async () => {
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
    slow.scheduler.define('slow', () => sleep(300));
    await slow.scheduler.scheduleMany(Array.from({ length: 10 }, (_, i) => ({ when: Date.now(), name: 'slow', payload: { i } })));
    await slow.scheduler.start();
    await waitFor('10 succeeded', async () => (await rows(long)).every((row) => row.state === 'succeeded'));
    // A round trip is short next to 300 ms: never more than the workers ahead.
    expect(Math.max(...slowFlight.limits)).toBeLessThanOrEqual(4);
    expect([...fast.errors, ...slow.errors]).toEqual([]);
  }, 30_000);

  it('rejects a prefetch that is not an integer from 0 to 10,000', () => {
    for (const bad of [-1, 1.5, 10_001, '5', Number.NaN]) {
      expect(() => postgresStore({ connectionString: server.url, prefetch: bad as never })).toThrow(/Expected `prefetch` to be an integer from 0 to 10000/);
    }
  });
});

describe('postgresStore: scheduleMany', () => {
  it('adds every item in one transaction, returning the stored rows in order, each with its own time, payload and key', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema);
    await store.migrate();
    scheduler.define('a', () => {});
    scheduler.define('b', () => {});
    const t = Date.now() + 3_600_000;
    const added = await scheduler.scheduleMany([
      { when: t, name: 'a', payload: { n: 1 } },
      { when: t + 1_000, name: 'b', payload: { n: 2 }, key: 'k1', retry: { attempts: 3, delay: 10 } },
      { when: new Date(t + 2_000), name: 'a', payload: [3] },
    ]);
    expect(added.map((row) => [row.name, row.key, row.payload, row.runAt.getTime(), row.maxAttempts, row.state])).toEqual([
      ['a', null, { n: 1 }, t, 1, 'waiting'],
      ['b', 'k1', { n: 2 }, t + 1_000, 3, 'waiting'],
      ['a', null, [3], t + 2_000, 1, 'waiting'],
    ]);
    expect(new Set(added.map((row) => row.id)).size).toBe(3);
    expect(await scheduler.getTask(added[1]!.id)).toEqual(added[1]);
  });

  it('keys are idempotent within a call (the last item wins) and across calls (the task is replaced, not added)', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema);
    await store.migrate();
    scheduler.define('a', () => {});
    const t = Date.now() + 3_600_000;
    const first = await scheduler.scheduleMany([
      { when: t, name: 'a', key: 'same', payload: 1 },
      { when: t, name: 'a', payload: 'free' },
      { when: t + 5, name: 'a', key: 'same', payload: 2 },
    ]);
    expect(first[0]!.id).toBe(first[2]!.id);
    expect(first[0]).toMatchObject({ payload: 2, key: 'same' });
    const second = await scheduler.scheduleMany([{ when: t + 9, name: 'a', key: 'same', payload: 3 }]);
    expect(second[0]!.id).toBe(first[0]!.id);
    expect(second[0]).toMatchObject({ payload: 3 });
    expect((await rows(schema)).length).toBe(2);
  });

  it('a key whose task is running is left alone (reported as it is), while the other items are written', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema);
    await store.migrate();
    scheduler.define('a', () => {});
    const [busy] = await scheduler.scheduleMany([{ when: Date.now() - 1_000, name: 'a', key: 'busy', payload: 'old' }]);
    const none = () => ({ occurrences: [], nextRunAt: null, remaining: null });
    expect((await store.claim('elsewhere', Date.now(), 30_000, 1, none)).map((c) => c.id)).toEqual([busy!.id]);
    const added = await scheduler.scheduleMany([
      { when: Date.now() + 60_000, name: 'a', key: 'busy', payload: 'new' },
      { when: Date.now() + 60_000, name: 'a', key: 'fresh', payload: 'new' },
    ]);
    expect(added.map((row) => [row.id === busy!.id, row.key, row.state, row.payload])).toEqual([
      [true, 'busy', 'running', 'old'],
      [false, 'fresh', 'waiting', 'new'],
    ]);
  });

  it('a bad item throws at the call, naming its index, and nothing is written', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema);
    scheduler.define('a', () => {});
    await store.migrate();
    const good = { when: Date.now(), name: 'a' };
    expect(() => scheduler.scheduleMany([good, good, { when: Date.now(), name: 'a', payload: () => {} }]))
      .toThrow(/scheduleMany\(\) item 2: .*payload/);
    expect(() => scheduler.scheduleMany([good, { when: Date.now(), name: 'nope' }])).toThrow(/item 1: No handler named "nope"/);
    expect(() => scheduler.scheduleMany([good, { when: Number.NaN, name: 'a' }])).toThrow(RangeError);
    expect(() => scheduler.scheduleMany([good, { when: Date.now(), name: 'a', retry: { attempts: 0 } }])).toThrow(/item 1:/);
    expect(() => scheduler.scheduleMany([{ when: Date.now(), name: 'a', colour: 'red' } as never])).toThrow(/item 0: Unknown durable task option `colour`/);
    expect(() => scheduler.scheduleMany([good, null as never])).toThrow(/item 1: expected an object/);
    expect(() => scheduler.scheduleMany('a' as never)).toThrow(TypeError);
    expect(await rows(schema)).toEqual([]);
  });

  it('all or nothing in the database too: a failing statement writes none of the items', async () => {
    const schema = freshSchema();
    const { scheduler, store } = open(schema);
    scheduler.define('a', () => {});
    await store.migrate();
    // A constraint the library does not know of: the third item breaks it.
    await admin.query(`ALTER TABLE "${schema}".taskheap_tasks ADD CONSTRAINT short_payload CHECK (length(payload) < 20)`);
    await expect(scheduler.scheduleMany([
      { when: Date.now(), name: 'a', payload: 1 },
      { when: Date.now(), name: 'a', payload: 2, key: 'k' },
      { when: Date.now(), name: 'a', payload: 'x'.repeat(40) },
    ])).rejects.toThrow(/short_payload/);
    expect(await rows(schema)).toEqual([]);
  });

  it('wakes a started scheduler: tasks added in bulk run promptly', async () => {
    const schema = freshSchema();
    const { scheduler } = open(schema);
    const ran: number[] = [];
    scheduler.define('a', (_ctx, p: number) => void ran.push(p));
    await scheduler.start();
    const at = Date.now() + 200;
    await scheduler.scheduleMany([3, 1, 2].map((p) => ({ when: at, name: 'a', payload: p })));
    await waitFor('three ran', () => ran.length === 3, 3_000);
    expect(ran.sort()).toEqual([1, 2, 3]);
  });
});
