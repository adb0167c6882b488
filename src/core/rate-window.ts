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
 *
 * A window may also count without enforcing anything (a limit that was
 * removed, or a queue without one; `limit` 0 keeps no ring at all): starts
 * that fall out of the ring are summed up as `evicted`, with the time of the
 * newest of them. When the limit grows again (`resize`), starts the ring no
 * longer holds are taken to have been made at that time, as late as they can
 * have been: a new limit is never exceeded by starts made before it, and at
 * worst holds a start back for up to one interval longer than needed.
 */
export class RateWindow {
  #limit: number;
  #interval: number;
  /** Start times, a ring once it holds `limit` of them; oldest at `#head`. */
  #starts: number[] = [];
  #head = 0;
  /** Starts recorded that the ring no longer holds (all older than those it holds). */
  #evicted: number;
  /** The newest of those (-Infinity with none). */
  #evictedAt: number;

  constructor(limit: number, interval: number, evicted = 0, evictedAt = -Infinity) {
    this.#limit = limit;
    this.#interval = interval;
    this.#evicted = evicted;
    this.#evictedAt = evictedAt;
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
    this.#evicted++;
    if (this.#limit === 0) {
      this.#evictedAt = now;
      return;
    }
    this.#evictedAt = starts[this.#head]!;
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
    if (starts.length === 0) return this.#evictedAt + this.#interval;
    const newest = starts.length < this.#limit || this.#head === 0 ? starts[starts.length - 1]! : starts[this.#head - 1]!;
    return newest + this.#interval;
  }

  /**
   * A new limit and interval at `now`. Keeps the most recent starts (as many
   * as the new limit counts); a larger limit than the ring holds gets the
   * starts it no longer holds back as starts at the newest of their times,
   * when that is still within the new window (see the class comment).
   */
  resize(limit: number, interval: number, now: number): void {
    this.#interval = interval;
    if (limit === this.#limit) return;
    const starts = this.#starts;
    let ordered = starts.length < this.#limit ? starts : [...starts.slice(this.#head), ...starts.slice(0, this.#head)];
    if (ordered.length > limit) {
      const cut = ordered.length - limit;
      this.#evicted += cut;
      this.#evictedAt = ordered[cut - 1]!;
      ordered = ordered.slice(cut);
    } else if (this.#evicted > 0 && this.#evictedAt + interval > now) {
      const back = Math.min(this.#evicted, limit - ordered.length);
      this.#evicted -= back;
      ordered = [...new Array<number>(back).fill(this.#evictedAt), ...ordered];
    }
    this.#starts = ordered;
    this.#head = 0;
    this.#limit = limit;
  }
}
