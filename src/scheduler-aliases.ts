// The names `Scheduler` had in taskheap 0.1, kept for one release as
// deprecated aliases of the one vocabulary (docs/design.md, "One
// vocabulary"): `Scheduler` extends this class. Delete it in the next minor.
import type { Task } from './core/task.js';
import type { StoredTask } from './durable/store.js';

/**
 * The deprecated names of `Scheduler` members, each calling the member that
 * replaces it (see docs/design.md, "One vocabulary"). They go in the next
 * minor release.
 */
export abstract class SchedulerAliases {
  /** In-memory tasks in state `waiting`, earliest first. */
  abstract waitingTasks(limit?: number): Task[];
  /** Cancels a stored task by id. */
  abstract cancelTask(id: number): Promise<boolean>;
  /** Runs a finished stored task again. */
  abstract retryTask(id: number): Promise<StoredTask>;
  /** The most tasks that may be waiting at once. */
  abstract get maxWaiting(): number;

  /** @deprecated Renamed `waitingTasks()` (the state is `waiting`, as a stored task's). */
  pendingTasks(limit?: number): Task[] {
    return this.waitingTasks(limit);
  }

  /** @deprecated Renamed `cancelTask(id)`, as `cancelJob(key)`, `getTask(id)`. */
  cancel(id: number): Promise<boolean> {
    return this.cancelTask(id);
  }

  /** @deprecated Renamed `retryTask(id)`, as `cancelTask(id)`, `getTask(id)`. */
  retry(id: number): Promise<StoredTask> {
    return this.retryTask(id);
  }

  /** @deprecated Renamed `maxWaiting` (the option too). */
  get maxPending(): number {
    return this.maxWaiting;
  }
}
