// The options of `schedule()` and `after()`, validated once into the
// settings a task carries (plain tasks share one settings object).
import { toDedupe, toLimits, type ConcurrencyLimit, type DedupeMode, type KeyedRateLimit } from './limit-options.js';
import { toRetryPolicy, type RetryOptions } from './retry.js';
import type { TaskSettings } from './task.js';
import { toDuration, type Duration } from './duration.js';
import { assertKnownKeys, assertOptionsObject, describe } from './validate.js';

/** Options of `schedule()` and `after()`. */
export interface TaskOptions {
  /** Cancels the task when aborted; may be shared by many tasks. */
  signal?: AbortSignal;
  /** A label for logs, errors and `ctx.name`. */
  name?: string;
  /**
   * A run still going after this long (milliseconds, or a string such as
   * `'30s'`) has its `ctx.signal` aborted with a `TimeoutError`, ends as
   * `timed-out` and frees its worker slot.
   * @default Infinity
   */
  timeout?: Duration;
  /** Retry failed or timed-out runs: a policy, or a number of attempts. */
  retry?: RetryOptions | number;
  /**
   * A rate limit of a key (a chat, a route), on top of the scheduler's
   * `rate`: the task starts only when the key's bucket has room. The
   * bucket's limit is the one of the most recently scheduled task naming
   * the key.
   * @example { key: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: KeyedRateLimit;
  /**
   * Tasks sharing a serial key run one at a time, in due-time order; the
   * key is held from a task's start to its final state, retries included.
   * The same as `concurrency: { key, limit: 1 }` (the two share their keys);
   * a task gives one or the other, not both.
   * @example `chat:${chatId}`
   */
  serial?: string;
  /**
   * A concurrency key: at most `limit` tasks naming `key` run at once (one
   * tenant cannot take every worker). The key's tasks start in due-time
   * order (priority does not reorder them) and each holds its place from
   * its start to its final state, retries included; a full key holds back
   * only its own tasks. The limit is the one of the most recently scheduled
   * task naming the key. Not with `serial` (which is `limit: 1`).
   * @default none
   * @example { key: `tenant:${tenantId}`, limit: 2 }
   */
  concurrency?: ConcurrencyLimit;
  /**
   * Among tasks due at once with too few free workers (or too little room
   * in the scheduler's `rate`), higher runs first: an integer. Strict:
   * lower priorities wait while higher ones are due.
   * @default 0
   */
  priority?: number;
  /**
   * The queue the task belongs to: a name (see `scheduler.queue(name)`);
   * queues have their own concurrency, rate limit and pause switch. A queue
   * nobody configured has no limits.
   * @default 'default'
   * @example 'emails'
   */
  queue?: string;
  /**
   * A dedupe key: what the call does when a task with the same key exists
   * is the `dedupe` mode's; `task.enqueued` tells what it did. Tasks only (not
   * jobs); 1 to 512 characters.
   * @default none
   * @example `digest:${userId}`
   */
  key?: string;
  /**
   * With a `key`: `'replace'` replaces a waiting task with the key (one
   * running or waiting for a retry is left alone, and the new one added);
   * `'keep'` returns the existing task if one is waiting or running;
   * `{ throttle: period }` returns the key's last task if it was added less
   * than `period` ago, finished or not; `{ debounce: period }` replaces a
   * waiting task with the key and is due `period` after its time, so the
   * last of a burst runs once the calls stop for `period`.
   * @default 'replace'
   * @example { debounce: '2s' }
   */
  dedupe?: DedupeMode;
}

/** The options a task and a recurring job's runs both take. @internal */
export const RUN_KEYS: readonly string[] = ['signal', 'name', 'timeout', 'retry', 'rate', 'serial', 'concurrency', 'priority', 'queue'];

/** The keys of `TaskOptions`: a run's, and a dedupe key (tasks only). */
const TASK_KEYS: ReadonlySet<string> = new Set([...RUN_KEYS, 'key', 'dedupe']);

/**
 * Validates task options into the settings a task carries. Options that say
 * nothing beyond the defaults give back `defaults` itself, so plain tasks
 * share one settings object.
 */
export function toSettings(options: TaskOptions, defaults: TaskSettings): TaskSettings {
  assertOptionsObject(options, 'task');
  assertKnownKeys(options, TASK_KEYS, 'task');
  const { signal, name, retry } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
  }
  if (name !== undefined && typeof name !== 'string') throw new TypeError(`Expected \`name\` to be a string, got ${describe(name)}`);
  const timeout = options.timeout === undefined || options.timeout === Infinity ? Infinity : toDuration(options.timeout, 'timeout', 1);
  const policy = retry === undefined ? undefined : toRetryPolicy(retry);
  let limits =
    options.rate === undefined &&
    options.serial === undefined &&
    options.priority === undefined &&
    options.concurrency === undefined &&
    options.queue === undefined
      ? undefined
      : toLimits(options);
  const dedupe = options.key === undefined && options.dedupe === undefined ? undefined : toDedupe(options.key, options.dedupe);
  if (dedupe !== undefined) limits = { ...(limits ?? { rate: undefined, serial: undefined, priority: 0 }), dedupe };
  if (signal === undefined && name === undefined && timeout === Infinity && policy === undefined && limits === undefined) return defaults;
  return { owner: defaults.owner, name, timeout, retry: policy, signal, observer: undefined, limits };
}
