// The claimer's wake-ups (src/durable/claimer.ts) with claim rounds on their
// way: a poll of an hour, so only a wake-up can make progress, and the real
// SQLite store's claim() held at a gate (a wrapper that delays the call, no
// mock), so that two rounds are on their way together exactly when the test
// says. The claimer is the same for every store; the PostgreSQL side (NOTIFY,
// a round of its own for work due now) is in postgres-batching.test.ts and
// the serial groups across processes in serial-postgres.test.ts.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import type { ClaimParams, Store } from '../../src/store.js';
import { sqliteStore } from '../../src/sqlite.js';
import { gate } from '../helpers.js';

const HOUR = 3_600_000;

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(10);
  }
}

/** The store with its claim() calls held until the test lets each go, in order. */
function heldClaims(store: Store) {
  const held: { free: number; workers: number | undefined; go: () => void }[] = [];
  let holding = false;
  const claim = store.claim.bind(store);
  store.claim = async (asked: ClaimParams) => {
    // The claimer reuses its params object: a store reads it at the call.
    const params = { ...asked };
    if (holding) {
      const { promise, open } = gate();
      held.push({ free: params.limit, workers: params.limits?.free, go: open });
      await promise;
    }
    return claim(params);
  };
  return {
    held,
    hold(on: boolean) {
      holding = on;
    },
  };
}

/**
 * One worker on a real SQLite file whose claims the test holds: a 'plain'
 * task that runs until `first` opens, and a 'keyed' one; `started` lists the
 * starts. A SQLite store takes no `poll` or `prefetch` option (one process,
 * it is told of its own work): they are set on the object, as the claimer
 * reads them.
 */
function oneWorker(prefetch: number) {
  const path = join(mkdtempSync(join(tmpdir(), 'taskheap-wake-')), 'store.db');
  const store = Object.assign(sqliteStore(path), { poll: HOUR, prefetch });
  const claims = heldClaims(store);
  const errors: unknown[] = [];
  const scheduler = new Scheduler({ store, workers: 1, onError: (error) => errors.push(error) });
  const first = gate();
  const started: string[] = [];
  scheduler.define('plain', async () => {
    started.push('plain');
    await first.promise;
  });
  scheduler.define('keyed', () => void started.push('keyed'));
  const close = async () => {
    claims.hold(false);
    for (const round of claims.held) round.go();
    await scheduler.close({ abort: true });
  };
  return { scheduler, claims, errors, first, started, close };
}

describe('claimer wake-ups with rounds on their way (poll: an hour)', () => {
  it('a limited task is claimed once a worker is free, though the rounds on their way when it was added and when the worker freed both asked with every worker spoken for', async () => {
    // One worker, one task prefetched. The round the serial task's add starts
    // asks while the worker is busy (no free worker: it cannot take the
    // task); the worker frees while that claim is held, and the refill's
    // round beside it counts the held claim's room as a worker spoken for:
    // it cannot take it either. Both answer "every worker is busy, the end
    // of a turn claims again", but no turn is left to end: the claimer used
    // to sleep for its poll, an hour, with the worker idle.
    const { scheduler, claims, errors, first, started, close } = oneWorker(1);
    try {
      await scheduler.start();
      await scheduler.schedule(Date.now(), 'plain');
      await waitFor('the plain task running', () => started.length === 1);
      claims.hold(true);
      // Added while the worker is busy: its round asks with no free worker.
      await scheduler.schedule(Date.now(), 'keyed', { serial: 'k' });
      await waitFor("the keyed task's round asking", () => claims.held.length === 1);
      expect(claims.held[0]!.workers).toBe(0);
      // The worker frees: the refill's round goes out beside the held one.
      first.open();
      await waitFor("the refill's round asking", () => claims.held.length === 2);
      expect(claims.held[1]!.workers).toBe(0);
      claims.hold(false);
      for (const round of claims.held) round.go();
      await waitFor('the keyed task running', () => started.length === 2);
      expect(started).toEqual(['plain', 'keyed']);
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  }, 20_000);

  it('a worker that frees while the round that found every worker busy is on its way claims the limited task, though the room it freed is not worth a claim', async () => {
    // One worker, two prefetched: a refill waits for half the capacity (two)
    // free. The serial task's round asks while the worker is busy; the
    // worker frees while that claim is held, its room (one) not worth a
    // claim. The round comes back with "every worker is busy", which no
    // longer holds: it used to sleep for its poll.
    const { scheduler, claims, errors, first, started, close } = oneWorker(2);
    try {
      await scheduler.start();
      const plain = await scheduler.schedule(Date.now(), 'plain');
      await waitFor('the plain task running', () => started.length === 1);
      claims.hold(true);
      await scheduler.schedule(Date.now(), 'keyed', { serial: 'k' });
      await waitFor("the keyed task's round asking", () => claims.held.length === 1);
      expect(claims.held[0]).toMatchObject({ free: 2, workers: 0 });
      first.open();
      await waitFor('the plain task recorded', async () => (await scheduler.getTask(plain.id))?.state === 'succeeded');
      expect(claims.held).toHaveLength(1);
      claims.hold(false);
      claims.held[0]!.go();
      await waitFor('the keyed task running', () => started.length === 2);
      expect(started).toEqual(['plain', 'keyed']);
      expect(errors).toEqual([]);
    } finally {
      await close();
    }
  }, 20_000);
});
