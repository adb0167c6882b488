/**
 * An exact sliding-window limiter: at most `limit` starts in any window of
 * `interval` ms. It keeps the last `limit` start times in a ring; there is
 * room at `now` when fewer than `limit` starts were ever recorded, or the
 * oldest of the last `limit` is at least `interval` old. A start at t counts
 * against the half-open window (t, t + interval): `{ limit: 1, interval:
 * 1000 }` allows starts at 0, 1000, 2000. No counter to reset at a window's
 * edge, so no burst of 2 × limit across one.
 *
 * Times are elapsed time (the clock's monotonic reading), so a wall clock
 * set back or forward neither frees nor freezes a bucket. The ring grows
 * with use up to `limit` entries, so a bucket allowing a million starts a
 * day costs nothing until it is used.
 */
export class RateWindow {
  #limit: number;
  #interval: number;
  /** Start times, a ring once it holds `limit` of them; oldest at `#head`. */
  #starts: number[] = [];
  #head = 0;

  constructor(limit: number, interval: number) {
    this.#limit = limit;
    this.#interval = interval;
  }

  get limit(): number {
    return this.#limit;
  }

  get interval(): number {
    return this.#interval;
  }

  /** Whether a start at `now` stays within the limit. */
  hasRoom(now: number): boolean {
    return this.#starts.length < this.#limit || this.#starts[this.#head]! + this.#interval <= now;
  }

  /** The earliest time a start fits (meaningful when `hasRoom` is false). */
  freeAt(): number {
    return this.#starts.length < this.#limit ? -Infinity : this.#starts[this.#head]! + this.#interval;
  }

  /** Counts a start at `now`. */
  record(now: number): void {
    const starts = this.#starts;
    if (starts.length < this.#limit) {
      starts.push(now);
      return;
    }
    starts[this.#head] = now;
    this.#head = this.#head + 1 === this.#limit ? 0 : this.#head + 1;
  }

  /** No start within the window any more: the bucket's state can be dropped. */
  expired(now: number): boolean {
    return this.expiresAt() <= now;
  }

  /** When the newest start stops counting (-Infinity with no start). */
  expiresAt(): number {
    const starts = this.#starts;
    if (starts.length === 0) return -Infinity;
    const newest = starts.length < this.#limit || this.#head === 0 ? starts[starts.length - 1]! : starts[this.#head - 1]!;
    return newest + this.#interval;
  }

  /** A new limit and interval, keeping the most recent starts (as many as the new limit counts). */
  resize(limit: number, interval: number): void {
    this.#interval = interval;
    if (limit === this.#limit) return;
    const starts = this.#starts;
    const ordered = starts.length < this.#limit ? starts : [...starts.slice(this.#head), ...starts.slice(0, this.#head)];
    this.#starts = ordered.length > limit ? ordered.slice(ordered.length - limit) : ordered;
    this.#head = 0;
    this.#limit = limit;
  }
}
