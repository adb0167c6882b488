// The claimed tasks this process holds in memory, prefetched or running:
// found by in-memory task (the loop tells how a task ended) and by stored id
// (the store tells of a lost lease or a cancel). The dispatcher adds a claim,
// the completer takes it out when its task settles, leases cancel lost ones.
// Each keeps its stored options, parsed once at dispatch.
import type { StepLog } from '../core/steps.js';
import { State, type Task } from '../core/task.js';
import type { StoredOptions } from './options.js';
import type { ClaimedTask } from './store.js';
import { DEFAULT_QUEUE, QueueBook } from './queues.js';

/** One claim held in memory, with its stored options as parsed at dispatch. @internal */
export interface Held {
  readonly claim: ClaimedTask;
  /** `claim.options`, parsed once: the settings come from it, and the retry policy when a run fails. */
  readonly options: StoredOptions;
  /** Its step record, read from `claim.steps` on the first step call (dispatch.ts). */
  steps?: StepLog;
}

/** @internal */
export class Holdings {
  readonly #byTask = new Map<Task, Held>();
  readonly #byId = new Map<number, Task>();
  /**
   * Ids of claims with a serial group, until their final outcome is confirmed
   * (or the lease is lost): that confirmation frees the key, so the next
   * claim should not wait for a poll.
   */
  readonly serials = new Set<number>();
  /**
   * Ids of claims handed back unstarted because their queue was paused:
   * their cancel in memory is recorded as a release (back to waiting, the
   * attempt not counted), not as cancelled.
   */
  readonly handedBack = new Set<number>();
  /** Ids of prefetched claims that started here and that the store has not marked started yet (leases.ts marks them). */
  readonly starts = new Set<number>();
  /** The named queues: what this process holds of each counts against its room there. */
  readonly queues: QueueBook;

  constructor(queues: QueueBook = new QueueBook(undefined)) {
    this.queues = queues;
  }

  /** Claims held in memory: running, or prefetched and about to. */
  get size(): number {
    return this.#byTask.size;
  }

  add(task: Task, held: Held): void {
    this.#byTask.set(task, held);
    this.#byId.set(held.claim.id, task);
    if (held.options.serial !== undefined) this.serials.add(held.claim.id);
    this.queues.hold(held.options.queue ?? DEFAULT_QUEUE);
  }

  get(task: Task): Held | undefined {
    return this.#byTask.get(task);
  }

  /** The task ended in memory: it is no longer held here (its outcome is the completer's now). */
  take(task: Task): Held | undefined {
    const held = this.#byTask.get(task);
    if (held === undefined) return undefined;
    this.#byTask.delete(task);
    this.#byId.delete(held.claim.id);
    this.queues.release(held.options.queue ?? DEFAULT_QUEUE);
    return held;
  }

  /** Cancels the in-memory task of stored task `id`, if it is held here. */
  cancel(id: number): void {
    this.#byId.get(id)?.cancel();
  }

  /** Queue `queue` was paused: hands back the claims of it held here that have not started (prefetched). */
  handBack(queue: string): void {
    for (const [task, held] of this.#byTask) {
      if ((held.options.queue ?? DEFAULT_QUEUE) !== queue || (task._state !== State.Waiting && task._state !== State.Held)) continue;
      this.handedBack.add(held.claim.id);
      if (!task.cancel()) this.handedBack.delete(held.claim.id);
    }
  }

  /** The stored ids held in memory. */
  ids(): IterableIterator<number> {
    return this.#byId.keys();
  }
}
