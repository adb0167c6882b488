// The durable runner, composed of one part per role (as River's producer,
// completer and maintenance services, or Oban's producer and plugins):
//   enqueue.ts      what producers add: schedule, scheduleMany, addJob, option parsing
//   claimer.ts      claim rounds, wake-ups, timers and the idle poll (prefetch.ts: how much to claim)
//   dispatch.ts     a claim into the in-memory loop, its stored options parsed once
//   completer.ts    outcomes, batched, written until confirmed (backoff on failure)
//   leases.ts       renewal of what this process holds, hand-back of lost claims
//   maintenance.ts  the retention sweep
//   waiters.ts      waitFor() and what wakes it
//   manage.ts       reads, lists and job management by id or key
//   flows.ts        flows: tasks that wait for others (issue 28; the graph in flow-graph.ts)
// sharing runner-context.ts (store, loop, owner, timings, shutdown flags),
// holdings.ts (the claims held in memory) and handlers.ts (the named handlers).
// This file wires them and keeps the one API the scheduler calls.
import type { JobBounds, RulePlan } from '../rules/plan.js';
import type { TaskLoop } from '../core/loop.js';
import type { Task } from '../core/task.js';
import { describe } from '../core/validate.js';
import { ClosedError } from '../core/errors.js';
import type { DurableTaskOptions, Handler, StoredJobOptions } from './options.js';
import type { EnqueuedTask, JobFilter, Store, StoredJob, StoredState, StoredTask, TaskCountFilter, TaskFilter } from './store.js';
import { Claimer, type SkipListener } from './claimer.js';
import { Completer } from './completer.js';
import { Dispatcher } from './dispatch.js';
import { Enqueuer } from './enqueue.js';
import { Handlers } from './handlers.js';
import { Holdings } from './holdings.js';
import { Leases } from './leases.js';
import { DEFAULT_RETENTION, Maintenance, type Retention } from './maintenance.js';
import { Management } from './manage.js';
import { taskLinks, type TaskLinks } from './links.js';
import { limitKeys, type LimitKey } from './limit-list.js';
import { Prefetch } from './prefetch.js';
import { RunnerContext } from './runner-context.js';
import { Waiters } from './waiters.js';
import { DurableQueue, emptyQueue, QueueBook, queueInfo, type DurableQueueInfo, type DurableQueueOptions } from './queues.js';
import type { DefineOptions } from './handlers.js';
import { addFlow, flowStatus, type StoredFlow, type FlowStatus } from './flows.js';
import type { FlowSpec } from './flow-graph.js';

export { DEFAULT_RETENTION, type Retention } from './maintenance.js';

/** How long close() keeps retrying unconfirmed outcomes unless the store says otherwise. */
const CLOSE_TIMEOUT = 5_000;

/**
 * Moves durable work between a store and the scheduler's worker pool:
 * claims due tasks under a lease, runs them as ordinary in-memory tasks,
 * renews their leases while they run, and records how they ended. A facade
 * over the parts listed at the top of this file.
 * @internal
 */
export class DurableRunner {
  readonly #ctx: RunnerContext;
  readonly #handlers: Handlers;
  readonly #holdings: Holdings;
  readonly #enqueuer: Enqueuer;
  readonly #claimer: Claimer;
  readonly #completer: Completer;
  readonly #leases: Leases;
  readonly #maintenance: Maintenance;
  readonly #dispatcher: Dispatcher;
  readonly #waiters: Waiters;
  readonly #management: Management;
  readonly #closeTimeout: number;
  #started: Promise<void> | undefined = undefined;
  /** The store opened and migrated, once: by the first call that needs it, `migrate()` or `start()`. */
  #ready: Promise<void> | undefined = undefined;

  constructor(
    store: Store,
    loop: TaskLoop,
    known: readonly string[] = [],
    retention: Retention = DEFAULT_RETENTION,
    queues?: Map<string, DurableQueueOptions>,
  ) {
    if (typeof store !== 'object' || store === null || typeof store.claim !== 'function' || typeof store.settle !== 'function') {
      throw new TypeError(`Expected \`store\` to be a taskheap store (sqliteStore() or postgresStore()), got ${describe(store)}`);
    }
    const ctx = (this.#ctx = new RunnerContext(store, loop));
    this.#closeTimeout = store.closeTimeout ?? CLOSE_TIMEOUT;
    const handlers = (this.#handlers = new Handlers(known));
    const holdings = (this.#holdings = new Holdings(new QueueBook(queues)));
    const prefetch = new Prefetch(loop, store);
    const wake = (runAt: number): void => this.#claimer.wakeAt(runAt);
    const ready = (): Promise<void> => this.ready();
    this.#waiters = new Waiters(ctx);
    this.#completer = new Completer(ctx, holdings, { turn: () => this.#claimer.refill(), wake, done: (id) => this.#waiters.done(id) });
    const dispatcher = (this.#dispatcher = new Dispatcher(ctx, handlers, holdings, prefetch, this.#completer));
    this.#claimer = new Claimer(ctx, handlers, holdings, prefetch, dispatcher, (claims) => this.#completer.handBack(claims));
    this.#leases = new Leases(ctx, holdings, this.#completer, () => this.#claimer.claiming);
    this.#maintenance = new Maintenance(ctx, retention);
    this.#enqueuer = new Enqueuer(store, handlers, ready, wake, () => loop.clock.now());
    this.#management = new Management(ctx, ready, wake);
  }

  /**
   * Told of stored job occurrences the job's policies dropped (misfire
   * 'skip', the catch-up cap of 'all', overlap 'skip'), after the claim that
   * decided it committed; the scheduler turns these into `skip` events.
   */
  get onSkip(): SkipListener | undefined {
    return this.#claimer.onSkip;
  }

  set onSkip(listener: SkipListener | undefined) {
    this.#claimer.onSkip = listener;
  }

  /**
   * Opens the store and creates or upgrades its schema, once. Producers get
   * here from their first call; a failure is not remembered, so the next
   * call tries again (the database may be back).
   */
  ready(): Promise<void> {
    if (this.#ctx.finished) return Promise.reject(new ClosedError());
    this.#ready ??= this.#ctx.store.migrate().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  /** Stores a flow (checked at the call; see flows.ts). */
  flow(spec: FlowSpec): Promise<StoredFlow> {
    const loop = this.#ctx.loop;
    return addFlow(
      this.#ctx.store,
      this.#handlers,
      () => this.ready(),
      () => loop.clock.now(),
      (at) => this.#claimer.wakeAt(at),
      spec,
    );
  }

  /** A flow's status, or undefined. */
  async getFlow(id: number): Promise<FlowStatus | undefined> {
    await this.ready();
    return flowStatus(this.#ctx.store, id);
  }

  /** A task's flow, dependencies and dependents, or undefined (see links.ts). */
  async getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined> {
    await this.ready();
    return taskLinks(this.#ctx.store, id, limit);
  }

  /** The id of the stored task a task of the loop was claimed for, or undefined (the dashboard's waiting tasks). */
  claimedId(task: Task): number | undefined {
    return this.#holdings.get(task)?.claim.id;
  }

  /** The limit keys in use with the most waiting tasks, or null if the store does not list them (see limit-list.ts). */
  async getLimitKeys(limit: number): Promise<LimitKey[] | null> {
    await this.ready();
    return limitKeys(this.#ctx.store, limit, this.#ctx.loop.clock.now());
  }

  /** Registers the handler that runs tasks named `name`. */
  define(name: string, handler: Handler, options?: DefineOptions): void {
    this.#handlers.define(name, handler, options);
  }

  /** The handle of a named queue (see DurableQueue). */
  queue(name: string): DurableQueue {
    return new DurableQueue(
      this.#holdings.queues,
      () => this.ready().then(() => this.#ctx.store),
      () => this.#claimer.refill(),
      (queue) => this.#holdings.handBack(queue),
      name,
    );
  }

  /** Every queue the store knows (a row or a task), with this process's settings. */
  async queues(): Promise<DurableQueueInfo[]> {
    await this.ready();
    const book = this.#holdings.queues;
    const stored = await this.#ctx.store.listQueues();
    const known = new Set(stored.map((queue) => queue.name));
    // Queues configured in this process but not yet stored are listed too (empty).
    for (const name of book.names()) if (!known.has(name)) stored.push(emptyQueue(name));
    return stored.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((queue) => queueInfo(book, queue));
  }

  /** Migrates, recovers and starts claiming; idempotent once it succeeded (a failed start may be called again). */
  start(): Promise<void> {
    this.#started ??= (async () => {
      await this.ready();
      const store = this.#ctx.store;
      // What a dead owner left running and recovery failed (lease expiries): reported here, once.
      for (const failed of (await store.recover?.()) ?? []) this.#dispatcher.reportExpired(failed);
      // The `queues` option's global concurrencies and rates: the most recent process to start decides.
      for (const [name, change] of this.#holdings.queues.startup) await store.setQueue(name, change);
      await store.subscribe(
        (runAt) => this.#claimer.wakeAt(runAt),
        (id) => this.#holdings.cancel(id),
        (queue) => this.#holdings.handBack(queue),
      );
      // Before the first claim: claims right after start() find their connections ready.
      await store.warm?.(this.#ctx.owner, this.#ctx.lease, this.#handlers.names);
      this.#leases.start();
      this.#claimer.start();
      this.#maintenance.start();
    })().catch((error: unknown) => {
      // Nothing was started (every step that can fail comes before): a later start() tries again,
      // as ready() does (a directory created, a server back).
      this.#started = undefined;
      throw error;
    });
    return this.#started;
  }

  /** Whether start() was called. */
  get started(): boolean {
    return this.#started !== undefined;
  }

  /** Claimed tasks held by this process: running, or prefetched and about to. */
  get inFlight(): number {
    return this.#holdings.size;
  }

  /** Validates at once (throwing at the call), then resolves when the store has committed. */
  schedule(runAt: number, name: string, options: DurableTaskOptions | undefined): Promise<EnqueuedTask> {
    return this.#enqueuer.schedule(runAt, name, options);
  }

  /**
   * Validates every item first (an error names the item's index, and
   * nothing is written), then adds them all in one transaction: the
   * caller's, when the items give their `client` (every item the same one).
   */
  scheduleMany(items: readonly { runAt: unknown; name: unknown; options: object }[]): Promise<EnqueuedTask[]> {
    return this.#enqueuer.scheduleMany(items);
  }

  /** Registers (or updates, by key) a stored recurring job. */
  addJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    return this.#enqueuer.addJob(name, options, plan, bounds);
  }

  /** Cancels a waiting or running task, here and wherever it runs; true if it was. */
  async cancel(id: number): Promise<boolean> {
    await this.ready();
    const cancelled = await this.#ctx.store.cancel(id);
    this.#holdings.cancel(id);
    if (cancelled) {
      this.#waiters.done(id);
      // It may have held a serial key: the key's next task need not wait for a poll.
      this.#claimer.wakeAt(this.#ctx.loop.clock.now());
    }
    return cancelled;
  }

  /** Puts a failed, timed-out or cancelled task back to waiting, due now, with all its attempts. */
  requeue(id: number): Promise<StoredTask | undefined> {
    return this.#management.requeue(id);
  }

  /**
   * Resolves with the task once it is in a final state. Woken by this
   * process's own writes and, where the store has them, by other processes'
   * announcements (PostgreSQL NOTIFY); a sweep of every waited task covers
   * what was not announced: after a reconnect of the listener, and every
   * poll where nothing is announced (SQLite, PgBouncer without a listening
   * connection), a minute or so where announcements come (waiters.ts).
   */
  async waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    await this.ready();
    return this.#waiters.waitFor(id, signal, timeout);
  }

  cancelJob(key: string): Promise<boolean> {
    return this.#management.cancelJob(key);
  }

  getTask(id: number): Promise<StoredTask | undefined> {
    return this.#management.getTask(id);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    return this.#management.listTasks(filter);
  }

  countTasks(filter: TaskCountFilter): Promise<Record<StoredState, number>> {
    return this.#management.countTasks(filter);
  }

  deleteTasks(filter: TaskFilter): Promise<number> {
    return this.#management.deleteTasks(filter);
  }

  getJob(key: string): Promise<StoredJob | undefined> {
    return this.#management.getJob(key);
  }

  listJobs(filter: JobFilter): Promise<StoredJob[]> {
    return this.#management.listJobs(filter);
  }

  /** Pauses ('scheduled' to 'paused') or resumes a stored job; false if it was not in the state to leave. */
  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    return this.#management.setJobState(key, from, to);
  }

  /** Adds an occurrence of a job due now; undefined if there is no such job or it was cancelled. */
  triggerJob(key: string): Promise<StoredTask | undefined> {
    return this.#management.triggerJob(key);
  }

  /**
   * Stops claiming; from now on a cancelled claim goes back to waiting.
   * Leases are still renewed until close() is over: running tasks and
   * unconfirmed outcomes stay ours.
   */
  stop(): void {
    this.#ctx.closed = true;
    this.#claimer.stop();
  }

  /**
   * After `stop()`: waits for running tasks, then for their outcomes to be
   * confirmed (at most `closeTimeout` ms), then closes the store.
   */
  async close(idle: Promise<void>): Promise<void> {
    this.#waiters.closeAll();
    await this.#maintenance.stop();
    await this.#claimer.settled();
    await idle;
    await this.#completer.drain(this.#closeTimeout);
    this.#ctx.finished = true;
    const renewal = this.#leases.stop();
    this.#completer.stop(this.#closeTimeout);
    await Promise.allSettled([renewal, this.#completer.idle()]);
    await this.#ctx.store.close();
  }
}
