// The options and events of `Scheduler`, and the checks of what its
// constructor and its methods are given (options objects, event names, ids,
// limits), turned into what the loop, the jobs and the durable worker take.
// The scheduler's hot path (`schedule()`, `after()`) needs none of it.
import { assertClock, systemClock, type Clock } from './core/clock.js';
import { loadOnUse } from './core/load-on-use.js';
import { toDuration, type Duration } from './core/duration.js';
import { toRate, type RateLimit } from './core/limit-options.js';
import { assertCount, type ErrorInfo, type LoopOptions, type TaskEvents } from './core/loop-types.js';
import type { QueueSettings } from './core/gate.js';
import { toQueues, type QueueOptions } from './core/queues.js';
import type { DurableQueueOptions } from './durable/queues.js';
import { assertKnownKeys, assertOptionsObject, describe, keysOf, MAX_TIME } from './core/validate.js';
import type { DurableTaskItem } from './durable/options.js';
import type { DurableRunner } from './durable/runner.js';
import type { Retention } from './durable/worker.js';
import type { Store } from './durable/store.js';
import type { SkipInfo } from './jobs/job.js';
import { systemZone, validateZone } from './rules/wall-time.js';
import { assertThreads, defaultThreads, toThreadSettings, type ThreadOptions } from './threads/options.js';
import type { ThreadSettings } from './threads/thread.js';

/** Options of `new Scheduler()`. */
export interface SchedulerOptions {
  /**
   * How many tasks may run at once: an integer >= 1, or `Infinity`.
   * @default 10
   */
  workers?: number;
  /**
   * The most in-memory tasks that may be waiting at once; `schedule()` beyond it throws `QueueFullError`.
   * @default Infinity
   */
  maxWaiting?: number;
  /**
   * The IANA time zone calendar rules use unless they name their own.
   * @default the system zone
   */
  timezone?: string;
  /**
   * When true, waiting tasks do not keep the process alive.
   * @default false
   */
  unref?: boolean;
  /**
   * Where time comes from. Pass a `ManualClock` from `taskheap/testing` in tests.
   * @default the system clock
   */
  clock?: Clock;
  /**
   * Called when a task fails for good (after its last attempt).
   * @default logs to console.error, unless the task's `result` was read (its
   * reader handles the failure)
   */
  onError?: (error: unknown, info: ErrorInfo) => void;
  /**
   * Keeps named-handler work in a database so it outlives the process:
   * `sqliteStore(path)` from `taskheap/sqlite` or `postgresStore(...)` from
   * `taskheap/postgres`. Function tasks stay in memory either way.
   * @default none
   */
  store?: Store;
  /**
   * With a store: the handler names this process may schedule without
   * defining them, such as a web process that adds work for workers
   * elsewhere. A process that defines handlers or lists names here refuses
   * any other name at the call (`UnknownHandlerError`), which catches typos;
   * one that does neither accepts any well-formed name.
   * @default none
   * @example
   * new Scheduler({ store, handlers: ['remind', 'invoice'] });
   */
  handlers?: readonly string[];
  /**
   * With a store: how long finished tasks are kept before a running worker
   * (a scheduler that called `start()`) deletes them: `succeeded` for
   * succeeded tasks, `failed` for failed, timed-out and cancelled ones (and
   * recurring jobs that are over). ms or a duration string; `false` keeps
   * that kind forever; `retention: false` keeps everything. `0` keeps
   * nothing: the worker deletes such a task as it ends, unless it has a key,
   * belongs to a flow, used steps or a `waitFor()` waits for it (those go with
   * a later sweep, once its waiter has read it).
   * @default { succeeded: '1d', failed: '7d' }
   * @example
   * new Scheduler({ store, retention: { succeeded: '1h', failed: '30d' } });
   * new Scheduler({ store, retention: { succeeded: 0 } }); // as graphile-worker: done means gone
   */
  retention?:
    | false
    | {
        /** How long succeeded tasks are kept; `false` keeps them forever, `0` not at all. @default '1d' */
        succeeded?: Duration | false;
        /** How long failed, timed-out and cancelled tasks (and jobs that are over) are kept; `false` keeps them forever, `0` not at all. @default '7d' */
        failed?: Duration | false;
      };
  /**
   * A scheduler-wide rate limit: at most `limit` task starts in any sliding
   * window of `interval`, in this process. Tasks may add a limit of their
   * own key with the task option `rate`. Also a live setting (`scheduler.rate`).
   * @default none (unlimited)
   * @example
   * new Scheduler({ rate: { limit: 30, interval: '1s' } });
   */
  rate?: RateLimit;
  /**
   * Named queues and their settings: per queue a `concurrency` (in this
   * process), a `globalConcurrency` and a `rate` limit (across every
   * process sharing a store; stored), and in memory `paused`; see
   * `scheduler.queue(name)`. Tasks, jobs and handlers join one with the
   * option `queue`; queues not listed here exist on first use, with no
   * limits. With a `store`, `paused` throws: a durable pause is stored for
   * every process, made with `await scheduler.queue(name).pause()`.
   * @default none
   * @example
   * new Scheduler({ queues: { emails: { concurrency: 2, rate: { limit: 10, interval: '1s' } } } });
   * new Scheduler({ store, queues: { emails: { concurrency: 2, globalConcurrency: 5 } } });
   */
  queues?: Record<string, QueueOptions>;
  /**
   * The most worker threads that run tasks given as a module
   * (`schedule(when, new URL('./task.js', import.meta.url))`, or
   * `define(name, url)` with a store). Threads start when such a task first
   * needs one and stay warm; none start for a scheduler that runs only
   * functions. `workers` still bounds how many tasks run at once. Also a
   * live setting (`scheduler.threads`).
   * @default os.availableParallelism()
   * @example
   * new Scheduler({ threads: 4 });
   */
  threads?: number;
  /**
   * How threads are started: `execArgv`, `resourceLimits`, and the `grace`
   * a handler has to stop once its signal aborted before its thread is
   * terminated. See `ThreadOptions`.
   * @default {}
   * @example
   * new Scheduler({ threadOptions: { resourceLimits: { maxOldGenerationSizeMb: 256 }, grace: '2s' } });
   */
  threadOptions?: ThreadOptions;
}

/** Events of a scheduler and the arguments their listeners receive. */
export interface SchedulerEvents extends TaskEvents {
  /** A job occurrence did not run (overlap or misfire policy); stored jobs too, by `key` (their `job` is undefined). */
  skip: [info: SkipInfo];
}

/** Every event a scheduler emits (an event added to `SchedulerEvents` and not here does not compile); `on`, `off` and `once` accept nothing else. @internal */
const EVENTS: ReadonlySet<string> = new Set(
  keysOf<SchedulerEvents>({
    start: true,
    success: true,
    failure: true,
    retry: true,
    cancel: true,
    skip: true,
    progress: true,
    log: true,
    idle: true,
  }),
);

/** The time `delay` from `now`, checked (`after()`). @internal */
export function delayEnd(now: number, delay: Duration): number {
  const time = now + toDuration(delay, 'delay');
  if (time > MAX_TIME)
    throw new RangeError(`Expected \`delay\` to end within the Date range (${MAX_TIME} epoch ms), got ${describe(delay)}`);
  return time;
}

/** @internal */
export function assertEvent(event: unknown): void {
  if (typeof event !== 'string' || !EVENTS.has(event)) {
    throw new TypeError(`Unknown event ${describe(event)}; expected one of: ${[...EVENTS].join(', ')}`);
  }
}

/** A stored task id: a positive safe integer. @internal */
export function assertId(id: unknown): asserts id is number {
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1)
    throw new TypeError(`Expected a stored task id (an integer >= 1), got ${describe(id)}`);
}

/** The options of `cron(expression, options)`. */
export interface CronOptions {
  /** The IANA zone the expression is read in; default: the scheduler's `timezone`. */
  timezone?: string;
}

/** The options of `waitFor(id, options)`. */
export interface WaitOptions {
  /** Stops waiting (the task goes on) when aborted: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Stops waiting after this long (ms or `'30s'`), rejecting with `WaitTimeoutError`; the task goes on. @default Infinity */
  timeout?: Duration;
}

// The keys each options object takes, from records typed by the options: a field added to an
// interface and not here does not compile.
const SCHEDULER_KEYS: ReadonlySet<string> = new Set(
  keysOf<SchedulerOptions>({
    workers: true,
    maxWaiting: true,
    timezone: true,
    unref: true,
    clock: true,
    onError: true,
    store: true,
    handlers: true,
    retention: true,
    rate: true,
    queues: true,
    threads: true,
    threadOptions: true,
  }),
);
const RETENTION_KEYS: ReadonlySet<string> = new Set(
  keysOf<Exclude<SchedulerOptions['retention'], false | undefined>>({ succeeded: true, failed: true }),
);
const CRON_KEYS: ReadonlySet<string> = new Set(keysOf<CronOptions>({ timezone: true }));
const WAIT_KEYS: ReadonlySet<string> = new Set(keysOf<WaitOptions>({ signal: true, timeout: true }));

/** The options of `new Scheduler()`, checked, in the shapes the loop and the durable worker take. @internal */
export interface SchedulerSettings {
  loop: LoopOptions;
  timezone: string;
  /** What a scheduler with a store runs it with; undefined without one. */
  durable: DurableSettings | undefined;
  /** The `queues` option, checked, without a store (in-memory queues). */
  queues: Map<string, QueueSettings> | undefined;
  /** The pool size and how its threads start. */
  threads: { size: number; settings: ThreadSettings };
}

/** The options of a scheduler with a store, checked, and the runner its store brings. @internal */
interface DurableSettings {
  store: Store;
  runner: DurableRunner;
  handlers: readonly string[] | undefined;
  retention: Retention;
  /** The `queues` option, checked (durable queues). */
  queues: Map<string, DurableQueueOptions> | undefined;
}

/**
 * The durable runner of `store`: the one taskheap's stores bring (durable/runner.ts), or, for a store of one's own,
 * loaded here, synchronously, since the constructor returns a scheduler ready to take named work.
 */
function runnerOf(store: unknown): DurableRunner {
  if (
    typeof store !== 'object' ||
    store === null ||
    typeof (store as Store).claim !== 'function' ||
    typeof (store as Store).settle !== 'function'
  ) {
    throw new TypeError(`Expected \`store\` to be a taskheap store (sqliteStore() or postgresStore()), got ${describe(store)}`);
  }
  const brought = (store as { runner?: DurableRunner }).runner;
  if (brought !== undefined) return brought;
  return loadOnUse<{ durableRunner: DurableRunner }>('durable/runner.js').durableRunner;
}

/** The option `maxWaiting`, checked. */
function toMaxWaiting({ maxWaiting = Infinity }: SchedulerOptions): number {
  assertCount(maxWaiting, 'maxWaiting');
  return maxWaiting;
}

/** Checks the options of `new Scheduler()`; throws on the first bad one. @internal */
export function toSchedulerSettings(options: SchedulerOptions): SchedulerSettings {
  assertOptionsObject(options, 'Scheduler');
  assertKnownKeys(options, SCHEDULER_KEYS, 'Scheduler');
  const {
    workers = 10,
    timezone,
    unref = false,
    clock = systemClock,
    onError = defaultOnError,
    store,
    handlers,
    retention,
    threads = defaultThreads(),
  } = options;
  const rate = options.rate === undefined ? undefined : toRate(options.rate, 'rate', false);
  const runner = store === undefined ? undefined : runnerOf(store);
  // Without a store the queues are the loop's; with one, the store's.
  const queues = options.queues === undefined || store !== undefined ? undefined : toQueues(options.queues);
  const durableQueues = options.queues === undefined || runner === undefined ? undefined : runner.queues(options.queues);
  assertCount(workers, 'workers');
  assertThreads(threads);
  const maxWaiting = toMaxWaiting(options);
  if (typeof unref !== 'boolean') throw new TypeError(`Expected \`unref\` to be a boolean, got ${describe(unref)}`);
  assertClock(clock);
  if (typeof onError !== 'function') throw new TypeError(`Expected \`onError\` to be a function, got ${describe(onError)}`);
  const zone = timezone === undefined ? systemZone() : validateZone(timezone);
  if (handlers !== undefined) {
    if (store === undefined) throw new TypeError('The `handlers` option needs a scheduler created with a `store`');
    if (!Array.isArray(handlers)) throw new TypeError(`Expected \`handlers\` to be an array of handler names, got ${describe(handlers)}`);
  }
  if (retention !== undefined && store === undefined)
    throw new TypeError('The `retention` option needs a scheduler created with a `store`');
  return {
    loop: { workers, maxWaiting, unref, clock, onError, rate },
    timezone: zone,
    durable:
      store === undefined || runner === undefined
        ? undefined
        : { store, runner, handlers, retention: toRetention(retention, runner.retention), queues: durableQueues },
    queues,
    threads: { size: threads, settings: toThreadSettings(options.threadOptions) },
  };
}

/** The `retention` option in ms (null: kept forever), with the runner's defaults for what it leaves out. */
function toRetention(retention: SchedulerOptions['retention'], defaults: Retention): Retention {
  if (retention === undefined) return defaults;
  if (retention === false) return { succeeded: null, failed: null };
  assertOptionsObject(retention, 'retention');
  assertKnownKeys(retention, RETENTION_KEYS, 'retention');
  const age = (value: Duration | false | undefined, what: 'succeeded' | 'failed') => {
    if (value === undefined) return defaults[what];
    if (value === false) return null;
    return toDuration(value, `retention.${what}`);
  };
  return { succeeded: age(retention.succeeded, 'succeeded'), failed: age(retention.failed, 'failed') };
}

function defaultOnError(error: unknown, info: ErrorInfo): void {
  if (info.task?._resultRead === true) return;
  const what = info.task === undefined ? 'store' : `task ${info.name === undefined ? `#${info.task.id}` : `"${info.name}"`}`;
  console.error(`[taskheap] ${what} failed:`, error);
}

/** The zone of `cron(expression, options)`: its own, or the scheduler's. @internal */
export function cronZone(options: CronOptions, timezone: string): string {
  assertOptionsObject(options, 'cron');
  assertKnownKeys(options, CRON_KEYS, 'cron');
  return options.timezone === undefined ? timezone : validateZone(options.timezone);
}

/** The options of `waitFor()`, checked: an optional signal and a timeout in ms (Infinity for none). @internal */
export function toWaitOptions(options: WaitOptions): { signal: AbortSignal | undefined; timeout: number } {
  assertOptionsObject(options, 'waitFor');
  assertKnownKeys(options, WAIT_KEYS, 'waitFor');
  const { signal } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
  const timeout = options.timeout === undefined ? Infinity : toDuration(options.timeout, 'timeout', 1);
  return { signal, timeout };
}

/** The items of `scheduleMany()` as the durable client takes them; each one is checked there, by index. @internal */
export function toStoredItems(items: readonly DurableTaskItem[]): { runAt: unknown; name: unknown; options: object }[] {
  if (!Array.isArray(items)) throw new TypeError(`Expected \`items\` of scheduleMany() to be an array, got ${describe(items)}`);
  return items.map((item, i) => {
    if (typeof item !== 'object' || item === null)
      throw new TypeError(`scheduleMany() item ${i}: expected an object { when, name, ... }, got ${describe(item)}`);
    const { when, name, ...options } = item;
    return { runAt: when as unknown, name: name as unknown, options };
  });
}

/** What `waitingTasks()` lists: at most `limit` tasks, and with `keyPrefix` only those whose key starts with it. */
export interface WaitingFilter {
  /** At most this many, the earliest due. @default all */
  limit?: number;
  /** Only tasks whose `key` starts with this (`''`: every task with a key). */
  keyPrefix?: string;
}

/** `waitingTasks()`'s argument: a limit, or a filter. @internal */
export function toWaitingFilter(filter: unknown): { limit: number; keyPrefix: string | undefined } {
  if (filter === undefined) return { limit: Infinity, keyPrefix: undefined };
  if (typeof filter === 'number') return { limit: toLimit(filter), keyPrefix: undefined };
  assertOptionsObject(filter, 'waitingTasks');
  assertKnownKeys(filter, WAITING_KEYS, 'waitingTasks');
  const { limit, keyPrefix } = filter as WaitingFilter;
  if (keyPrefix !== undefined && typeof keyPrefix !== 'string')
    throw new TypeError(`Expected \`keyPrefix\` to be a string, got ${describe(keyPrefix)}`);
  return { limit: limit === undefined ? Infinity : toLimit(limit), keyPrefix };
}

const WAITING_KEYS: ReadonlySet<string> = new Set(keysOf<WaitingFilter>({ limit: true, keyPrefix: true }));

function toLimit(limit: unknown): number {
  if (!Number.isInteger(limit) || (limit as number) < 0)
    throw new RangeError(`Expected \`limit\` to be an integer >= 0, got ${describe(limit)}`);
  return limit as number;
}

/** The `abort` option of `close()`. @internal */
export function toAbort(options: { abort?: boolean }): boolean {
  assertOptionsObject(options, 'close');
  const abort = options.abort ?? false;
  if (typeof abort !== 'boolean') throw new TypeError(`Expected \`abort\` to be a boolean, got ${describe(abort)}`);
  return abort;
}
