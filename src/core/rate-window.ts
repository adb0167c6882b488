/**
 * How many runs of starts (see `RateWindow.#count`) a window remembers the
 * spacing of: each change of limit or interval begins one, and so does a
 * change between starts made with room and without (no limit in force).
 * Starts older than these runs are only known to be no later than the
 * newer ones.
 */
const RUNS = 8;

/**
 * An exact sliding-window limiter: at most `limit` starts in any window of
 * `interval` ms. It keeps the last `limit` start times in a ring; there is
 * room at `now` when fewer than `limit` starts count, or the oldest of the
 * last `limit` is at least `interval` old. A start at t counts against the
 * half-open window (t, t + interval): `{ limit: 1, interval: 1000 }` allows
 * starts at 0, 1000, 2000. No counter to reset at a window's edge, so no
 * burst of 2 × limit across one.
 *
 * Times are elapsed time (the clock's monotonic reading), so a wall clock
 * set back or forward neither frees nor freezes a bucket. The ring grows
 * with use up to `limit` entries, so a bucket allowing a million starts a
 * day costs nothing until it is used.
 *
 * A window may also count without enforcing anything (a limit that was
 * removed, or a queue without one; `limit` 0 keeps no ring at all): starts
 * that fall out of the ring are summed up as `evicted`, with the time of the
 * newest of them. When a new limit counts more starts than the ring holds
 * (`resize`), it takes back the ones it no longer holds, each at the latest
 * time it can have had: no later than the starts after it, and `interval`
 * before the start `limit` after it if that one came with room (`limit`
 * and `interval` as they were then; the window notes it as it records, in
 * runs). So a new limit is never exceeded by starts made before it, and it
 * counts them at their exact times when each came as soon as an earlier
 * one left the window (tasks were waiting for room); others may be taken as
 * later than they were, holding a start back for at most one interval
 * longer than needed.
 */
export class RateWindow {
  #limit: number;
  #interval: number;
  /**
   * The newest starts, a ring once it holds `limit` of them; oldest at
   * `#head`. An entry is a start's time, or (taken back by `resize`) the
   * latest it can have had. It holds fewer than `limit` only when no start
   * it does not hold is within the window.
   */
  #starts: number[] = [];
  #head = 0;
  /** Starts recorded that the ring no longer holds (all older than those it holds). */
  #evicted: number;
  /** The latest time the newest of them can have had (-Infinity with none). */
  #evictedAt: number;
  /**
   * What is known of the spacing of the newest starts, in runs: each of the
   * `#count` newest starts came at least `#gap` ms after the start
   * `#spacing` before it (gap 0: nothing known). Older runs are in
   * `#older`, triples [count, spacing, gap], newest last, made on the first
   * change of pacing: a window whose limit never changes and is enforced
   * has one run and no array. Starts before the oldest run: nothing known.
   */
  #count = 0;
  #spacing = 0;
  #gap = 0;
  #older: number[] | undefined = undefined;

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
    const limit = this.#limit;
    // Whether the start `limit` before this one came at least `interval` before it (true with none):
    // what lets a later, larger limit place the starts the ring will have let go of.
    let paced: boolean;
    if (starts.length < limit) {
      // That start, if any, is one the ring does not hold: no later than #evictedAt.
      paced = this.#evicted === 0 || this.#evictedAt + this.#interval <= now;
      starts.push(now);
    } else {
      this.#evicted++;
      if (limit === 0) {
        paced = false;
        this.#evictedAt = now;
      } else {
        const oldest = starts[this.#head]!;
        paced = oldest + this.#interval <= now;
        this.#evictedAt = oldest;
        starts[this.#head] = now;
        this.#head = this.#head + 1 === limit ? 0 : this.#head + 1;
      }
    }
    const gap = paced ? this.#interval : 0;
    const spacing = paced ? limit : 0;
    if (gap === this.#gap && spacing === this.#spacing) {
      this.#count++;
      return;
    }
    if (this.#count > 0) {
      const older = (this.#older ??= []);
      if (older.length === (RUNS - 1) * 3) {
        // The oldest run is forgotten (no allocation: a change of pacing may come with every start).
        older.copyWithin(0, 3);
        older.length -= 3;
      }
      older.push(this.#count, this.#spacing, this.#gap);
    }
    this.#count = 1;
    this.#spacing = spacing;
    this.#gap = gap;
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
   * as the new limit counts); when the ring holds fewer than that, it takes
   * back those it no longer holds that may be within the new window, each at
   * the latest time it can have had (see the class comment).
   */
  resize(limit: number, interval: number, now: number): void {
    if (limit === this.#limit && interval === this.#interval) return;
    const starts = this.#starts;
    let ordered = this.#head === 0 ? starts : [...starts.slice(this.#head), ...starts.slice(0, this.#head)];
    this.#limit = limit;
    this.#interval = interval;
    this.#head = 0;
    if (ordered.length > limit) {
      const cut = ordered.length - limit;
      this.#evicted += cut;
      this.#evictedAt = ordered[cut - 1]!;
      ordered = ordered.slice(cut);
    } else if (ordered.length < limit && this.#evicted > 0) {
      // Also with the same limit: a longer interval may reach starts a shorter one had let go of.
      ordered = this.#takeBack(ordered, now);
    }
    this.#starts = ordered;
  }

  /**
   * The ring `ordered` (oldest first, fewer than `limit`) with the starts it
   * no longer holds put back in front, newest first, for as long as the limit
   * counts them and they may be within the window; the rest stay evicted.
   */
  #takeBack(ordered: number[], now: number): number[] {
    const held = ordered.length;
    const evicted = this.#evicted;
    const most = Math.min(evicted, this.#limit - held);
    // latest[i]: the latest time the (i + 1)-th newest start can have had; one more
    // slot when some stay evicted, for the newest of those (the new #evictedAt).
    const size = held + most + (evicted > most ? 1 : 0);
    const latest = new Array<number>(size).fill(Infinity);
    for (let i = 0; i < held; i++) latest[i] = ordered[held - 1 - i]!;
    latest[held] = this.#evictedAt;
    // The run of the start at i: the newest (0) first, then the older ones; past the oldest, nothing known.
    const older = this.#older ?? [];
    let run = 0;
    let left = this.#count;
    let spacing = this.#spacing;
    let gap = this.#gap;
    let back = 0;
    let next = -Infinity;
    for (let i = 0; i < size; i++) {
      // A start is no later than any start after it, and than what the runs bound it by (set below).
      let at = latest[i]!;
      if (i > 0 && latest[i - 1]! < at) at = latest[i - 1]!;
      latest[i] = at;
      if (i >= held) {
        // Out of the window (so are all older ones), or one past what the limit counts: stays evicted.
        if (i === held + most || at + this.#interval <= now) {
          next = at;
          break;
        }
        back++;
      }
      while (left === 0) {
        const k = older.length - 3 * ++run;
        if (k < 0) {
          left = Infinity;
          spacing = gap = 0;
        } else {
          left = older[k]!;
          spacing = older[k + 1]!;
          gap = older[k + 2]!;
        }
      }
      left--;
      // This start came at least `gap` after the one `spacing` before it: that one is no later than at - gap.
      const j = i + spacing;
      if (gap > 0 && j < size && at - gap < latest[j]!) latest[j] = at - gap;
    }
    this.#evicted = evicted - back;
    this.#evictedAt = this.#evicted > 0 ? next : -Infinity;
    latest.length = held + back;
    return latest.reverse();
  }
}
