// The PostgreSQL claim (issue 16) against the same reference model as the
// SQLite one (serial-sqlite.property.test.ts), on a real server. The server's
// clock cannot be driven, so a task is either due (its due time an hour ago
// plus a small offset, in the order the model knows) or not due (an hour
// from now); a retry is due at once (the server's now: later than every
// past due time) or in an hour.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres.js';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { Outcome } from '../../../src/durable/store.js';
import type { PgServer } from '../pg-server.js';
import { usePostgres } from '../use-postgres.js';

let server: PgServer;
usePostgres((started) => {
  server = started;
});

type Op =
  | { op: 'add'; at: number | null; priority: number; serial: string | null }
  | { op: 'claim'; limit: number }
  | { op: 'settle'; pick: number; kind: 'complete' | 'retry-now' | 'retry-later' | 'release' }
  | { op: 'cancel'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      at: fc.option(fc.integer({ min: 0, max: 6 }), { freq: 5 }),
      priority: fc.integer({ min: -1, max: 2 }),
      serial: fc.constantFrom(null, 'a', 'b', 'c'),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('claim' as const), limit: fc.integer({ min: 1, max: 4 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      pick: fc.nat(),
      kind: fc.constantFrom('complete' as const, 'retry-now' as const, 'retry-later' as const, 'release' as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }) },
);

interface ModelTask {
  id: number;
  due: boolean;
  order: number;
  priority: number;
  serial: string | null;
  state: 'waiting' | 'running' | 'done';
}

let schemas = 0;

describe('PostgreSQL claim against a reference model (fast-check)', () => {
  it('claims exactly what the model says, in its order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 50 }), async (ops) => {
        const store = postgresStore({ connectionString: server.url, schema: `p${++schemas}_${process.pid}`, timeout: 5_000 });
        await store.migrate();
        const base = Date.now() - 3_600_000;
        const tasks: ModelTask[] = [];
        const held = new Map<string, number>();
        // Due order: an added due task's offset, then retries in the order they happened (the server's now grows).
        let retries = 1_000;
        const before = (a: ModelTask, b: ModelTask) => a.order - b.order || a.id - b.id;
        const head = (key: string) => tasks.filter((t) => t.serial === key && t.state === 'waiting').sort(before)[0];
        const claimable = (t: ModelTask) =>
          t.state === 'waiting' && (t.serial === null || (held.has(t.serial) ? held.get(t.serial) === t.id : head(t.serial)?.id === t.id));
        try {
          for (const step of ops) {
            if (step.op === 'add') {
              const runAt = step.at === null ? Date.now() + 3_600_000 : base + step.at;
              const row = await store.addTask({
                name: 'w',
                key: null,
                payload: '{}',
                runAt,
                maxAttempts: 1,
                options: '{}',
                serial: step.serial,
                priority: step.priority,
              });
              tasks.push({
                id: row.id,
                due: step.at !== null,
                order: step.at ?? 1e9,
                priority: step.priority,
                serial: step.serial,
                state: 'waiting',
              });
            } else if (step.op === 'claim') {
              const want = tasks
                .filter((t) => t.due && claimable(t))
                .sort((a, b) => b.priority - a.priority || before(a, b))
                .slice(0, step.limit);
              const got = await store.claim({ owner: 'me', now: Date.now(), lease: 600_000, limit: step.limit, advance: advanceJob });
              expect(got.map((c) => c.id)).toEqual(want.map((t) => t.id));
              for (const t of want) {
                t.state = 'running';
                if (t.serial !== null) held.set(t.serial, t.id);
              }
            } else if (step.op === 'settle') {
              const running = tasks.filter((t) => t.state === 'running');
              if (running.length === 0) continue;
              const t = running[step.pick % running.length]!;
              const outcome: Outcome =
                step.kind === 'complete'
                  ? { id: t.id, kind: 'complete', state: 'succeeded', error: null }
                  : step.kind === 'release'
                    ? { id: t.id, kind: 'release' }
                    : { id: t.id, kind: 'retry', delay: step.kind === 'retry-now' ? 0 : 3_600_000, error: 'again' };
              await store.settle('me', [outcome], Date.now());
              t.state = step.kind === 'complete' ? 'done' : 'waiting';
              if (step.kind === 'retry-now') {
                t.due = true;
                t.order = ++retries;
              } else if (step.kind === 'retry-later') {
                t.due = false;
                t.order = 1e9 + ++retries;
              }
              if (step.kind === 'complete' && t.serial !== null && held.get(t.serial) === t.id) held.delete(t.serial);
            } else {
              if (tasks.length === 0) continue;
              const t = tasks[step.pick % tasks.length]!;
              expect(await store.cancel(t.id)).toBe(t.state !== 'done');
              t.state = 'done';
              if (t.serial !== null && held.get(t.serial) === t.id) held.delete(t.serial);
            }
          }
          // Nothing claimable and due: nextDue is not 0 (no busy loop behind held keys).
          const next = await store.nextDue({ now: Date.now() });
          if (tasks.some((t) => t.due && claimable(t))) expect(next).toBe(0);
          else expect(next === undefined || next > 0, `nextDue ${next}`).toBe(true);
        } finally {
          await store.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 180_000);
});
