/**
 * Every error taskheap creates carries a stable `code`, so callers can branch
 * on it without matching messages.
 */
export class TaskheapError extends Error {
  /** A stable, machine-readable identifier such as `ERR_SCHEDULER_CLOSED`. */
  readonly code: string;

  constructor(message: string, code: string, options?: ErrorOptions) {
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
