// Dedupe keys of in-memory tasks (`DedupeKeys`): the last task each key
// accepted, and what a new add with the key does under its `dedupe` mode
// (the decision shared with the stores: dedupe-decision.ts).
import TinyQueue from 'tinyqueue';
import { decideKeyedAdd, dueAt } from './dedupe-decision.js';
import { CancelledError } from './errors.js';
import type { Dedupe, DedupeOutcome } from './limit-options.js';
import { MAX_TIME, describe } from './validate.js';
import { Run, State, type Task } from './task.js';

/** The last task a key accepted. */
interface Entry {
  task: Task;
  /** When it was accepted (elapsed time). */
  at: number;
  /** Kept after the task's final state until then (a throttle's period); -Infinity: dropped at once. */
  until: number;
}

/** The task that follows a run (`'rerun'`): it may not start before that run's final state. */
interface Follower {
  task: Task;
  /** Whether it came due before the run ended, and waits here (`hold`) for `settled()` of the run. */
  held: boolean;
}

/** Whether a task has not reached a final state. */
function unfinished(task: Task): boolean {
  const state = task._state;
  return state === State.Waiting || state === State.Held || state === State.Running;
}

/**
 * The dedupe keys of in-memory tasks (the `key` and `dedupe` options): the
 * last task each key accepted, while it is unfinished, and after that while
 * the throttle period of the call that added it runs. So keys used once
 * leave nothing behind once their task is done (and its period over).
 * @internal
 */
export class DedupeKeys {
  readonly #entries = new Map<string, Entry>();
  readonly #expiries = new TinyQueue<{ at: number; key: string }>([], (a, b) => a.at - b.at);
  // Who follows whom, by task rather than by key: the key may name a newer
  // task while the follower still waits (a throttle past its period adds one
  // beside it). A run has one follower at most (a follow moves the key on to
  // it); both records go when the run reaches its final state.
  readonly #followers = new Map<Task, Follower>();
  readonly #following = new Map<Task, Task>();

  /** The last task `key` accepted, while it has not ended: a message by key goes to it. */
  unfinished(key: string): Task | undefined {
    const task = this.#entries.get(key)?.task;
    return task !== undefined && unfinished(task) ? task : undefined;
  }

  /**
   * A call with a dedupe key at elapsed time `now`, for a task due at `time`
   * (wall): returns the existing task, or the one `insert` adds (cancelling
   * the waiting one it replaces first), with `task.enqueued` set.
   */
  add(dedupe: Dedupe, time: number, now: number, insert: (time: number) => Task): Task {
    const entry = this.#entries.get(dedupe.key);
    const last = entry?.task;
    const state = last?._state;
    // Waiting: not started yet (a run waiting for its retry has started).
    const started = state === State.Running || last?._run instanceof Run;
    const mode = dedupe.mode;
    const action = decideKeyedAdd(
      mode,
      dedupe.period,
      entry && { state: !unfinished(last!) ? 'finished' : started ? 'started' : 'waiting', createdAt: entry.at },
      now,
      false,
    );
    if (action === 'existing') {
      last!.enqueued = 'existing';
      return last!;
    }
    const at = dueAt(mode, dedupe.period, time);
    if (at > MAX_TIME)
      throw new RangeError(`Expected the debounced time to be within the Date range (${MAX_TIME} epoch ms), got ${describe(at)}`);
    // A follower replaced while it waits: the new task follows the same run (read before the cancel, which lets go of it).
    const after = action === 'follow' ? last : action === 'replace' ? this.#following.get(last!) : undefined;
    let outcome: DedupeOutcome = 'inserted';
    if (action === 'replace') {
      last!.cancel(new CancelledError(`Replaced by a newer task with the key ${JSON.stringify(dedupe.key)}`));
      outcome = 'replaced';
    }
    const task = insert(at);
    task.enqueued = outcome;
    this.#entries.set(dedupe.key, { task, at: now, until: mode === 'throttle' ? now + dedupe.period : -Infinity });
    if (after !== undefined) {
      this.#following.delete(last!);
      this.#following.set(task, after);
      this.#followers.set(after, { task, held: false });
    }
    return task;
  }

  /**
   * A due task (state `Held`): true if it follows a run that has not ended,
   * and so waits here until `settled()` of that run returns it.
   */
  hold(task: Task): boolean {
    const after = this.#following.get(task);
    if (after === undefined) return false;
    this.#followers.get(after)!.held = true;
    return true;
  }

  /** A held task was cancelled: true if it was waiting here (it is no longer). */
  unhold(task: Task): boolean {
    const after = this.#following.get(task);
    if (after === undefined || !this.#followers.get(after)!.held) return false;
    this.#following.delete(task);
    this.#followers.delete(after);
    return true;
  }

  /**
   * A task with a dedupe key reached its final state: its key goes, or waits
   * for its period. Returns the task that followed it and waited here, now
   * free to go on.
   */
  settled(task: Task, key: string, now: number): Task | undefined {
    const entry = this.#entries.get(key);
    if (entry?.task === task) {
      if (entry.until > now) this.#expiries.push({ at: entry.until, key });
      else this.#entries.delete(key);
    }
    const follower = this.#followers.get(task);
    if (follower === undefined) return undefined;
    this.#followers.delete(task);
    this.#following.delete(follower.task);
    return follower.held ? follower.task : undefined;
  }

  /** Every task waiting here for the run it follows. */
  forEachHeld(fn: (task: Task) => void): void {
    for (const follower of this.#followers.values()) if (follower.held) fn(follower.task);
  }

  /** Drops keys whose task is finished and whose period is over. */
  sweep(now: number): void {
    const expiries = this.#expiries;
    for (let top = expiries.peek(); top !== undefined && top.at <= now; top = expiries.peek()) {
      expiries.pop();
      const entry = this.#entries.get(top.key);
      if (entry === undefined || entry.until > now) continue;
      if (!unfinished(entry.task)) this.#entries.delete(top.key);
    }
  }

  /** Keys held (for tests of their bound). */
  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
    this.#followers.clear();
    this.#following.clear();
    this.#expiries.data.length = this.#expiries.length = 0;
  }
}
