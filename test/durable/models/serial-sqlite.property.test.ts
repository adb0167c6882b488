// A property test of the SQLite claim (issue 16) against a reference model:
// random tasks (due time, priority, serial group) and random claims, outcomes
// (final, retry, hand back), cancels and clock ticks. The model's rule: a due
// waiting task may be claimed if it has no serial group, holds its key, or its
// key is free and it is the key's first waiting task (due time, then id);
// claims take them by priority (highest first), then due time, then id; a
// key is held from the claim until a final outcome or a cancel.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sqliteStore } from '../../../src/sqlite.js';
import { advanceJob } from '../../../src/durable/advance-job.js';
import type { Outcome } from '../../../src/durable/store.js';

const LEASE = 1_000_000;

type Op =
  | { op: 'add'; at: number; priority: number; serial: string | null }
  | { op: 'claim'; limit: number }
  | { op: 'settle'; pick: number; kind: 'complete' | 'retry' | 'release'; delay: number }
  | { op: 'cancel'; pick: number }
  | { op: 'tick'; by: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      at: fc.integer({ min: 0, max: 6 }),
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
      kind: fc.constantFrom('complete' as const, 'retry' as const, 'release' as const),
      delay: fc.integer({ min: 0, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('tick' as const), by: fc.integer({ min: 1, max: 3 }) }) },
);

interface ModelTask {
  id: number;
  runAt: number;
  priority: number;
  serial: string | null;
  state: 'waiting' | 'running' | 'done';
  lockedUntil: number;
}

describe('SQLite claim against a reference model (fast-check)', () => {
  it('claims exactly what the model says, in its order, and nextDue agrees', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 60 }), async (ops) => {
        const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-serial-prop-')), 'store.db'));
        await store.migrate();
        const tasks: ModelTask[] = [];
        const held = new Map<string, number>();
        let now = 1_000;
        const head = (key: string) =>
          tasks.filter((t) => t.serial === key && t.state === 'waiting').sort((a, b) => a.runAt - b.runAt || a.id - b.id)[0];
        const claimable = (t: ModelTask) =>
          t.state === 'waiting' && (t.serial === null || (held.has(t.serial) ? held.get(t.serial) === t.id : head(t.serial)?.id === t.id));
        try {
          for (const step of ops) {
            if (step.op === 'add') {
              const row = await store.addTask({
                name: 'w',
                key: null,
                payload: '{}',
                runAt: now + step.at,
                maxAttempts: 1,
                options: '{}',
                serial: step.serial,
                priority: step.priority,
              });
              tasks.push({
                id: row.id,
                runAt: now + step.at,
                priority: step.priority,
                serial: step.serial,
                state: 'waiting',
                lockedUntil: 0,
              });
            } else if (step.op === 'claim') {
              const want = tasks
                .filter((t) => t.runAt <= now && claimable(t))
                .sort((a, b) => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id)
                .slice(0, step.limit);
              const got = await store.claim({ owner: 'me', now, lease: LEASE, limit: step.limit, advance: advanceJob });
              expect(got.map((c) => c.id)).toEqual(want.map((t) => t.id));
              for (const t of want) {
                t.state = 'running';
                t.lockedUntil = now + LEASE;
                if (t.serial !== null) held.set(t.serial, t.id);
              }
            } else if (step.op === 'settle') {
              const running = tasks.filter((t) => t.state === 'running');
              if (running.length === 0) continue;
              const t = running[step.pick % running.length]!;
              const outcome: Outcome =
                step.kind === 'complete'
                  ? { id: t.id, kind: 'complete', state: 'succeeded', error: null }
                  : step.kind === 'retry'
                    ? { id: t.id, kind: 'retry', delay: step.delay, error: 'again' }
                    : { id: t.id, kind: 'release' };
              await store.settle('me', [outcome], now);
              t.state = step.kind === 'complete' ? 'done' : 'waiting';
              if (step.kind === 'retry') t.runAt = now + step.delay;
              if (step.kind === 'complete' && t.serial !== null && held.get(t.serial) === t.id) held.delete(t.serial);
            } else if (step.op === 'cancel') {
              if (tasks.length === 0) continue;
              const t = tasks[step.pick % tasks.length]!;
              expect(await store.cancel(t.id)).toBe(t.state !== 'done');
              t.state = 'done';
              if (t.serial !== null && held.get(t.serial) === t.id) held.delete(t.serial);
            } else {
              now += step.by;
            }
            const times = [
              ...tasks.filter(claimable).map((t) => t.runAt),
              ...tasks.filter((t) => t.state === 'running').map((t) => t.lockedUntil),
            ];
            const next = times.length === 0 ? undefined : Math.max(0, Math.min(...times) - now);
            expect(await store.nextDue({ now })).toBe(next);
          }
        } finally {
          await store.close();
        }
      }),
      { numRuns: 200 },
    );
  }, 120_000);
});
