// The lines due tasks wait in for a key or a queue: `KeyLane` (a concurrency
// or serial group), `RateLane` (a rate group), `QueueLane` (a named queue),
// `FairLane` (a fair share's group), and the entries that stand for their
// heads in the gate's heaps.
import type { Rate } from './limit-options.js';
import { byDueTime, byPriority, HeldQueue, type Queued } from './held-queue.js';
import { RateWindow } from './rate-window.js';
import { State, type Task, type TaskSettings } from './task.js';

/**
 * The tasks of one concurrency group (`concurrency: { group, limit }`, or
 * `serial: key` with limit 1). A task takes one of the key's `limit` places
 * when it starts and keeps it until its final state, retries included
 * (`active` counts them). Due tasks of the key park here, earliest due
 * first; the earliest goes on (`next`, towards its rate group and a worker)
 * while a place is free, one at a time, so the key's tasks start in due
 * order whatever their priorities. Made when a task naming the key is
 * scheduled, dropped once none is unfinished.
 * @internal
 */
export class KeyLane {
  readonly key: string;
  /** The limit of the most recently scheduled task naming the key. */
  limit: number;
  readonly parked = new HeldQueue<Task>(byDueTime);
  /** The parked task let go on, not started yet: it takes a place when it starts. */
  next: Task | undefined = undefined;
  /** Tasks of the key that started and have not reached a final state (running, or waiting for a retry). */
  active = 0;
  /** Tasks naming the key that have not reached a final state. */
  unfinished = 0;

  constructor(key: string, limit: number) {
    this.key = key;
    this.limit = limit;
  }

  /** Whether the head of `parked` may go on now. */
  get open(): boolean {
    return this.next === undefined && this.active < this.limit;
  }
}

/**
 * Stands in a heap for something else's first item, with that item's due
 * time, id and settings (so its priority) as the heap orders them: the head
 * of a rate group's line in a ready heap (a LaneEntry), or a queue's best
 * ready item in the scheduler's ready heap (a QueueEntry). What it stands
 * for may change while it waits there (an earlier task arrives, the head is
 * cancelled): the entry is then retired (`_state` no longer `Held`, a
 * tombstone) and a new one made. A task's own fields never change while it
 * is in a heap, so the heaps stay ordered.
 * @internal
 */
abstract class Entry {
  readonly _time: number;
  readonly id: number;
  readonly _settings: TaskSettings;
  _state = State.Held;

  constructor(item: Queued, time = item._time) {
    this._time = time;
    this.id = item.id;
    this._settings = item._settings;
  }
}

/** The head of a rate group's line in a ready heap. @internal */
export class LaneEntry extends Entry {
  readonly lane: RateLane;

  constructor(head: Task, lane: RateLane) {
    super(head);
    this.lane = lane;
  }
}

/**
 * The due tasks of one rate-limit group, earliest due first (so the key's
 * order holds whatever their priorities), until they start. While the
 * bucket has room the head is in a ready heap through one `entry`; a head
 * the bucket has no room for waits for `blockedAt`, the instant the window
 * frees, as one entry in the gate's wake heap: no timer of its own. It is made when a task naming the key is scheduled, and
 * dropped once none is unfinished and its window has expired (at once, or
 * at the first pump after the window expires).
 * @internal
 */
export class RateLane {
  readonly key: string;
  readonly window: RateWindow;
  readonly parked = new HeldQueue<Task>(byDueTime);
  /** The head's entry in a ready heap, while the bucket has room for it. */
  entry: LaneEntry | undefined = undefined;
  /** When the blocked head may go (elapsed time); Infinity when not blocked. */
  blockedAt = Infinity;
  /** Removed from the gate: its entries in the wake heap are stale. */
  dropped = false;
  /** Tasks naming the key that have not reached a final state (waiting in the heap or here, running, or waiting for a retry). */
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

/** A queue's best ready item in the scheduler's ready heap. @internal */
export class QueueEntry extends Entry {
  readonly queue: QueueLane;
  /** What it stands for: the top of the queue's own heap when it was made. */
  readonly item: Task | LaneEntry | FairEntry;

  constructor(item: Task | LaneEntry | FairEntry, queue: QueueLane) {
    super(item);
    this.queue = queue;
    this.item = item;
  }
}

/**
 * One named queue. Until it is gated (given a concurrency, a rate limit or
 * a pause) its ready tasks share the scheduler's ready heap and it only
 * counts; from then on (for good) they wait in its own heap, `ready`, in
 * priority order, and its best one stands in the scheduler's ready heap (an
 * `entry`) only while the queue is open: not paused, fewer than `limit` of
 * its tasks running, room in its rate window. A queue blocked by its rate
 * waits in the gate's wake heap (`blockedAt`), one blocked by its
 * concurrency for one of its runs to end. So a closed queue holds back its
 * own tasks only.
 * @internal
 */
export class QueueLane {
  readonly name: string;
  concurrency = Infinity;
  globalConcurrency = Infinity;
  /** The rate limit in force; its window counts starts with or without one. */
  rate: Rate | undefined = undefined;
  readonly window: RateWindow;
  paused = false;
  gated = false;
  readonly ready = new HeldQueue<Task | LaneEntry | FairEntry>(byPriority);
  /** Its fair shares' lanes by group ('' for its tasks without one), once shares are in use. */
  readonly fair = new Map<string, FairLane>();
  entry: QueueEntry | undefined = undefined;
  /** Tasks of the queue running now. */
  running: number;
  blockedAt = Infinity;
  /** Queues are never dropped (their wake entries never go stale that way). */
  readonly dropped = false;

  constructor(name: string, running = 0, starts = 0, lastStart = -Infinity) {
    this.name = name;
    this.running = running;
    this.window = new RateWindow(0, 0, starts, lastStart);
  }

  /** The concurrency in force: the lower of `concurrency` and `globalConcurrency` (one process). */
  get limit(): number {
    return Math.min(this.concurrency, this.globalConcurrency);
  }
}

/**
 * The ready items of one fair share's group in one queue (`fair: { group,
 * weight }`; tasks without one are the group ''), highest priority first,
 * then earliest due. Its head stands in the queue's ready heap (the
 * scheduler's, for an ungated queue) through one `entry` whose place is the
 * group's `pass`: stride scheduling, where each start adds `1 / weight` to
 * the pass and the heap starts the lowest pass first (priority still
 * first), so a group of weight 2 gets twice the starts of weight 1. A group
 * that had nothing ready comes back at the gate's virtual time (the pass of
 * the latest start) if it is behind it: it saved no turns while idle.
 * @internal
 */
export class FairLane {
  readonly group: string;
  /** The queue it belongs to, which keeps it in `fair` while it lives. */
  readonly queue: QueueLane;
  weight: number;
  pass = 0;
  readonly items = new HeldQueue<Task | LaneEntry>(byPriority);
  /** The head's entry in a ready heap. */
  entry: FairEntry | undefined = undefined;

  constructor(group: string, queue: QueueLane, weight: number) {
    this.group = group;
    this.queue = queue;
    this.weight = weight;
  }
}

/**
 * The stride rule of fair shares (the gate's): the pass a group lines up at
 * when it had nothing ready (no earlier than the virtual time, so it saved
 * no turns), and its pass after a start (on by 1 / weight). A start also
 * moves the virtual time up to the pass it started at. The stores apply the
 * same rule with a task's turn fixed when it comes due (durable/sqlite/fair.ts,
 * durable/postgres/fair.ts). @internal
 */
export const rejoined = (pass: number, virtual: number): number => Math.max(pass, virtual);
/** @internal */
export const afterStart = (pass: number, weight: number): number => pass + 1 / weight;

/** The head of a fair share's group in a ready heap, placed by the group's pass (its `_time`). @internal */
export class FairEntry extends Entry {
  readonly lane: FairLane;
  /** What it stands for: the group's head when it was made. */
  readonly item: Task | LaneEntry;

  constructor(item: Task | LaneEntry, lane: FairLane) {
    super(item, lane.pass);
    this.lane = lane;
    this.item = item;
  }
}
