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
  /** The started task `task` follows (`'rerun'`): it may not start before that one's final state. */
  after: Task | undefined;
  /** Whether `task` came due while `after` had not ended, and waits here (`hold`). */
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
    let outcome: DedupeOutcome = 'inserted';
    if (action === 'replace') {
      last!.cancel(new CancelledError(`Replaced by a newer task with the key ${JSON.stringify(dedupe.key)}`));
      outcome = 'replaced';
    }
    // A follower replaced while it waits: the new task follows the same run.
    const after = action === 'follow' ? last : action === 'replace' ? entry!.after : undefined;
    const task = insert(at);
    task.enqueued = outcome;
    this.#entries.set(dedupe.key, { task, at: now, until: mode === 'throttle' ? now + dedupe.period : -Infinity, after, held: false });
    return task;
  }

  /**
   * A due task of a key (state `Held`): true if it follows a run that has not
   * ended, and so waits here until `settled()` of that run returns it.
   */
  hold(task: Task, key: string): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.task !== task || entry.after === undefined) return false;
    if (!unfinished(entry.after)) {
      entry.after = undefined;
      return false;
    }
    entry.held = true;
    return true;
  }

  /** A held task was cancelled: true if it was waiting here (it is no longer). */
  unhold(task: Task, key: string): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.task !== task || !entry.held) return false;
    entry.held = false;
    return true;
  }

  /**
   * A task with a dedupe key reached its final state: its key goes, or waits
   * for its period. Returns the task that followed it and waited here, now
   * free to go on.
   */
  settled(task: Task, key: string, now: number): Task | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.after === task) {
      entry.after = undefined;
      if (!entry.held) return undefined;
      entry.held = false;
      return entry.task;
    }
    if (entry.task !== task) return undefined;
    if (entry.until > now) this.#expiries.push({ at: entry.until, key });
    else this.#entries.delete(key);
    return undefined;
  }

  /** Every task waiting here for the run it follows. */
  forEachHeld(fn: (task: Task) => void): void {
    for (const entry of this.#entries.values()) if (entry.held) fn(entry.task);
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
    this.#expiries.data.length = this.#expiries.length = 0;
  }
}
