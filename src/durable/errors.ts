// The errors of stored work that callers catch by class: a task not found,
// a wait that timed out, a lease lost inside ctx.transaction(), an unknown
// handler name (store.ts re-exports them; SchemaVersionError stays there).
import { TaskheapError } from '../core/errors.js';

/** `waitFor(id)` or `retry(id)` named a task the store does not have (never added, or deleted by retention). */
export class TaskNotFoundError extends TaskheapError {
  /** The id asked for. */
  readonly id: number;

  constructor(id: number) {
    super(`No stored task with id ${id}`, 'ERR_TASK_NOT_FOUND');
    this.id = id;
  }
}

/** `waitFor(id, { timeout })`: the task was not finished in time (it goes on). */
export class WaitTimeoutError extends TaskheapError {
  /** The id waited for. */
  readonly id: number;
  /** The timeout, ms. */
  readonly timeout: number;

  constructor(id: number, timeout: number) {
    super(`Task ${id} did not reach a final state within ${timeout} ms (it goes on; waitFor() only stopped waiting)`, 'ERR_WAIT_TIMEOUT');
    this.id = id;
    this.timeout = timeout;
  }
}

/** `ctx.transaction()` could not record the task: its lease was lost (taken over or cancelled); nothing was committed. */
export class LeaseLostError extends TaskheapError {
  constructor(id: number) {
    super(
      `Task ${id} is no longer held by this process (its lease expired and was taken over, or it was cancelled); the transaction was rolled back`,
      'ERR_LEASE_LOST',
    );
  }
}

/** A task or job names a handler that `define()` never registered. */
export class UnknownHandlerError extends TaskheapError {
  constructor(name: string) {
    super(
      `No handler named "${name}"; define it with scheduler.define("${name}", handler) or, in a process that only adds work, list it in the scheduler's \`handlers\` option`,
      'ERR_UNKNOWN_HANDLER',
    );
  }
}
