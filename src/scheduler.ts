import { assertClock, systemClock, type Clock } from './clock.js';
import { DurableRunner, type DurableTaskOptions, type Handler } from './durable-runner.js';
import { CronBuilder, Every, OnceBuilder, type JobBounds, type JobFactory, type JobOptions, type RulePlan, type StoredJobOptions } from './every.js';
import { Job, type JobHost } from './job.js';
import { Emitter } from './emitter.js';
import { ClosedError, QueueFullError, TimeoutError } from './errors.js';
import { LatenessRecorder, type Lateness } from './lateness.js';
import { retryDelay, toRetryPolicy, type RetryOptions } from './retry.js';
import { SignalRegistry } from './signal-registry.js';
import type { Store, StoredJob, StoredTask, TaskFilter } from './store.js';
import { materialize, Run, State, Task, type TaskFunction, type TaskObserver, type TaskOwner, type TaskSettings } from './task.js';
import { TaskQueue } from './task-queue.js';
import { assertDuration, assertKnownKeys, assertOptionsObject, describe, toEpoch, type When } from './validate.js';
import { systemZone, validateZone } from './wall-time.js';

/** Options of `new Scheduler()`. */
export interface SchedulerOptions {
  /**
   * How many tasks may run at once: an integer >= 1, or `Infinity`.
   * @default 10
   */
  workers?: number;
  /**
   * The most tasks that may be pending at once; `schedule()` beyond it throws `QueueFullError`.
   * @default Infinity
   */
  maxPending?: number;
  /**
   * The IANA time zone calendar rules use unless they name their own.
   * @default the system zone
   */
  timezone?: string;
  /**
   * When true, pending tasks do not keep the process alive.
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
   * @default logs to console.error
   */
  onError?: (error: unknown, info: ErrorInfo) => void;
  /**
   * Keeps named-handler work in a database so it outlives the process:
   * `sqliteStore(path)` from `taskheap/sqlite` or `postgresStore(...)` from
   * `taskheap/postgres`. Function tasks stay in memory either way.
   * @default none
   */
  store?: Store;
}

/** What `onError` is told about a failure. */
export interface ErrorInfo {
  /** The failed task; undefined for an error of the store (a lost database connection). */
  task: Task | undefined;
  /** The task's `name` option. */
  name: string | undefined;
  /** The attempt that failed (1 for the first run); 0 for store errors. */
  attempt: number;
}

/** Options of `schedule()` and `after()`. */
export interface TaskOptions {
  /** Cancels the task when aborted; may be shared by many tasks. */
  signal?: AbortSignal;
  /** A label for logs, errors and `ctx.name`. */
  name?: string;
  /**
   * A run still going after this many ms has its `ctx.signal` aborted with a
   * `TimeoutError`, ends as `timed-out` and frees its worker slot.
   * @default Infinity
   */
  timeout?: number;
  /** Retry failed or timed-out runs: a policy, or a number of attempts. */
  retry?: RetryOptions | number;
}

/** A snapshot returned by `scheduler.stats()`. */
export interface SchedulerStats {
  /** Tasks waiting for their time or for a worker. */
  pending: number;
  /** Tasks running now. */
  running: number;
  /** Pending tasks already due, waiting for a free worker. */
  waiting: number;
  /** The pool size. */
  workers: number;
  /** Tasks that succeeded, since the scheduler was created. */
  succeeded: number;
  /** Tasks that failed for good (after their retries). */
  failed: number;
  /** Tasks whose last attempt timed out. */
  timedOut: number;
  /** Tasks cancelled before or while running (including by `close()`). */
  cancelled: number;
  /** How late runs started (ms), over the last 1,024 runs; `max` over all. */
  lateness: Lateness;
}

/** Events of a scheduler and the arguments their listeners receive. */
export interface SchedulerEvents {
  /** A run started. */
  start: [task: Task];
  /** A task succeeded, with its value. */
  success: [task: Task, value: unknown];
  /** A task failed for good, with its last error. */
  failure: [task: Task, error: unknown];
  /** A run failed and will be retried after `delay` ms. */
  retry: [task: Task, error: unknown, delay: number];
  /** A task was cancelled (pending, or running and then gave up). */
  cancel: [task: Task, reason: unknown];
  /** A job occurrence did not run (overlap or misfire policy). */
  skip: [info: SkipInfo];
  /** Nothing is pending or running any more. */
  idle: [];
}

/** Why a job occurrence did not run (the `skip` event). */
export interface SkipInfo {
  /** The job whose occurrence was skipped. */
  job: Job;
  /** When the skipped occurrence was due. */
  scheduledAt: Date;
  /** `overlap`: the previous run was still going; `misfire`: whole periods were missed. */
  reason: 'overlap' | 'misfire';
}

// A sleep never lasts longer than this, so a wall clock that jumps or a
// machine that sleeps is noticed within this time (and setTimeout's 2^31-1 ms
// limit is never reached).
const MAX_SLEEP = 30_000;
// A long run of synchronous tasks yields to the event loop after this many ms.
const PUMP_BUDGET = 10;

const CRON_KEYS = new Set(['timezone']);
const SCHEDULER_KEYS = new Set(['workers', 'maxPending', 'timezone', 'unref', 'clock', 'onError', 'store']);
const TASK_KEYS = new Set(['signal', 'name', 'timeout', 'retry']);
const JOB_KEYS = new Set([...TASK_KEYS, 'overlap', 'misfire', 'jitter']);

let nextId = 1;

function defaultOnError(error: unknown, info: ErrorInfo): void {
  const what = info.task === undefined ? 'store' : `task ${info.name === undefined ? `#${info.task.id}` : `"${info.name}"`}`;
  console.error(`[taskheap] ${what} failed:`, error);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function';
}

function assertWorkers(value: unknown): asserts value is number {
  if (value !== Infinity && (!Number.isInteger(value) || (value as number) < 1)) {
    throw new RangeError(`Expected \`workers\` to be an integer >= 1 or Infinity, got ${describe(value)}`);
  }
}

/**
 * Runs functions at points in time. Pending tasks sit in one min-heap and a
 * single timer is armed for the earliest; due tasks run on a bounded,
 * resizable pool of worker slots.
 *
 * @example
 * const scheduler = new Scheduler({ workers: 4 });
 * scheduler.after(1_000, () => console.log('a second later'));
 * scheduler.schedule(new Date('2030-01-01'), async ({ signal }) => fetch(url, { signal }));
 * await scheduler.close();
 */
export class Scheduler implements TaskOwner, JobFactory {
  #queue = new TaskQueue();
  /** Jobs that still plan occurrences (not done or cancelled). */
  #jobs = new Set<Job>();
  #jobHost: JobHost = {
    now: () => this.#clock.now(),
    enqueue: (time, fn, settings) => this.#push(time, fn, settings),
    skipped: (job, scheduledAt, reason) => {
      if (this.#events.has('skip')) this.#events.emit('skip', { job, scheduledAt: new Date(scheduledAt), reason });
    },
    finished: (job, signal) => {
      this.#jobs.delete(job);
      if (signal !== undefined) this.#signals.delete(signal, job);
    },
  };
  /** Claims durable work from the store, when there is one. */
  #runner: DurableRunner | undefined = undefined;
  /** Shared by every task scheduled without options. */
  #defaults: TaskSettings = { owner: this, name: undefined, timeout: Infinity, retry: undefined, signal: undefined, observer: undefined };
  #clock: Clock;
  #workers: number;
  #maxPending: number;
  #timezone: string;
  #unref: boolean;
  #onError: (error: unknown, info: ErrorInfo) => void;
  #events = new Emitter<SchedulerEvents>();
  #signals = new SignalRegistry<Task | Job>((member, reason) => {
    if (member instanceof Job) member.cancel(reason);
    else this.cancelTask(member, reason);
  });
  #lateness = new LatenessRecorder();

  #running = 0;
  /** Runs of async tasks in flight, so `close({ abort: true })` can reach them. */
  #active = new Set<Run>();
  /** The run of a synchronous task while its function executes. */
  #current: Run | undefined = undefined;
  #timer: unknown = undefined;
  /** Due time the timer was armed for; Infinity when none is armed. */
  #timerAt = Infinity;
  #pumpQueued = false;
  #pumping = false;
  #closed = false;
  #closing: Promise<void> | undefined = undefined;
  #idleWaiters: (() => void)[] = [];

  #succeeded = 0;
  #failed = 0;
  #timedOut = 0;
  #cancelled = 0;

  /** @param options see `SchedulerOptions` */
  constructor(options: SchedulerOptions = {}) {
    assertOptionsObject(options, 'Scheduler');
    assertKnownKeys(options, SCHEDULER_KEYS, 'Scheduler');
    const { workers = 10, maxPending = Infinity, timezone, unref = false, clock = systemClock, onError = defaultOnError, store } = options;
    assertWorkers(workers);
    if (maxPending !== Infinity && (!Number.isInteger(maxPending) || maxPending < 1)) {
      throw new RangeError(`Expected \`maxPending\` to be an integer >= 1 or Infinity, got ${describe(maxPending)}`);
    }
    if (typeof unref !== 'boolean') throw new TypeError(`Expected \`unref\` to be a boolean, got ${describe(unref)}`);
    assertClock(clock);
    if (typeof onError !== 'function') throw new TypeError(`Expected \`onError\` to be a function, got ${describe(onError)}`);
    this.#workers = workers;
    this.#maxPending = maxPending;
    this.#timezone = timezone === undefined ? systemZone() : validateZone(timezone);
    this.#unref = unref;
    this.#clock = clock;
    this.#onError = onError;
    if (store !== undefined) {
      if (typeof store !== 'object' || store === null || typeof store.claim !== 'function') {
        throw new TypeError(`Expected \`store\` to be a taskheap store (sqliteStore() or postgresStore()), got ${describe(store)}`);
      }
      this.#runner = new DurableRunner(store, this.#durableHost(), { lease: store.lease ?? 30_000, poll: store.poll ?? 5_000 });
    }
  }

  #durableHost() {
    const owner = this;
    return {
      clock: this.#clock,
      unref: this.#unref,
      get workers() {
        return owner.#workers;
      },
      enqueue: (time: number, fn: TaskFunction, settings: TaskSettings) => this.#push(time, fn, settings),
      settings: (name: string, timeout: number, observer: TaskObserver): TaskSettings =>
        ({ owner: this, name, timeout, retry: undefined, signal: undefined, observer }),
      report: (error: unknown) => this.#safeOnError(error, { task: undefined, name: undefined, attempt: 0 }),
    };
  }

  #requireStore(what: string): DurableRunner {
    if (this.#runner === undefined) throw new TypeError(`${what} needs a scheduler created with a \`store\``);
    return this.#runner;
  }

  /**
   * Registers the handler that runs durable tasks and jobs named `name`.
   * Define every handler before `start()`.
   * @example
   * scheduler.define('remind', async (ctx, payload: { user: string; text: string }) => send(payload));
   */
  define<P = any>(name: string, handler: Handler<P>): this {
    this.#requireStore('define()').define(name, handler);
    return this;
  }

  /**
   * With a store: migrates its schema, returns work left running by a dead
   * process to waiting, and starts claiming due work. Without a store it does
   * nothing. Throws `SchemaVersionError` if the database is newer than this library.
   * @example
   * await scheduler.start();
   */
  start(): Promise<void> {
    return this.#runner?.start() ?? Promise.resolve();
  }

  /**
   * A stored task, as the store has it now.
   * @example
   * const { state, attempts, lastError } = (await scheduler.getTask(id))!;
   */
  getTask(id: number): Promise<StoredTask | undefined> {
    return this.#requireStore('getTask()').getTask(id);
  }

  /**
   * Stored tasks, earliest first.
   * @example
   * await scheduler.listTasks({ state: 'failed', limit: 50 });
   */
  listTasks(filter: TaskFilter = {}): Promise<StoredTask[]> {
    return this.#requireStore('listTasks()').listTasks(filter);
  }

  /**
   * Cancels a stored task by id, from any process sharing the store; if it
   * is running somewhere, its `ctx.signal` aborts there.
   * @example
   * await scheduler.cancel(task.id);
   */
  cancel(id: number): Promise<boolean> {
    return this.#requireStore('cancel()').cancel(id);
  }

  /** Cancels a stored recurring job by key, with its waiting occurrences. */
  cancelJob(key: string): Promise<boolean> {
    return this.#requireStore('cancelJob()').cancelJob(key);
  }

  /**
   * Runs `fn` at `when`. A time in the past runs as soon as a worker is free.
   * @param when a `Date`, epoch milliseconds, or a luxon `DateTime`
   * @param fn the task; sync or async; receives a `TaskContext`
   * @example
   * const task = scheduler.schedule(Date.now() + 60_000, async (ctx) => {
   *   await sendReminder({ signal: ctx.signal });
   * }, { name: 'reminder', timeout: 5_000, retry: { attempts: 3, delay: 1_000 } });
   */
  schedule<R>(when: When, fn: TaskFunction<R>, options?: TaskOptions): Task<Awaited<R>>;
  /**
   * With a store: schedules the handler `name` (see `define()`) with a JSON
   * payload; resolves once the store has committed it.
   * @example
   * const task = await scheduler.schedule(when, 'remind', { payload: { user, text }, key: `remind:${id}` });
   */
  schedule(when: When, name: string, options?: DurableTaskOptions): Promise<StoredTask>;
  schedule<R>(when: When, fn: TaskFunction<R> | string, options?: TaskOptions | DurableTaskOptions): Task<Awaited<R>> | Promise<StoredTask> {
    const time = toEpoch(when);
    if (typeof fn === 'string') return this.#scheduleStored(time, fn, options as DurableTaskOptions | undefined);
    return this.#add(time, fn, options as TaskOptions | undefined);
  }

  #scheduleStored(time: number, name: string, options: DurableTaskOptions | undefined): Promise<StoredTask> {
    const runner = this.#requireStore('Scheduling a handler by name');
    if (this.#closed) throw new ClosedError();
    return runner.schedule(time, name, options);
  }

  /**
   * Runs `fn` after `delay` milliseconds; the same as `schedule(now + delay, …)`.
   * @example
   * scheduler.after(5_000, () => console.log('five seconds later'));
   */
  after<R>(delay: number, fn: TaskFunction<R>, options?: TaskOptions): Task<Awaited<R>>;
  /** With a store: the handler `name` after `delay` ms (see the durable `schedule`). */
  after(delay: number, name: string, options?: DurableTaskOptions): Promise<StoredTask>;
  after<R>(delay: number, fn: TaskFunction<R> | string, options?: TaskOptions | DurableTaskOptions): Task<Awaited<R>> | Promise<StoredTask> {
    assertDuration(delay, 'delay');
    const time = this.#clock.now() + delay;
    if (typeof fn === 'string') return this.#scheduleStored(time, fn, options as DurableTaskOptions | undefined);
    return this.#add(time, fn, options as TaskOptions | undefined);
  }

  /**
   * Starts a fluent recurring rule: `every(n).<unit>()...run(fn)`.
   * @param n how many units between runs; an integer >= 1
   * @default 1
   * @example
   * scheduler.every(2).seconds().run(fn);
   * scheduler.every().day().at('10:30').run(fn);
   * scheduler.every().monday().at('08:30', 'Europe/Paris').run(fn);
   * scheduler.every(10).minutes().from(date).until(date).times(5).immediately().run(fn);
   */
  every(n = 1): Every {
    return new Every(this, n);
  }

  /**
   * A job from a cron expression: 5 fields, or 6 with seconds first; lists,
   * ranges, steps, names, `L`, `W`, `#`, `?` and the @-nicknames. A bad
   * expression throws a RangeError that names the field.
   * @example
   * scheduler.cron('*\/15 9-17 * * MON-FRI', { timezone: 'Asia/Tokyo' }).run(fn);
   */
  cron(expression: string, options: { timezone?: string } = {}): CronBuilder {
    assertOptionsObject(options, 'cron');
    assertKnownKeys(options, CRON_KEYS, 'cron');
    const zone = options.timezone === undefined ? this.#timezone : validateZone(options.timezone);
    return new CronBuilder(this, expression, zone);
  }


  /** Jobs that are scheduled or paused, in creation order. */
  jobs(): Job[] {
    return [...this.#jobs];
  }

  /** @internal the time, for builders */
  now(): number {
    return this.#clock.now();
  }

  /** @internal `run(name)` of a builder lands here */
  createStoredJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    const runner = this.#requireStore('A job with a handler name');
    if (this.#closed) throw new ClosedError();
    return runner.addJob(name, options, plan, bounds);
  }

  /** @internal `run()` of a builder lands here */
  createJob(fn: TaskFunction, options: JobOptions | undefined, plan: RulePlan, bounds: JobBounds): Job {
    assertOptionsObject(options, 'job');
    if (options !== undefined) assertKnownKeys(options, JOB_KEYS, 'job');
    const overlap = options?.overlap ?? 'skip';
    const misfire = options?.misfire ?? 'once';
    const jitter = options?.jitter ?? bounds.jitter;
    const signal = options?.signal;
    if (overlap !== 'skip' && overlap !== 'queue' && overlap !== 'allow') {
      throw new RangeError(`Expected \`overlap\` to be 'skip', 'queue' or 'allow', got ${describe(overlap)}`);
    }
    if (misfire !== 'once' && misfire !== 'skip' && misfire !== 'all') {
      throw new RangeError(`Expected \`misfire\` to be 'once', 'skip' or 'all', got ${describe(misfire)}`);
    }
    assertDuration(jitter, 'jitter');
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
    }
    // The job watches its signal itself (a cancelled job is gone for good), so its runs' settings carry none.
    const settings = options === undefined ? this.#defaults : this.#toSettings({ name: options.name, timeout: options.timeout, retry: options.retry });
    if (this.#closed) throw new ClosedError();
    if (this.#queue.size >= this.#maxPending) throw new QueueFullError(this.#maxPending);
    if (signal?.aborted) throw signal.reason;
    const job = new Job(this.#jobHost, fn, {
      rule: plan.rule, first: plan.first, until: bounds.until, times: bounds.times, jitter, overlap, misfire, settings, signal,
    });
    if (job.state === 'scheduled') {
      this.#jobs.add(job);
      if (signal !== undefined) this.#signals.add(signal, job);
    }
    return job;
  }

  /**
   * How many tasks may run at once. Growing starts waiting tasks at once;
   * shrinking lets running tasks finish. Safe to set from inside a task.
   * @default 10
   * @example
   * scheduler.workers = 1;        // run one at a time from now on
   * scheduler.workers = Infinity; // no limit
   */
  get workers(): number {
    return this.#workers;
  }

  /** Resizes the pool; throws a RangeError for anything but an integer >= 1 or Infinity. */
  set workers(value: number) {
    assertWorkers(value);
    this.#workers = value;
    this.#pump();
  }

  /**
   * The most tasks that may be pending at once.
   * @default Infinity
   */
  get maxPending(): number {
    return this.#maxPending;
  }

  /** The default IANA time zone of calendar rules. */
  get timezone(): string {
    return this.#timezone;
  }

  /** The clock this scheduler reads. */
  get clock(): Clock {
    return this.#clock;
  }

  /** Tasks waiting for their time or for a worker. */
  get size(): number {
    return this.#queue.size;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Resolves when no task is pending or running.
   * @example
   * scheduler.after(0, work);
   * await scheduler.onIdle();
   */
  onIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Counters and lateness percentiles at this moment. */
  stats(): SchedulerStats {
    return {
      pending: this.#queue.size,
      running: this.#running,
      waiting: this.#queue.countDue(this.#clock.now()),
      workers: this.#workers,
      succeeded: this.#succeeded,
      failed: this.#failed,
      timedOut: this.#timedOut,
      cancelled: this.#cancelled,
      lateness: this.#lateness.summary(),
    };
  }

  /**
   * Pending tasks, earliest first. A copy made on each call: O(n log n).
   */
  pendingTasks(): Task[] {
    return this.#queue.toSortedArray();
  }

  /**
   * Listens to an event.
   * @example
   * scheduler.on('failure', (task, error) => log.warn({ id: task.id, error }));
   */
  on<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this {
    this.#events.on(event, listener);
    return this;
  }

  /** Stops listening. */
  off<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this {
    this.#events.off(event, listener);
    return this;
  }

  /**
   * A one-shot job: like `schedule()`, but with the `Job` handle and options
   * (`pause`, `trigger`, `lastRunAt`...).
   * @example
   * const job = scheduler.once(new Date('2026-12-24T18:00:00Z')).run(sendGreetings);
   */
  once(when: When): OnceBuilder;
  /**
   * Listens to the next occurrence of an event only.
   * @example
   * scheduler.once('idle', () => console.log('all done'));
   */
  once<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this;
  once<K extends keyof SchedulerEvents>(whenOrEvent: When | K, listener?: (...args: SchedulerEvents[K]) => void): OnceBuilder | this {
    // An event name is a string; a time never is, so the two uses cannot be confused.
    if (typeof whenOrEvent === 'string') {
      this.#events.once(whenOrEvent, listener!);
      return this;
    }
    return new OnceBuilder(this, whenOrEvent);
  }

  /**
   * Stops accepting work, cancels every pending task (their `result` rejects
   * with `ClosedError`), and resolves once running tasks settle. With
   * `abort: true` running tasks also see `ctx.signal` abort. Idempotent; safe
   * to call from inside a task (but a task that awaits it waits for itself).
   * @example
   * process.on('SIGTERM', () => scheduler.close().then(() => process.exit(0)));
   */
  close(options: { abort?: boolean } = {}): Promise<void> {
    assertOptionsObject(options, 'close');
    const abort = options.abort ?? false;
    if (typeof abort !== 'boolean') throw new TypeError(`Expected \`abort\` to be a boolean, got ${describe(abort)}`);
    if (this.#closing === undefined) {
      this.#closed = true;
      this.#disarm();
      this.#runner?.stop();
      const reason = new ClosedError();
      for (const job of this.#jobs) job._stop();
      for (const task of this.#queue.clear()) this.#cancelPending(task, reason, false);
      this.#closing = this.#runner === undefined ? this.onIdle() : this.#runner.close(this.onIdle());
    }
    if (abort) {
      const reason = new ClosedError('The scheduler was closed with abort: true');
      if (this.#current !== undefined) this.#abortRun(this.#current, reason);
      for (const run of this.#active) this.#abortRun(run, reason);
    }
    return this.#closing;
  }

  /** `await using scheduler = new Scheduler()` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** @internal the `task.cancel()` implementation */
  cancelTask(task: Task, reason: unknown): boolean {
    if (task._state === State.Pending) {
      this.#cancelPending(task, reason, true);
      this.#checkIdle();
      return true;
    }
    const run = task._run;
    if (task._state !== State.Running || run === undefined || run.aborted) return false;
    this.#abortRun(run, materialize(reason));
    return true;
  }

  /** Cooperative: the run sees its signal abort, and if it then fails it ends `cancelled`. */
  #abortRun(run: Run, reason: unknown): void {
    run.cancelled = true;
    run.abort(reason);
  }

  #add(time: number, fn: TaskFunction, options: TaskOptions | undefined): Task<any> {
    if (typeof fn !== 'function') throw new TypeError(`Expected the task to be a function, got ${describe(fn)}`);
    const settings = options === undefined ? this.#defaults : this.#toSettings(options);
    if (this.#closed) throw new ClosedError();
    if (this.#queue.size >= this.#maxPending) throw new QueueFullError(this.#maxPending);
    const signal = settings.signal;
    if (signal?.aborted) throw signal.reason;
    const task = this.#push(time, fn, settings);
    if (signal !== undefined) this.#signals.add(signal, task);
    return task;
  }

  /** A new task into the heap, past every check: jobs and the store's claims land here too. */
  #push(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    const task = new Task(nextId++, time, fn, settings);
    this.#enqueue(task);
    return task;
  }

  #enqueue(task: Task): void {
    this.#queue.push(task);
    // Arming is deferred to a microtask: scheduling a burst of tasks in one
    // tick then costs one timer update, not one per task, and tasks already
    // due in the same tick still start in due-time order.
    if (task._time < this.#timerAt && !this.#pumpQueued) {
      this.#pumpQueued = true;
      queueMicrotask(this.#queuedPump);
    }
  }

  #queuedPump = (): void => {
    this.#pumpQueued = false;
    this.#pump();
  };

  #wake = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.#pump();
  };

  /** Starts due tasks while workers are free, then arms the timer for what is left. */
  #pump(): void {
    // A task that resizes the pool or settles synchronously calls back in
    // here; the loop below already re-reads everything it depends on.
    if (this.#pumping || this.#closed) return;
    this.#pumping = true;
    const clock = this.#clock;
    const queue = this.#queue;
    const start = clock.now();
    try {
      while (this.#running < this.#workers) {
        const task = queue.peek();
        if (task === undefined) break;
        const now = clock.now();
        if (task._time > now) break;
        if (now - start > PUMP_BUDGET) return this.#yield();
        queue.pop();
        this.#dispatch(task, now);
      }
    } finally {
      this.#pumping = false;
    }
    this.#arm();
  }

  /** Lets I/O and other timers run in the middle of a long burst of due tasks. */
  #yield(): void {
    this.#disarm();
    this.#timerAt = -Infinity;
    const immediate = setImmediate(this.#wake);
    if (this.#unref) immediate.unref();
    this.#timer = immediate;
  }

  #arm(): void {
    const next = this.#running < this.#workers ? this.#queue.peek() : undefined;
    // With no free worker, the next settling task pumps; no timer needed.
    if (next === undefined) return this.#disarm();
    if (next._time === this.#timerAt) return;
    this.#disarm();
    const delay = Math.min(Math.max(next._time - this.#clock.now(), 0), MAX_SLEEP);
    this.#timerAt = next._time;
    this.#timer = this.#clock.setTimer(this.#wake, delay, this.#unref);
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    if (this.#timerAt === -Infinity) clearImmediate(this.#timer as NodeJS.Immediate);
    else this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #dispatch(task: Task, now: number): void {
    this.#running++;
    task._state = State.Running;
    const run = new Run(task, now);
    task._run = run;
    this.#lateness.record(now - task._time);
    if (this.#events.has('start')) this.#events.emit('start', task);
    let value: unknown;
    this.#current = run;
    try {
      value = task._fn(run);
    } catch (error) {
      this.#current = undefined;
      return this.#fail(run, error, false);
    }
    this.#current = undefined;
    if (!isThenable(value)) return this.#succeed(run, value);
    this.#active.add(run);
    const timeout = task._settings.timeout;
    if (timeout !== Infinity) run.timer = this.#clock.setTimer(() => this.#fail(run, new TimeoutError(timeout, task.name), true), timeout);
    value.then((result) => this.#succeed(run, result), (error) => this.#fail(run, error, false));
  }

  #succeed(run: Run, value: unknown): void {
    if (run.done) return;
    this.#release(run);
    const task = run.task;
    this.#detach(task);
    this.#finish(task, State.Succeeded, value);
    this.#succeeded++;
    if (this.#events.has('success')) this.#events.emit('success', task, value);
    this.#afterRun();
  }

  #fail(run: Run, error: unknown, timedOut: boolean): void {
    if (run.done) return;
    if (timedOut) run.abort(error);
    this.#release(run);
    const task = run.task;
    const retry = task._settings.retry;
    if (run.cancelled) {
      this.#detach(task);
      this.#finish(task, State.Cancelled, error);
      this.#cancelled++;
      if (this.#events.has('cancel')) this.#events.emit('cancel', task, error);
    } else if (retry !== undefined && run.attempt < retry.attempts && !this.#closed) {
      const delay = retryDelay(retry, run.attempt);
      task._state = State.Pending;
      task._time = this.#clock.now() + delay;
      this.#enqueue(task);
      if (this.#events.has('retry')) this.#events.emit('retry', task, error, delay);
    } else {
      this.#detach(task);
      this.#finish(task, timedOut ? State.TimedOut : State.Failed, error);
      if (timedOut) this.#timedOut++;
      else this.#failed++;
      this.#report(task, error);
    }
    this.#afterRun();
  }

  #report(task: Task, error: unknown): void {
    if (this.#events.has('failure')) this.#events.emit('failure', task, error);
    this.#safeOnError(error, { task, name: task.name, attempt: task.attempts });
  }

  #safeOnError(error: unknown, info: ErrorInfo): void {
    try {
      this.#onError(error, info);
    } catch (thrown) {
      queueMicrotask(() => {
        throw thrown;
      });
    }
  }

  /** Frees the run's worker slot; later outcomes of its function are ignored. */
  #release(run: Run): void {
    run.done = true;
    this.#running--;
    if (run.timer !== undefined) this.#clock.clearTimer(run.timer);
    this.#active.delete(run);
  }

  #afterRun(): void {
    this.#pump();
    this.#checkIdle();
  }

  #cancelPending(task: Task, reason: unknown, inQueue: boolean): void {
    task._state = State.Cancelled;
    if (inQueue) this.#queue.discard();
    this.#detach(task);
    this.#finish(task, State.Cancelled, reason);
    this.#cancelled++;
    if (this.#events.has('cancel')) this.#events.emit('cancel', task, materialize(reason));
  }

  #finish(task: Task, state: State, outcome: unknown): void {
    task._finish(state, outcome);
    task._settings.observer?.settled(task, state, outcome);
  }

  #detach(task: Task): void {
    const signal = task._settings.signal;
    if (signal !== undefined) this.#signals.delete(signal, task);
  }

  #isIdle(): boolean {
    return this.#running === 0 && this.#queue.size === 0;
  }

  #checkIdle(): void {
    if (!this.#isIdle()) return;
    const waiters = this.#idleWaiters;
    if (waiters.length > 0) {
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
    if (this.#events.has('idle')) this.#events.emit('idle');
  }

  #toSettings(options: TaskOptions): TaskSettings {
    assertOptionsObject(options, 'task');
    assertKnownKeys(options, TASK_KEYS, 'task');
    const { signal, name, timeout = Infinity, retry } = options;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
    }
    if (name !== undefined && typeof name !== 'string') throw new TypeError(`Expected \`name\` to be a string, got ${describe(name)}`);
    if (timeout !== Infinity) assertDuration(timeout, 'timeout', 1);
    const policy = retry === undefined ? undefined : toRetryPolicy(retry);
    if (signal === undefined && name === undefined && timeout === Infinity && policy === undefined) return this.#defaults;
    return { owner: this, name, timeout, retry: policy, signal, observer: undefined };
  }
}
