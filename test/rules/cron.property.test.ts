/**
 * Property test: CronRule.next() against a brute-force reference that walks
 * real time minute by minute (second by second for 6-field expressions),
 * reads each instant's wall clock from Intl, and checks the fields with an
 * independent matcher written from the cron rules, not from src/cron.ts.
 *
 * The reference implements the DST rules by definition:
 * - real time: an instant is an occurrence when its wall time matches;
 * - fixed time: the occurrence of a matching wall time x is the first
 *   instant whose clock reads x or later, i.e. where the running maximum of
 *   the wall clock first reaches x (a gap is jumped over at its end, an
 *   overlap does not push the maximum up again).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DateTime } from 'luxon';
import { CronRule } from '../../src/rules/cron.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const ZONES = [
  'America/New_York',
  'Europe/London',
  'Australia/Lord_Howe',
  'Asia/Tokyo',
  'Australia/Sydney',
  'America/Santiago',
  'Asia/Kolkata',
  'UTC',
] as const;

// ---------------------------------------------------------------- wall clock

const formats = new Map<string, Intl.DateTimeFormat>();

/** The wall time shown at `t` (whole seconds), as ms since 1970 read as UTC. */
function wallOf(zone: string, t: number): number {
  let format = formats.get(zone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(zone, format);
  }
  const [date = '', time = ''] = format.format(t).split(', ');
  const [month, day, year] = date.split('/').map(Number);
  const [hour, minute, second] = time.split(':').map(Number);
  return Date.UTC(year!, month! - 1, day!, hour!, minute!, second!);
}

/**
 * Wall times at from, from + step, … to. Intl is asked every 15 minutes of
 * real time only: where the two ends of a stretch are exactly that far apart
 * on the wall too, the offset did not change inside it (no zone changes
 * offset twice within 15 minutes); otherwise every instant of it is asked.
 */
function wallsBetween(zone: string, from: number, to: number, step: number): number[] {
  const count = Math.floor((to - from) / step) + 1;
  const walls = new Array<number>(count);
  const chunk = Math.max(1, Math.floor((15 * MINUTE) / step));
  for (let i = 0; i < count; i += chunk) {
    const j = Math.min(i + chunk, count - 1);
    const first = wallOf(zone, from + i * step);
    const last = wallOf(zone, from + j * step);
    for (let k = i; k <= j; k++) {
      walls[k] = last - first === (j - i) * step ? first + (k - i) * step : wallOf(zone, from + k * step);
    }
  }
  return walls;
}

/** The 2024-2027 transitions of a zone (luxon, day by day, then bisected). */
function transitions(zone: string): number[] {
  const found: number[] = [];
  const offset = (t: number) => DateTime.fromMillis(t, { zone }).offset;
  for (let day = Date.UTC(2024, 0, 1); day < Date.UTC(2028, 0, 1); day += DAY) {
    const before = offset(day);
    if (before === offset(day + DAY)) continue;
    let [low, high] = [day, day + DAY];
    while (high - low > MINUTE) {
      const mid = low + Math.floor((high - low) / 2 / MINUTE) * MINUTE;
      if (offset(mid) === before) low = mid;
      else high = mid;
    }
    found.push(high);
  }
  return found;
}

const TRANSITIONS = new Map(ZONES.map((zone) => [zone, transitions(zone)]));

/** Lowest and highest UTC offset of each zone (ms), to size the walk around a local date. */
const OFFSETS = new Map(
  ZONES.map((zone) => {
    const offsets = [Date.UTC(2026, 0, 1), Date.UTC(2026, 6, 1)].map((t) => DateTime.fromMillis(t, { zone }).offset * MINUTE);
    return [zone, [Math.min(...offsets), Math.max(...offsets)] as const];
  }),
);

// ---------------------------------------------------------------- expressions

interface Plain {
  text: string;
  values: number[];
}

interface DayPart {
  text: string;
  /** Restricted, for Vixie OR: anything but `*` and `?`. */
  restricted: boolean;
  match: (d: DateInfo) => boolean;
}

interface DateInfo {
  year: number;
  month: number;
  day: number;
  /** 0 = Sunday. */
  weekday: number;
  daysInMonth: number;
}

interface Spec {
  expression: string;
  seconds: number[];
  minutes: number[];
  hours: number[];
  months: number[];
  dom: DayPart;
  dow: DayPart;
  /** OCPS `+`: both day fields must match. */
  and: boolean;
  /** OCPS 7th field; undefined = any year. */
  years: number[] | undefined;
}

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

const span = (from: number, to: number, step = 1) => {
  const out: number[] = [];
  for (let v = from; v <= to; v += step) out.push(v);
  return out;
};

/**
 * One plain field: *, a, a,b,c, a-b, *\/n, a-b/n, a/n. `top` is where `*`
 * and `a/n` stop; `render` may print a value as a name.
 */
function plainField(
  min: number,
  max: number,
  top: number,
  render: fc.Arbitrary<(v: number) => string>,
  value = fc.integer({ min, max }),
): fc.Arbitrary<Plain> {
  const pair = fc.tuple(value, value).map(([a, b]): [number, number] => (a <= b ? [a, b] : [b, a]));
  const step = fc.integer({ min: 1, max: Math.max(2, Math.ceil((top - min) / 2)) });
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant({ text: '*', values: span(min, top) }) },
    { weight: 3, arbitrary: fc.tuple(value, render).map(([v, r]) => ({ text: r(v), values: [v] })) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.uniqueArray(value, { minLength: 2, maxLength: 3 }), render)
        .map(([vs, r]) => ({ text: vs.map(r).join(','), values: vs })),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(pair, render).map(([[a, b], r]) => ({ text: `${r(a)}-${r(b)}`, values: span(a, b) })),
    },
    { weight: 2, arbitrary: step.map((n) => ({ text: `*/${n}`, values: span(min, top, n) })) },
    { weight: 1, arbitrary: fc.tuple(pair, step).map(([[a, b], n]) => ({ text: `${a}-${b}/${n}`, values: span(a, b, n) })) },
    { weight: 1, arbitrary: fc.tuple(value, step).map(([a, n]) => ({ text: `${a}/${n}`, values: span(a, Math.max(a, top), n) })) },
  );
}

const numeric = fc.constant((v: number) => String(v));
const caseOf = (name: string, style: number) =>
  style === 0 ? name : style === 1 ? name.toLowerCase() : name[0] + name.slice(1).toLowerCase();
const named = (names: string[], base: number) =>
  fc.oneof(
    numeric,
    fc.integer({ min: 0, max: 2 }).map((style) => (v: number) => caseOf(names[v - base]!, style)),
  );

const secondField = plainField(0, 59, 59, numeric);
const minuteField = plainField(0, 59, 59, numeric, fc.oneof(fc.constantFrom(0, 15, 30, 45, 59), fc.integer({ min: 0, max: 59 })));
// Mostly the small hours, where the transitions are (and 23 for Santiago).
const hourField = plainField(
  0,
  23,
  23,
  numeric,
  fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant(23), fc.integer({ min: 0, max: 23 })),
);
const monthField = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Plain>({ text: '*', values: span(1, 12) }) },
  { weight: 1, arbitrary: plainField(1, 12, 12, named(MONTH_NAMES, 1)) },
);

/** Quartz nW, written as "the Mon-Fri day of the month closest to n". */
function nearestWeekday(n: number, d: DateInfo): number | undefined {
  if (n > d.daysInMonth) return undefined;
  let best: number | undefined;
  for (let x = 1; x <= d.daysInMonth; x++) {
    const weekday = (d.weekday - d.day + x + 35) % 7;
    if (weekday === 0 || weekday === 6) continue;
    if (best === undefined || Math.abs(x - n) < Math.abs(best - n)) best = x;
  }
  return best;
}

function lastWeekday(d: DateInfo): number {
  for (let x = d.daysInMonth; ; x--) {
    const weekday = (d.weekday - d.day + x + 35) % 7;
    if (weekday !== 0 && weekday !== 6) return x;
  }
}

const domField: fc.Arbitrary<DayPart> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('*', '?').map((text) => ({ text, restricted: false, match: () => true })) },
  {
    weight: 3,
    arbitrary: plainField(1, 31, 31, numeric)
      .filter((p) => p.text !== '*')
      .map((p) => ({ text: p.text, restricted: true, match: (d: DateInfo) => p.values.includes(d.day) })),
  },
  { weight: 1, arbitrary: fc.constant({ text: 'L', restricted: true, match: (d: DateInfo) => d.day === d.daysInMonth }) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 0, max: 5 })
      .map((n) => ({ text: `L-${n}`, restricted: true, match: (d: DateInfo) => d.day === d.daysInMonth - n })),
  },
  { weight: 1, arbitrary: fc.constant({ text: 'LW', restricted: true, match: (d: DateInfo) => d.day === lastWeekday(d) }) },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 31 })
      .map((n) => ({ text: `${n}W`, restricted: true, match: (d: DateInfo) => d.day === nearestWeekday(n, d) })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 1, max: 28 }), fc.integer({ min: 1, max: 31 })).map(([a, n]) => ({
      text: `${a},L,${n}W`,
      restricted: true,
      match: (d: DateInfo) => d.day === a || d.day === d.daysInMonth || d.day === nearestWeekday(n, d),
    })),
  },
);

const weekdayName = (w: number, style: number) => caseOf(DAY_NAMES[w % 7]!, style);
/** Names for 0-6 only: "SUN-7" (Sunday through Sunday) and "SUN-SUN" (Sunday) differ. */
const weekdayRender = fc.oneof(
  numeric,
  fc.integer({ min: 0, max: 2 }).map((style) => (v: number) => (v === 7 ? '7' : weekdayName(v, style))),
);
const dowField: fc.Arbitrary<DayPart> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('*', '?').map((text) => ({ text, restricted: false, match: () => true })) },
  {
    weight: 3,
    arbitrary: plainField(0, 7, 6, weekdayRender)
      .filter((p) => p.text !== '*')
      .map((p) => ({ text: p.text, restricted: true, match: (d: DateInfo) => p.values.some((v) => v % 7 === d.weekday) })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 0, max: 7 }), fc.boolean(), fc.boolean()).map(([w, name, hash]) => ({
      text: `${name ? weekdayName(w, 0) : w}${hash ? '#' : ''}L`,
      restricted: true,
      match: (d: DateInfo) => d.weekday === w % 7 && d.day + 7 > d.daysInMonth,
    })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 1, max: 5 }), fc.boolean()).map(([w, n, name]) => ({
      text: `${name ? weekdayName(w, 1) : w}#${n}`,
      restricted: true,
      match: (d: DateInfo) => d.weekday === w % 7 && Math.ceil(d.day / 7) === n,
    })),
  },
);

function spec(
  second: Plain | undefined,
  minute: Plain,
  hour: Plain,
  dom: DayPart,
  month: Plain,
  dow: DayPart,
  and = false,
  year?: Plain,
): Spec {
  const fields = [minute.text, hour.text, dom.text, month.text, `${and ? '+' : ''}${dow.text}`];
  const withSeconds = second === undefined && year === undefined ? fields : [second?.text ?? '0', ...fields];
  return {
    and,
    years: year?.values,
    expression: (year === undefined ? withSeconds : [...withSeconds, year.text]).join(' '),
    seconds: second?.values ?? [0],
    minutes: minute.values,
    hours: hour.values,
    months: month.values,
    dom,
    dow,
  };
}

// OCPS 1.4: `+` before day-of-week (AND), and a year field (7 fields) around the years the walk covers.
const yearField = fc.oneof(
  fc.constant<Plain>({ text: '*', values: span(1970, 9999) }),
  plainField(2000, 2045, 2045, numeric, fc.integer({ min: 2022, max: 2042 })).filter((p) => p.text !== '*' && !p.text.startsWith('*/')),
);
const fiveFields = fc
  .tuple(minuteField, hourField, domField, monthField, dowField, fc.boolean(), fc.option(yearField, { freq: 3 }))
  .map(([mi, h, dom, mo, dow, and, year]) => spec(undefined, mi, h, dom, mo, dow, and, year ?? undefined));
const star: DayPart = { text: '*', restricted: false, match: () => true };
const sixFields = fc
  .tuple(secondField, minuteField, fc.oneof(fc.constant<Plain>({ text: '*', values: span(0, 23) }), hourField))
  .map(([second, minute, hour]) => spec(second, minute, hour, star, { text: '*', values: span(1, 12) }, star));

// ---------------------------------------------------------------- reference

function dateInfo(wall: number): DateInfo {
  const d = new Date(wall);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth() + 1;
  return { year, month, day: d.getUTCDate(), weekday: d.getUTCDay(), daysInMonth: new Date(Date.UTC(year, month, 0)).getUTCDate() };
}

function dateMatches(s: Spec, d: DateInfo): boolean {
  if (!s.months.includes(d.month)) return false;
  if (s.years !== undefined && !s.years.includes(d.year)) return false;
  // Vixie cron: OR when both day fields are restricted (AND with OCPS `+`), otherwise the restricted one (if any).
  if (s.dom.restricted && s.dow.restricted && !s.and) return s.dom.match(d) || s.dow.match(d);
  return s.dom.match(d) && s.dow.match(d);
}

function wallMatches(s: Spec, wall: number): boolean {
  const d = new Date(wall);
  return (
    s.seconds.includes(d.getUTCSeconds()) &&
    s.minutes.includes(d.getUTCMinutes()) &&
    s.hours.includes(d.getUTCHours()) &&
    dateMatches(s, dateInfo(wall))
  );
}

const isFixed = (s: Spec) => new Set(s.seconds).size === 1 && new Set(s.minutes).size === 1 && new Set(s.hours).size === 1;

/**
 * Occurrences in [from, to], walking instants by `step`; for fixed time from
 * `from - 3 h`, so the running maximum has seen any overlap in progress.
 */
function walk(s: Spec, zone: string, from: number, to: number, step: number, into: Set<number>): void {
  const fixed = isFixed(s);
  const begin = fixed ? from - 3 * HOUR : from;
  const walls = wallsBetween(zone, begin, to, step);
  let max = -Infinity;
  for (let i = 0; i < walls.length; i++) {
    const t = begin + i * step;
    const wall = walls[i]!;
    if (!fixed) {
      if (t >= from && wallMatches(s, wall)) into.add(t);
    } else if (wall > max) {
      // Every wall time the clock reaches for the first time at t (several when t ends a gap).
      if (t >= from && max > -Infinity) {
        for (let x = Math.max(max + step, wall - 3 * HOUR); x <= wall; x += step) {
          if (wallMatches(s, x)) into.add(t);
        }
      }
      max = wall;
    }
  }
}

/**
 * The first `count` occurrences after `after` for a 5-field spec, minute by
 * minute, but only through the local dates whose day fields match (up to 3000
 * days ahead). `horizon`: the reference is complete up to this instant.
 */
function reference5(s: Spec, zone: (typeof ZONES)[number], after: number, count: number): { found: number[]; horizon: number } {
  const found = new Set<number>();
  const [low, high] = OFFSETS.get(zone)!;
  const first = dateInfo(wallOf(zone, Math.floor(after / 1000) * 1000));
  const startDate = Date.UTC(first.year, first.month - 1, first.day) - DAY;
  let extra = -1;
  let date = startDate;
  for (; date < startDate + 3000 * DAY; date += DAY) {
    if (!dateMatches(s, dateInfo(date))) continue;
    // Every instant whose wall clock shows this date.
    walk(s, zone, date - high - HOUR, date + DAY - low + HOUR, MINUTE, found);
    const ahead = [...found].filter((t) => t > after).length;
    // The next matching date can still interleave (fall-back across midnight); later ones cannot.
    if (ahead >= count && ++extra >= 1) break;
  }
  const sorted = [...found].filter((t) => t > after).sort((a, b) => a - b);
  if (extra >= 1) return { found: sorted.slice(0, count), horizon: sorted[count - 1]! };
  const horizon = date - high - HOUR; // instants before this show dates that were scanned
  return { found: sorted.filter((t) => t <= horizon).slice(0, count), horizon };
}

function iterate(rule: CronRule, after: number, count: number, horizon: number): number[] {
  const out: number[] = [];
  let t: number | undefined = after;
  while (out.length < count && (t = rule.next(t)) !== undefined && t <= horizon) out.push(t);
  return out;
}

const show = (zone: string) => (ts: number[]) => ts.map((t) => DateTime.fromMillis(t, { zone }).toISO());

// ---------------------------------------------------------------- properties

const zoneAndStart = fc.constantFrom(...ZONES).chain((zone) => {
  const changes = TRANSITIONS.get(zone)!;
  const nearChange =
    changes.length === 0
      ? fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2028, 0, 1) })
      : fc.tuple(fc.constantFrom(...changes), fc.integer({ min: -2 * DAY, max: 2 * DAY })).map(([t, d]) => t + d);
  const onMinute = nearChange.map((t) => Math.floor(t / MINUTE) * MINUTE);
  // Days before a transition, so a sparse rule's next match can land in it from afar.
  const daysBefore =
    changes.length === 0
      ? nearChange
      : fc.tuple(fc.constantFrom(...changes), fc.integer({ min: 2 * DAY, max: 10 * DAY })).map(([t, d]) => t - d);
  const anywhere = fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2040, 0, 1) });
  return fc.tuple(fc.constant(zone), fc.oneof(nearChange, onMinute, daysBefore, anywhere));
});

describe('CronRule.next() against a minute-by-minute walk', () => {
  it('5-field expressions, any zone, starts near DST transitions', () => {
    fc.assert(
      fc.property(fiveFields, zoneAndStart, (s, [zone, after]) => {
        const rule = new CronRule(s.expression, zone);
        expect(rule.fixedTime).toBe(isFixed(s));
        const { found, horizon } = reference5(s, zone, after, 3);
        expect(show(zone)(iterate(rule, after, 3, horizon)), `${s.expression} in ${zone} after ${new Date(after).toISOString()}`).toEqual(
          show(zone)(found),
        );
      }),
      { numRuns: 300, seed: 424242 },
    );
  });

  it('fixed-time 5-field expressions across the transitions themselves', () => {
    const fixedTimes = fc.tuple(
      fc.oneof(fc.constantFrom(0, 15, 30, 45), fc.integer({ min: 0, max: 59 })),
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant(23)),
    );
    fc.assert(
      fc.property(fixedTimes, domField, dowField, zoneAndStart, ([minute, hour], dom, dow, [zone, after]) => {
        const s = spec(
          undefined,
          { text: String(minute), values: [minute] },
          { text: String(hour), values: [hour] },
          dom,
          { text: '*', values: span(1, 12) },
          dow,
        );
        const rule = new CronRule(s.expression, zone);
        const { found, horizon } = reference5(s, zone, after, 3);
        expect(show(zone)(iterate(rule, after, 3, horizon)), `${s.expression} in ${zone}`).toEqual(show(zone)(found));
      }),
      { numRuns: 150, seed: 1337 },
    );
  });

  it('6-field expressions, second by second over 90 minutes', () => {
    fc.assert(
      fc.property(sixFields, zoneAndStart, (s, [zone, after]) => {
        const rule = new CronRule(s.expression, zone);
        const start = Math.floor(after / 1000) * 1000;
        const found = new Set<number>();
        walk(s, zone, start, start + 90 * MINUTE, 1000, found);
        const expected = [...found].filter((t) => t > after).sort((a, b) => a - b);
        const actual = iterate(rule, after, Infinity, start + 90 * MINUTE);
        expect(show(zone)(actual), `${s.expression} in ${zone} after ${new Date(after).toISOString()}`).toEqual(show(zone)(expected));
      }),
      { numRuns: 50, seed: 99 },
    );
  });
});
