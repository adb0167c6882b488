// Management of stored work by id or key, for any process sharing the store
// (a producer too): read and list tasks and jobs, requeue a finished task,
// pause, resume, trigger and cancel jobs. Each call opens the store first;
// one that makes work due wakes the claimer. (Cancelling a task also stops
// it here and wakes its waiters: the runner does that, it needs those parts.)
import { resumedAt } from './advance-job.js';
import {
  FINAL_STATES,
  type JobFilter,
  type StoredJob,
  type StoredState,
  type StoredTask,
  type TaskCountFilter,
  type TaskFilter,
} from './store.js';
import { assertJobFilter, assertKey, assertTaskFilter } from './validate.js';
import type { RunnerContext } from './runner-context.js';

/** @internal */
export class Management {
  readonly #ctx: RunnerContext;
  /** Opens and migrates the store once (the runner's `ready()`). */
  readonly #ready: () => Promise<void>;
  /** Tells the claimer that work is due at a time. */
  readonly #wake: (runAt: number) => void;

  constructor(ctx: RunnerContext, ready: () => Promise<void>, wake: (runAt: number) => void) {
    this.#ctx = ctx;
    this.#ready = ready;
    this.#wake = wake;
  }

  /** Puts a failed, timed-out or cancelled task back to waiting, due now, with all its attempts. */
  async requeue(id: number): Promise<StoredTask | undefined> {
    await this.#ready();
    const task = await this.#ctx.store.requeue(id, this.#ctx.loop.clock.now());
    if (task !== undefined) this.#wake(task.runAt.getTime());
    return task;
  }

  async cancelJob(key: string): Promise<boolean> {
    await this.#ready();
    return this.#ctx.store.cancelJob(key);
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    await this.#ready();
    return this.#ctx.store.getTask(id);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    assertTaskFilter(filter);
    return this.#ready().then(() => this.#ctx.store.listTasks(filter));
  }

  countTasks(filter: TaskCountFilter): Promise<Record<StoredState, number>> {
    assertTaskFilter(filter, true);
    return this.#ready().then(() => this.#ctx.store.countTasks(filter));
  }

  deleteTasks(filter: TaskFilter): Promise<number> {
    assertTaskFilter(filter);
    if ('after' in filter) throw new TypeError('deleteTasks() takes no `after`: it deletes from the start');
    if (filter.state !== undefined && !FINAL_STATES.has(filter.state))
      throw new RangeError(
        `Expected \`state\` of deleteTasks() to be a final state (succeeded, failed, timed-out, cancelled), got '${filter.state}'`,
      );
    const store = this.#ctx.store;
    if (store.deleteTasks === undefined) return Promise.reject(new TypeError('This store cannot delete tasks'));
    return this.#ready().then(() => store.deleteTasks!(filter));
  }

  getJob(key: string): Promise<StoredJob | undefined> {
    assertKey(key, 'key');
    return this.#ready().then(() => this.#ctx.store.getJob(key));
  }

  listJobs(filter: JobFilter): Promise<StoredJob[]> {
    assertJobFilter(filter);
    return this.#ready().then(() => this.#ctx.store.listJobs(filter));
  }

  /** Pauses ('scheduled' to 'paused') or resumes a stored job; false if it was not in the state to leave. */
  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    assertKey(key, 'key');
    return this.#setJobState(key, from, to);
  }

  async #setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    await this.#ready();
    // A resume skips the occurrences that fell in the pause, as an in-memory job's does.
    const { store, loop } = this.#ctx;
    const changed = to === 'scheduled' ? await store.resumeJob(key, loop.clock.now(), resumedAt) : await store.setJobState(key, from, to);
    if (changed && to === 'scheduled') this.#wake(this.#ctx.loop.clock.now());
    return changed;
  }

  triggerJob(key: string): Promise<StoredTask | undefined> {
    assertKey(key, 'key');
    return this.#triggerJob(key);
  }

  async #triggerJob(key: string): Promise<StoredTask | undefined> {
    await this.#ready();
    const task = await this.#ctx.store.triggerJob(key, this.#ctx.loop.clock.now());
    if (task !== undefined) this.#wake(task.runAt.getTime());
    return task;
  }
}
