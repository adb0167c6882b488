// The options of `schedule()` and `after()`, validated once into the
// settings a task carries (plain tasks share one settings object).
import { toDedupe } from './limit-options.js';
import { DEDUPE_KEYS, LIMIT_KEYS, RUN_KEYS, toLimits, toRun, type DedupeOptions, type LimitOptions, type RunOptions } from './options.js';
import type { TaskSettings } from './task.js';
import { assertKnownKeys, assertOptionsObject, describe, keysOf } from './validate.js';

/** Options of `schedule()` and `after()`: a run's, its limits and its dedupe key. */
export interface TaskOptions extends RunOptions, LimitOptions, DedupeOptions {
  /** Cancels the task when aborted; may be shared by many tasks. */
  signal?: AbortSignal;
  /** A label for logs, errors and `ctx.name`. */
  name?: string;
}

/** The options of an in-memory task that are no group's (a field added to `TaskOptions` outside a group and not here does not compile); a job takes them too. @internal */
export const LABEL_KEYS = keysOf<Omit<TaskOptions, keyof RunOptions | keyof LimitOptions | keyof DedupeOptions>>({
  signal: true,
  name: true,
});

/** The keys of `TaskOptions`. */
const TASK_KEYS: ReadonlySet<string> = new Set([...LABEL_KEYS, ...RUN_KEYS, ...LIMIT_KEYS, ...DEDUPE_KEYS]);

/**
 * Validates task options into the settings a task carries. Options that say
 * nothing beyond the defaults give back `defaults` itself, so plain tasks
 * share one settings object.
 */
export function toSettings(options: TaskOptions, defaults: TaskSettings): TaskSettings {
  assertOptionsObject(options, 'task');
  assertKnownKeys(options, TASK_KEYS, 'task');
  const { signal, name } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
  }
  if (name !== undefined && typeof name !== 'string') throw new TypeError(`Expected \`name\` to be a string, got ${describe(name)}`);
  const { timeout, retry: policy } = toRun(options);
  let limits = toLimits(options);
  const dedupe = options.key === undefined && options.dedupe === undefined ? undefined : toDedupe(options.key, options.dedupe);
  if (dedupe !== undefined) limits = { ...(limits ?? { rate: undefined, serial: undefined, priority: 0 }), dedupe };
  if (signal === undefined && name === undefined && timeout === Infinity && policy === undefined && limits === undefined) return defaults;
  return { owner: defaults.owner, name, timeout, retry: policy, signal, observer: undefined, limits };
}
