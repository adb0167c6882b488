/**
 * Cron expressions: parsing and "next occurrence" in any IANA zone.
 *
 * Each field is precomputed into a small lookup table ("next allowed value
 * at or after v"), and the day fields into a 31-bit mask per kind of month
 * (length x weekday of the 1st: only 28 kinds exist). `nextWallTime` then
 * jumps field by field (month, day, hour, minute, second), carrying over like
 * an odometer, on plain integers. Time zones and DST are handled afterwards by
 * wall-time.ts.
 */
import type { Rule } from './rule.js';
import { assertInstant } from './rule.js';
import type { WallTimePattern } from './wall-time.js';
import { DAY, SECOND, TimeZone, civilFromDays, dayOfWeek, daysFromCivil, daysInMonth, nextFixedTime, nextRealTime } from './wall-time.js';

interface Field {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** Upper end of `*` and `a/n` (day-of-week accepts 7 for Sunday, but `*` means 0-6). */
  readonly top: number;
  /** Names for the values min, min+1, … */
  readonly names?: readonly string[];
}

const SECONDS: Field = { name: 'second', min: 0, max: 59, top: 59 };
const MINUTES: Field = { name: 'minute', min: 0, max: 59, top: 59 };
const HOURS: Field = { name: 'hour', min: 0, max: 23, top: 23 };
const DAYS_OF_MONTH: Field = { name: 'day-of-month', min: 1, max: 31, top: 31 };
const MONTHS: Field = {
  name: 'month',
  min: 1,
  max: 12,
  top: 12,
  names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
};
const DAYS_OF_WEEK: Field = {
  name: 'day-of-week',
  min: 0,
  max: 7,
  top: 6,
  names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'],
};

/**
 * Years: OCPS's portable range starts at 1970; 9999 bounds the search for
 * patterns that never match again. `*` leaves the year free (no table).
 */
const YEARS: Field = { name: 'year', min: 1970, max: 9999, top: 9999 };

const NICKNAMES = new Map([
  ['@yearly', '0 0 1 1 *'],
  ['@annually', '0 0 1 1 *'],
  ['@monthly', '0 0 1 * *'],
  ['@weekly', '0 0 * * 0'],
  ['@daily', '0 0 * * *'],
  ['@midnight', '0 0 * * *'],
  ['@hourly', '0 * * * *'],
]);

/**
 * The Gregorian calendar repeats every 400 years (146,097 days is a whole
 * number of weeks), so a day pattern that matches nothing in 400 years never
 * matches. Patterns that can never fire are caught at construction; this only
 * bounds the search for rare ones (`0 0 29 2 1#5`: Feb 29 on a fifth Monday,
 * 28-40 years apart).
 */
const SEARCH_YEARS = 400;

type Fail = (problem: string) => never;

/** The parsed day-of-month and day-of-week fields. Masks use bit d-1 for day d, bit w for weekday w (0 = Sunday). */
interface DaySpec {
  /** Unrestricted (`*` or `?`): Vixie cron ORs the two day fields only when both are restricted. */
  domStar: boolean;
  dowStar: boolean;
  dom: number;
  /** `L` (0) and `L-n` (n): days before the last day of the month. */
  fromLast: number[];
  /** `nW`: the weekday nearest to day n. */
  nearest: number[];
  /** `LW`: the last weekday (Mon-Fri) of the month. */
  lastWeekday: boolean;
  dow: number;
  /** `w#n` pairs: the nth weekday w of the month. */
  nth: Array<[weekday: number, n: number]>;
  /** `wL` / `w#L`: the last weekday w of the month, as a weekday mask. */
  lastOf: number;
  /** OCPS `+` before day-of-week: a day must match both fields, not either. */
  and: boolean;
}

/**
 * A cron expression in a time zone.
 *
 * Syntax (OCPS 1.4): 5 fields (minute hour day-of-month month day-of-week),
 * 6 with seconds first, or 7 with seconds first and a year last (1970-9999;
 * `*\/4` there means the years divisible by 4);
 * `*`, `a`, `a,b`, `a-b`, `*\/n`, `a-b/n`, `a/n`; JAN-DEC and SUN-SAT (any
 * case, also in ranges, `FRI-SUN` wraps to Sunday); 0 and 7 are both Sunday;
 * `?` = `*` in the day fields (only there); day-of-month `L`, `L-n`, `nW`,
 * `LW`; day-of-week `nL` or `n#L` (last weekday n of the month) and `n#k`
 * (kth weekday n); `@yearly` `@annually` `@monthly` `@weekly` `@daily`
 * `@midnight` `@hourly` (lowercase, as in Vixie cron). When both day fields
 * are restricted a day matches either (Vixie cron), or both when day-of-week
 * starts with `+` (`0 12 1 * +MON`: the 1st, if it is a Monday); when one is
 * `*` or `?` only the other counts. `nW` never matches in a month that has no day n.
 *
 * DST: a *fixed-time* expression (second, minute and hour each one value)
 * fires once per matching day: in a spring-forward gap at the end of the gap,
 * in a fall-back overlap at the first occurrence. Any other expression
 * follows real time: gap times are skipped, overlap times fire twice.
 *
 * @example
 * const rule = new CronRule('30 2 * * *', 'America/New_York');
 * new Date(rule.next(Date.UTC(2026, 2, 8))!).toISOString(); // '2026-03-08T07:00:00.000Z' (03:00 EDT: 02:30 does not exist)
 * new CronRule('*\/15 9-17 * * MON-FRI', 'Asia/Tokyo').fixedTime; // false
 * @throws TypeError if `expression` is not a string; RangeError for bad syntax (the message names the field) or an invalid zone.
 */
export class CronRule implements Rule, WallTimePattern {
  /** The expression as given. */
  readonly expression: string;
  /** The validated zone name. */
  readonly zone: string;
  /** True when second, minute and hour each allow a single value: see the DST rules above. */
  readonly fixedTime: boolean;

  readonly #tz: TimeZone;
  // "Next allowed value >= v" tables, -1 past the last one (one spare slot for the carry).
  readonly #second: Int8Array;
  readonly #minute: Int8Array;
  readonly #hour: Int8Array;
  readonly #month: Int8Array;
  /** Next allowed year >= y, indexed by y - 1970; undefined when any year will do. */
  readonly #year: Int16Array | undefined;
  /** Matching-day masks per kind of month: index (length - 28) * 7 + weekday of the 1st. */
  readonly #days = new Int32Array(28);
  readonly #canFire: boolean;

  constructor(expression: string, zone: string) {
    if (typeof expression !== 'string') {
      throw new TypeError(`Cron expression must be a string, got ${expression === null ? 'null' : typeof expression}`);
    }
    this.expression = expression;
    const fail: Fail = (problem) => {
      throw new RangeError(`Invalid cron expression "${expression}": ${problem}`);
    };

    let text = expression.trim();
    if (text.startsWith('@')) {
      const expanded = NICKNAMES.get(text);
      if (expanded === undefined) {
        const hint = text === '@reboot' ? ' (@reboot is not supported: run the task when your program starts)' : '';
        fail(`unknown nickname "${text}"${hint}: expected one of ${[...NICKNAMES.keys()].join(', ')} (lowercase)`);
      }
      text = expanded;
    }
    const parts = text === '' ? [] : text.split(/\s+/);
    if (parts.length < 5 || parts.length > 7)
      fail(`wrong number of fields (${parts.length}): expected 5, 6 (seconds first) or 7 (seconds first, year last)`);
    if (parts.length === 5) parts.unshift('0');
    const [second, minute, hour, dom, month, dow, year = '*'] = parts as [string, string, string, string, string, string, string?];

    const seconds = parseField(second, SECONDS, fail);
    const minutes = parseField(minute, MINUTES, fail);
    const hours = parseField(hour, HOURS, fail);
    const months = parseField(month, MONTHS, fail);
    const days = parseDays(dom, dow, fail);
    this.#year = year === '*' ? undefined : yearTable(parseField(year, YEARS, fail));

    this.#second = nextTable(seconds);
    this.#minute = nextTable(minutes);
    this.#hour = nextTable(hours);
    this.#month = nextTable(months);
    this.fixedTime = count(seconds) === 1 && count(minutes) === 1 && count(hours) === 1;

    let canFire = false;
    for (let length = 28; length <= 31; length++) {
      for (let first = 0; first < 7; first++) {
        const mask = dayMask(days, length, first);
        this.#days[(length - 28) * 7 + first] = mask;
        // Only month kinds that exist count: February has 28 or 29 days, others 30 or 31.
        for (let m = 1; m <= 12; m++) {
          const fits = m === 2 ? length <= 29 : length === daysInMonth(2001, m);
          if (months[m] === 1 && fits && mask !== 0) canFire = true;
        }
      }
    }
    this.#canFire = canFire;

    this.#tz = TimeZone.of(zone);
    this.zone = this.#tz.name;
  }

  /**
   * The first occurrence strictly after `after` (epoch ms), or undefined if
   * the expression can never match again.
   * @example
   * new CronRule('0 9 * * MON', 'Europe/Paris').next(Date.UTC(2026, 0, 1)); // Date.UTC(2026, 0, 5, 8): Monday 09:00 CET
   */
  next(after: number): number | undefined {
    assertInstant(after);
    if (!this.#canFire) return undefined;
    return this.fixedTime ? nextFixedTime(this.#tz, this, after) : nextRealTime(this.#tz, this, after);
  }

  /**
   * The first matching wall time (ms since 1970 read as UTC, see wall-time.ts)
   * strictly after `wall`, ignoring time zones; undefined if none within 400 years.
   */
  nextWallTime(wall: number): number | undefined {
    const start = Math.floor(wall / SECOND) + 1;
    const startDay = Math.floor(start / 86400);
    const secondOfDay = start - startDay * 86400;
    let { year, month, day } = civilFromDays(startDay);
    let hour = Math.floor(secondOfDay / 3600);
    let minute = Math.floor(secondOfDay / 60) % 60;
    let second = secondOfDay % 60;
    // With a year field the table bounds the search instead (it ends at 9999).
    const years = this.#year;
    const lastYear = years === undefined ? year + SEARCH_YEARS : Infinity;

    // Odometer: find the next allowed value of each field from the largest
    // down; if a field has none left, bump the field above and reset the rest.
    while (year <= lastYear) {
      if (years !== undefined) {
        const y = year < YEARS.min ? years[0]! : year > YEARS.max ? -1 : years[year - YEARS.min]!;
        if (y < 0) return undefined;
        if (y !== year) {
          year = y;
          month = day = 1;
          hour = minute = second = 0;
        }
      }
      const m = this.#month[month]!;
      if (m < 0) {
        year++;
        month = 1;
        day = 1;
        hour = minute = second = 0;
        continue;
      }
      if (m !== month) {
        month = m;
        day = 1;
        hour = minute = second = 0;
      }
      const length = daysInMonth(year, month);
      const first = dayOfWeek(daysFromCivil(year, month, 1));
      const days = this.#days[(length - 28) * 7 + first]! >>> (day - 1);
      if (days === 0) {
        month++;
        day = 1;
        hour = minute = second = 0;
        continue;
      }
      const d = day + 31 - Math.clz32(days & -days);
      if (d !== day) {
        day = d;
        hour = minute = second = 0;
      }
      const h = this.#hour[hour]!;
      if (h < 0) {
        day++;
        hour = minute = second = 0;
        continue;
      }
      if (h !== hour) {
        hour = h;
        minute = second = 0;
      }
      const mi = this.#minute[minute]!;
      if (mi < 0) {
        hour++;
        minute = second = 0;
        continue;
      }
      if (mi !== minute) {
        minute = mi;
        second = 0;
      }
      const s = this.#second[second]!;
      if (s < 0) {
        minute++;
        second = 0;
        continue;
      }
      return daysFromCivil(year, month, day) * DAY + ((hour * 60 + minute) * 60 + s) * SECOND;
    }
    return undefined;
  }
}

/** Parses a comma list of `*`, `a`, `a-b`, `*\/n`, `a/n`, `a-b/n` into a 0/1 array indexed by value. */
function parseField(text: string, field: Field, fail: Fail, special?: (item: string) => boolean): Uint8Array {
  const set = new Uint8Array(field.max + 1);
  for (const item of text.split(',')) {
    if (item === '') fail(`empty list item in ${field.name} field`);
    if (special?.(item)) continue;
    const [base = '', step, extra] = item.split('/');
    if (extra !== undefined) fail(`invalid value "${item}" in ${field.name} field`);
    let by = 1;
    if (step !== undefined) {
      if (!/^\d+$/.test(step)) fail(`invalid step "${step}" in ${field.name} field`);
      by = Number(step);
      if (by === 0) fail(`step 0 in ${field.name} field: the step must be at least 1`);
    }
    let from: number;
    let to: number;
    if (base === '*' || base === '?') {
      if (base === '?' && field !== DAYS_OF_MONTH && field !== DAYS_OF_WEEK) {
        fail(`"?" is only allowed in the day-of-month and day-of-week fields, not in the ${field.name} field`);
      }
      // Years step from year 0, so `*/4` means the years divisible by 4 (as croner), not 1970, 1974...
      from = field === YEARS ? Math.ceil(field.min / by) * by : field.min;
      to = field.top;
    } else {
      const [low = '', high, more] = base.split('-');
      if (more !== undefined) fail(`invalid value "${item}" in ${field.name} field`);
      from = parseValue(low, field, fail);
      if (high !== undefined) {
        to = parseValue(high, field, fail);
        // FRI-SUN means Friday to Sunday, not a reversed range.
        if (field === DAYS_OF_WEEK && to === 0 && from > 0 && high !== '0') to = 7;
        if (to < from) fail(`range ${base} is reversed in ${field.name} field`);
      } else {
        to = step === undefined ? from : Math.max(from, field.top);
      }
    }
    for (let v = from; v <= to; v += by) set[v] = 1;
  }
  return set;
}

/** A number or (for month and day-of-week) a three-letter name, range-checked. */
function parseValue(text: string, field: Field, fail: Fail): number {
  let value: number;
  if (/^\d+$/.test(text)) {
    value = Number(text);
  } else if (field.names !== undefined && /^[a-z]+$/i.test(text)) {
    const index = field.names.indexOf(text.toUpperCase());
    if (index < 0) fail(`unknown name "${text}" in ${field.name} field`);
    value = field.min + index;
  } else {
    fail(`invalid value "${text}" in ${field.name} field`);
  }
  if (value < field.min || value > field.max) {
    fail(`${field.name} field value ${value} is out of range ${field.min}-${field.max}`);
  }
  return value;
}

function parseDays(domText: string, dowText: string, fail: Fail): DaySpec {
  // OCPS 1.4: a leading `+` on day-of-week asks for AND; nowhere else.
  const and = dowText.startsWith('+');
  if (and) dowText = dowText.slice(1);
  if (dowText.includes('+') || domText.includes('+')) {
    fail('"+" is only allowed as the first character of the day-of-week field (e.g. +MON)');
  }
  if (and && dowText === '') fail('"+" in the day-of-week field needs a value after it (e.g. +MON)');
  const spec: DaySpec = {
    and,
    domStar: domText === '*' || domText === '?',
    dowStar: dowText === '*' || dowText === '?',
    dom: 0,
    fromLast: [],
    nearest: [],
    lastWeekday: false,
    dow: 0,
    nth: [],
    lastOf: 0,
  };

  const doms = parseField(domText, DAYS_OF_MONTH, fail, (item) => {
    const upper = item.toUpperCase();
    if (upper === 'LW') {
      spec.lastWeekday = true;
      return true;
    }
    const last = /^L(?:-(\d+))?$/.exec(upper);
    if (last !== null) {
      const n = Number(last[1] ?? 0);
      if (n > 30) fail(`day-of-month field value ${item} is out of range L-0 to L-30`);
      spec.fromLast.push(n);
      return true;
    }
    const nearest = /^(\d+)W$/.exec(upper);
    if (nearest !== null) {
      spec.nearest.push(parseValue(nearest[1]!, DAYS_OF_MONTH, fail));
      return true;
    }
    return false;
  });
  for (let d = 1; d <= 31; d++) if (doms[d] === 1) spec.dom |= 1 << (d - 1);

  const dows = parseField(dowText, DAYS_OF_WEEK, fail, (item) => {
    const upper = item.toUpperCase();
    if (upper === 'L') fail(`"L" in day-of-week field needs a weekday before it, e.g. 5L or FRIL`);
    const last = /^(\d+|[A-Z]{3})#?L$/.exec(upper);
    if (last !== null) {
      spec.lastOf |= 1 << (parseValue(last[1]!, DAYS_OF_WEEK, fail) % 7);
      return true;
    }
    const nth = /^(\d+|[A-Z]{3})#(\d+)$/.exec(upper);
    if (nth !== null) {
      const n = Number(nth[2]);
      if (n < 1 || n > 5) fail(`day-of-week field occurrence ${item} is out of range #1-#5`);
      spec.nth.push([parseValue(nth[1]!, DAYS_OF_WEEK, fail) % 7, n]);
      return true;
    }
    return false;
  });
  for (let w = 0; w <= 7; w++) if (dows[w] === 1) spec.dow |= 1 << (w % 7);
  return spec;
}

/** Days matching `spec` in a month of `length` days whose 1st is weekday `first` (0 = Sunday). */
function dayMask(spec: DaySpec, length: number, first: number): number {
  const all = 0x7fffffff >>> (31 - length);
  if (spec.domStar && spec.dowStar) return all;

  let dom = spec.dom & all;
  const weekday = (d: number): number => (first + d - 1) % 7;
  for (const n of spec.fromLast) if (length - n >= 1) dom |= 1 << (length - n - 1);
  for (const n of spec.nearest) {
    if (n > length) continue;
    let d = n;
    // Quartz rules: move to the nearest Mon-Fri without leaving the month.
    if (weekday(n) === 6) d = n === 1 ? 3 : n - 1;
    else if (weekday(n) === 0) d = n === length ? n - 2 : n + 1;
    dom |= 1 << (d - 1);
  }
  if (spec.lastWeekday) {
    const w = weekday(length);
    dom |= 1 << (length - (w === 6 ? 1 : w === 0 ? 2 : 0) - 1);
  }

  let dow = 0;
  for (let d = 1; d <= length; d++) if ((spec.dow >> weekday(d)) & 1) dow |= 1 << (d - 1);
  for (const [w, n] of spec.nth) {
    const d = 1 + ((w - first + 7) % 7) + 7 * (n - 1);
    if (d <= length) dow |= 1 << (d - 1);
  }
  for (let w = 0; w < 7; w++) {
    if ((spec.lastOf >> w) & 1) dow |= 1 << (length - ((weekday(length) - w + 7) % 7) - 1);
  }

  if (spec.domStar) return dow;
  if (spec.dowStar) return dom;
  return spec.and ? dom & dow : dom | dow;
}

/** table[v] = the smallest allowed value >= v, or -1; one extra slot so a carried-over v = max + 1 reads -1. */
function nextTable(set: Uint8Array): Int8Array {
  const table = new Int8Array(set.length + 1).fill(-1);
  for (let v = set.length - 1; v >= 0; v--) table[v] = set[v] === 1 ? v : table[v + 1]!;
  return table;
}

/** As `nextTable`, for years: table[y - 1970] = the first allowed year >= y, or -1. */
function yearTable(set: Uint8Array): Int16Array {
  const table = new Int16Array(YEARS.max - YEARS.min + 2).fill(-1);
  for (let y = YEARS.max; y >= YEARS.min; y--) table[y - YEARS.min] = set[y] === 1 ? y : table[y - YEARS.min + 1]!;
  return table;
}

function count(set: Uint8Array): number {
  let n = 0;
  for (const v of set) n += v;
  return n;
}
