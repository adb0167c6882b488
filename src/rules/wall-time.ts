/**
 * Time zones and local wall time.
 *
 * A *wall time* is what a clock on the wall shows, encoded as milliseconds
 * since 1970-01-01T00:00 *as if it were UTC*: `Date.UTC(2026, 2, 8, 2, 30)` is
 * "2026-03-08 02:30" in whatever zone we are talking about. Rules do their
 * calendar math on wall times with plain integers, and only convert to real
 * instants at the end, through a {@link TimeZone}.
 *
 * Converting needs the zone's UTC offset, which Intl only gives one instant at
 * a time, slowly (a formatted string per call: about 1.5 µs; luxon's
 * `IANAZone.offset` reads the same ICU data through formatToParts, about
 * 6 µs). So a TimeZone
 * probes the offset once a day, bisects to the exact second wherever it
 * changes, and keeps the resulting transition list per 32-day block. After
 * that, offsets, transitions and wall-time resolution are array lookups.
 */
import { MAX_INSTANT } from './rule.js';

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** Offsets are probed this often. tzdb's closest pair of transitions since 1900 is 7 days apart. */
const PROBE = DAY;
const BLOCK = 32 * DAY;
/** Cap on cached blocks per zone (about 90 years); the cache is simply dropped when full. */
const MAX_BLOCKS = 1024;
/**
 * No UTC offset has ever exceeded ±16 h (±15:56 LMT in 1845 Manila at the
 * extreme), so every instant showing a given wall time lies within this much of it.
 */
const MAX_OFFSET = 18 * HOUR;

/** "GMT", "GMT+05:30", "GMT-04:56:02" (LMT has seconds); ICU may print U+2212 for minus. */
const LONG_OFFSET = /GMT(?:([+\-\u2212])(\d\d):(\d\d)(?::(\d\d))?)?$/;

const validated = new Map<string, string>();
let knownNames: Map<string, string> | undefined;

/**
 * Checks an IANA time zone name and returns the name to use for it.
 *
 * Case is normalised to the spelling Intl knows (`europe/paris` ->
 * `Europe/Paris`, `utc` -> `UTC`). A valid link name that Intl would rename,
 * such as `Asia/Kolkata` (Node 20's ICU reports the legacy `Asia/Calcutta`)
 * or `US/Eastern`, is returned as given: it names the same rules.
 *
 * @throws RangeError `Invalid time zone "Mars/Olympus"`; TypeError if not a string.
 * @example
 * validateZone('europe/paris'); // 'Europe/Paris'
 * validateZone('Mars/Olympus'); // throws RangeError
 */
export function validateZone(zone: string): string {
  if (typeof zone !== 'string') {
    throw new TypeError(`Invalid time zone ${String(zone)}: expected an IANA name such as "Europe/Paris"`);
  }
  const cached = validated.get(zone);
  if (cached !== undefined) return cached;
  // Node 24's Intl takes offsets ('+05:00') as zones, Node 20 and 22 refuse
  // them: refused everywhere, so a schedule means the same on every Node.
  if (/^[+-]\d/.test(zone)) {
    throw new RangeError(
      `Invalid time zone "${zone}": expected an IANA name such as "Europe/Paris"; a fixed offset is an Etc zone ("Etc/GMT-5" is UTC+05:00)`,
    );
  }
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw new RangeError(`Invalid time zone "${zone}"`);
  }
  knownNames ??= new Map(Intl.supportedValuesOf('timeZone').map((name) => [name.toLowerCase(), name]));
  const lower = zone.toLowerCase();
  const name = knownNames.get(lower) ?? (lower === resolved.toLowerCase() ? resolved : zone);
  validated.set(zone, name);
  return name;
}

/**
 * The process's IANA time zone (`TZ` or the OS setting), `UTC` if unknown.
 * @example
 * systemZone(); // e.g. 'Europe/Paris'
 */
export function systemZone(): string {
  // Creating a DateTimeFormat costs milliseconds; every Scheduler asks once.
  return (cachedSystemZone ??= Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC');
}

let cachedSystemZone: string | undefined;

/** Offsets of one 32-day block: `offsets[i]` applies from `starts[i]`; `starts[0]` is the block start. */
interface Block {
  readonly starts: number[];
  readonly offsets: number[];
}

const zones = new Map<string, TimeZone>();

/**
 * An IANA zone with cached offsets and wall-time <-> instant conversion.
 *
 * Wall time -> instant is where DST bites: a wall time in a spring-forward
 * gap has no instant, one in a fall-back overlap has two. {@link instants}
 * lists them all; {@link resolve} picks the one a fixed-time rule wants.
 *
 * @example
 * const ny = TimeZone.of('America/New_York');
 * ny.instants(Date.UTC(2026, 10, 1, 1, 30)); // [05:30Z (EDT), 06:30Z (EST)]
 * ny.resolve(Date.UTC(2026, 2, 8, 2, 30));   // 07:00Z: 03:00 EDT, the end of the gap
 */
export class TimeZone {
  /** The validated zone name (see {@link validateZone}). */
  readonly name: string;
  /** Formats e.g. "3/8/2026, GMT-04:00"; only the offset is read. */
  readonly #format: Intl.DateTimeFormat;
  readonly #blocks = new Map<number, Block>();

  private constructor(name: string) {
    this.name = name;
    this.#format = new Intl.DateTimeFormat('en-US', { timeZone: name, timeZoneName: 'longOffset' });
  }

  /**
   * The shared instance for a zone name; validates it first.
   * @throws RangeError for an unknown zone.
   */
  static of(zone: string): TimeZone {
    const name = validateZone(zone);
    let tz = zones.get(name);
    if (tz === undefined) zones.set(name, (tz = new TimeZone(name)));
    return tz;
  }

  /** UTC offset in milliseconds at `instant` (e.g. -4 h = -14_400_000 for EDT). */
  offset(instant: number): number {
    const block = this.#block(Math.floor(instant / BLOCK));
    const { starts } = block;
    let i = starts.length - 1;
    while (starts[i]! > instant) i--;
    return block.offsets[i]!;
  }

  /** The wall time shown at `instant`. */
  wallTime(instant: number): number {
    return instant + this.offset(instant);
  }

  /** The first instant in `(after, until]` at which the offset changes, if any. */
  nextTransition(after: number, until: number): number | undefined {
    for (let b = Math.floor(after / BLOCK); b * BLOCK <= until; b++) {
      // starts[0] is a block boundary, not a transition; a transition that
      // lands exactly on a boundary is stored as the previous block's last entry.
      const { starts } = this.#block(b);
      for (let i = 1; i < starts.length; i++) {
        const t = starts[i]!;
        if (t > until) return undefined;
        if (t > after) return t;
      }
    }
    return undefined;
  }

  /**
   * Every instant at which the clock shows `wall`, ascending: none inside a
   * spring-forward gap, two inside a fall-back overlap, one otherwise.
   * @example
   * TimeZone.of('Europe/London').instants(Date.UTC(2026, 2, 29, 1, 30)); // [] (gap)
   */
  instants(wall: number): number[] {
    const found: number[] = [];
    this.#segments(wall, (start, end, offset) => {
      const t = wall - offset;
      if (t >= start && t < end) found.push(t);
      return false;
    });
    return found;
  }

  /**
   * The first instant at which the clock shows `wall` or later — the
   * "fixed-time" reading of a wall time: an overlapped wall time resolves to
   * its first (earlier) occurrence, and one inside a gap to the transition
   * instant itself, the first instant after the gap. (luxon instead shifts a
   * gap time forward by the gap length: 02:30 -> 03:30.)
   * @example
   * const ny = TimeZone.of('America/New_York');
   * ny.resolve(Date.UTC(2026, 2, 8, 2, 30)); // Date.UTC(2026, 2, 8, 7): 03:00 EDT
   * ny.resolve(Date.UTC(2026, 10, 1, 1, 30)); // Date.UTC(2026, 10, 1, 5, 30): 01:30 EDT
   */
  resolve(wall: number): number {
    let result = wall;
    this.#segments(wall, (start, end, offset) => {
      // Within one segment the clock shows t + offset, so it reaches `wall` at wall - offset.
      result = Math.max(start, wall - offset);
      return result < end;
    });
    return result;
  }

  /**
   * Calls `visit(start, end, offset)` for each constant-offset stretch of time
   * that could show `wall`, in order, until it returns true.
   */
  #segments(wall: number, visit: (start: number, end: number, offset: number) => boolean): void {
    const until = wall + MAX_OFFSET;
    let start = wall - MAX_OFFSET;
    let offset = this.offset(start);
    for (;;) {
      const change = this.nextTransition(start, until);
      if (visit(start, change ?? until + 1, offset) || change === undefined) return;
      start = change;
      offset = this.offset(change);
    }
  }

  #block(index: number): Block {
    let block = this.#blocks.get(index);
    if (block === undefined) {
      if (this.#blocks.size >= MAX_BLOCKS) this.#blocks.clear();
      block = this.#scan(index * BLOCK, (index + 1) * BLOCK);
      this.#blocks.set(index, block);
    }
    return block;
  }

  /** Finds the transitions in `(start, end]` by daily probes and bisection. */
  #scan(start: number, end: number): Block {
    const starts = [start];
    const offsets = [this.#probe(start)];
    let before = start;
    let offset = offsets[0]!;
    for (let at = start + PROBE; at <= end; at += PROBE) {
      const probed = this.#probe(at);
      while (probed !== offset) {
        const change = this.#bisect(before, at, offset);
        offset = this.#probe(change);
        starts.push(change);
        offsets.push(offset);
        before = change;
      }
      before = at;
    }
    return { starts, offsets };
  }

  /** The first whole second in `(low, high]` whose offset differs from `offset` (tzdb has 1 s resolution). */
  #bisect(low: number, high: number, offset: number): number {
    while (high - low > SECOND) {
      const mid = low + Math.floor((high - low) / (2 * SECOND)) * SECOND;
      if (this.#probe(mid) === offset) low = mid;
      else high = mid;
    }
    return high;
  }

  /** The offset straight from Intl (same ICU data luxon reads). */
  #probe(instant: number): number {
    const text = this.#format.format(Math.min(Math.max(instant, -MAX_INSTANT), MAX_INSTANT));
    const match = LONG_OFFSET.exec(text);
    if (match === null) throw new Error(`Cannot read the UTC offset of ${this.name} from "${text}"`);
    const [, sign, hours, minutes, seconds] = match;
    if (sign === undefined) return 0; // plain "GMT"
    const offset = Number(hours) * HOUR + Number(minutes) * MINUTE + Number(seconds ?? 0) * SECOND;
    return sign === '+' ? offset : -offset;
  }
}

/** A set of wall times, such as a cron pattern or "every 3 days at 10:30". */
export interface WallTimePattern {
  /** The first matching wall time strictly after `wall`, or undefined if there is none. */
  nextWallTime(wall: number): number | undefined;
}

/**
 * Next occurrence of a *fixed-time* pattern (one wall time per day at most):
 * each matching wall time happens exactly once, at {@link TimeZone.resolve}.
 * A time skipped by spring-forward runs when the gap ends; a time repeated by
 * fall-back runs at its first occurrence only.
 */
export function nextFixedTime(zone: TimeZone, pattern: WallTimePattern, after: number): number | undefined {
  // resolve() never decreases as the wall time grows, and resolve(wallTime(after)) <= after,
  // so the answer is the first matching wall time past `after`'s own that resolves past `after`.
  // That is the first or (after a fall-back repeat) the second one we look at.
  let wall = pattern.nextWallTime(zone.wallTime(after));
  while (wall !== undefined) {
    const t = zone.resolve(wall);
    if (t > after) return t <= MAX_INSTANT ? t : undefined;
    wall = pattern.nextWallTime(wall);
  }
  return undefined;
}

/**
 * Next occurrence of a pattern that follows real time: the first instant
 * after `after` at which the clock shows a matching wall time. Wall times in
 * a gap never show, so they are skipped; wall times in an overlap show twice,
 * so they occur twice.
 */
export function nextRealTime(zone: TimeZone, pattern: WallTimePattern, after: number): number | undefined {
  let from = Math.floor(after) + 1; // first candidate instant; whole ms, as wall times are
  for (;;) {
    if (from > MAX_INSTANT) return undefined;
    const offset = zone.offset(from);
    let wall = pattern.nextWallTime(from + offset - 1);
    if (wall === undefined) return undefined;
    // Offsets only ever fall back by hours, so without a transition in the
    // next two days the clock keeps moving forward from wallTime(from), and
    // the answer is the first instant of the first matching wall time that has one.
    const change = zone.nextTransition(from, from + 2 * DAY);
    if (change !== undefined) {
      // The clock shows `offset` until `change`: use the match if it comes before, else restart there.
      if (wall - offset < change) return wall - offset;
      from = change;
      continue;
    }
    for (;;) {
      const t = zone.instants(wall).find((instant) => instant >= from);
      if (t !== undefined) return t <= MAX_INSTANT ? t : undefined;
      wall = pattern.nextWallTime(wall); // `wall` fell in a gap
      if (wall === undefined) return undefined;
    }
  }
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

/** Days in `month` (1-12) of `year`. */
export function daysInMonth(year: number, month: number): number {
  return month === 2 && isLeapYear(year) ? 29 : MONTH_DAYS[month - 1]!;
}

/**
 * Days since 1970-01-01 of a proleptic Gregorian date (month 1-12).
 * Howard Hinnant's days_from_civil: exact for any year, no Date objects.
 */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * ((month + 9) % 12) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146097 + dayOfEra - 719468;
}

/** Inverse of {@link daysFromCivil}: the date `days` after 1970-01-01. */
export function civilFromDays(days: number): { year: number; month: number; day: number } {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const dayOfEra = z - era * 146097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36524) - Math.floor(dayOfEra / 146096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day: dayOfYear - Math.floor((153 * mp + 2) / 5) + 1 };
}

/** Day of week of a day number: 0 = Sunday … 6 = Saturday (1970-01-01 was a Thursday). */
export function dayOfWeek(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}
