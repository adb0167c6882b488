// The errors of work run in threads: `ThreadError` (a thread that crashed,
// exited or ran out of memory under a task, or an outcome that could not
// cross the boundary), and the rebuilding of an error a handler threw in its
// thread into an Error of the main thread.
import { TaskheapError, type TaskheapErrorCode } from '../core/errors.js';

/**
 * The failure of a task run in a pool thread for a reason other than its
 * handler throwing: `code` tells which.
 * - `ERR_THREAD_CRASHED`: an uncaught exception in the thread (an error
 *   thrown from a timer or an event the handler did not await);
 * - `ERR_THREAD_EXIT`: the thread ended under the task (`process.exit()`);
 * - `ERR_THREAD_OUT_OF_MEMORY`: the thread reached its `resourceLimits`;
 * - `ERR_THREAD_CLONE`: the task's result (or error) could not be sent back
 *   by structured clone (a function, a class instance with private state...).
 *
 * The thread is replaced; other tasks are not disturbed. The original error,
 * if any, is the `cause`.
 * @example
 * scheduler.on('failure', (task, error) => {
 *   if (error instanceof ThreadError && error.code === 'ERR_THREAD_OUT_OF_MEMORY') alert(task.name);
 * });
 */
export class ThreadError extends TaskheapError {
  constructor(message: string, code: Extract<TaskheapErrorCode, `ERR_THREAD_${string}`>, options?: ErrorOptions) {
    super(message, code, options);
  }
}

/** The shape in which the thread posts an error it caught (see bootstrap.ts). @internal */
export interface ErrorMessage {
  name?: string;
  message?: string;
  stack?: string;
  fields?: Record<string, unknown>;
  /** A thrown value that is not an Error: as cloned, or as a string. */
  thrown?: unknown;
}

/**
 * An error the handler threw in its thread, rebuilt on the main thread: an
 * Error with the same name, message, stack (the thread's) and cloneable own
 * properties (such as `code`). A thrown non-Error value comes back as itself.
 * @internal
 */
export function toError(message: ErrorMessage): unknown {
  if (!('message' in message) && 'thrown' in message) return message.thrown;
  const error = new Error(message.message);
  Object.defineProperty(error, 'name', { value: message.name ?? 'Error', writable: true, configurable: true });
  if (message.stack !== undefined) error.stack = message.stack;
  if (message.fields !== undefined) Object.assign(error, message.fields);
  return error;
}
