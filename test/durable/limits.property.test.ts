// Property tests of the limits (issue 22) against simple reference models, on
// both stores: random tasks (a concurrency key of limit 1, 2 or 3, a rate
// bucket, both or neither), random claims (with free workers), outcomes
// (final, retry) and clock ticks. The models: at most N tasks of a key hold
// a slot at once (a slot held from the claim to the final outcome), a key's
// tasks start in due order, and in any window of a bucket's interval at most
// `limit` starts (a retry is a start). SQLite runs on the times it is given
// (windows of 5 ms, ticks of 1 to 3); PostgreSQL on its own clock (windows of
// an hour: every start of a run is in one window). On SQLite, draining at the
// end (the clock moved past every window) runs every task: nothing is stuck.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sqliteStore } from '../../src/sqlite.js';
import { postgresStore } from '../../src/postgres.js';
import { advanceJob } from '../../src/durable/advance-job.js';
import type { Store } from '../../src/durable/store.js';
import type { PgServer } from './pg-server.js';
import { schemaNamer, usePostgres } from './use-postgres.js';

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

/** Runs `ops` on a store and checks every claim against the models; returns the model's tasks. */
async function check(
  store: Store,
  ops: Op[],
  clock: { now: () => number; tick: (by: number) => void },
  interval: number,
): Promise<ModelTask[]> {
  const tasks: ModelTask[] = [];
  const starts = new Map<string, number[]>();
  for (const step of ops) {
    const now = clock.now();
    if (step.op === 'add') {
      const options = JSON.stringify({
        concurrency: step.key === null ? undefined : { key: step.key, limit: LIMITS[step.key] },
        rate: step.bucket === null ? undefined : { key: step.bucket, limit: BUCKETS[step.bucket], interval },
      });
      const row = await store.addTask({
        name: 'w',
        key: null,
        payload: '{}',
        runAt: now + step.at,
        maxAttempts: 99,
        options,
        serial: step.key,
        rateKey: step.bucket,
      });
      tasks.push({ id: row.id, runAt: now + step.at, key: step.key, bucket: step.bucket, state: 'waiting', holds: false });
    } else if (step.op === 'claim') {
      const got = await store.claim('me', now, LEASE, step.limit, advanceJob, undefined, undefined, { free: step.free, rate: undefined });
      expect(got.length).toBeLessThanOrEqual(step.limit);
      const claimed = got.map((c) => tasks.find((t) => t.id === c.id)!);
      expect(claimed.filter((t) => t.key !== null || t.bucket !== null).length, 'limited tasks only into free workers').toBeLessThanOrEqual(
        step.free,
      );
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
      await store.settle(
        'me',
        [
          step.kind === 'complete'
            ? { id: t.id, kind: 'complete', state: 'succeeded', error: null }
            : { id: t.id, kind: 'retry', delay: 0, error: 'again' },
        ],
        now,
      );
      t.state = step.kind === 'complete' ? 'done' : 'waiting';
      if (step.kind === 'complete') t.holds = false;
    } else clock.tick(step.by);
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
          const tasks = await check(store, ops, { now: () => now, tick: (by) => (now += by) }, 5);
          // Drain: the clock past every window, claims and completions until nothing is left.
          for (let round = 0; round < 200 && tasks.some((t) => t.state !== 'done'); round++) {
            now += 5;
            for (const c of await store.claim('me', now, LEASE, 10, advanceJob, undefined, undefined, { free: 10, rate: undefined })) {
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
            store,
            ops.map((op) => (op.op === 'add' ? { ...op, at: op.at <= 0 ? -60_000 : 3_600_000 } : op)),
            clock,
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
