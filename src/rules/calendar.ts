/**
 * Calendar recurrences: every N days, or every N weeks on chosen weekdays,
 * at one wall time in a zone. The backbone of `every(3).days().at('10:30')`,
 * `every(2).weeks()`, `every().monday()`, `weekday()` and `weekend()`.
 */
import type { Rule } from './rule.js';
import { assertInstant } from './rule.js';
import type { WallTimePattern } from './wall-time.js';
import { DAY, HOUR, MINUTE, SECOND, TimeZone, nextFixedTime } from './wall-time.js';

/** What a `CalendarRule` is made of. */
export interface CalendarRuleOptions {
  /** IANA zone whose wall clock the rule follows. */
  zone: string;
  /** Epoch ms; its local date in `zone` is period 0. No occurrence falls on an earlier date. */
  anchor: number;
  /** Count periods in calendar days or in ISO weeks. */
  unit: 'day' | 'week';
  /** Integer >= 1: every N days, or every N weeks. */
  every: number;
  /**
   * luxon numbering, 1 = Monday … 7 = Sunday. With unit 'week' (default: the
   * anchor's weekday), or with unit 'day' and every 1 meaning "these days of
   * every week" (weekday(), weekend()).
   */
  weekdays?: readonly number[];
  /** Wall-clock hour, 0-23. */
  hour: number;
  /** Wall-clock minute, 0-59. */
  minute: number;
  /** Wall-clock second, 0-59. */
  second: number;
}

/**
 * Every N days or every N weeks (on some weekdays) at a fixed wall time.
 *
 * Days count calendar days from the anchor's local date: a date qualifies
 * when its distance from it is a multiple of N. Weeks are ISO weeks (Monday
 * first) counted from the anchor's week: a date qualifies when its week is a
 * multiple of N weeks after the anchor's and its weekday is listed. Dates
 * before the anchor's local date never qualify; the anchor's date itself does
 * if its wall time is still ahead.
 *
 * Always a fixed-time rule: a wall time inside a spring-forward gap runs at
 * the end of the gap, one inside a fall-back overlap runs once, at its first
 * occurrence. It is calendar arithmetic, never "+ 24 h".
 *
 * @example
 * // Every other week on Monday and Thursday at 08:30 Paris time, starting this week.
 * const rule = new CalendarRule({ zone: 'Europe/Paris', anchor: Date.now(), unit: 'week', every: 2,
 *   weekdays: [1, 4], hour: 8, minute: 30, second: 0 });
 * rule.next(Date.now());
 * @throws RangeError (TypeError for a non-object) naming the bad option.
 */
export class CalendarRule implements Rule, WallTimePattern {
  /** The IANA zone whose wall clock the rule follows. */
  readonly zone: string;
  /** Epoch ms whose local date is period 0. */
  readonly anchor: number;
  /** Periods are calendar days or ISO weeks. */
  readonly unit: 'day' | 'week';
  /** N: every N days or weeks. */
  readonly every: number;
  /** Sorted, without duplicates; undefined for plain "every N days". */
  readonly weekdays: readonly number[] | undefined;
  /** Wall-clock hour. */
  readonly hour: number;
  /** Wall-clock minute. */
  readonly minute: number;
  /** Wall-clock second. */
  readonly second: number;
  /** Always true: one wall time per qualifying day. */
  readonly fixedTime = true;

  readonly #tz: TimeZone;
  /** The anchor's local date as days since 1970-01-01. */
  readonly #anchorDay: number;
  /** Bit w-1 set for each allowed luxon weekday w; 0 for plain "every N days". */
  readonly #weekdayMask: number;
  /** Milliseconds from local midnight. */
  readonly #timeOfDay: number;

  constructor(options: CalendarRuleOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`CalendarRule options must be an object, got ${options === null ? 'null' : typeof options}`);
    }
    const { zone, anchor, unit, every, weekdays, hour, minute, second } = options;
    if (typeof anchor !== 'number' || !Number.isFinite(anchor)) {
      throw new RangeError(`Invalid anchor ${String(anchor)}: expected finite epoch milliseconds`);
    }
    if (unit !== 'day' && unit !== 'week') throw new RangeError(`Invalid unit ${JSON.stringify(unit)}: expected "day" or "week"`);
    checkInteger('every', every, 1, Number.MAX_SAFE_INTEGER);
    // No step beyond the Date range (2e8 days): it could never fire twice, and
    // day arithmetic on larger ones loses precision and never ends.
    const maxEvery = unit === 'day' ? MAX_DAYS : Math.floor(MAX_DAYS / 7);
    if (every > maxEvery) throw new RangeError(`Invalid every ${every}: at most ${maxEvery} ${unit}s (the Date range)`);
    checkInteger('hour', hour, 0, 23);
    checkInteger('minute', minute, 0, 59);
    checkInteger('second', second, 0, 59);
    this.#tz = TimeZone.of(zone);
    this.zone = this.#tz.name;
    this.anchor = anchor;
    this.unit = unit;
    this.every = every;
    this.hour = hour;
    this.minute = minute;
    this.second = second;
    this.#anchorDay = Math.floor(this.#tz.wallTime(anchor) / DAY);
    this.#timeOfDay = hour * HOUR + minute * MINUTE + second * SECOND;

    if (weekdays !== undefined) {
      if (unit === 'day' && every !== 1) {
        throw new RangeError(`weekdays need unit "week" (or unit "day" with every 1), got unit "day" with every ${every}`);
      }
      if (!Array.isArray(weekdays) || weekdays.length === 0) {
        throw new RangeError(`Invalid weekdays ${JSON.stringify(weekdays)}: expected a non-empty array of 1 (Monday) to 7 (Sunday)`);
      }
      let mask = 0;
      for (const w of weekdays) {
        checkInteger('weekday', w, 1, 7, ' (1 = Monday … 7 = Sunday)');
        mask |= 1 << (w - 1);
      }
      this.#weekdayMask = mask;
    } else {
      // A weekly rule with no weekdays repeats on the anchor's weekday.
      this.#weekdayMask = unit === 'week' ? 1 << (isoWeekday(this.#anchorDay) - 1) : 0;
    }
    this.weekdays = this.#weekdayMask === 0 ? undefined : [1, 2, 3, 4, 5, 6, 7].filter((w) => (this.#weekdayMask >> (w - 1)) & 1);
  }

  /**
   * The first occurrence strictly after `after` (epoch ms).
   * @example
   * const daily = new CalendarRule({ zone: 'America/New_York', anchor: Date.UTC(2026, 2, 1), unit: 'day', every: 1,
   *   hour: 2, minute: 30, second: 0 });
   * daily.next(Date.UTC(2026, 2, 8)); // Date.UTC(2026, 2, 8, 7): 03:00 EDT, as 02:30 is skipped that day
   */
  next(after: number): number | undefined {
    assertInstant(after);
    return nextFixedTime(this.#tz, this, after);
  }

  /** The first qualifying wall time strictly after `wall` (ms since 1970 read as UTC), ignoring zones. */
  nextWallTime(wall: number): number | undefined {
    const today = Math.floor(wall / DAY);
    const day = this.#nextDay(wall - today * DAY < this.#timeOfDay ? today : today + 1);
    return day * DAY + this.#timeOfDay;
  }

  /** The first qualifying day number >= `day`. */
  #nextDay(day: number): number {
    const anchor = this.#anchorDay;
    const every = this.every;
    if (day < anchor) day = anchor;
    if (this.#weekdayMask === 0) return day + ((every - ((day - anchor) % every)) % every);

    const anchorWeek = isoWeek(anchor);
    for (;;) {
      const week = isoWeek(day);
      const behind = (week - anchorWeek) % every;
      if (behind !== 0) {
        day = monday(week + every - behind);
        continue;
      }
      const rest = this.#weekdayMask >> (isoWeekday(day) - 1); // allowed days from `day` to Sunday
      if (rest !== 0) return day + 31 - Math.clz32(rest & -rest);
      day = monday(week + 1);
    }
  }
}

/** Days in the whole Date range, ±8.64e15 ms. */
const MAX_DAYS = 200_000_000;

/** ISO week number counted from the week of Monday 1969-12-29 (day -3). */
function isoWeek(day: number): number {
  return Math.floor((day + 3) / 7);
}

function monday(week: number): number {
  return week * 7 - 3;
}

/** 1 = Monday … 7 = Sunday. */
function isoWeekday(day: number): number {
  return day - monday(isoWeek(day)) + 1;
}

function checkInteger(name: string, value: number, min: number, max: number, note = ''): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}-${max}`;
    throw new RangeError(`Invalid ${name} ${String(value)}: expected an integer ${range}${note}`);
  }
}
