// The one queue API of `Scheduler` (docs/queues.md), its types: what
// `scheduler.queue(name)` and `scheduler.queues()` return, the in-memory
// queues (core/queues.ts) without a store and the durable ones
// (durable/queues.ts) with one. Both handles have the same members; what
// needs the store (every setting shared by the processes: pause, global
// concurrency, rate) returns a Promise, in memory too (resolved at once, the
// change already made), so code that uses queues is the same in both modes.
import type { RateLimit } from './core/limit-options.js';
import type { QueueCounts } from './core/queues.js';
import type { DurableQueueCounts } from './durable/queues.js';

/**
 * A queue's tasks by state, as `counts()` and `queues()` give them. Both
 * modes have `waiting` (every task not started yet, due or not) and
 * `running`; in memory (`QueueCounts`) also `due` (the waiting ones already
 * due), with a store
 * (`DurableQueueCounts`) every stored state.
 */
export type SchedulerQueueCounts = Pick<QueueCounts, 'waiting' | 'running'> & Partial<QueueCounts> & Partial<DurableQueueCounts>;

/** One queue as `scheduler.queues()` lists it (a `QueueInfo` in memory, a `DurableQueueInfo` with a store). */
export interface SchedulerQueueInfo {
  /** The queue's name (`'default'` for tasks that name none). */
  name: string;
  /** Its concurrency in this process; `Infinity` for none. */
  concurrency: number;
  /** Its concurrency across processes (in memory the lower of it and `concurrency` applies); `Infinity` for none. */
  globalConcurrency: number;
  /** Its rate limit (interval in ms; with a store the stored one, across every process), or undefined for none. */
  rate: RateLimit | undefined;
  /** Whether it is paused (with a store: stored, for every process). */
  paused: boolean;
  /** Its tasks by state. */
  counts: SchedulerQueueCounts;
}

/**
 * What `scheduler.queue(name)` returns: the in-memory `Queue` without a
 * store, a `DurableQueue` with one; both have these members.
 * `concurrency` is a live setting of this process; the methods return
 * Promises in both modes (in memory they resolve at once, the change
 * already made; with a store once it is stored, for every process). The
 * rate is shared with a store, so it is set with `await setRate()` and read
 * with `await info()` (an in-memory `Queue` also has a synchronous `rate`).
 * @example
 * const emails = scheduler.queue('emails');
 * emails.concurrency = 2;               // this process runs at most 2 at once
 * await emails.setGlobalConcurrency(5); // every process together at most 5
 * await emails.setRate({ limit: 10, interval: '1s' }); // every process together at most 10 starts a second
 * await emails.pause();                 // due emails wait...
 * await emails.resume();                // ...and start now
 * const { waiting, running } = await emails.counts();
 */
export interface SchedulerQueue {
  /** The queue's name. */
  readonly name: string;
  /** At most this many of the queue's tasks run at once in this process (live): an integer >= 1, or `Infinity`. */
  concurrency: number;
  /** Sets the queue's concurrency across every process sharing it (`Infinity`: none). */
  setGlobalConcurrency(value: number): Promise<void>;
  /** Sets the queue's rate across every process sharing it (undefined: none); the starts already made in the window count. */
  setRate(value: RateLimit | undefined): Promise<void>;
  /** Pauses the queue: none of its due tasks starts until `resume()`; running ones go on. */
  pause(): Promise<void>;
  /** Resumes a paused queue. */
  resume(): Promise<void>;
  /** The queue's tasks by state. */
  counts(): Promise<SchedulerQueueCounts>;
  /** The queue's settings, paused flag and counts. */
  info(): Promise<SchedulerQueueInfo>;
}
