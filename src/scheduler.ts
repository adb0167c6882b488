// `Scheduler`, the public face: every public method, with its JSDoc. It hands
// function tasks to the loop (core/), recurring jobs to jobs/, and work by
// handler name to the durable runner (durable/) when there is a store. Its
// options, its events and the checks of what its methods are given are in
// scheduler-options.ts.
import type { Clock } from './core/clock.js';
import { Emitter } from './core/emitter.js';
import { ClosedError } from './core/errors.js';
import { TaskLoop } from './core/loop.js';
import type { SchedulerStats } from './core/loop-types.js';
import type { TaskOptions } from './core/task-options.js';
import type { RateLimit } from './core/limit-options.js';
import { configureQueues, listQueues, Queue } from './core/queues.js';
import type { SchedulerQueue, SchedulerQueueInfo } from './scheduler-queues.js';
import { cancelFlowTask, Flows, retryFlowTask, sendFlowTask, waitForFlowTask } from './scheduler-flows.js';
import { Task, type TaskFunction } from './core/task.js';
import { toSendArgs } from './core/steps.js';
import type { Duration } from './core/duration.js';
import { describe, toEpoch, type When } from './core/validate.js';
import type { DurableTaskItem, DurableTaskOptions, Handler, StoredJobOptions } from './durable/options.js';
import type { DurableWorker } from './durable/worker.js';
import type { DurableClient } from './durable/client.js';
import type { DefineOptions } from './durable/handlers.js';
import type { JobFilter, StoredJob, StoredState, StoredTask, EnqueuedTask, TaskCountFilter, TaskFilter } from './durable/store.js';
import { AtBuilder, CronBuilder, Every, type ModuleJobOptions } from './jobs/builders.js';
import type { Job } from './jobs/job.js';
import { JobSet } from './jobs/job-set.js';
import type { JobBounds, RulePlan } from './rules/plan.js';
import {
  assertEvent,
  assertId,
  toWaitingFilter,
  type CronOptions,
  type WaitOptions,
  type WaitingFilter,
  cronZone,
  delayEnd,
  toSchedulerSettings,
  toAbort,
  toStoredItems,
  toWaitOptions,
  type SchedulerEvents,
  type SchedulerOptions,
} from './scheduler-options.js';
import { ThreadPool } from './threads/pool.js';
import { assertThreads, threadHandler, threadTask, type ThreadTaskOptions } from './threads/options.js';

type Added<R> = Task<Awaited<R>> | Promise<EnqueuedTask>; // what schedule() and after() return

// Builders take the scheduler as their JobFactory structurally (an `implements` would name internal members).
/**
 * Runs functions at points in time. Waiting tasks sit in one min-heap and a
 * single timer is armed for the earliest; due tasks run on a bounded,
 * resizable pool of worker slots.
 *
 * This class is the public face: the loop itself is `TaskLoop` (core/),
 * recurring jobs live in jobs/, and named-handler work goes to the durable
 * layer (durable/) when the scheduler has a store.
 *
 * @example
 * const scheduler = new Scheduler({ workers: 4 });
 * scheduler.after(1_000, () => console.log('a second later'));
 * scheduler.schedule(new Date('2030-01-01'), async ({ signal }) => fetch(url, { signal }));
 * await scheduler.close();
 */
export class Scheduler {
  readonly #loop: TaskLoop;
  readonly #events = new Emitter<SchedulerEvents>();
  readonly #jobs: JobSet;
  /** Claims and runs durable work from the store, when there is one. */
  readonly #worker: DurableWorker | undefined;
  /** Adds, reads and manages stored work (the worker's client), when there is a store. */
  readonly #client: DurableClient | undefined;
  /** With a store many processes share, the warning that work given as a function is not stored (durable/warnings.ts). */
  readonly #warnLocalWork: (() => void) | undefined;
  readonly #timezone: string;
  readonly #threads: ThreadPool;
  #closing: Promise<void> | undefined = undefined;

  /** @param options see `SchedulerOptions` */
  constructor(options: SchedulerOptions = {}) {
    const { loop, timezone, durable, queues, threads } = toSchedulerSettings(options);
    this.#timezone = timezone;
    this.#threads = new ThreadPool(threads.size, threads.settings);
    this.#loop = new TaskLoop(loop, this.#events);
    this.#jobs = new JobSet(this.#loop, this.#events);
    if (queues !== undefined) configureQueues(this.#loop, queues);
    // The store brings the durable runner: without one, durable/ is never loaded.
    this.#worker = durable?.runner.worker(this, durable.store, this.#loop, durable.handlers, durable.retention, durable.queues);
    this.#client = this.#worker?.client;
    this.#warnLocalWork = durable?.store.capabilities.multiProcess === true ? durable.runner.warnLocalWork : undefined;
    // A stored job has no Job object: the event names it by key.
    if (this.#worker !== undefined)
      this.#worker.onSkip = (key, name, at, reason) => {
        if (this.#events.has('skip')) this.#events.emit('skip', { job: undefined, name, key, scheduledAt: new Date(at), reason });
      };
  }

  #requireStore(what: string, open = false): DurableClient {
    if (this.#client === undefined) throw new TypeError(`${what} needs a scheduler created with a \`store\``);
    if (open && this.#loop.closed) throw new ClosedError();
    return this.#client;
  }

  // Each method with a function, a handler name or a module URL declares the function form last: TypeScript 7 reports a
  // call that matches no overload against the last one only, and a misspelt option is most often in the function form.
  /**
   * With a store: schedules the handler `name` (see `define()`) with a JSON payload. A Promise where a function gets a
   * `Task`: the stored row exists once the store commits it (docs/design.md, "One vocabulary").
   * @example
   * const task = await scheduler.schedule(when, 'remind', { payload: { user, text }, key: `remind:${id}` });
   */
  schedule(when: When, name: string, options?: DurableTaskOptions): Promise<EnqueuedTask>;
  /**
   * Runs the module's default export `(ctx, payload) => result` in a worker thread (see `threads`).
   * @example
   * const task = scheduler.schedule(when, new URL('./thumbnail.js', import.meta.url), { payload: { file } });
   */
  schedule<R = unknown>(when: When, module: URL, options?: ThreadTaskOptions): Task<R>;
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
  schedule<R>(when: When, fn: TaskFunction<R> | string | URL, options?: TaskOptions | DurableTaskOptions): Added<R> {
    return this.#add(toEpoch(when), fn, options);
  }

  #add<R>(time: number, fn: TaskFunction<R> | string | URL, options: TaskOptions | DurableTaskOptions | undefined) {
    if (this.#warnLocalWork !== undefined && typeof fn !== 'string') this.#warnLocalWork();
    if (typeof fn === 'function') return this.#loop.add(time, fn, options as TaskOptions | undefined);
    if (fn instanceof URL) return this.#loop.add(time, ...threadTask(this.#threads, fn, options)) as Task<Awaited<R>>;
    if (typeof fn !== 'string')
      throw new TypeError(`Expected a task: a function, a module URL or (with a store) a handler name, got ${describe(fn)}`);
    return this.#requireStore('Scheduling a handler by name', true).enqueue.schedule(time, fn, options as DurableTaskOptions | undefined);
  }

  /**
   * With a store: schedules many durable tasks in one call and one transaction, all or nothing. Every item is checked
   * first; a bad one throws at this call, naming its index, and nothing is written. Each item has its own time, handler,
   * payload, `key` and `dedupe`, as in `schedule()` (a key given twice in one call: the items meet in order, each
   * resolving to the key's final row with its own `enqueued`). Resolves with the stored rows, in the order given.
   * @example
   * const rows = await scheduler.scheduleMany(users.map((user) => ({
   *   when: Date.now(), name: 'welcome', payload: { user: user.id }, key: `welcome:${user.id}`,
   * })));
   */
  scheduleMany(items: readonly DurableTaskItem[]): Promise<EnqueuedTask[]> {
    return this.#requireStore('scheduleMany()', true).enqueue.scheduleMany(toStoredItems(items));
  }

  /** With a store: the handler `name` after `delay` (see the durable `schedule`). */
  after(delay: Duration, name: string, options?: DurableTaskOptions): Promise<EnqueuedTask>;
  /** The module `module`'s default export in a worker thread, after `delay` (see `schedule`). */
  after<R = unknown>(delay: Duration, module: URL, options?: ThreadTaskOptions): Task<R>;
  /**
   * Runs `fn` after `delay` (milliseconds, or a string such as `'10m'` or
   * `'1h30m'`, see `parseDuration`); the same as `schedule(now + delay, …)`.
   * @example
   * scheduler.after(5_000, () => console.log('five seconds later'));
   * scheduler.after('10m', () => console.log('ten minutes later'));
   */
  after<R>(delay: Duration, fn: TaskFunction<R>, options?: TaskOptions): Task<Awaited<R>>;
  after<R>(delay: Duration, fn: TaskFunction<R> | string | URL, options?: TaskOptions | DurableTaskOptions): Added<R> {
    return this.#add(delayEnd(this.#loop.clock.now(), delay), fn, options);
  }

  /**
   * Starts a fluent recurring rule: `every(n).<unit>()...run(fn)`, or
   * `every('15m')...run(fn)` with a duration string (units up to hours; it is
   * `every(15).minutes()`).
   * @param n how many units between runs (an integer >= 1), or a duration string
   * @default 1
   * @example
   * scheduler.every(2).seconds().run(fn);
   * scheduler.every('15m').run(fn);
   * scheduler.every().day().at('10:30').run(fn);
   * scheduler.every().monday().at('08:30', 'Europe/Paris').run(fn);
   * scheduler.every(10).minutes().from(date).until(date).times(5).immediately().run(fn);
   */
  every(n: number | string = 1): Every {
    return new Every(this, n);
  }

  /**
   * A job from a cron expression (OCPS 1.4): 5 fields, 6 with seconds first,
   * or 7 with a year last; lists, ranges, steps, names, `L`, `W`, `#`, `?`,
   * `+` (day-of-month AND day-of-week) and the @-nicknames. A bad expression
   * throws a RangeError that names the field.
   * @example
   * scheduler.cron('*\/15 9-17 * * MON-FRI', { timezone: 'Asia/Tokyo' }).run(fn);
   */
  cron(expression: string, options: CronOptions = {}): CronBuilder {
    return new CronBuilder(this, expression, cronZone(options, this.#timezone));
  }

  /**
   * A one-shot job at `when`: like `schedule()`, but with the `Job` handle and
   * options (`pause()`, `trigger()`, `lastRunAt`, `overlap`...). `when` is a
   * `Date`, epoch milliseconds, a luxon `DateTime` or an ISO-8601 string with
   * an offset or Z.
   * @example
   * const job = scheduler.at(new Date('2026-12-24T18:00:00Z')).run(sendGreetings);
   * scheduler.at('2026-12-24T18:00:00Z').run(sendGreetings);
   */
  at(when: When): AtBuilder {
    return new AtBuilder(this, when);
  }

  /** Jobs that are scheduled or paused, in creation order. */
  jobs(): Job[] {
    return this.#jobs.list();
  }

  /** @internal the time, for builders */
  now(): number {
    return this.#loop.clock.now();
  }

  /** @internal `run()` of a builder lands here */
  createJob(fn: TaskFunction | URL, options: ModuleJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Job {
    if (this.#warnLocalWork !== undefined) this.#warnLocalWork();
    return this.#jobs.create(...(fn instanceof URL ? threadTask(this.#threads, fn, options) : ([fn, options] as const)), plan, bounds);
  }

  /** @internal `run(name)` of a builder lands here */
  createStoredJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    return this.#requireStore('A job with a handler name', true).enqueue.addJob(name, options, plan, bounds);
  }

  /**
   * Registers the handler that runs durable tasks and jobs named `name`.
   * Define every handler before `start()`. A module URL runs its default export in a worker thread (see `threads`).
   * @example
   * scheduler.define('remind', async (ctx, payload: { user: string; text: string }) => send(payload));
   * scheduler.define('email', sendEmail, { queue: 'emails' }); // its tasks join 'emails' unless they name a queue
   * scheduler.define('thumbnail', new URL('./thumbnail.js', import.meta.url)); // runs in a thread
   */
  // biome-ignore lint/suspicious/noExplicitAny: a handler defined without a payload type accepts any JSON payload
  define<P = any>(name: string, handler: Handler<P> | URL, options?: DefineOptions): this {
    this.#requireStore('define()').handlers.define(name, handler instanceof URL ? threadHandler(this.#threads, handler) : handler, options);
    return this;
  }

  /**
   * With a store: opens it and creates or upgrades its schema, once. Not needed: the first call that uses the store
   * (`schedule`, `getTask`, `start`...) does it. Call it at boot to fail early on a database that is unreachable or
   * newer than this library (`SchemaVersionError`). Claims and runs nothing.
   * @example
   * await scheduler.migrate();
   */
  migrate(): Promise<void> {
    return this.#requireStore('migrate()').ready();
  }

  /**
   * With a store: migrates its schema, returns work left running by a dead
   * process to waiting, and starts claiming due work. Without a store it does
   * nothing. Throws `SchemaVersionError` if the database is newer than this library.
   * @example
   * await scheduler.start();
   */
  start(): Promise<void> {
    return this.#worker?.start() ?? Promise.resolve();
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
   * Stored tasks, earliest due first (then by id), filtered by `state`, `name`
   * (handler), `queue`, `keyPrefix`, `jobKey` and due time (`from` inclusive,
   * `to` exclusive); at most `limit` (default 100, at most 10,000). For the
   * next page pass the last task of this one as `after`.
   * @example
   * const page = await scheduler.listTasks({ state: 'failed', name: 'invoice', limit: 50 });
   * const next = await scheduler.listTasks({ state: 'failed', name: 'invoice', limit: 50, after: page.at(-1) });
   */
  listTasks(filter: TaskFilter = {}): Promise<StoredTask[]> {
    return this.#requireStore('listTasks()').listTasks(filter);
  }

  /**
   * Stored tasks counted by state, by the store (every state, 0 for none), under the filters of `listTasks` but `state`, `after` and `limit`.
   * @example
   * const { waiting, failed } = await scheduler.countTasks({ name: 'invoice', queue: 'emails' });
   */
  countTasks(filter: TaskCountFilter = {}): Promise<Record<StoredState, number>> {
    return this.#requireStore('countTasks()').countTasks(filter);
  }

  /**
   * Deletes finished stored tasks (succeeded, failed, timed-out, cancelled; or the one final `state` given) under the
   * filters of `listTasks` but `after`, at most `limit` (default 10,000) per call; resolves with how many went.
   * @example
   * await scheduler.deleteTasks({ name: 'invoice', state: 'succeeded', to: Date.now() - 86_400_000 });
   */
  deleteTasks(filter: Omit<TaskFilter, 'after'> = {}): Promise<number> {
    return this.#requireStore('deleteTasks()').deleteTasks(filter);
  }

  /**
   * Cancels a stored task by id, from any process sharing the store; if it is running somewhere, its `ctx.signal`
   * aborts there. Without a store, a task of an in-memory flow (`flows.add()`); a `Task` of `schedule()` has
   * `task.cancel()`. A cancelled task of a flow (`blocked` ones too) is followed by its dependents' rules. Resolves
   * false if the task was already final or there is none.
   * @example
   * await scheduler.cancelTask(task.id);
   */
  cancelTask(id: number): Promise<boolean> {
    if (this.#client === undefined) {
      assertId(id);
      return cancelFlowTask(this.#loop, id);
    }
    return this.#client.cancel(id);
  }

  /**
   * Sends `message` (a JSON value) on `topic` to a task that waits for it with `ctx.receive(topic)`: a `Task`, a
   * stored task's id, or `{ key }`, the unfinished task with that `key` (a stored one when the scheduler has a store,
   * from any process sharing it); without a store, an id is an in-memory flow's task. A message sent before the task
   * reaches its wait is kept for it, each is taken once, and a task waiting for one is due at once. Resolves false if
   * the task has ended (or no unfinished task has the key).
   * @example
   * await scheduler.send({ key: `chat:${chat}` }, 'reply', text);
   */
  send(to: Task | number | { key: string }, topic: string, message?: unknown): Promise<boolean> {
    const value = toSendArgs(to, topic, message, (x) => x instanceof Task);
    if (to instanceof Task || (this.#client === undefined && typeof to === 'object'))
      return Promise.resolve(this.#loop.send(to, topic, value));
    // Without a store, an id is an in-memory flow's task (as for waitFor() and cancelTask()).
    if (this.#client === undefined) return sendFlowTask(this.#loop, to as number, topic, value);
    return this.#requireStore('send() to a stored task').send(to, topic, value);
  }

  /**
   * Resolves with a stored task once it is in a final state (`succeeded`, `failed`, `timed-out` or `cancelled`), from
   * any process: its `result` is what the handler returned, `lastError` and `errors` why it failed. Rejects with
   * `TaskNotFoundError` if there is no such task, `WaitTimeoutError` after `timeout` (the task goes on), the signal's
   * reason when `signal` aborts, and `ClosedError` when the scheduler closes. Needs no `start()`. PostgreSQL wakes it
   * through LISTEN/NOTIFY. Without a store, a task of an in-memory flow (`flows.add()`).
   * @example
   * const task = await scheduler.schedule(Date.now(), 'resize', { payload: { image } });
   * const { state, result } = await scheduler.waitFor(task.id, { timeout: '30s' });
   */
  waitFor(id: number, options: WaitOptions = {}): Promise<StoredTask> {
    assertId(id);
    const { signal, timeout } = toWaitOptions(options);
    if (this.#client === undefined) return waitForFlowTask(this.#loop, id, signal, timeout);
    return this.#client.waitFor(id, signal, timeout);
  }

  /**
   * Runs a failed, timed-out or cancelled stored task again: back to `waiting`, due now, with all its attempts
   * (`attempts` starts again at 0; the errors of earlier attempts stay in `errors`). Resolves with the task, or rejects
   * with `TaskNotFoundError` if there is none with this id, and with a `TaskheapError` (`ERR_TASK_NOT_FINISHED`) if it
   * is waiting, running or succeeded. A task of a flow comes back with the failed tasks above it that stopped it, and
   * what their failure stopped waits to run again (docs/flows.md). Without a store, a task of an in-memory flow (`flows.add()`).
   * @example
   * for (const task of await scheduler.listTasks({ state: 'failed' })) await scheduler.retryTask(task.id);
   */
  async retryTask(id: number): Promise<StoredTask> {
    assertId(id);
    if (this.#client === undefined) return retryFlowTask(this.#loop, id);
    return this.#client.retry(id);
  }

  /**
   * Cancels a stored recurring job by key, with its waiting occurrences; a
   * running occurrence finishes. Resolves false if there is no such job or
   * it was already cancelled.
   */
  cancelJob(key: string): Promise<boolean> {
    return this.#requireStore('cancelJob()').cancelJob(key);
  }

  /**
   * A stored recurring job by key: its state, `nextRunAt`, `lastRunAt`,
   * `runs` and its stored occurrences by state (`counts`).
   * @example
   * const { state, nextRunAt, lastRunAt, counts } = (await scheduler.getJob('standup'))!;
   */
  getJob(key: string): Promise<StoredJob | undefined> {
    return this.#requireStore('getJob()').getJob(key);
  }

  /**
   * Stored recurring jobs in key order, filtered by `state`, `name` or
   * `keyPrefix`; `after` (a key) gives the next page.
   * @example
   * const page = await scheduler.listJobs({ state: 'paused', limit: 50 });
   * const next = await scheduler.listJobs({ state: 'paused', limit: 50, after: page.at(-1)?.key });
   */
  listJobs(filter: JobFilter = {}): Promise<StoredJob[]> {
    return this.#requireStore('listJobs()').listJobs(filter);
  }

  /**
   * Pauses a stored job from any process: no occurrence comes due until it
   * is resumed (waiting and running ones are left alone). Resolves false if
   * the job was not scheduled (no such job, already paused, done, cancelled).
   */
  pauseJob(key: string): Promise<boolean> {
    return this.#requireStore('pauseJob()').setJobState(key, 'scheduled', 'paused');
  }

  /**
   * Resumes a paused stored job as `job.resume()` does an in-memory one: occurrences that fell in the pause are not run
   * (`misfire` is for downtime), and `nextRunAt` is never in the past. Resolves false if it was not paused.
   */
  resumeJob(key: string): Promise<boolean> {
    return this.#requireStore('resumeJob()').setJobState(key, 'paused', 'scheduled');
  }

  /**
   * Runs a stored job now, once, besides its schedule (paused ones too): adds an occurrence due now, which does not
   * count against `times` or `runs` and does not move `nextRunAt`. Resolves with that task, or rejects with
   * `TaskheapError` `ERR_JOB_NOT_FOUND` if there is no such job or it was cancelled.
   * @example
   * const task = await scheduler.triggerJob('nightly-report');
   * await scheduler.waitFor(task.id);
   */
  triggerJob(key: string): Promise<StoredTask> {
    return this.#requireStore('triggerJob()').triggerJob(key);
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
    return this.#loop.workers;
  }

  /** Resizes the pool; throws a TypeError for a non-number and a RangeError for anything but an integer >= 1 or Infinity. */
  set workers(value: number) {
    this.#loop.workers = value;
  }

  /**
   * The most worker threads for module tasks. Growing starts threads as tasks
   * need them; shrinking ends idle threads now, busy ones after their task.
   * @default os.availableParallelism()
   * @example
   * scheduler.threads = 2;
   */
  get threads(): number {
    return this.#threads.size;
  }

  /** Resizes the thread pool; throws a RangeError for anything but an integer >= 1. */
  set threads(value: number) {
    assertThreads(value);
    this.#threads.size = value;
  }

  /**
   * The scheduler-wide rate limit (`{ limit, interval }`, interval in ms), or
   * undefined for none. Setting it takes effect at once: starts already made
   * count against the new window, and waiting tasks are re-evaluated.
   * @default undefined
   * @example
   * scheduler.rate = { limit: 10, interval: '1s' }; // slow down
   * scheduler.rate = undefined;                      // no limit
   */
  get rate(): RateLimit | undefined {
    return this.#loop.rate;
  }

  /** Sets the scheduler-wide rate limit; a bad value throws and changes nothing. */
  set rate(value: RateLimit | undefined) {
    this.#loop.rate = value;
  }

  /**
   * A named queue (see `SchedulerQueue`): the in-memory `Queue` without a store, a `DurableQueue` with one, with the
   * same members: `concurrency` (live, in this process), and `pause()`, `resume()`, `setRate()`, `setGlobalConcurrency()`,
   * `counts()`, `info()`, which return Promises in both modes (with a store they hold for every process sharing it).
   * Queues exist on first use with no limits; tasks, jobs and handlers join one with the option `queue`, and those that
   * name none are in `'default'`.
   * @example
   * const emails = scheduler.queue('emails');
   * emails.concurrency = 2;
   * await emails.pause();
   */
  queue(name: string): SchedulerQueue {
    return this.#worker === undefined ? new Queue(this.#loop, name) : this.#worker.queue(name);
  }

  /**
   * Every queue, with its settings, paused flag and counts: in memory the
   * default one, those configured and those tasks named (O(n) in the waiting
   * tasks); with a store every queue the store knows, read from it.
   * @example
   * for (const { name, paused, counts } of await scheduler.queues()) console.log(name, paused, counts.waiting);
   */
  queues(): Promise<SchedulerQueueInfo[]> {
    return this.#client === undefined ? Promise.resolve(listQueues(this.#loop)) : this.#client.queues();
  }

  /** Flows (docs/flows.md): tasks that wait for others, stored all or none (`flows.add()`), and their status (`flows.get()`). */
  get flows(): Flows {
    return new Flows(this.#loop, this.#worker);
  }

  /** The most tasks that may be waiting at once (the option `maxWaiting`). @default Infinity */
  get maxWaiting(): number {
    return this.#loop.maxWaiting;
  }

  /** The default IANA time zone of calendar rules. */
  get timezone(): string {
    return this.#timezone;
  }

  /** The clock this scheduler reads. */
  get clock(): Clock {
    return this.#loop.clock;
  }

  /** Tasks waiting for their time or for a worker. */
  get size(): number {
    return this.#loop.size;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#loop.running;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#loop.closed;
  }

  /**
   * Resolves when no task is waiting or running.
   * @example
   * scheduler.after(0, work);
   * await scheduler.onIdle();
   */
  onIdle(): Promise<void> {
    return this.#loop.onIdle();
  }

  /** Counters and lateness percentiles at this moment. */
  stats(): SchedulerStats {
    return this.#loop.stats();
  }

  /**
   * In-memory tasks in state `waiting`, earliest first: all of them (a copy, O(n log n)), or the `limit` earliest
   * (O(limit log limit)); with `keyPrefix`, those whose `key` starts with it (one pass over every waiting task).
   * Stored ones: `listTasks({ state: 'waiting', keyPrefix })`.
   * @example
   * scheduler.waitingTasks(10); // the next ten to run
   * scheduler.waitingTasks({ keyPrefix: `remind:${chatId}:` }); // one chat's reminders
   */
  waitingTasks(filter?: number | WaitingFilter): Task[] {
    const { limit, keyPrefix } = toWaitingFilter(filter);
    return this.#loop.waitingTasks(limit, keyPrefix);
  }

  /** @internal waiting and due counts per task name, for `metrics()`: one O(n) pass. */
  waitingByName(): ReturnType<TaskLoop['waitingByName']> {
    return this.#loop.waitingByName();
  }

  /**
   * Listens to an event.
   * @example
   * scheduler.on('failure', (task, error) => log.warn({ id: task.id, error }));
   */
  on<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this {
    assertEvent(event);
    this.#events.on(event, listener);
    return this;
  }

  /** Stops listening. */
  off<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this {
    assertEvent(event);
    this.#events.off(event, listener);
    return this;
  }

  /**
   * Listens to the next occurrence of an event only.
   * @example
   * scheduler.once('idle', () => console.log('all done'));
   */
  once<K extends keyof SchedulerEvents>(event: K, listener: (...args: SchedulerEvents[K]) => void): this {
    assertEvent(event);
    this.#events.once(event, listener);
    return this;
  }

  /**
   * Stops accepting work, cancels every waiting task (their `result` rejects with `ClosedError`), and resolves once
   * running tasks settle. With `abort: true` running tasks also see `ctx.signal` abort. Idempotent; safe to call from
   * inside a task (but a task that awaits it waits for itself).
   * @example
   * process.on('SIGTERM', () => scheduler.close().then(() => process.exit(0)));
   */
  close(options: { abort?: boolean } = {}): Promise<void> {
    const abort = toAbort(options);
    if (this.#closing === undefined) {
      this.#worker?.stop();
      this.#jobs.stop();
      const idle = this.#loop.close();
      this.#closing = (this.#worker === undefined ? idle : this.#worker.close(idle)).finally(() => this.#threads.close());
    }
    if (abort) this.#loop.abortRunning(new ClosedError('The scheduler was closed with abort: true'));
    return this.#closing;
  }

  /** `await using scheduler = new Scheduler()` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
