import { byDueTime, HeldQueue } from './held-queue.js';
import { RateWindow } from './rate-window.js';
import type { Task } from './task.js';

/**
 * The tasks of one serial key. The key is held by one task (`holder`) from
 * the moment it gets the key until its final state, retries included; due
 * tasks of the key park here meanwhile, earliest due first, and the next one
 * gets the key when the holder ends. Dropped as soon as nobody holds it.
 * @internal
 */
export class SerialLane {
  holder: Task | undefined = undefined;
  readonly parked = new HeldQueue(byDueTime);
}

/**
 * The tasks of one rate-limit key. At most one of them (`out`) is in the
 * ready heap at a time, let out because the bucket had room; the others park
 * here, earliest due first, so the key's order holds whatever their
 * priorities. A head the bucket has no room for waits for `blockedAt`, the
 * instant the window frees, as one entry in the flow's wake heap: no timer
 * of its own. It is made when a task naming the key is scheduled, and
 * dropped once none is unfinished and its window has expired (at once, or
 * at the first pump after the window expires).
 * @internal
 */
export class RateLane {
  readonly key: string;
  readonly window: RateWindow;
  readonly parked = new HeldQueue(byDueTime);
  out: Task | undefined = undefined;
  /** When the blocked head may go (elapsed time); Infinity when not blocked. */
  blockedAt = Infinity;
  /** Removed from the flow: its entries in the wake heap are stale. */
  dropped = false;
  /** Tasks naming the key that have not reached a final state (pending, waiting here, running, or waiting for a retry). */
  unfinished = 0;

  constructor(key: string, limit: number, interval: number) {
    this.key = key;
    this.window = new RateWindow(limit, interval);
  }

  /** No task of the key is unfinished and no start counts any more: the lane can go. */
  idle(now: number): boolean {
    return this.unfinished === 0 && this.window.expired(now);
  }
}
