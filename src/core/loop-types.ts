// What the loop is given and what it reports: its options, the events it
// emits, what `onError` is told, the `stats()` snapshot, and the check of a
// pool size. Types and one check only, so the public API (index.ts, ops/,
// dashboard/) can name them without reaching into the engine.
import type { Clock } from './clock.js';
import type { Rate } from './limit-options.js';
import type { Lateness } from './lateness.js';
import type { Task } from './task.js';
import type { TaskLogLine } from './journal.js';
import { describe } from './validate.js';

/** What `onError` is told about a failure. */
export interface ErrorInfo {
  /** The failed task; undefined for an error of the store (a lost database connection). */
  task: Task | undefined;
  /** The task's `name` option. */
  name: string | undefined;
  /** The attempt that failed (1 for the first run); 0 for store errors. */
  attempt: number;
}

/** A snapshot returned by `scheduler.stats()`. */
export interface SchedulerStats {
  /** Tasks in state `waiting`: for their time, or due and waiting for a worker (the word of `countTasks()` too). */
  waiting: number;
  /** Waiting tasks already due: for a free worker, or for their rate limit, serial group, queue or priority turn. */
  due: number;
  /** Tasks running now. */
  running: number;
  /** The pool size. */
  workers: number;
  /** Tasks that succeeded, since the scheduler was created. */
  succeeded: number;
  /**
   * Tasks that failed for good: their last attempt failed (a run that is
   * retried, in memory or by the store, counts in `retried` instead).
   */
  failed: number;
  /** Runs that failed or timed out and are run again (a retry in memory, or by the store for a stored task). */
  retried: number;
  /** Tasks whose last attempt timed out. */
  timedOut: number;
  /** Tasks cancelled before or while running (including by `close()`). */
  cancelled: number;
  /** How late runs started (ms), over the last 1,024 runs; `max` over all. */
  lateness: Lateness;
}

/** The events of the loop itself; the scheduler adds the jobs' `skip`. */
export interface TaskEvents {
  /** A run started. */
  start: [task: Task];
  /** A task succeeded, with its value. */
  success: [task: Task, value: unknown];
  /** A task failed for good, with its last error. */
  failure: [task: Task, error: unknown];
  /** A run failed and will be retried after `delay` ms (for a stored task: by its store, from any process). */
  retry: [task: Task, error: unknown, delay: number];
  /** A task was cancelled (waiting, or running and then gave up). */
  cancel: [task: Task, reason: unknown];
  /** A run reported progress (`ctx.progress()`); `storedId` is a stored task's id (undefined in memory). */
  progress: [task: Task, value: unknown, storedId: number | undefined];
  /** A run logged a line (`ctx.log()`); `storedId` as for `progress`. */
  log: [task: Task, line: TaskLogLine, storedId: number | undefined];
  /** Nothing is waiting or running any more. */
  idle: [];
}

/** Something an AbortSignal can cancel: a task or a job. */
export interface Cancellable {
  cancel(reason?: unknown): boolean;
}

/** The loop's settings, validated by the scheduler. @internal */
export interface LoopOptions {
  workers: number;
  maxWaiting: number;
  unref: boolean;
  clock: Clock;
  onError: (error: unknown, info: ErrorInfo) => void;
  /** The scheduler-wide rate limit, validated. */
  rate?: Rate | undefined;
}

/**
 * Throws unless `value` is a count such as `workers` or `maxWaiting`: an
 * integer >= 1 or Infinity. A TypeError for a non-number (`'4'`), a
 * RangeError for a bad number; `option` names it.
 */
export function assertCount(value: unknown, option: string): asserts value is number {
  if (typeof value !== 'number') throw new TypeError(`Expected \`${option}\` to be a number, got ${describe(value)}`);
  if (value !== Infinity && (!Number.isInteger(value) || value < 1)) {
    throw new RangeError(`Expected \`${option}\` to be an integer >= 1 or Infinity, got ${describe(value)}`);
  }
}
