// The claimed tasks this process holds in memory, prefetched or running:
// found by in-memory task (the loop tells how a task ended) and by stored id
// (the store tells of a lost lease or a cancel). The dispatcher adds a claim,
// the completer takes it out when its task settles, leases cancel lost ones.
// Each keeps its stored options, parsed once at dispatch.
import type { Task } from '../core/task.js';
import type { StoredOptions } from './options.js';
import type { ClaimedTask } from './store.js';

/** One claim held in memory, with its stored options as parsed at dispatch. @internal */
export interface Held {
  readonly claim: ClaimedTask;
  /** `claim.options`, parsed once: the settings come from it, and the retry policy when a run fails. */
  readonly options: StoredOptions;
}

/** @internal */
export class Holdings {
  readonly #byTask = new Map<Task, Held>();
  readonly #byId = new Map<number, Task>();
  /**
   * Ids of claims with a serial key, until their final outcome is confirmed
   * (or the lease is lost): that confirmation frees the key, so the next
   * claim should not wait for a poll.
   */
  readonly serials = new Set<number>();

  /** Claims held in memory: running, or prefetched and about to. */
  get size(): number {
    return this.#byTask.size;
  }

  add(task: Task, held: Held): void {
    this.#byTask.set(task, held);
    this.#byId.set(held.claim.id, task);
    if (held.options.serial !== undefined) this.serials.add(held.claim.id);
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
    return held;
  }

  /** Cancels the in-memory task of stored task `id`, if it is held here. */
  cancel(id: number): void {
    this.#byId.get(id)?.cancel();
  }

  /** The stored ids held in memory. */
  ids(): IterableIterator<number> {
    return this.#byId.keys();
  }
}
