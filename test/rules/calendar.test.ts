import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DateTime } from 'luxon';
import { CalendarRule } from '../../src/rules/calendar.js';
import type { CalendarRuleOptions } from '../../src/rules/calendar.js';

const at = (iso: string, zone = 'UTC') => DateTime.fromISO(iso, { zone }).toMillis();

/** The first `n` occurrences after `from`, as local "yyyy-MM-dd HH:mm Www" strings. */
function runs(options: Partial<CalendarRuleOptions> & { anchor: number }, from: number, n = 4): string[] {
  const zone = options.zone ?? 'UTC';
  const rule = new CalendarRule({ zone, unit: 'day', every: 1, hour: 10, minute: 30, second: 0, ...options });
  const out: string[] = [];
  let t: number | undefined = from;
  while (out.length < n && (t = rule.next(t)) !== undefined) out.push(DateTime.fromMillis(t, { zone }).toFormat('yyyy-MM-dd HH:mm ccc'));
  return out;
}

describe('CalendarRule: every N days', () => {
  it('every day at a wall time, starting on the anchor date when the time is still ahead', () => {
    const anchor = at('2026-01-01T08:00');
    expect(runs({ anchor }, anchor, 3)).toEqual(['2026-01-01 10:30 Thu', '2026-01-02 10:30 Fri', '2026-01-03 10:30 Sat']);
  });

  it('starts the next day when the anchor date time has passed', () => {
    const anchor = at('2026-01-01T11:00');
    expect(runs({ anchor }, anchor, 2)).toEqual(['2026-01-02 10:30 Fri', '2026-01-03 10:30 Sat']);
  });

  it('never fires on a date before the anchor date', () => {
    const anchor = at('2026-01-10T00:00');
    expect(runs({ anchor }, at('2025-12-01T00:00'), 1)).toEqual(['2026-01-10 10:30 Sat']);
  });

  it('every 3 days across month and year boundaries', () => {
    expect(runs({ anchor: at('2026-01-30T00:00'), every: 3 }, at('2026-01-01T00:00'), 4)).toEqual([
      '2026-01-30 10:30 Fri',
      '2026-02-02 10:30 Mon',
      '2026-02-05 10:30 Thu',
      '2026-02-08 10:30 Sun',
    ]);
    expect(runs({ anchor: at('2026-12-30T00:00'), every: 3 }, at('2026-12-30T12:00'), 3)).toEqual([
      '2027-01-02 10:30 Sat',
      '2027-01-05 10:30 Tue',
      '2027-01-08 10:30 Fri',
    ]);
  });

  it('counts calendar days in leap years', () => {
    expect(runs({ anchor: at('2028-02-27T00:00'), every: 2 }, at('2028-02-27T00:00'), 3)).toEqual([
      '2028-02-27 10:30 Sun',
      '2028-02-29 10:30 Tue',
      '2028-03-02 10:30 Thu',
    ]);
  });

  it('takes period 0 from the anchor date in the rule zone, not in UTC', () => {
    // 03:00Z on Jan 1 is still Dec 31 in New York.
    const anchor = at('2026-01-01T03:00');
    expect(runs({ anchor, zone: 'America/New_York', every: 2, hour: 9, minute: 0 }, anchor, 3)).toEqual([
      '2026-01-02 09:00 Fri',
      '2026-01-04 09:00 Sun',
      '2026-01-06 09:00 Tue',
    ]);
  });

  it('is calendar arithmetic across DST, never + 24 h', () => {
    const zone = 'Europe/Paris';
    expect(runs({ anchor: at('2026-03-27T00:00', zone), zone, hour: 9, minute: 0 }, at('2026-03-27T00:00', zone), 4)).toEqual([
      '2026-03-27 09:00 Fri',
      '2026-03-28 09:00 Sat',
      '2026-03-29 09:00 Sun',
      '2026-03-30 09:00 Mon',
    ]);
  });

  it('supports seconds', () => {
    const anchor = at('2026-01-01T00:00');
    expect(runs({ anchor, hour: 23, minute: 59, second: 59 }, anchor, 2)).toEqual(['2026-01-01 23:59 Thu', '2026-01-02 23:59 Fri']);
    const rule = new CalendarRule({ zone: 'UTC', anchor, unit: 'day', every: 1, hour: 23, minute: 59, second: 59 });
    expect(rule.next(anchor)).toBe(at('2026-01-01T23:59:59'));
  });
});

describe('CalendarRule: weeks and weekdays', () => {
  it('every 2 weeks on Monday and Thursday, counting ISO weeks from the anchor week', () => {
    // Anchor Wednesday Jan 7: Monday Jan 5 is in period 0 but before the anchor date.
    const anchor = at('2026-01-07T12:00');
    expect(runs({ anchor, unit: 'week', every: 2, weekdays: [4, 1] }, anchor, 5)).toEqual([
      '2026-01-08 10:30 Thu',
      '2026-01-19 10:30 Mon',
      '2026-01-22 10:30 Thu',
      '2026-02-02 10:30 Mon',
      '2026-02-05 10:30 Thu',
    ]);
  });

  it('defaults to the anchor weekday', () => {
    const anchor = at('2026-01-07T08:00'); // Wednesday
    const rule = new CalendarRule({ zone: 'UTC', anchor, unit: 'week', every: 1, hour: 10, minute: 30, second: 0 });
    expect(rule.weekdays).toEqual([3]);
    expect(runs({ anchor, unit: 'week' }, anchor, 3)).toEqual(['2026-01-07 10:30 Wed', '2026-01-14 10:30 Wed', '2026-01-21 10:30 Wed']);
    expect(runs({ anchor, unit: 'week', every: 3 }, anchor, 3)).toEqual([
      '2026-01-07 10:30 Wed',
      '2026-01-28 10:30 Wed',
      '2026-02-18 10:30 Wed',
    ]);
  });

  it('keeps the 2-week rhythm across a 53-week ISO year', () => {
    // 2026 has an ISO week 53 (Dec 28): alternate weeks go Dec 21, Jan 4, not Dec 21, Dec 28.
    const anchor = at('2026-12-21T00:00');
    expect(runs({ anchor, unit: 'week', every: 2, weekdays: [1] }, anchor, 3)).toEqual([
      '2026-12-21 10:30 Mon',
      '2027-01-04 10:30 Mon',
      '2027-01-18 10:30 Mon',
    ]);
  });

  it('weekday(): Monday to Friday every week', () => {
    const anchor = at('2026-01-02T12:00'); // Friday, after 10:30
    expect(runs({ anchor, weekdays: [1, 2, 3, 4, 5] }, anchor, 6)).toEqual([
      '2026-01-05 10:30 Mon',
      '2026-01-06 10:30 Tue',
      '2026-01-07 10:30 Wed',
      '2026-01-08 10:30 Thu',
      '2026-01-09 10:30 Fri',
      '2026-01-12 10:30 Mon',
    ]);
  });

  it('weekend(): Saturday and Sunday every week', () => {
    const anchor = at('2026-01-01T00:00');
    expect(runs({ anchor, weekdays: [6, 7] }, anchor, 4)).toEqual([
      '2026-01-03 10:30 Sat',
      '2026-01-04 10:30 Sun',
      '2026-01-10 10:30 Sat',
      '2026-01-11 10:30 Sun',
    ]);
  });

  it('normalises weekdays', () => {
    const rule = new CalendarRule({ zone: 'UTC', anchor: 0, unit: 'week', every: 1, weekdays: [7, 1, 1], hour: 0, minute: 0, second: 0 });
    expect(rule.weekdays).toEqual([1, 7]);
    expect(rule.fixedTime).toBe(true);
  });
});

describe('CalendarRule: validation', () => {
  const base: CalendarRuleOptions = { zone: 'UTC', anchor: 0, unit: 'day', every: 1, hour: 0, minute: 0, second: 0 };
  const make = (patch: Record<string, unknown>) => () => new CalendarRule({ ...base, ...patch } as CalendarRuleOptions);

  it('rejects bad numbers with a RangeError naming the value', () => {
    expect(make({ every: 0 })).toThrow('Invalid every 0: expected an integer >= 1');
    expect(make({ every: -1 })).toThrow(RangeError);
    expect(make({ every: 1.5 })).toThrow('Invalid every 1.5');
    expect(make({ hour: 24 })).toThrow('Invalid hour 24: expected an integer 0-23');
    expect(make({ minute: 60 })).toThrow('Invalid minute 60: expected an integer 0-59');
    expect(make({ second: -1 })).toThrow('Invalid second -1: expected an integer 0-59');
    expect(make({ anchor: Number.NaN })).toThrow('Invalid anchor NaN');
    expect(make({ unit: 'month' })).toThrow('Invalid unit "month": expected "day" or "week"');
  });

  it('rejects bad weekdays', () => {
    expect(make({ unit: 'week', weekdays: [] })).toThrow('Invalid weekdays []');
    expect(make({ unit: 'week', weekdays: [0] })).toThrow('Invalid weekday 0: expected an integer 1-7 (1 = Monday … 7 = Sunday)');
    expect(make({ unit: 'week', weekdays: [8] })).toThrow('Invalid weekday 8');
    expect(make({ unit: 'day', every: 2, weekdays: [1] })).toThrow(
      'weekdays need unit "week" (or unit "day" with every 1), got unit "day" with every 2',
    );
  });

  it('rejects a bad zone or options', () => {
    expect(make({ zone: 'Mars/Olympus' })).toThrow('Invalid time zone "Mars/Olympus"');
    expect(() => new CalendarRule(null as unknown as CalendarRuleOptions)).toThrow(TypeError);
  });

  it('rejects a non-finite instant', () => {
    expect(() => new CalendarRule(base).next(Number.NaN)).toThrow(RangeError);
  });
});

/**
 * Brute force: walk local dates one by one, qualify each by plain date
 * arithmetic, and find each fixed-time occurrence by asking luxon which
 * instants show the wall time (stepping back over a gap).
 */
function reference(options: CalendarRuleOptions, after: number, count: number): number[] {
  const { zone, anchor, unit, every, hour, minute, second } = options;
  const DAY = 86_400_000;
  const a = DateTime.fromMillis(anchor, { zone });
  const anchorDate = Date.UTC(a.year, a.month - 1, a.day);
  const anchorMonday = anchorDate - (a.weekday - 1) * DAY;
  const weekdays = options.weekdays ?? (unit === 'week' ? [a.weekday] : undefined);
  const from = DateTime.fromMillis(after, { zone });
  let date = Math.max(anchorDate, Date.UTC(from.year, from.month - 1, from.day) - DAY);
  const out: number[] = [];
  for (; out.length < count; date += DAY) {
    const d = new Date(date);
    const weekday = d.getUTCDay() === 0 ? 7 : d.getUTCDay();
    if (weekdays === undefined) {
      if (((date - anchorDate) / DAY) % every !== 0) continue;
    } else {
      const week = Math.floor((date - anchorMonday) / (7 * DAY));
      if (week % every !== 0 || !weekdays.includes(weekday)) continue;
    }
    const t = firstInstantShowing(zone, d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), hour, minute, second);
    if (t > after) out.push(t);
  }
  return out;
}

/** The first instant whose wall clock reads the given time or later. */
function firstInstantShowing(zone: string, year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  const target = Date.UTC(year, month - 1, day, hour, minute, second);
  const wall = (t: number) => t + DateTime.fromMillis(t, { zone }).offset * 60_000;
  let t = DateTime.fromObject({ year, month, day, hour, minute, second }, { zone }).toMillis();
  // An overlapped time shows twice, up to two hours apart: take the earliest instant showing it.
  const showing = [120, 90, 60, 30, 0].map((back) => t - back * 60_000).filter((c) => wall(c) === target);
  if (showing.length > 0) return showing[0]!;
  // A gap time: luxon moved it forward by the gap length; walk back to the end of the gap.
  while (wall(t - 60_000) >= target) t -= 60_000;
  while (wall(t - 1000) >= target) t -= 1000;
  return t;
}

describe('CalendarRule: brute-force comparison', () => {
  const zones = ['UTC', 'America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'Australia/Sydney', 'America/Santiago', 'Asia/Kolkata'];

  it('matches a day-by-day walk for random rules, zones, anchors and start instants', () => {
    const options = fc.record({
      zone: fc.constantFrom(...zones),
      anchor: fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2030, 0, 1) }),
      // 'weeks': every N weeks on the anchor weekday; 'on': every N weeks on some weekdays;
      // 'daily-on': unit 'day', every 1, some weekdays (weekday() / weekend()).
      kind: fc.constantFrom('days', 'weeks', 'on', 'daily-on'),
      every: fc.integer({ min: 1, max: 5 }),
      weekdays: fc.uniqueArray(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 7 }),
      // Mostly small hours, where the DST transitions are.
      hour: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 23 })),
      minute: fc.constantFrom(0, 15, 30, 45, 59),
      second: fc.constantFrom(0, 0, 30),
      start: fc.integer({ min: -5 * 86_400_000, max: 400 * 86_400_000 }),
    });
    fc.assert(
      fc.property(options, (o) => {
        const opts: CalendarRuleOptions = {
          zone: o.zone,
          anchor: o.anchor,
          unit: o.kind === 'days' || o.kind === 'daily-on' ? 'day' : 'week',
          every: o.kind === 'daily-on' ? 1 : o.every,
          hour: o.hour,
          minute: o.minute,
          second: o.second,
          ...(o.kind === 'on' || o.kind === 'daily-on' ? { weekdays: o.weekdays } : {}),
        };
        const rule = new CalendarRule(opts);
        const after = o.anchor + o.start;
        const expected = reference(opts, after, 12);
        const actual: number[] = [];
        let t: number | undefined = after;
        while (actual.length < expected.length && (t = rule.next(t)) !== undefined) actual.push(t);
        const show = (ts: number[]) => ts.map((x) => DateTime.fromMillis(x, { zone: o.zone }).toISO());
        expect(show(actual)).toEqual(show(expected));
      }),
      { numRuns: 150, seed: 20260308 },
    );
  });

  it('lands DST-transition days exactly (spring gaps and autumn overlaps)', () => {
    for (const zone of zones) {
      for (const [hour, minute] of [
        [0, 0],
        [0, 30],
        [1, 30],
        [2, 0],
        [2, 15],
        [2, 30],
        [3, 0],
        [23, 30],
      ] as const) {
        const opts: CalendarRuleOptions = { zone, anchor: Date.UTC(2026, 0, 1), unit: 'day', every: 1, hour, minute, second: 0 };
        const rule = new CalendarRule(opts);
        for (const month of [3, 4, 9, 10, 11]) {
          const after = Date.UTC(2026, month - 1, 1);
          const expected = reference(opts, after, 40);
          const actual: number[] = [];
          let t: number | undefined = after;
          while (actual.length < 40 && (t = rule.next(t)) !== undefined) actual.push(t);
          expect(actual, `${zone} ${hour}:${minute} from month ${month}`).toEqual(expected);
        }
      }
    }
  });
});
