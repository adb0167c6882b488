// What every part of the durable runner shares (runner.ts composes them):
// the store and the loop it works against, this process's claim owner, the
// store's timings, and the two steps of shutting down. Only what all parts
// need is here; what two parts share goes to those two as constructor
// arguments (Holdings, a callback), so each file's inputs are in its constructor.
import { randomUUID } from 'node:crypto';
import type { TaskLoop } from '../core/loop.js';
import type { Clock } from '../core/clock.js';
import type { Store } from './store.js';

/** What the client (and the waiters) work with: the worker's context, or a plain one where nothing runs. */
export interface StoreContext {
  readonly store: Store;
  /** The scheduler's clock: due times, throttles and job times are on it. */
  readonly clock: Clock;
  /** ms between looks when nothing is announced (waiters' sweeps). */
  readonly poll: number;
  /** Closing: waiters let go, and no new ones start. */
  readonly closed: boolean;
  /** Closed: the store is closed, and calls reject with ClosedError. */
  readonly finished: boolean;
  /** Whether the waiters' timers may let the process exit (the scheduler's `unref`). */
  readonly unref: boolean;
  /** A store error for `onError`. */
  report(error: unknown): void;
}

/** Backoff of failed store calls: 100 ms doubling up to this. */
const MAX_BACKOFF = 5_000;

/** @internal */
export class RunnerContext implements StoreContext {
  readonly store: Store;
  readonly loop: TaskLoop;
  /** The owner of this process's claims and leases. */
  readonly owner = randomUUID();
  /** ms a claim lasts without renewal. */
  readonly lease: number;
  /** ms between looks for work when nothing wakes the process (and between waiters' sweeps where nothing is announced). */
  readonly poll: number;
  /** stop() came: no more claims, sweeps end, and a task cancelled from now on is handed back unrun. */
  closed = false;
  /** close() is over: no more outcome writes, nor renewals. */
  finished = false;

  /** The loop's clock (StoreContext). */
  get clock(): Clock {
    return this.loop.clock;
  }

  /** Whether the loop's timers let the process exit (StoreContext). */
  get unref(): boolean {
    return this.loop.unref;
  }

  constructor(store: Store, loop: TaskLoop) {
    this.store = store;
    this.loop = loop;
    this.lease = store.lease ?? 30_000;
    this.poll = store.poll ?? 5_000;
  }

  /** A store error for `onError`: no task, attempt 0. */
  report(error: unknown): void {
    this.loop.report(error, { task: undefined, name: undefined, attempt: 0 });
  }
}

/** The wait after `failures` failed store calls in a row: 100 ms doubling, at most MAX_BACKOFF. */
export function backoff(failures: number): number {
  return Math.min(MAX_BACKOFF, 100 * 2 ** Math.min(failures, 10));
}
