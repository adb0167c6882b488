// Fair shares on SQLite against the reference model's turns rule, the
// stores' (test/core/fair-model.ts), with fast-check: random tasks of three
// groups (random weights), priorities and due times, runs ended at random,
// time passing a millisecond at a time and the pool resized. The store is
// driven as a worker drives it: after every step one claim for the free
// workers (on the scheduler's clock, which SQLite compares due times on),
// an ended run settled. Each claim starts the tasks the model starts at that
// instant (all at once, into free workers, so their order within the claim
// is no one's to see). Every task names a group.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { advanceJob } from '../../../src/durable/advance-job.js';
import { Scheduler } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { ManualClock } from '../../../src/testing.js';
import { fairOps, Model, type Op } from '../../core/fair-model.js';
import { START } from '../../helpers.js';

const GROUPS = ['a', 'b', 'c'] as const;
const OWNER = 'fair-model';
const opArb = fairOps(GROUPS.length);

async function check(ops: Op[], weights: Record<string, number>, workers: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-fair-'));
  const clock = new ManualClock(START);
  const store = sqliteStore(join(dir, 'fair.db'));
  // Never started: it only adds, through the durable API; the claims below are this test's.
  const scheduler = new Scheduler({ clock, store });
  scheduler.define('work', () => {});
  const model = new Model(workers, weights);
  model.on = true;
  model.turns = true;
  let pool = workers;
  /** One claim for the free workers; the tasks it starts together are the ones the model starts at that instant. */
  const pump = async (step: Op) => {
    const free = pool - model.running;
    const claimed =
      free > 0
        ? await store.claim({
            owner: OWNER,
            now: clock.now(),
            lease: 3_600_000,
            limit: free,
            advance: advanceJob,
            limits: { free, rate: undefined },
          })
        : [];
    const before = model.started.length;
    model.pump(clock.now());
    const byId = (a: number, b: number) => a - b;
    expect(claimed.map((claim) => claim.id).sort(byId), JSON.stringify(step)).toEqual(model.started.slice(before).sort(byId));
  };
  try {
    await store.migrate();
    for (const step of ops) {
      if (step.op === 'add') {
        const group = GROUPS[step.group]!;
        const due = clock.now() + step.at;
        const task = await scheduler.schedule(due, 'work', { priority: step.priority, fair: { group, weight: weights[group] } });
        model.tasks.push({ id: task.id, group, due, priority: step.priority, state: 'waiting' });
        await pump(step);
      } else if (step.op === 'end') {
        const running = model.tasks.filter((t) => t.state === 'running');
        if (running.length === 0) continue;
        const task = running[step.pick % running.length]!;
        await store.settle(OWNER, [{ id: task.id, kind: 'complete', state: 'succeeded', error: null }], clock.now());
        task.state = 'done';
        await pump(step);
      } else if (step.op === 'tick') {
        for (let i = 0; i < step.by; i++) {
          await clock.advance(1);
          await pump(step);
        }
      } else {
        pool = step.workers;
        model.workers = step.workers;
        await pump(step);
      }
    }
  } finally {
    await scheduler.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('fair shares on SQLite against the reference model (fast-check)', () => {
  it('every claim starts what the weighted turns name, with priorities, due times, ended runs and a resized pool', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 5, maxLength: 40 }),
        fc.record({ a: fc.integer({ min: 1, max: 3 }), b: fc.integer({ min: 1, max: 3 }), c: fc.integer({ min: 1, max: 3 }) }),
        fc.integer({ min: 1, max: 3 }),
        (ops, weights, workers) => check(ops, weights, workers),
      ),
      { numRuns: 200 },
    );
  }, 60_000);
});
