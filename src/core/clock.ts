/**
 * A source of time and timers. The scheduler reads the time and arms its one
 * timer only through this interface, so tests can drive it with a
 * `ManualClock` (from `taskheap/testing`) instead of real time.
 */
export interface Clock {
  /** The current wall-clock time in epoch milliseconds. */
  now(): number;
  /**
   * Elapsed time in milliseconds from an arbitrary origin, never set back:
   * interval jobs and the loop's time budget follow it, so a wall clock that
   * is set back or forward neither silences nor bunches them. Optional: a
   * clock without it has no separate elapsed reading, and `now()` serves for both.
   * @default performance.now() for the system clock
   */
  monotonic?(): number;
  /**
   * Calls `callback` once after `delay` milliseconds of elapsed time.
   * `unref: true` asks that the timer not keep the process alive.
   */
  setTimer(callback: () => void, delay: number, unref?: boolean): unknown;
  /** Cancels a timer returned by `setTimer`; unknown or spent handles are ignored. */
  clearTimer(handle: unknown): void;
}

/** The default clock: `Date.now()` and Node's `setTimeout`. */
export const systemClock: Clock = {
  // Looked up on each call, so fake timers installed later (vi.useFakeTimers) are honoured.
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer(callback, delay, unref) {
    const timer = setTimeout(callback, delay);
    if (unref) timer.unref();
    return timer;
  },
  clearTimer(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** Throws a TypeError unless `value` has the three methods of a `Clock`. */
export function assertClock(value: unknown): asserts value is Clock {
  const clock = value as Partial<Clock> | null;
  if (
    typeof clock !== 'object' ||
    clock === null ||
    typeof clock.now !== 'function' ||
    typeof clock.setTimer !== 'function' ||
    typeof clock.clearTimer !== 'function' ||
    (clock.monotonic !== undefined && typeof clock.monotonic !== 'function')
  ) {
    throw new TypeError('Expected `clock` to be an object with now(), setTimer() and clearTimer() methods (and optionally monotonic())');
  }
}
