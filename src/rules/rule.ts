/**
 * A recurrence: answers "when is the next occurrence after this instant?".
 *
 * Rules are pure calendar math: no timers, no clock. Instants are epoch
 * milliseconds. Iterating `t = rule.next(t)` yields strictly increasing
 * instants until the rule is exhausted.
 *
 * @example
 * // The next three occurrences.
 * const runs: Date[] = [];
 * for (let t = rule.next(Date.now()); t !== undefined && runs.length < 3; t = rule.next(t)) runs.push(new Date(t));
 */
export interface Rule {
  /** The first occurrence strictly after `after` (epoch ms), or undefined if the rule never fires again. */
  next(after: number): number | undefined;
}

/** The largest epoch-ms value a `Date` can hold; rules never return anything later. */
export const MAX_INSTANT = 8.64e15;

/**
 * Throws a RangeError unless `after` is a finite number (epoch ms).
 * Shared by every rule so `next(NaN)` fails loudly instead of returning NaN.
 */
export function assertInstant(after: number): void {
  if (typeof after !== 'number' || !Number.isFinite(after)) {
    throw new RangeError(`Invalid instant ${String(after)}: expected finite epoch milliseconds`);
  }
}

/**
 * Fixed-rate recurrence: fires at `start + k * interval` for every integer
 * `k >= 0`. Runs never drift, however long each one takes, because every
 * occurrence is computed from `start`, not from the previous run.
 *
 * @example
 * const rule = new IntervalRule(Date.UTC(2026, 0, 1), 15 * 60_000); // every 15 min from 2026-01-01
 * rule.next(Date.UTC(2026, 0, 1, 0, 7)); // Date.UTC(2026, 0, 1, 0, 15)
 */
export class IntervalRule implements Rule {
  /** The first occurrence (epoch ms). */
  readonly start: number;
  /** Milliseconds between occurrences, a positive integer. */
  readonly interval: number;

  /**
   * @param start epoch ms of the first occurrence; any finite number.
   * @param interval milliseconds between occurrences; a positive integer.
   * @throws RangeError naming the bad value.
   */
  constructor(start: number, interval: number) {
    if (typeof start !== 'number' || !Number.isFinite(start)) {
      throw new RangeError(`Invalid interval start ${String(start)}: expected finite epoch milliseconds`);
    }
    if (typeof interval !== 'number' || !Number.isInteger(interval) || interval <= 0) {
      throw new RangeError(`Invalid interval ${String(interval)}: expected a positive integer number of milliseconds`);
    }
    this.start = start;
    this.interval = interval;
  }

  /** The first `start + k * interval` (k >= 0) strictly after `after`. */
  next(after: number): number | undefined {
    assertInstant(after);
    if (after < this.start) return this.start;
    let t = this.start + (Math.floor((after - this.start) / this.interval) + 1) * this.interval;
    // Floating-point division can land one step short for huge values.
    if (t <= after) t += this.interval;
    return t <= MAX_INSTANT ? t : undefined;
  }
}
