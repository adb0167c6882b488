// How module tasks are asked for and set up: the scheduler options `threads`
// and `threadOptions` with their checks, the option `payload` of a task
// given as a module, and the task function (or durable handler) that hands
// such a task to the pool. What a module's handler receives is
// `ThreadContext`.
import { availableParallelism } from 'node:os';
import type { ResourceLimits } from 'node:worker_threads';
import { toDuration, type Duration } from '../core/duration.js';
import { nonNodeRuntime } from '../core/runtime.js';
import type { TaskContext, TaskFunction } from '../core/task.js';
import type { TaskOptions } from '../core/task-options.js';
import { assertKnownKeys, assertOptionsObject, describe, keysOf } from '../core/validate.js';
import { ThreadJob } from './job.js';
import type { ThreadPool } from './pool.js';
import type { ThreadSettings } from './thread.js';

/** How pool threads are started (the scheduler option `threadOptions`). */
export interface ThreadOptions {
  /**
   * Node flags of each thread, e.g. `['--import', 'tsx']` to load TypeScript
   * modules in development (a module must be something Node can load).
   * Node only: on Bun and Deno, `new Scheduler()` throws a TypeError.
   * @default the main thread's `process.execArgv`
   * @example
   * new Scheduler({ threadOptions: { execArgv: ['--import', 'tsx'] } });
   */
  execArgv?: readonly string[];
  /**
   * Memory limits of each thread (`worker_threads` `resourceLimits`): a task
   * whose thread runs out fails with `ThreadError` `ERR_THREAD_OUT_OF_MEMORY`,
   * and the thread is replaced. Node only: on Bun and Deno, `new
   * Scheduler()` throws a TypeError.
   * @default Node's defaults
   * @example
   * new Scheduler({ threadOptions: { resourceLimits: { maxOldGenerationSizeMb: 256 } } });
   */
  resourceLimits?: ResourceLimits;
  /**
   * How long a handler whose `ctx.signal` aborted (cancel, `timeout`,
   * `close({ abort: true })`) has to settle before its thread is terminated
   * and replaced; the task then ends `cancelled` or `timed-out`. ms or a
   * duration string.
   * @default 1000
   * @example
   * new Scheduler({ threadOptions: { grace: '5s' } });
   */
  grace?: Duration;
}

/** The options of a task given as a module (`schedule(when, url, options)`). */
export interface ThreadTaskOptions extends TaskOptions {
  /**
   * The handler's second argument, copied into its thread by structured
   * clone (checked at the call: a function or a class instance with private
   * state throws a TypeError naming it).
   * @default undefined
   * @example
   * scheduler.after(0, new URL('./thumbnail.js', import.meta.url), { payload: { file: 'cat.png', width: 256 } });
   */
  payload?: unknown;
}

/**
 * What a module's handler receives in its thread: the task's context (its
 * `signal` aborts there when the task is cancelled, times out or the
 * scheduler closes with `abort: true`), plus a stored task's `id`.
 * @example
 * // thumbnail.js
 * export default async function thumbnail(ctx, { file, width }) {
 *   ctx.signal.throwIfAborted();
 *   return render(file, width);
 * }
 */
export interface ThreadContext extends TaskContext {
  /** A stored task's id (durable work); undefined for a task in memory. */
  readonly id?: number;
}

const THREAD_KEYS: ReadonlySet<string> = new Set(keysOf<ThreadOptions>({ execArgv: true, resourceLimits: true, grace: true }));
const LIMIT_KEYS: ReadonlySet<string> = new Set(
  keysOf<ResourceLimits>({ maxYoungGenerationSizeMb: true, maxOldGenerationSizeMb: true, codeRangeSizeMb: true, stackSizeMb: true }),
);

/** The default pool size: one thread per core Node may use. @internal */
export function defaultThreads(): number {
  return availableParallelism();
}

/** Throws a RangeError unless `value` is a valid thread count. @internal */
export function assertThreads(value: unknown): asserts value is number {
  if (!Number.isInteger(value) || (value as number) < 1)
    throw new RangeError(`Expected \`threads\` to be an integer >= 1, got ${describe(value)}`);
}

/** The option `threadOptions`, checked. @internal */
export function toThreadSettings(options: ThreadOptions | undefined): ThreadSettings {
  if (options === undefined) return { execArgv: undefined, resourceLimits: undefined, grace: 1000 };
  assertOptionsObject(options, 'threadOptions');
  assertKnownKeys(options, THREAD_KEYS, 'threadOptions');
  const { execArgv, resourceLimits } = options;
  if (execArgv !== undefined && (!Array.isArray(execArgv) || execArgv.some((flag) => typeof flag !== 'string')))
    throw new TypeError(`Expected \`threadOptions.execArgv\` to be an array of strings, got ${describe(execArgv)}`);
  if (resourceLimits !== undefined) {
    assertOptionsObject(resourceLimits, 'threadOptions.resourceLimits');
    assertKnownKeys(resourceLimits, LIMIT_KEYS, 'threadOptions.resourceLimits');
    for (const [key, value] of Object.entries(resourceLimits))
      if (typeof value !== 'number' || !(value > 0))
        throw new RangeError(`Expected \`threadOptions.resourceLimits.${key}\` to be a number > 0, got ${describe(value)}`);
  }
  const runtime = nonNodeRuntime();
  // Bun accepts both and applies neither (a thread grows past any limit); Deno refuses Node's flags, and a
  // thread of its that reaches a limit while running a handler hangs instead of ending: refused here, by name.
  if (runtime !== undefined && (execArgv !== undefined || resourceLimits !== undefined)) {
    const option = execArgv !== undefined ? 'execArgv' : 'resourceLimits';
    throw new TypeError(`\`threadOptions.${option}\` is Node-only: the worker threads of ${runtime} do not honour it (leave it out there)`);
  }
  const grace = options.grace === undefined ? 1000 : toDuration(options.grace, 'threadOptions.grace');
  return { execArgv: execArgv === undefined ? undefined : [...execArgv], resourceLimits, grace };
}

/** Runs `module`'s handler in the pool with `ctx` and `payload`. */
function runIn(pool: ThreadPool, module: URL, ctx: TaskContext & { id?: number }, payload: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => pool.run(new ThreadJob(module, ctx, payload, resolve, reject)));
}

/**
 * A module task as the loop runs it: a task function that runs the module
 * in the pool, and the task's own options without `payload`. The payload is
 * cloned here, so a bad one throws at the call.
 * @internal
 */
export function threadTask<O extends TaskOptions>(
  pool: ThreadPool,
  module: URL,
  options: (O & { payload?: unknown }) | undefined,
): [fn: TaskFunction<Promise<unknown>>, options: O | undefined] {
  if (options === undefined) return [(ctx) => runIn(pool, module, ctx, undefined), undefined];
  assertOptionsObject(options, 'schedule');
  const { payload, ...rest } = options as O & { payload?: unknown };
  let copy: unknown;
  try {
    copy = structuredClone(payload);
  } catch (error) {
    throw new TypeError(
      `Expected \`payload\` to be structured-cloneable to send it to a thread, got ${describe(payload)}: ${String(error)}`,
    );
  }
  return [(ctx) => runIn(pool, module, ctx, copy), rest as unknown as O];
}

/** A durable handler that runs `module` in the pool. @internal */
export function threadHandler(pool: ThreadPool, module: URL): (ctx: TaskContext & { id?: number }, payload: unknown) => Promise<unknown> {
  return (ctx, payload) => runIn(pool, module, ctx, payload);
}
