// The durable client: what any process needs to add, read and manage stored
// work, a producer or the CLI too, with no worker behind it: open and migrate
// the store (ready), add tasks, batches and jobs (enqueue.ts), read and list
// tasks and jobs, requeue a finished task, cancel a task, pause, resume,
// trigger and cancel jobs, wait for tasks (waiters.ts), add and read flows,
// a task's links, the limit groups in use and the queues. Each call opens the
// store first; one that makes work due tells the worker (if any) through
// `hooks.wake`, and a cancel tells it to stop the task here (`hooks.cancelled`).
// What a worker runs (claims, leases, outcomes) is worker.ts, which uses this.
import { ClosedError, TaskheapError } from '../core/errors.js';
import { systemClock } from '../core/clock.js';
import { notRetryable } from './errors.js';
import { resumedAt } from './advance-job.js';
import { Enqueuer } from './enqueue.js';
import { addFlow, flowStatus, type FlowStatus, type StoredFlow } from './flows.js';
import type { FlowSpec } from './flow-graph.js';
import { Handlers } from './handlers.js';
import { limitGroups } from './limit-list.js';
import { taskLinks } from './links.js';
import { emptyQueue, QueueBook, queueInfo, type DurableQueueInfo } from './queues.js';
import {
  FINAL_STATES,
  hasSteps,
  type JobFilter,
  type LimitGroup,
  type Store,
  type StoredJob,
  type StoredState,
  type StoredTask,
  type TaskCountFilter,
  type TaskFilter,
  type TaskLinks,
} from './store.js';
import { assertJobFilter, assertKey, assertTaskFilter } from './validate.js';
import { Waiters } from './waiters.js';
import type { StoreContext } from './runner-context.js';

/** What the client tells the worker of this process, if there is one. */
export interface ClientHooks {
  /** Work is due at a time: the claimer may need to look sooner. */
  wake(runAt: number): void;
  /** A task was cancelled: stop it here if it runs here, and let its key's next task through. */
  cancelled(id: number): void;
}

const NO_WORKER: ClientHooks = { wake: () => {}, cancelled: () => {} };

/** @internal */
export class DurableClient {
  readonly #ctx: StoreContext;
  readonly #hooks: ClientHooks;
  /** The named handlers of this process (define): adds check names against them. */
  readonly handlers: Handlers;
  /** This process's queue settings (the `queues` option, `queue(name)`), which `queues()` shows. */
  readonly book: QueueBook;
  /** Adds: schedule, scheduleMany, addJob. */
  readonly enqueue: Enqueuer;
  /** waitFor() and what wakes it. */
  readonly waiters: Waiters;
  /** The store opened and migrated, once: by the first call that needs it. */
  #opened: Promise<void> | undefined = undefined;

  constructor(ctx: StoreContext, handlers: Handlers, book: QueueBook, hooks: ClientHooks = NO_WORKER) {
    this.#ctx = ctx;
    this.#hooks = hooks;
    this.handlers = handlers;
    this.book = book;
    this.enqueue = new Enqueuer(
      ctx.store,
      handlers,
      () => this.ready(),
      hooks.wake,
      () => ctx.clock.now(),
    );
    this.waiters = new Waiters(ctx);
  }

  /**
   * Opens the store and creates or upgrades its schema, once. Producers get
   * here from their first call; a failure is not remembered, so the next
   * call tries again (the database may be back).
   */
  ready(): Promise<void> {
    if (this.#ctx.finished) return Promise.reject(new ClosedError());
    this.#opened ??= this.#ctx.store.migrate().catch((error: unknown) => {
      this.#opened = undefined;
      throw error;
    });
    return this.#opened;
  }

  /** Cancels a waiting or running task, here and wherever it runs; true if it was. */
  async cancel(id: number): Promise<boolean> {
    await this.ready();
    const cancelled = await this.#ctx.store.cancel(id);
    this.#hooks.cancelled(id);
    if (cancelled) {
      this.waiters.done(id);
      // It may have held a serial group: the key's next task need not wait for a poll.
      this.#hooks.wake(this.#ctx.clock.now());
    }
    return cancelled;
  }

  /**
   * Resolves with the task once it is in a final state (see waiters.ts:
   * this process's own writes, other processes' announcements, a sweep).
   */
  async waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    await this.ready();
    return this.waiters.waitFor(id, signal, timeout);
  }

  /** Stores a flow (checked at the call; see flows.ts). */
  flow(spec: FlowSpec): Promise<StoredFlow> {
    const clock = this.#ctx.clock;
    return addFlow(
      this.#ctx.store,
      this.handlers,
      () => this.ready(),
      () => clock.now(),
      this.#hooks.wake,
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

  /** The limit groups in use with the most waiting tasks, or null if the store does not list them (see limit-list.ts). */
  async getLimitGroups(limit: number): Promise<LimitGroup[] | null> {
    await this.ready();
    return limitGroups(this.#ctx.store, limit, this.#ctx.clock.now());
  }

  /** Every queue the store knows (a row or a task), with this process's settings. */
  async queues(): Promise<DurableQueueInfo[]> {
    await this.ready();
    const stored = await this.#ctx.store.listQueues();
    const known = new Set(stored.map((queue) => queue.name));
    // Queues configured in this process but not yet stored are listed too (empty).
    for (const name of this.book.names()) if (!known.has(name)) stored.push(emptyQueue(name));
    return stored.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((queue) => queueInfo(this.book, queue));
  }

  /**
   * Puts a failed, timed-out or cancelled task back to waiting, due now,
   * with all its attempts; rejects with TaskNotFoundError if there is none,
   * and ERR_TASK_NOT_FINISHED if it is waiting, running or succeeded.
   */
  async retry(id: number): Promise<StoredTask> {
    await this.ready();
    const task = await this.#ctx.store.requeue(id, this.#ctx.clock.now());
    if (task === undefined) throw notRetryable(id, await this.#ctx.store.getTask(id));
    this.#hooks.wake(task.runAt.getTime());
    return task;
  }

  /** `scheduler.send()` to a stored task (checked by the caller): kept by the store, which wakes a task waiting on the topic. */
  async send(to: number | { key: string }, topic: string, message: unknown): Promise<boolean> {
    const store = this.#ctx.store;
    if (!hasSteps(store))
      throw new TaskheapError(
        'scheduler.send() to a stored task needs a store that keeps steps (its capabilities.steps is false)',
        'ERR_STEPS_NOT_STORED',
      );
    await this.ready();
    const now = this.#ctx.clock.now();
    const sent = await store.send({ to, topic, message: JSON.stringify(message), now });
    // A task waiting on the topic is due now: this process's claimer need not wait for a poll.
    if (sent) this.#hooks.wake(now);
    return sent;
  }

  async cancelJob(key: string): Promise<boolean> {
    await this.ready();
    return this.#ctx.store.cancelJob(key);
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    await this.ready();
    return this.#ctx.store.getTask(id);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    assertTaskFilter(filter);
    return this.ready().then(() => this.#ctx.store.listTasks(filter));
  }

  countTasks(filter: TaskCountFilter): Promise<Record<StoredState, number>> {
    assertTaskFilter(filter, true);
    return this.ready().then(() => this.#ctx.store.countTasks(filter));
  }

  deleteTasks(filter: TaskFilter): Promise<number> {
    assertTaskFilter(filter);
    if ('after' in filter) throw new TypeError('deleteTasks() takes no `after`: it deletes from the start');
    if (filter.state !== undefined && !FINAL_STATES.has(filter.state))
      throw new RangeError(
        `Expected \`state\` of deleteTasks() to be a final state (succeeded, failed, timed-out, cancelled), got '${filter.state}'`,
      );
    return this.ready().then(() => this.#ctx.store.deleteTasks(filter));
  }

  getJob(key: string): Promise<StoredJob | undefined> {
    assertKey(key, 'key');
    return this.ready().then(() => this.#ctx.store.getJob(key));
  }

  listJobs(filter: JobFilter): Promise<StoredJob[]> {
    assertJobFilter(filter);
    return this.ready().then(() => this.#ctx.store.listJobs(filter));
  }

  /** Pauses ('scheduled' to 'paused') or resumes a stored job; false if it was not in the state to leave. */
  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    assertKey(key, 'key');
    const { store, clock } = this.#ctx;
    return this.ready().then(async () => {
      // A resume skips the occurrences that fell in the pause, as an in-memory job's does.
      if (to !== 'scheduled') return store.setJobState(key, from, to);
      const changed = await store.resumeJob(key, clock.now(), resumedAt);
      if (changed) this.#hooks.wake(clock.now());
      return changed;
    });
  }

  /** Adds an occurrence of a job due now; rejects with ERR_JOB_NOT_FOUND if there is no such job or it was cancelled. */
  triggerJob(key: string): Promise<StoredTask> {
    assertKey(key, 'key');
    return this.ready().then(async () => {
      const task = await this.#ctx.store.triggerJob(key, this.#ctx.clock.now());
      if (task === undefined) {
        throw new TaskheapError(
          `No stored job with key ${JSON.stringify(key)} that can run (it does not exist or was cancelled)`,
          'ERR_JOB_NOT_FOUND',
        );
      }
      this.#hooks.wake(task.runAt.getTime());
      return task;
    });
  }
}

/** Each Scheduler's client, when it has a store: the Scheduler sets it, the dashboard's stored views read it (nothing on the public `Scheduler`). @internal */
export const schedulerClients = new WeakMap<object, DurableClient>();

/**
 * A client for a process that runs nothing (the command line, a producer's
 * tools): the system clock, no worker to tell, store errors left to the calls.
 */
export function storeClient(store: Store): DurableClient {
  const ctx: StoreContext = {
    store,
    clock: systemClock,
    poll: store.poll ?? 5_000,
    closed: false,
    finished: false,
    unref: true,
    report: () => {},
  };
  return new DurableClient(ctx, new Handlers([]), new QueueBook(undefined));
}
