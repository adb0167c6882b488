/**
 * DST behaviour tables: the documentation of what recurring rules do around
 * daylight-saving transitions, zone by zone, for both 2026 transitions.
 *
 * Fixed-time rules (second, minute and hour each a single value; every
 * CalendarRule) fire once per day: a wall time in a spring-forward gap fires
 * at the first instant after the gap, one in a fall-back overlap fires at its
 * first occurrence. All other rules follow real time: gap times are skipped,
 * overlap times fire twice.
 *
 * Every value below was checked by hand against the transitions listed in
 * the first test.
 */
import { describe, expect, it } from 'vitest';
import { DateTime, IANAZone } from 'luxon';
import { CalendarRule } from '../../src/rules/calendar.js';
import { CronRule } from '../../src/rules/cron.js';
import type { Rule } from '../../src/rules/rule.js';

/** Every occurrence in [from, to] (instants given as ISO strings with offsets), as ISO strings in `zone`. */
function between(rule: Rule, zone: string, from: string, to: string): string[] {
  const end = DateTime.fromISO(to).toMillis();
  const out: string[] = [];
  let t: number | undefined = DateTime.fromISO(from).toMillis() - 1;
  while ((t = rule.next(t)) !== undefined && t <= end) {
    out.push(DateTime.fromMillis(t, { zone }).toISO({ suppressMilliseconds: true })!);
  }
  return out;
}

const cron = (expression: string, zone: string) => new CronRule(expression, zone);
const daily = (zone: string, hour: number, minute: number) =>
  new CalendarRule({ zone, anchor: Date.UTC(2025, 11, 1), unit: 'day', every: 1, hour, minute, second: 0 });

/** The 2026 offset changes of a zone, found minute by minute around each day whose offset changed. */
function transitions2026(zone: string): string[] {
  const iana = IANAZone.create(zone);
  const found: string[] = [];
  for (let day = Date.UTC(2026, 0, 1); day < Date.UTC(2027, 0, 1); day += 86_400_000) {
    if (iana.offset(day) === iana.offset(day + 86_400_000)) continue;
    for (let t = day + 60_000; t <= day + 86_400_000; t += 60_000) {
      if (iana.offset(t) !== iana.offset(t - 60_000)) {
        const before = DateTime.fromMillis(t - 60_000, { zone }).toFormat('yyyy-MM-dd HH:mm ZZ');
        const after = DateTime.fromMillis(t, { zone }).toFormat('HH:mm ZZ');
        found.push(`${new Date(t).toISOString().slice(0, 16)}Z: ${before} -> ${after}`);
      }
    }
  }
  return found;
}

describe('2026 transitions the tables below rely on (looked up with luxon)', () => {
  it.each([
    [
      'America/New_York',
      ['2026-03-08T07:00Z: 2026-03-08 01:59 -05:00 -> 03:00 -04:00', '2026-11-01T06:00Z: 2026-11-01 01:59 -04:00 -> 01:00 -05:00'],
    ],
    [
      'Europe/London',
      ['2026-03-29T01:00Z: 2026-03-29 00:59 +00:00 -> 02:00 +01:00', '2026-10-25T01:00Z: 2026-10-25 01:59 +01:00 -> 01:00 +00:00'],
    ],
    [
      'Australia/Lord_Howe',
      ['2026-04-04T15:00Z: 2026-04-05 01:59 +11:00 -> 01:30 +10:30', '2026-10-03T15:30Z: 2026-10-04 01:59 +10:30 -> 02:30 +11:00'],
    ],
    [
      'Australia/Sydney',
      ['2026-04-04T16:00Z: 2026-04-05 02:59 +11:00 -> 02:00 +10:00', '2026-10-03T16:00Z: 2026-10-04 01:59 +10:00 -> 03:00 +11:00'],
    ],
    [
      'America/Santiago',
      ['2026-04-05T03:00Z: 2026-04-04 23:59 -03:00 -> 23:00 -04:00', '2026-09-06T04:00Z: 2026-09-05 23:59 -04:00 -> 01:00 -03:00'],
    ],
    ['Asia/Tokyo', []],
  ])('%s', (zone, expected) => {
    expect(transitions2026(zone)).toEqual(expected);
  });
});

describe('America/New_York: spring forward 2026-03-08 02:00 -> 03:00 (gap 02:00-03:00)', () => {
  const zone = 'America/New_York';
  const days = ['2026-03-07T00:00:00-05:00', '2026-03-09T23:59:59-04:00'] as const;

  it('daily 02:30 runs at 03:00 EDT, the end of the gap (CalendarRule and cron)', () => {
    const expected = ['2026-03-07T02:30:00-05:00', '2026-03-08T03:00:00-04:00', '2026-03-09T02:30:00-04:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 is unaffected', () => {
    const expected = ['2026-03-07T01:30:00-05:00', '2026-03-08T01:30:00-05:00', '2026-03-09T01:30:00-04:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs at 03:00 EDT', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-03-07T02:00:00-05:00',
      '2026-03-08T03:00:00-04:00',
      '2026-03-09T02:00:00-04:00',
    ]);
  });

  it('*/15 * * * * skips the missing hour', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-03-08T01:00:00-05:00', '2026-03-08T04:00:00-04:00')).toEqual([
      '2026-03-08T01:00:00-05:00',
      '2026-03-08T01:15:00-05:00',
      '2026-03-08T01:30:00-05:00',
      '2026-03-08T01:45:00-05:00',
      '2026-03-08T03:00:00-04:00',
      '2026-03-08T03:15:00-04:00',
      '2026-03-08T03:30:00-04:00',
      '2026-03-08T03:45:00-04:00',
      '2026-03-08T04:00:00-04:00',
    ]);
  });

  it('0 * * * * has no 02:00', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-03-07T23:00:00-05:00', '2026-03-08T06:00:00-04:00')).toEqual([
      '2026-03-07T23:00:00-05:00',
      '2026-03-08T00:00:00-05:00',
      '2026-03-08T01:00:00-05:00',
      '2026-03-08T03:00:00-04:00',
      '2026-03-08T04:00:00-04:00',
      '2026-03-08T05:00:00-04:00',
      '2026-03-08T06:00:00-04:00',
    ]);
  });

  it('a sparse rule reaching the gap from days away skips it', () => {
    expect(between(cron('0,30 2 * * SUN', zone), zone, '2026-03-01T12:00:00-05:00', '2026-03-15T23:00:00-04:00')).toEqual([
      '2026-03-15T02:00:00-04:00',
      '2026-03-15T02:30:00-04:00',
    ]);
  });

  it('0 1-3 * * * (not fixed-time) skips 02:00', () => {
    expect(between(cron('0 1-3 * * *', zone), zone, '2026-03-08T00:00:00-05:00', '2026-03-08T23:59:59-04:00')).toEqual([
      '2026-03-08T01:00:00-05:00',
      '2026-03-08T03:00:00-04:00',
    ]);
  });
});

describe('America/New_York: fall back 2026-11-01 02:00 -> 01:00 (01:00-02:00 twice)', () => {
  const zone = 'America/New_York';
  const days = ['2026-10-31T00:00:00-04:00', '2026-11-02T23:59:59-05:00'] as const;

  it('daily 02:30 is unaffected', () => {
    const expected = ['2026-10-31T02:30:00-04:00', '2026-11-01T02:30:00-05:00', '2026-11-02T02:30:00-05:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 runs once, at 01:30 EDT', () => {
    const expected = ['2026-10-31T01:30:00-04:00', '2026-11-01T01:30:00-04:00', '2026-11-02T01:30:00-05:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs once, at 02:00 EST (02:00 EDT never shows)', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-10-31T02:00:00-04:00',
      '2026-11-01T02:00:00-05:00',
      '2026-11-02T02:00:00-05:00',
    ]);
  });

  it('*/15 * * * * runs the repeated hour twice', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-11-01T00:45:00-04:00', '2026-11-01T02:00:00-05:00')).toEqual([
      '2026-11-01T00:45:00-04:00',
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:15:00-04:00',
      '2026-11-01T01:30:00-04:00',
      '2026-11-01T01:45:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T01:15:00-05:00',
      '2026-11-01T01:30:00-05:00',
      '2026-11-01T01:45:00-05:00',
      '2026-11-01T02:00:00-05:00',
    ]);
  });

  it('0 * * * * runs 01:00 twice', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-10-31T23:00:00-04:00', '2026-11-01T04:00:00-05:00')).toEqual([
      '2026-10-31T23:00:00-04:00',
      '2026-11-01T00:00:00-04:00',
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T02:00:00-05:00',
      '2026-11-01T03:00:00-05:00',
      '2026-11-01T04:00:00-05:00',
    ]);
  });

  it('0 1-3 * * * (not fixed-time) runs 01:00 twice', () => {
    expect(between(cron('0 1-3 * * *', zone), zone, '2026-11-01T00:00:00-04:00', '2026-11-01T23:59:59-05:00')).toEqual([
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T02:00:00-05:00',
      '2026-11-01T03:00:00-05:00',
    ]);
  });

  it('a sparse rule reaching the overlap from days away runs the first 01:00 first', () => {
    // Sundays at 01:00 and 01:30 (not fixed-time), starting a week before.
    expect(between(cron('0,30 1 * * SUN', zone), zone, '2026-10-25T12:00:00-04:00', '2026-11-08T23:00:00-05:00')).toEqual([
      '2026-11-01T01:00:00-04:00',
      '2026-11-01T01:30:00-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T01:30:00-05:00',
      '2026-11-08T01:00:00-05:00',
      '2026-11-08T01:30:00-05:00',
    ]);
  });

  it('an iteration started inside the repeated hour does not run a fixed time again', () => {
    const rule = cron('30 1 * * *', zone);
    expect(between(rule, zone, '2026-11-01T01:45:00-04:00', '2026-11-02T12:00:00-05:00')).toEqual(['2026-11-02T01:30:00-05:00']);
    expect(between(rule, zone, '2026-11-01T01:10:00-05:00', '2026-11-02T12:00:00-05:00')).toEqual(['2026-11-02T01:30:00-05:00']);
  });
});

describe('Europe/London: spring forward 2026-03-29 01:00 GMT -> 02:00 BST (gap 01:00-02:00)', () => {
  const zone = 'Europe/London';
  const days = ['2026-03-28T00:00:00+00:00', '2026-03-30T23:59:59+01:00'] as const;

  it('daily 02:30 is unaffected', () => {
    const expected = ['2026-03-28T02:30:00+00:00', '2026-03-29T02:30:00+01:00', '2026-03-30T02:30:00+01:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 runs at 02:00 BST, the end of the gap', () => {
    const expected = ['2026-03-28T01:30:00+00:00', '2026-03-29T02:00:00+01:00', '2026-03-30T01:30:00+01:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * is unaffected (02:00 BST is the transition instant)', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-03-28T02:00:00+00:00',
      '2026-03-29T02:00:00+01:00',
      '2026-03-30T02:00:00+01:00',
    ]);
  });

  it('*/15 * * * * skips 01:00-01:45', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-03-29T00:00:00+00:00', '2026-03-29T03:00:00+01:00')).toEqual([
      '2026-03-29T00:00:00+00:00',
      '2026-03-29T00:15:00+00:00',
      '2026-03-29T00:30:00+00:00',
      '2026-03-29T00:45:00+00:00',
      '2026-03-29T02:00:00+01:00',
      '2026-03-29T02:15:00+01:00',
      '2026-03-29T02:30:00+01:00',
      '2026-03-29T02:45:00+01:00',
      '2026-03-29T03:00:00+01:00',
    ]);
  });

  it('0 * * * * has no 01:00', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-03-28T22:00:00+00:00', '2026-03-29T05:00:00+01:00')).toEqual([
      '2026-03-28T22:00:00+00:00',
      '2026-03-28T23:00:00+00:00',
      '2026-03-29T00:00:00+00:00',
      '2026-03-29T02:00:00+01:00',
      '2026-03-29T03:00:00+01:00',
      '2026-03-29T04:00:00+01:00',
      '2026-03-29T05:00:00+01:00',
    ]);
  });
});

describe('Europe/London: fall back 2026-10-25 02:00 BST -> 01:00 GMT (01:00-02:00 twice)', () => {
  const zone = 'Europe/London';
  const days = ['2026-10-24T00:00:00+01:00', '2026-10-26T23:59:59+00:00'] as const;

  it('daily 02:30 is unaffected', () => {
    const expected = ['2026-10-24T02:30:00+01:00', '2026-10-25T02:30:00+00:00', '2026-10-26T02:30:00+00:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 runs once, at 01:30 BST', () => {
    const expected = ['2026-10-24T01:30:00+01:00', '2026-10-25T01:30:00+01:00', '2026-10-26T01:30:00+00:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs once, at 02:00 GMT', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-10-24T02:00:00+01:00',
      '2026-10-25T02:00:00+00:00',
      '2026-10-26T02:00:00+00:00',
    ]);
  });

  it('*/15 * * * * runs 01:00-01:45 twice', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-10-25T01:00:00+01:00', '2026-10-25T02:00:00+00:00')).toEqual([
      '2026-10-25T01:00:00+01:00',
      '2026-10-25T01:15:00+01:00',
      '2026-10-25T01:30:00+01:00',
      '2026-10-25T01:45:00+01:00',
      '2026-10-25T01:00:00+00:00',
      '2026-10-25T01:15:00+00:00',
      '2026-10-25T01:30:00+00:00',
      '2026-10-25T01:45:00+00:00',
      '2026-10-25T02:00:00+00:00',
    ]);
  });

  it('0 * * * * runs 01:00 twice', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-10-24T23:00:00+01:00', '2026-10-25T04:00:00+00:00')).toEqual([
      '2026-10-24T23:00:00+01:00',
      '2026-10-25T00:00:00+01:00',
      '2026-10-25T01:00:00+01:00',
      '2026-10-25T01:00:00+00:00',
      '2026-10-25T02:00:00+00:00',
      '2026-10-25T03:00:00+00:00',
      '2026-10-25T04:00:00+00:00',
    ]);
  });
});

describe('Australia/Lord_Howe: fall back 2026-04-05 02:00 -> 01:30 (+11:00 -> +10:30, 01:30-02:00 twice)', () => {
  const zone = 'Australia/Lord_Howe';
  const days = ['2026-04-04T00:00:00+11:00', '2026-04-06T23:59:59+10:30'] as const;

  it('daily 02:30 is unaffected', () => {
    const expected = ['2026-04-04T02:30:00+11:00', '2026-04-05T02:30:00+10:30', '2026-04-06T02:30:00+10:30'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 runs once, at its first occurrence (+11:00)', () => {
    const expected = ['2026-04-04T01:30:00+11:00', '2026-04-05T01:30:00+11:00', '2026-04-06T01:30:00+10:30'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs once, at 02:00 +10:30 (02:00 +11:00 never shows)', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-04-04T02:00:00+11:00',
      '2026-04-05T02:00:00+10:30',
      '2026-04-06T02:00:00+10:30',
    ]);
  });

  it('*/15 * * * * runs 01:30 and 01:45 twice', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-04-05T01:00:00+11:00', '2026-04-05T02:30:00+10:30')).toEqual([
      '2026-04-05T01:00:00+11:00',
      '2026-04-05T01:15:00+11:00',
      '2026-04-05T01:30:00+11:00',
      '2026-04-05T01:45:00+11:00',
      '2026-04-05T01:30:00+10:30',
      '2026-04-05T01:45:00+10:30',
      '2026-04-05T02:00:00+10:30',
      '2026-04-05T02:15:00+10:30',
      '2026-04-05T02:30:00+10:30',
    ]);
  });

  it('0 * * * * is unaffected: no top of the hour is repeated', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-04-04T23:00:00+11:00', '2026-04-05T04:30:00+10:30')).toEqual([
      '2026-04-04T23:00:00+11:00',
      '2026-04-05T00:00:00+11:00',
      '2026-04-05T01:00:00+11:00',
      '2026-04-05T02:00:00+10:30',
      '2026-04-05T03:00:00+10:30',
      '2026-04-05T04:00:00+10:30',
    ]);
  });
});

describe('Australia/Lord_Howe: spring forward 2026-10-04 02:00 -> 02:30 (+10:30 -> +11:00, gap 02:00-02:30)', () => {
  const zone = 'Australia/Lord_Howe';
  const days = ['2026-10-03T00:00:00+10:30', '2026-10-05T23:59:59+11:00'] as const;

  it('daily 02:30 is unaffected (02:30 +11:00 is the transition instant)', () => {
    const expected = ['2026-10-03T02:30:00+10:30', '2026-10-04T02:30:00+11:00', '2026-10-05T02:30:00+11:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 02:15 and 0 2 * * * run at 02:30, the end of the half-hour gap', () => {
    expect(between(daily(zone, 2, 15), zone, ...days)).toEqual([
      '2026-10-03T02:15:00+10:30',
      '2026-10-04T02:30:00+11:00',
      '2026-10-05T02:15:00+11:00',
    ]);
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-10-03T02:00:00+10:30',
      '2026-10-04T02:30:00+11:00',
      '2026-10-05T02:00:00+11:00',
    ]);
  });

  it('daily 01:30 is unaffected', () => {
    const expected = ['2026-10-03T01:30:00+10:30', '2026-10-04T01:30:00+10:30', '2026-10-05T01:30:00+11:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('*/15 * * * * skips 02:00 and 02:15', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-10-04T01:00:00+10:30', '2026-10-04T03:30:00+11:00')).toEqual([
      '2026-10-04T01:00:00+10:30',
      '2026-10-04T01:15:00+10:30',
      '2026-10-04T01:30:00+10:30',
      '2026-10-04T01:45:00+10:30',
      '2026-10-04T02:30:00+11:00',
      '2026-10-04T02:45:00+11:00',
      '2026-10-04T03:00:00+11:00',
      '2026-10-04T03:15:00+11:00',
      '2026-10-04T03:30:00+11:00',
    ]);
  });

  it('0 * * * * has no 02:00', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-10-03T23:00:00+10:30', '2026-10-04T05:30:00+11:00')).toEqual([
      '2026-10-03T23:00:00+10:30',
      '2026-10-04T00:00:00+10:30',
      '2026-10-04T01:00:00+10:30',
      '2026-10-04T03:00:00+11:00',
      '2026-10-04T04:00:00+11:00',
      '2026-10-04T05:00:00+11:00',
    ]);
  });
});

describe('Australia/Sydney: fall back 2026-04-05 03:00 -> 02:00 (+11:00 -> +10:00, 02:00-03:00 twice)', () => {
  const zone = 'Australia/Sydney';
  const days = ['2026-04-04T00:00:00+11:00', '2026-04-06T23:59:59+10:00'] as const;

  it('daily 02:30 runs once, at its first occurrence (+11:00)', () => {
    const expected = ['2026-04-04T02:30:00+11:00', '2026-04-05T02:30:00+11:00', '2026-04-06T02:30:00+10:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 is unaffected', () => {
    const expected = ['2026-04-04T01:30:00+11:00', '2026-04-05T01:30:00+11:00', '2026-04-06T01:30:00+10:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs once, at 02:00 +11:00', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-04-04T02:00:00+11:00',
      '2026-04-05T02:00:00+11:00',
      '2026-04-06T02:00:00+10:00',
    ]);
  });

  it('*/15 * * * * runs 02:00-02:45 twice', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-04-05T02:00:00+11:00', '2026-04-05T03:00:00+10:00')).toEqual([
      '2026-04-05T02:00:00+11:00',
      '2026-04-05T02:15:00+11:00',
      '2026-04-05T02:30:00+11:00',
      '2026-04-05T02:45:00+11:00',
      '2026-04-05T02:00:00+10:00',
      '2026-04-05T02:15:00+10:00',
      '2026-04-05T02:30:00+10:00',
      '2026-04-05T02:45:00+10:00',
      '2026-04-05T03:00:00+10:00',
    ]);
  });

  it('0 * * * * runs 02:00 twice', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-04-05T00:00:00+11:00', '2026-04-05T05:00:00+10:00')).toEqual([
      '2026-04-05T00:00:00+11:00',
      '2026-04-05T01:00:00+11:00',
      '2026-04-05T02:00:00+11:00',
      '2026-04-05T02:00:00+10:00',
      '2026-04-05T03:00:00+10:00',
      '2026-04-05T04:00:00+10:00',
      '2026-04-05T05:00:00+10:00',
    ]);
  });
});

describe('Australia/Sydney: spring forward 2026-10-04 02:00 -> 03:00 (+10:00 -> +11:00, gap 02:00-03:00)', () => {
  const zone = 'Australia/Sydney';
  const days = ['2026-10-03T00:00:00+10:00', '2026-10-05T23:59:59+11:00'] as const;

  it('daily 02:30 runs at 03:00, the end of the gap', () => {
    const expected = ['2026-10-03T02:30:00+10:00', '2026-10-04T03:00:00+11:00', '2026-10-05T02:30:00+11:00'];
    expect(between(daily(zone, 2, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 2 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('daily 01:30 is unaffected', () => {
    const expected = ['2026-10-03T01:30:00+10:00', '2026-10-04T01:30:00+10:00', '2026-10-05T01:30:00+11:00'];
    expect(between(daily(zone, 1, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 1 * * *', zone), zone, ...days)).toEqual(expected);
  });

  it('0 2 * * * runs at 03:00', () => {
    expect(between(cron('0 2 * * *', zone), zone, ...days)).toEqual([
      '2026-10-03T02:00:00+10:00',
      '2026-10-04T03:00:00+11:00',
      '2026-10-05T02:00:00+11:00',
    ]);
  });

  it('*/15 * * * * skips the missing hour', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-10-04T01:00:00+10:00', '2026-10-04T04:00:00+11:00')).toEqual([
      '2026-10-04T01:00:00+10:00',
      '2026-10-04T01:15:00+10:00',
      '2026-10-04T01:30:00+10:00',
      '2026-10-04T01:45:00+10:00',
      '2026-10-04T03:00:00+11:00',
      '2026-10-04T03:15:00+11:00',
      '2026-10-04T03:30:00+11:00',
      '2026-10-04T03:45:00+11:00',
      '2026-10-04T04:00:00+11:00',
    ]);
  });

  it('0 * * * * has no 02:00', () => {
    expect(between(cron('0 * * * *', zone), zone, '2026-10-03T23:00:00+10:00', '2026-10-04T06:00:00+11:00')).toEqual([
      '2026-10-03T23:00:00+10:00',
      '2026-10-04T00:00:00+10:00',
      '2026-10-04T01:00:00+10:00',
      '2026-10-04T03:00:00+11:00',
      '2026-10-04T04:00:00+11:00',
      '2026-10-04T05:00:00+11:00',
      '2026-10-04T06:00:00+11:00',
    ]);
  });
});

describe('America/Santiago: transitions at midnight', () => {
  const zone = 'America/Santiago';

  it('fall back 2026-04-05 00:00 -> 2026-04-04 23:00 (-03:00 -> -04:00): 23:30 runs once, hourly runs 23:00 twice', () => {
    const days = ['2026-04-03T00:00:00-03:00', '2026-04-05T23:59:59-04:00'] as const;
    const expected = ['2026-04-03T23:30:00-03:00', '2026-04-04T23:30:00-03:00', '2026-04-05T23:30:00-04:00'];
    expect(between(daily(zone, 23, 30), zone, ...days)).toEqual(expected);
    expect(between(cron('30 23 * * *', zone), zone, ...days)).toEqual(expected);
    expect(between(cron('0 0 * * *', zone), zone, ...days)).toEqual([
      '2026-04-03T00:00:00-03:00',
      '2026-04-04T00:00:00-03:00',
      '2026-04-05T00:00:00-04:00',
    ]);
    expect(between(cron('0 * * * *', zone), zone, '2026-04-04T21:00:00-03:00', '2026-04-05T02:00:00-04:00')).toEqual([
      '2026-04-04T21:00:00-03:00',
      '2026-04-04T22:00:00-03:00',
      '2026-04-04T23:00:00-03:00',
      '2026-04-04T23:00:00-04:00',
      '2026-04-05T00:00:00-04:00',
      '2026-04-05T01:00:00-04:00',
      '2026-04-05T02:00:00-04:00',
    ]);
  });

  it('spring forward 2026-09-06 00:00 -> 01:00 (-04:00 -> -03:00): midnight runs at 01:00', () => {
    const days = ['2026-09-05T00:00:00-04:00', '2026-09-07T23:59:59-03:00'] as const;
    const expected = ['2026-09-05T00:00:00-04:00', '2026-09-06T01:00:00-03:00', '2026-09-07T00:00:00-03:00'];
    expect(between(daily(zone, 0, 0), zone, ...days)).toEqual(expected);
    expect(between(cron('0 0 * * *', zone), zone, ...days)).toEqual(expected);
    expect(between(cron('@daily', zone), zone, ...days)).toEqual(expected);
    expect(between(cron('30 0 * * *', zone), zone, ...days)).toEqual([
      '2026-09-05T00:30:00-04:00',
      '2026-09-06T01:00:00-03:00',
      '2026-09-07T00:30:00-03:00',
    ]);
    expect(between(cron('*/15 * * * *', zone), zone, '2026-09-05T23:00:00-04:00', '2026-09-06T02:00:00-03:00')).toEqual([
      '2026-09-05T23:00:00-04:00',
      '2026-09-05T23:15:00-04:00',
      '2026-09-05T23:30:00-04:00',
      '2026-09-05T23:45:00-04:00',
      '2026-09-06T01:00:00-03:00',
      '2026-09-06T01:15:00-03:00',
      '2026-09-06T01:30:00-03:00',
      '2026-09-06T01:45:00-03:00',
      '2026-09-06T02:00:00-03:00',
    ]);
  });
});

describe('Asia/Tokyo: no DST, nothing special on the New York transition dates', () => {
  const zone = 'Asia/Tokyo';

  it.each([
    ['2026-03-07', '2026-03-08', '2026-03-09'],
    ['2026-10-31', '2026-11-01', '2026-11-02'],
  ])('daily rules around %s', (d1, d2, d3) => {
    const days = [`${d1}T00:00:00+09:00`, `${d3}T23:59:59+09:00`] as const;
    for (const [hour, minute] of [
      [2, 30],
      [1, 30],
      [2, 0],
    ] as const) {
      const time = `${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}:00+09:00`;
      const expected = [`${d1}T${time}`, `${d2}T${time}`, `${d3}T${time}`];
      expect(between(daily(zone, hour, minute), zone, ...days)).toEqual(expected);
      expect(between(cron(`${minute} ${hour} * * *`, zone), zone, ...days)).toEqual(expected);
    }
  });

  it('*/15 and hourly are a plain clock', () => {
    expect(between(cron('*/15 * * * *', zone), zone, '2026-03-08T01:00:00+09:00', '2026-03-08T03:00:00+09:00')).toEqual([
      '2026-03-08T01:00:00+09:00',
      '2026-03-08T01:15:00+09:00',
      '2026-03-08T01:30:00+09:00',
      '2026-03-08T01:45:00+09:00',
      '2026-03-08T02:00:00+09:00',
      '2026-03-08T02:15:00+09:00',
      '2026-03-08T02:30:00+09:00',
      '2026-03-08T02:45:00+09:00',
      '2026-03-08T03:00:00+09:00',
    ]);
    expect(between(cron('0 * * * *', zone), zone, '2026-03-07T23:00:00+09:00', '2026-03-08T03:00:00+09:00')).toEqual([
      '2026-03-07T23:00:00+09:00',
      '2026-03-08T00:00:00+09:00',
      '2026-03-08T01:00:00+09:00',
      '2026-03-08T02:00:00+09:00',
      '2026-03-08T03:00:00+09:00',
    ]);
  });
});

describe('6-field (seconds) rules across a gap and an overlap', () => {
  const zone = 'America/New_York';

  it('*/20 * * * * * skips the gap and repeats the overlap, second by second', () => {
    expect(between(cron('*/20 * * * * *', zone), zone, '2026-03-08T01:59:20-05:00', '2026-03-08T03:00:20-04:00')).toEqual([
      '2026-03-08T01:59:20-05:00',
      '2026-03-08T01:59:40-05:00',
      '2026-03-08T03:00:00-04:00',
      '2026-03-08T03:00:20-04:00',
    ]);
    expect(between(cron('*/20 * * * * *', zone), zone, '2026-11-01T01:59:20-04:00', '2026-11-01T01:00:20-05:00')).toEqual([
      '2026-11-01T01:59:20-04:00',
      '2026-11-01T01:59:40-04:00',
      '2026-11-01T01:00:00-05:00',
      '2026-11-01T01:00:20-05:00',
    ]);
  });

  it('a fixed-time rule with seconds runs at the end of the gap', () => {
    expect(between(cron('45 30 2 * * *', zone), zone, '2026-03-08T00:00:00-05:00', '2026-03-09T23:59:59-04:00')).toEqual([
      '2026-03-08T03:00:00-04:00',
      '2026-03-09T02:30:45-04:00',
    ]);
  });
});
