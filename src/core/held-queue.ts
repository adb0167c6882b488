// The heaps the gate orders waiting tasks in (by due time, or by priority
// then due time), with removal of a task from the middle.
import TinyQueue from 'tinyqueue';
import { State, type Task } from './task.js';

/** What the gate's heaps order: a task, or an entry standing for the head of a rate group's line or a queue's best task. @internal */
export type Queued = Pick<Task, '_time' | 'id' | '_settings' | '_state'>;

/** Earliest due time first; equal times in scheduling order. @internal */
export function byDueTime(a: Queued, b: Queued): number {
  return a._time - b._time || a.id - b.id;
}

/** Higher priority first, then earliest due time, then scheduling order. @internal */
export function byPriority(a: Queued, b: Queued): number {
  return (b._settings.limits?.priority ?? 0) - (a._settings.limits?.priority ?? 0) || a._time - b._time || a.id - b.id;
}

// Below this many entries a rebuild is not worth its cost.
const MIN_COMPACT = 1024;

/**
 * A heap of held tasks (state `Held`: due, waiting in the gate). As in
 * TaskQueue, a cancelled task stays as a tombstone (its state changed) and
 * is skipped when it reaches the top; `live` counts the others.
 * @internal
 */
export class HeldQueue<T extends Queued = Task> {
  #heap: TinyQueue<T>;
  readonly #compare: (a: T, b: T) => number;
  #live = 0;

  constructor(compare: (a: T, b: T) => number) {
    this.#compare = compare;
    this.#heap = new TinyQueue<T>([], compare);
  }

  get live(): number {
    return this.#live;
  }

  push(task: T): void {
    this.#heap.push(task);
    this.#live++;
  }

  /** The first live task, without removing it. */
  peek(): T | undefined {
    const heap = this.#heap;
    let top = heap.peek();
    while (top !== undefined && top._state !== State.Held) {
      heap.pop();
      top = heap.peek();
    }
    return top;
  }

  /** Removes the task `peek()` returned. */
  pop(): void {
    this.#heap.pop();
    this.#live--;
  }

  /** A held task in this queue stopped being held (was cancelled): it becomes a tombstone. */
  discard(): void {
    this.#live--;
    // Tombstones are dropped as they surface; a queue left with only
    // tombstones is emptied at once, so a dropped key keeps nothing alive.
    const heap = this.#heap;
    if (this.#live === 0) heap.data.length = heap.length = 0;
    // Tombstones outnumbering live tasks: rebuild in O(n), as TaskQueue does.
    else if (heap.length > MIN_COMPACT && heap.length > 2 * this.#live) {
      const live = this.clear();
      this.#heap = new TinyQueue(live, this.#compare);
      this.#live = live.length;
    }
  }

  /** Calls `fn` for each live task, in no particular order. */
  forEach(fn: (task: T) => void): void {
    for (const task of this.#heap.data) if (task._state === State.Held) fn(task);
  }

  /** Takes out the live tasks `match` picks (in no particular order) and rebuilds the heap from the others: O(n). */
  extract(match: (task: T) => boolean): T[] {
    const taken: T[] = [];
    const kept: T[] = [];
    for (const task of this.#heap.data) {
      if (task._state !== State.Held) continue;
      if (match(task)) taken.push(task);
      else kept.push(task);
    }
    if (taken.length === 0) return taken;
    this.#heap = new TinyQueue(kept, this.#compare);
    this.#live = kept.length;
    return taken;
  }

  /** Empties the queue, returning the live tasks. */
  clear(): T[] {
    const live = this.#heap.data.filter((task) => task._state === State.Held);
    this.#heap.data.length = this.#heap.length = 0;
    this.#live = 0;
    return live;
  }
}
