// Property tests of the limits (issue 22) against simple reference models, on
// both stores: random tasks (a concurrency group of limit 1, 2 or 3, a rate
// bucket, both or neither), random claims (with free workers), outcomes
// (final, retry) and clock ticks. The models: at most N tasks of a key hold
// a slot at once (a slot held from the claim to the final outcome), a key's
// tasks start in due order, and in any window of a bucket's interval at most
// `limit` starts (a retry is a start). SQLite runs on the times it is given
// (windows of 5 ms, ticks of 1 to 3); PostgreSQL on its own clock (windows of
// an hour: every start of a run is in one window). On SQLite, draining at the
// end (the clock moved past every window) runs every task: nothing is stuck.
// In memory (a Scheduler without a store, on a ManualClock, windows of 5 ms)
// the same operations run on tasks of a paused queue, which a claim lets go
// of for `limit` more starts; the models are the same, with two differences
// stated where they apply: memory claims nothing ahead of its workers (every
// start is into a free one), so a claim's `free` has no meaning there; and a
// key lets its tasks go on in due order as they fall due, so a task added
// with a due time already past does not overtake one of its key let go of
// before it (a store orders all of a key's waiting tasks at each claim):
// there every task is added due now or later.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sqliteStore } from '../../../src/sqlite.js';
import { postgresStore } from '../../../src/postgres.js';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { Store } from '../../../src/durable/store.js';
import { Scheduler, type Task } from '../../../src/index.js';
import { ManualClock } from '../../../src/testing.js';
import { START } from '../../helpers.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';

const LIMITS: Record<string, number> = { a: 1, b: 2, c: 3 };
const BUCKETS: Record<string, number> = { x: 2, y: 3 };
const LEASE = 1_000_000;

type Op =
  | { op: 'add'; at: number; key: string | null; bucket: string | null }
  | { op: 'claim'; limit: number; free: number }
  | { op: 'settle'; pick: number; kind: 'complete' | 'retry' }
  | { op: 'tick'; by: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      at: fc.integer({ min: -2, max: 3 }),
      key: fc.constantFrom(null, 'a', 'b', 'c'),
      bucket: fc.constantFrom(null, 'x', 'y'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      limit: fc.integer({ min: 1, max: 5 }),
      free: fc.integer({ min: 0, max: 5 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      pick: fc.nat(),
      kind: fc.constantFrom('complete' as const, 'retry' as const),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tick' as const), by: fc.integer({ min: 1, max: 3 }) }) },
);

interface ModelTask {
  id: number;
  runAt: number;
  key: string | null;
  bucket: string | null;
  state: 'waiting' | 'running' | 'done';
  holds: boolean;
}

/** What the models drive: a store, or a scheduler without one. */
interface Engine {
  now(): number;
  tick(by: number): Promise<void>;
  /** Adds a task due at `runAt`, with a concurrency group (limit `LIMITS[key]`) and a rate bucket (`BUCKETS[bucket]` per `interval`); its id. */
  add(runAt: number, key: string | null, bucket: string | null): Promise<number>;
  /** The ids of the tasks one claim starts: at most `limit`, limited ones only into `free` workers where the engine claims ahead. */
  claim(limit: number, free: number): Promise<readonly number[]>;
  settle(id: number, kind: 'complete' | 'retry'): Promise<void>;
  /**
   * Whether it claims ahead of its workers (a store's prefetch), so that a
   * claim's `free` bounds its limited tasks. Memory does not: every task it
   * starts runs in a worker at once.
   */
  claimsAhead: boolean;
}

/** A store as an Engine, on the clock `clock`. */
function storeEngine(store: Store, clock: { now: () => number; tick: (by: number) => void }, interval: number): Engine {
  return {
    now: clock.now,
    tick: async (by) => clock.tick(by),
    async add(runAt, key, bucket) {
      const options = JSON.stringify({
        concurrency: key === null ? undefined : { group: key, limit: LIMITS[key] },
        rate: bucket === null ? undefined : { group: bucket, limit: BUCKETS[bucket], interval },
      });
      const row = await store.addTask({
        name: 'w',
        key: null,
        payload: '{}',
        runAt,
        maxAttempts: 99,
        options,
        serial: key,
        rateGroup: bucket,
      });
      return row.id;
    },
    async claim(limit, free) {
      const got = await store.claim({
        owner: 'me',
        now: clock.now(),
        lease: LEASE,
        limit,
        advance: advanceJob,
        limits: { free, rate: undefined },
      });
      return got.map((c) => c.id);
    },
    async settle(id, kind) {
      await store.settle(
        'me',
        [kind === 'complete' ? { id, kind: 'complete', state: 'succeeded', error: null } : { id, kind: 'retry', delay: 0, error: 'again' }],
        clock.now(),
      );
    },
    claimsAhead: true,
  };
}

/**
 * A Scheduler without a store as an Engine: its tasks in a paused queue,
 * which a claim lets go of for `limit` more starts (the workers are not a
 * limit); a run ends when the test settles it, a retry due at once.
 */
function memoryEngine(
  interval: number,
): Engine & { scheduler: Scheduler; clock: ManualClock; started: number[]; running: Map<number, (ok: boolean) => void> } {
  const clock = new ManualClock(START);
  const scheduler = new Scheduler({ clock, workers: Infinity, onError: () => {}, queues: { w: { paused: true } } });
  const queue = scheduler.queue('w');
  const started: number[] = [];
  const running = new Map<number, (ok: boolean) => void>();
  return {
    scheduler,
    clock,
    started,
    running,
    now: () => clock.now(),
    tick: (by) => clock.advance(by),
    async add(runAt, key, bucket) {
      const task: Task = scheduler.schedule(
        runAt,
        (ctx) =>
          new Promise<void>((resolve, reject) => {
            started.push(task.id);
            running.set(task.id, (ok) => (ok ? resolve() : reject(new Error('again'))));
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
          }),
        {
          queue: 'w',
          retry: { attempts: 99, delay: 0, backoff: 'fixed' },
          ...(key === null ? {} : { concurrency: { group: key, limit: LIMITS[key]! } }),
          ...(bucket === null ? {} : { rate: { group: bucket, limit: BUCKETS[bucket]!, interval } }),
        },
      );
      return task.id;
    },
    async claim(limit) {
      // Every due task is held by the paused queue first, then let go of for `limit` more starts.
      await clock.advance(0);
      queue.concurrency = running.size + limit;
      await queue.resume();
      await clock.advance(0);
      await queue.pause();
      return started.splice(0);
    },
    async settle(id, kind) {
      const end = running.get(id)!;
      running.delete(id);
      end(kind === 'complete');
      await clock.advance(0);
    },
    claimsAhead: false,
  };
}

/** Runs `ops` on an engine and checks every claim against the models; returns the model's tasks. */
async function check(engine: Engine, ops: Op[], interval: number): Promise<ModelTask[]> {
  const tasks: ModelTask[] = [];
  const starts = new Map<string, number[]>();
  for (const step of ops) {
    const now = engine.now();
    if (step.op === 'add') {
      const id = await engine.add(now + step.at, step.key, step.bucket);
      tasks.push({ id, runAt: now + step.at, key: step.key, bucket: step.bucket, state: 'waiting', holds: false });
    } else if (step.op === 'claim') {
      const got = await engine.claim(step.limit, step.free);
      expect(got.length).toBeLessThanOrEqual(step.limit);
      const claimed = got.map((id) => tasks.find((t) => t.id === id)!);
      if (engine.claimsAhead)
        expect(
          claimed.filter((t) => t.key !== null || t.bucket !== null).length,
          'limited tasks only into free workers',
        ).toBeLessThanOrEqual(step.free);
      for (const t of claimed) {
        expect(t.state, `task ${t.id} claimed while ${t.state}`).toBe('waiting');
        // Due order within a key: every earlier waiting task of the key that holds no slot is claimed too.
        if (t.key !== null && !t.holds) {
          const earlier = tasks.filter(
            (o) => o.key === t.key && o.state === 'waiting' && !o.holds && (o.runAt < t.runAt || (o.runAt === t.runAt && o.id < t.id)),
          );
          for (const o of earlier) expect(claimed.includes(o), `${t.key}: ${t.id} started before ${o.id}`).toBe(true);
        }
      }
      for (const t of claimed) {
        t.state = 'running';
        t.holds = t.key !== null;
        if (t.bucket !== null) starts.set(t.bucket, [...(starts.get(t.bucket) ?? []), now]);
      }
      for (const key of Object.keys(LIMITS)) {
        expect(tasks.filter((t) => t.key === key && t.holds).length, `slots of ${key}`).toBeLessThanOrEqual(LIMITS[key]!);
      }
      for (const [bucket, times] of starts) {
        expect(times.filter((at) => at > now - interval).length, `starts of ${bucket} in the window`).toBeLessThanOrEqual(BUCKETS[bucket]!);
      }
    } else if (step.op === 'settle') {
      const running = tasks.filter((t) => t.state === 'running');
      if (running.length === 0) continue;
      const t = running[step.pick % running.length]!;
      await engine.settle(t.id, step.kind);
      t.state = step.kind === 'complete' ? 'done' : 'waiting';
      if (step.kind === 'complete') t.holds = false;
    } else await engine.tick(step.by);
  }
  return tasks;
}

describe('limits against reference models on SQLite (fast-check)', () => {
  it('never more than N of a key, in due order; never more than `limit` starts in a window; draining runs everything', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 50 }), async (ops) => {
        const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-limits-prop-')), 'store.db'));
        await store.migrate();
        let now = 1_000;
        try {
          const tasks = await check(storeEngine(store, { now: () => now, tick: (by) => (now += by) }, 5), ops, 5);
          // Drain: the clock past every window, claims and completions until nothing is left.
          for (let round = 0; round < 200 && tasks.some((t) => t.state !== 'done'); round++) {
            now += 5;
            for (const c of await store.claim({
              owner: 'me',
              now,
              lease: LEASE,
              limit: 10,
              advance: advanceJob,
              limits: { free: 10, rate: undefined },
            })) {
              await store.settle('me', [{ id: c.id, kind: 'complete', state: 'succeeded', error: null }], now);
              tasks.find((t) => t.id === c.id)!.state = 'done';
            }
            for (const t of tasks.filter((r) => r.state === 'running')) {
              await store.settle('me', [{ id: t.id, kind: 'complete', state: 'succeeded', error: null }], now);
              t.state = 'done';
            }
          }
          expect(
            tasks.filter((t) => t.state !== 'done'),
            'tasks left after draining',
          ).toEqual([]);
        } finally {
          await store.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});

describe('limits against reference models in memory (fast-check)', () => {
  it('never more than N of a key, in due order; never more than `limit` starts in a window; draining runs everything', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 50 }), async (ops) => {
        const engine = memoryEngine(5);
        try {
          // Due now or later: in memory a key's due order is the order its tasks fall due (see above).
          const tasks = await check(
            engine,
            ops.map((op) => (op.op === 'add' ? { ...op, at: Math.max(0, op.at) } : op)),
            5,
          );
          // Drain: the clock past every window, every due task let go of and finished, until nothing is left.
          const queue = engine.scheduler.queue('w');
          queue.concurrency = Infinity;
          await queue.resume();
          for (let round = 0; round < 200 && tasks.some((t) => t.state !== 'done'); round++) {
            await engine.clock.advance(5);
            for (const [id, end] of [...engine.running]) {
              engine.running.delete(id);
              end(true);
              tasks.find((t) => t.id === id)!.state = 'done';
            }
            await engine.clock.advance(0);
          }
          expect(
            tasks.filter((t) => t.state !== 'done'),
            'tasks left after draining',
          ).toEqual([]);
        } finally {
          await engine.scheduler.close({ abort: true });
        }
      }),
      { numRuns: 100 },
    );
  }, 60_000);
});

let server: PgServer;
usePostgres((started) => {
  server = started;
});
const freshSchema = schemaNamer('limprop');

describe('limits against reference models on PostgreSQL (fast-check)', () => {
  it('never more than N of a key, in due order; never more than `limit` starts in a window (an hour)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 40 }), async (ops) => {
        const store = postgresStore({ connectionString: server.url, schema: freshSchema() });
        await store.migrate();
        try {
          // The server's clock: tasks due in the past or an hour ahead, never in between.
          const base = Date.now();
          const clock = { now: () => base, tick: () => {} };
          await check(
            storeEngine(store, clock, 3_600_000),
            ops.map((op) => (op.op === 'add' ? { ...op, at: op.at <= 0 ? -60_000 : 3_600_000 } : op)),
            3_600_000,
          );
        } finally {
          await store.close();
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
