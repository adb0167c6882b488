import { byDueTime, HeldQueue } from './held-queue.js';
import { RateWindow } from './rate-window.js';
import { State, type Task, type TaskSettings } from './task.js';

/**
 * The tasks of one serial key. The key is held by one task (`holder`) from
 * the moment it gets the key until its final state, retries included; due
 * tasks of the key park here meanwhile, earliest due first, and the next one
 * gets the key when the holder ends. Dropped as soon as nobody holds it.
 * @internal
 */
export class SerialLane {
  holder: Task | undefined = undefined;
  readonly parked = new HeldQueue<Task>(byDueTime);
}

/**
 * The head of a rate key's line in the ready heap: its due time, id and
 * settings (so its priority) as the heap orders them. The head may change
 * while it waits there (an earlier task of the key arrives, or the head is
 * cancelled): the entry is then retired (`_state` no longer `Held`, a
 * tombstone) and a new one made. A task's own fields never change while it
 * is in a heap, so the heaps stay ordered.
 * @internal
 */
export class LaneEntry {
  readonly _time: number;
  readonly id: number;
  readonly _settings: TaskSettings;
  _state = State.Held;
  readonly lane: RateLane;

  constructor(head: Task, lane: RateLane) {
    this._time = head._time;
    this.id = head.id;
    this._settings = head._settings;
    this.lane = lane;
  }
}

/**
 * The due tasks of one rate-limit key, earliest due first (so the key's
 * order holds whatever their priorities), until they start. While the
 * bucket has room the head is in the ready heap through one `entry`; a head
 * the bucket has no room for waits for `blockedAt`, the instant the window
 * frees, as one entry in the flow's wake heap: no timer of its own. It is made when a task naming the key is scheduled, and
 * dropped once none is unfinished and its window has expired (at once, or
 * at the first pump after the window expires).
 * @internal
 */
export class RateLane {
  readonly key: string;
  readonly window: RateWindow;
  readonly parked = new HeldQueue<Task>(byDueTime);
  /** The head's entry in the ready heap, while the bucket has room for it. */
  entry: LaneEntry | undefined = undefined;
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
