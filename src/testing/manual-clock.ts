// `ManualClock`: a clock tests set and advance, stepping to each due time in
// order without waiting for real time (exported from `taskheap/testing`).
import TinyQueue from 'tinyqueue';
import type { Clock } from '../core/clock.js';
import { toDuration, type Duration } from '../core/duration.js';
import { toEpoch, type When } from '../core/validate.js';

interface Timer {
  /** due, on the elapsed-time axis */
  at: number;
  seq: number;
  callback: (() => void) | undefined;
}

// Captured at load, so tests that also install fake timers cannot stall advance().
const realSetImmediate = globalThis.setImmediate;

/** One macrotask turn: every pending microtask (promise reaction) runs first. */
function settle(): Promise<void> {
  return new Promise((resolve) => realSetImmediate(resolve));
}

/**
 * A clock that moves only when told to, for deterministic tests of code that
 * uses a Scheduler. Pass it as `new Scheduler({ clock })`.
 *
 * Like a real machine it keeps two times: the wall clock that `now()` reads,
 * and elapsed time, on which timers fire. `advance()` moves both; `set()`
 * moves only the wall clock, the way an NTP correction or a manual change
 * does, so a scheduler notices the jump at its next wake.
 *
 * @example
 * import { ManualClock } from 'taskheap/testing';
 * const clock = new ManualClock(new Date('2026-03-08T06:00:00Z'));
 * const scheduler = new Scheduler({ clock });
 * scheduler.after(1_000, () => console.log(new Date(clock.now())));
 * await clock.advance(1_000); // runs the task, with clock.now() at its due time
 */
export class ManualClock implements Clock {
  #now: number;
  #elapsed = 0;
  #seq = 0;
  #timers = new TinyQueue<Timer>([], (a, b) => a.at - b.at || a.seq - b.seq);

  /** @param start the initial wall-clock time. Default: the real time now. */
  constructor(start: When = Date.now()) {
    this.#now = toEpoch(start, 'start');
  }

  /** The current wall-clock time, epoch milliseconds. */
  now(): number {
    return this.#now;
  }

  /**
   * Elapsed time since the clock was made, ms: moved by `advance()`, never by
   * `set()`. Interval jobs follow it.
   */
  monotonic(): number {
    return this.#elapsed;
  }

  /** Part of `Clock`: calls `callback` once `advance()` has moved elapsed time by `delay` ms. */
  setTimer(callback: () => void, delay: number): unknown {
    const timer: Timer = { at: this.#elapsed + Math.max(0, delay), seq: this.#seq++, callback };
    this.#timers.push(timer);
    return timer;
  }

  /** Part of `Clock`: the timer never fires. */
  clearTimer(handle: unknown): void {
    if (handle !== null && typeof handle === 'object') (handle as Timer).callback = undefined;
  }

  /** Timers armed and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.#timers.data.filter((timer) => timer.callback !== undefined).length;
  }

  /**
   * Moves time forward by `ms` (milliseconds, or a string such as `'1h'`), stopping at each timer's due time in order:
   * the clock reads that due time while the timer's callback runs, and
   * promise reactions settle before the next step. Never waits for real time.
   * @example
   * await clock.advance(60 * 60_000); // one virtual hour, in a few ms
   * await clock.advance('1h');        // the same
   */
  async advance(ms: Duration): Promise<void> {
    const target = this.#elapsed + toDuration(ms, 'ms');
    await settle();
    for (;;) {
      const timer = this.#timers.peek();
      if (timer === undefined || timer.at > target) break;
      this.#timers.pop();
      const callback = timer.callback;
      if (callback === undefined) continue;
      timer.callback = undefined;
      // A timer overdue after stall() fires at once, without time going back.
      this.#moveTo(Math.max(timer.at, this.#elapsed));
      callback();
      await settle();
    }
    this.#moveTo(target);
    await settle();
  }

  /**
   * Advances to the wall-clock time `when` (see `advance`).
   * @example
   * await clock.advanceTo(new Date('2026-03-08T08:00:00Z'));
   */
  advanceTo(when: When): Promise<void> {
    return this.advance(Math.max(0, toEpoch(when) - this.#now));
  }

  /**
   * Jumps the wall clock to `when` without firing timers, as a clock change
   * on a real machine does. Timers keep their remaining delays and elapsed
   * time (`monotonic()`) does not move, so the two clocks now differ: tasks
   * for a wall time follow the jump, interval jobs do not.
   * @example
   * clock.set(clock.now() + 3_600_000); // an hour ahead; a scheduler notices within 30 s
   */
  set(when: When): void {
    this.#now = toEpoch(when);
  }

  /**
   * Moves both clocks forward by `ms` without firing timers, as a blocked
   * event loop or a busy machine does: timers due meanwhile fire late, at the
   * next `advance()`. For tests of misfires and lateness.
   * @example
   * clock.stall(10 * 60_000);  // the loop was stuck for 10 minutes
   * await clock.advance(0);     // overdue timers fire now
   */
  stall(ms: Duration): void {
    this.#moveTo(this.#elapsed + toDuration(ms, 'ms'));
  }

  #moveTo(elapsed: number): void {
    this.#now += elapsed - this.#elapsed;
    this.#elapsed = elapsed;
  }
}
