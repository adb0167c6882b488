// The timer heap (`TaskQueue`): waiting tasks by due time, then scheduling
// order; cancelled tasks leave it at once.
import TinyQueue from 'tinyqueue';
import { State, type Task } from './task.js';

/** Earliest due time first; equal times in scheduling order. */
function byDueTime(a: Task, b: Task): number {
  return a._time - b._time || a.id - b.id;
}

// Below this many dead entries a rebuild is not worth its cost.
const MIN_COMPACT = 1024;

/**
 * The waiting tasks, a binary min-heap on due time.
 *
 * tinyqueue cannot remove from the middle, so a cancelled task stays in the
 * heap as a tombstone (its state is no longer waiting) and is dropped when it
 * reaches the top. Once tombstones outnumber live tasks the heap is rebuilt
 * without them in O(n): cancel stays O(1) amortised and a heap full of
 * cancelled tasks never holds more than twice the live ones.
 */
export class TaskQueue {
  #heap = new TinyQueue<Task>([], byDueTime);
  #dead = 0;

  /** Live (waiting) tasks. */
  get size(): number {
    return this.#heap.length - this.#dead;
  }

  push(task: Task): void {
    this.#heap.push(task);
  }

  /** The earliest live task, without removing it. */
  peek(): Task | undefined {
    const heap = this.#heap;
    let top = heap.peek();
    while (top !== undefined && top._state !== State.Waiting) {
      heap.pop();
      this.#dead--;
      top = heap.peek();
    }
    return top;
  }

  /** Removes the task `peek()` returned. */
  pop(): void {
    this.#heap.pop();
  }

  /**
   * Makes waiting `task` due earlier, at `time` (a message for a task that
   * waits for one): O(n) to find it, then up the heap. False if it is not here.
   */
  moveEarlier(task: Task, time: number): boolean {
    const data = this.#heap.data;
    let i = data.indexOf(task);
    if (i < 0 || i >= this.#heap.length || time >= task._time) return false;
    task._time = time;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (byDueTime(task, data[parent]!) >= 0) break;
      data[i] = data[parent]!;
      i = parent;
    }
    data[i] = task;
    return true;
  }

  /** Call after a queued task stopped waiting (was cancelled). */
  discard(): void {
    this.#dead++;
    if (this.#dead > MIN_COMPACT && this.#dead > this.#heap.length - this.#dead) this.#compact();
  }

  /** Number of live tasks due at or before `now`; visits only those (and their children). */
  countDue(now: number): number {
    const data = this.#heap.data;
    const length = this.#heap.length;
    let count = 0;
    const stack = length > 0 ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      const task = data[i]!;
      // Tombstones keep their old due time, so the heap order still holds below them.
      if (task._time > now) continue;
      if (task._state === State.Waiting) count++;
      if (2 * i + 1 < length) stack.push(2 * i + 1);
      if (2 * i + 2 < length) stack.push(2 * i + 2);
    }
    return count;
  }

  /** Empties the queue, returning the live tasks in no particular order. */
  clear(): Task[] {
    const live = this.#heap.data.filter((task) => task._state === State.Waiting);
    this.#heap = new TinyQueue<Task>([], byDueTime);
    this.#dead = 0;
    return live;
  }

  /** Calls `fn` for each live task, in no particular order. */
  forEach(fn: (task: Task) => void): void {
    for (const task of this.#heap.data) if (task._state === State.Waiting) fn(task);
  }

  /**
   * The `limit` earliest live tasks, earliest first, in O(limit log limit):
   * a walk down the heap that always expands the smallest entry seen so far.
   */
  earliest(limit: number): Task[] {
    const data = this.#heap.data;
    const length = this.#heap.length;
    const out: Task[] = [];
    if (length === 0 || limit <= 0) return out;
    const frontier = new TinyQueue<number>([0], (a, b) => byDueTime(data[a]!, data[b]!));
    while (frontier.length > 0 && out.length < limit) {
      const i = frontier.pop()!;
      if (data[i]!._state === State.Waiting) out.push(data[i]!);
      if (2 * i + 1 < length) frontier.push(2 * i + 1);
      if (2 * i + 2 < length) frontier.push(2 * i + 2);
    }
    return out;
  }

  /** Live tasks, earliest first (a copy; for introspection, not the hot path). */
  toSortedArray(): Task[] {
    return this.#heap.data.filter((task) => task._state === State.Waiting).sort(byDueTime);
  }

  /**
   * Moves the waiting tasks `select` picks by `delta` ms and restores the heap
   * order: O(n), for the rare wall-clock jump.
   */
  shift(delta: number, select: (task: Task) => boolean): void {
    const live = this.clear();
    for (const task of live) if (select(task)) task._time += delta;
    this.#heap = new TinyQueue(live, byDueTime);
  }

  #compact(): void {
    this.#heap = new TinyQueue(this.clear(), byDueTime);
  }
}
