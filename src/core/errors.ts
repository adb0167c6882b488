// The errors of the in-memory scheduler, and the root of every error taskheap
// creates: `TaskheapError` with its `code`, one of `TaskheapErrorCode`.
// The errors of stored work are in durable/errors.ts, those of worker
// threads in threads/errors.ts; their codes are listed here, where the class
// that carries them is.

/**
 * Every `code` a `TaskheapError` may carry, so a comparison with a code that
 * does not exist is a compile error.
 */
export type TaskheapErrorCode =
  // The scheduler and its tasks (this file).
  | 'ERR_SCHEDULER_CLOSED'
  | 'ERR_QUEUE_FULL'
  | 'ERR_TASK_TIMEOUT'
  | 'ERR_TASK_CANCELLED'
  | 'ERR_MISSING_PEER'
  | 'ERR_STEP_MISMATCH'
  | 'ERR_STEP_SUSPENDED'
  | 'ERR_STEPS_NOT_STORED'
  // Stored work (durable/errors.ts, durable/sqlite/errors.ts, and the plain TaskheapErrors of the durable layer).
  | 'ERR_TASK_NOT_FOUND'
  | 'ERR_TASK_NOT_FINISHED'
  | 'ERR_JOB_NOT_FOUND'
  | 'ERR_JOB_KEY'
  | 'ERR_WAIT_TIMEOUT'
  | 'ERR_LEASE_LOST'
  | 'ERR_LEASE_EXPIRED'
  | 'ERR_UNKNOWN_HANDLER'
  | 'ERR_SCHEMA_TOO_NEW'
  | 'ERR_STORE_IN_USE'
  | 'ERR_FLOW'
  | 'ERR_PROGRESS_NOT_STORED'
  // Worker threads (threads/errors.ts).
  | 'ERR_THREAD_CRASHED'
  | 'ERR_THREAD_EXIT'
  | 'ERR_THREAD_OUT_OF_MEMORY'
  | 'ERR_THREAD_CLONE';

/**
 * Every error taskheap creates carries a stable `code`, so callers can branch
 * on it without matching messages.
 * @example
 * if (error instanceof TaskheapError && error.code === 'ERR_QUEUE_FULL') retryLater();
 */
export class TaskheapError extends Error {
  /** A stable, machine-readable identifier such as `ERR_SCHEDULER_CLOSED`. */
  readonly code: TaskheapErrorCode;

  constructor(message: string, code: TaskheapErrorCode, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * Thrown by `schedule()` after `close()`, and the rejection of every task
 * that was still waiting when the scheduler closed.
 */
export class ClosedError extends TaskheapError {
  constructor(message = 'The scheduler is closed') {
    super(message, 'ERR_SCHEDULER_CLOSED');
  }
}

/** Thrown by `schedule()` when `maxWaiting` tasks are already waiting. */
export class QueueFullError extends TaskheapError {
  constructor(maxWaiting: number) {
    super(`Cannot schedule: ${maxWaiting} tasks are already waiting (maxWaiting)`, 'ERR_QUEUE_FULL');
  }
}

/**
 * The reason a run's `ctx.signal` is aborted with when it outlives its
 * `timeout`, and the rejection of a task whose last attempt timed out.
 */
export class TimeoutError extends TaskheapError {
  /** The timeout that was exceeded, in milliseconds. */
  readonly timeout: number;

  constructor(timeout: number, name?: string) {
    super(`Task ${name === undefined ? '' : `"${name}" `}timed out after ${timeout} ms`, 'ERR_TASK_TIMEOUT');
    this.timeout = timeout;
  }
}

/** The default reason of `task.cancel()` and `job.cancel()` when none is given. */
export class CancelledError extends TaskheapError {
  constructor(message = 'The task was cancelled') {
    super(message, 'ERR_TASK_CANCELLED');
  }
}

/**
 * Thrown at the first call that needs an optional peer dependency (a
 * database driver, `@opentelemetry/api`) that is not installed.
 */
export class MissingPeerError extends TaskheapError {
  /** The package to install. */
  readonly package: string;

  constructor(name: string, feature: string, options?: ErrorOptions) {
    super(
      `${feature} needs the optional peer dependency "${name}", which is not installed: npm install ${name}`,
      'ERR_MISSING_PEER',
      options,
    );
    this.package = name;
  }
}

/**
 * Thrown by a step call that suspends the run (a sleep not over, a wait with
 * no message yet). The run is marked too, so the engine ends it as a
 * suspension whatever the handler does with this error: let it through.
 */
export class StepSuspended extends TaskheapError {
  constructor() {
    super(
      'The run is suspended here (ctx.sleep or ctx.receive) and runs again from its start when due: let this error through',
      'ERR_STEP_SUSPENDED',
    );
  }
}
