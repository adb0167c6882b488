// The errors of stored work that callers catch by class: a task not found,
// a wait that timed out, a lease lost inside ctx.transaction(), a lease that
// expired too often, an unknown handler name, a flow that cannot be stored,
// a database newer than this library. (SQLite's StoreInUseError is in
// sqlite/errors.ts; every code is in TaskheapErrorCode, core/errors.ts.)
import { TaskheapError } from '../core/errors.js';
import { expiredMessage } from './expiries.js';
import { SCHEMA_VERSION } from './store.js';

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

/**
 * A stored task failed without running again: its lease ran out
 * `maxLeaseExpiries + 1` times while it ran (its process died, or blocked
 * its event loop for longer than the lease). The process whose claim
 * decided it emits `failure` and calls `onError` with this error, once.
 * @example
 * scheduler.on('failure', (task, error) => {
 *   if (error instanceof LeaseExpiredError) log.warn(`stored task ${error.id} kept killing its workers`);
 * });
 */
export class LeaseExpiredError extends TaskheapError {
  /** The stored task's id. */
  readonly id: number;
  /** How many times its lease expired. */
  readonly expiries: number;

  constructor(id: number, expiries: number) {
    super(`Task ${id}: ${expiredMessage(expiries)}`, 'ERR_LEASE_EXPIRED');
    this.id = id;
    this.expiries = expiries;
  }
}

/**
 * A second stored job of one handler registered without a \`key\` by this
 * process: a job's key defaults to its handler's name, which the first one has.
 */
export class JobKeyError extends TaskheapError {
  constructor(name: string) {
    super(
      `A second stored job of handler '${name}' needs a \`key\`: without one a job's key is its handler's name ('${name}'), which the first one has`,
      'ERR_JOB_KEY',
    );
  }
}

/** A flow that cannot be stored (a cycle, a dependency on an unknown name); nothing was written. */
export class FlowError extends TaskheapError {
  constructor(message: string) {
    super(message, 'ERR_FLOW');
  }
}

/** A database written by a newer taskheap: refusing it beats corrupting it. */
export class SchemaVersionError extends TaskheapError {
  /** The version found in the database. */
  readonly found: number;

  constructor(found: number) {
    super(
      `The taskheap schema in this database is version ${found}, newer than this library's ${SCHEMA_VERSION}; upgrade taskheap`,
      'ERR_SCHEMA_TOO_NEW',
    );
    this.found = found;
  }
}

/** Why a task cannot be retried (`retryTask`): there is none, or it is not failed, timed-out or cancelled. */
export function notRetryable(id: number, task: { readonly state: string } | undefined): Error {
  if (task === undefined) return new TaskNotFoundError(id);
  return new TaskheapError(
    `Task ${id} is ${task.state}; only a failed, timed-out or cancelled task can be retried`,
    'ERR_TASK_NOT_FINISHED',
  );
}
