// After an outage (PgBouncer or PostgreSQL restarted), each of two
// schedulers must claim and run new work again, within a bound (issue 23).
//
// "Each runs some of a new batch" does not test that: the process that adds
// work wakes itself and claims it at once, up to its capacity (its workers
// and its prefetch, prefetch.ts), while the other learns of it only by its
// next poll. A batch no larger than that capacity goes to the one that added
// it however alive the other is (measured, when the prefetch was at least the
// workers: 29 batches of 8 in a row, with no outage at all). So here every new task is a 'gate' that
// blocks until released: the scheduler that claims them fills up and stays
// full, and batches are added whenever none is waiting, until the one that
// is full leaves the rest to the other, which must claim it by its poll.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Scheduler } from '../../src/index.js';

/** The name of the blocking tasks. */
export const GATE = 'gate';

export interface BothRan {
  /** How often each gate task started, by id: once each, unless something ran twice. */
  starts: Map<number, number>;
  /** Gate tasks added in all. */
  added: number;
  /** Gate tasks each scheduler started. */
  ran: number[];
}

/**
 * Defines GATE on each of `schedulers`, then adds `batch` gate tasks with
 * `add` whenever `waiting()` (gate tasks waiting in the store) is 0, until
 * every scheduler has started one; then releases them all. Throws, naming
 * what each ran, if that takes longer than `timeout` ms (a scheduler that
 * never claims again). Failures of `add` and `waiting` (the database still
 * away) are retried. The caller then waits for the `added` gate tasks to
 * succeed and checks `starts`.
 */
export async function bothRunNewWork(
  schedulers: readonly Scheduler[],
  add: (count: number) => Promise<unknown>,
  waiting: () => Promise<number>,
  { batch = 8, timeout = 30_000 } = {},
): Promise<BothRan> {
  const starts = new Map<number, number>();
  const ran = schedulers.map(() => 0);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  schedulers.forEach((scheduler, i) => {
    scheduler.define(GATE, async (ctx) => {
      starts.set(ctx.id, (starts.get(ctx.id) ?? 0) + 1);
      ran[i]!++;
      await released;
    });
  });
  let added = 0;
  const deadline = Date.now() + timeout;
  try {
    while (!ran.every((n) => n > 0)) {
      if (Date.now() > deadline) {
        throw new Error(`Not every scheduler ran new work within ${timeout} ms: each started ${JSON.stringify(ran)} of ${added} added`);
      }
      try {
        if ((await waiting()) === 0) {
          await add(batch);
          added += batch;
        }
      } catch {
        // the database is still away: look again
      }
      await sleep(50);
    }
  } finally {
    release();
  }
  return { starts, added, ran };
}
