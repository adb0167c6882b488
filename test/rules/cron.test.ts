import { describe, expect, it } from 'vitest';
import { DateTime } from 'luxon';
import { CronRule } from '../../src/rules/cron.js';

/** The first `n` occurrences after local time `from` in `zone`, as "yyyy-MM-dd HH:mm:ss Www" local strings. */
function runs(expression: string, from: string, n = 4, zone = 'UTC'): string[] {
  const rule = new CronRule(expression, zone);
  const out: string[] = [];
  let t: number | undefined = DateTime.fromISO(from, { zone }).toMillis();
  while (out.length < n && (t = rule.next(t)) !== undefined) {
    out.push(DateTime.fromMillis(t, { zone }).toFormat('yyyy-MM-dd HH:mm:ss ccc'));
  }
  return out;
}

/** Dates only, for day-level tests at midnight. */
const days = (expression: string, from: string, n = 4) => runs(expression, from, n).map((s) => s.replace(' 00:00:00', ''));

describe('CronRule: minute, hour and second fields', () => {
  it('* matches every minute', () => {
    expect(runs('* * * * *', '2026-01-01T00:00:30', 3)).toEqual([
      '2026-01-01 00:01:00 Thu',
      '2026-01-01 00:02:00 Thu',
      '2026-01-01 00:03:00 Thu',
    ]);
  });

  it('single values, lists and ranges', () => {
    expect(runs('5 * * * *', '2026-01-01T00:05', 2)).toEqual(['2026-01-01 01:05:00 Thu', '2026-01-01 02:05:00 Thu']);
    expect(runs('0,15,45 * * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 00:15:00 Thu',
      '2026-01-01 00:45:00 Thu',
      '2026-01-01 01:00:00 Thu',
      '2026-01-01 01:15:00 Thu',
    ]);
    expect(runs('10-12 * * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 00:10:00 Thu',
      '2026-01-01 00:11:00 Thu',
      '2026-01-01 00:12:00 Thu',
      '2026-01-01 01:10:00 Thu',
    ]);
  });

  it('steps: */n, a-b/n and a/n (from a to the field maximum)', () => {
    expect(runs('*/20 * * * *', '2026-01-01T00:00', 3)).toEqual([
      '2026-01-01 00:20:00 Thu',
      '2026-01-01 00:40:00 Thu',
      '2026-01-01 01:00:00 Thu',
    ]);
    // */7 restarts at 0 every hour: 56 is followed by 0, not 3.
    expect(runs('*/7 * * * *', '2026-01-01T00:50', 3)).toEqual([
      '2026-01-01 00:56:00 Thu',
      '2026-01-01 01:00:00 Thu',
      '2026-01-01 01:07:00 Thu',
    ]);
    expect(runs('10-30/10 * * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 00:10:00 Thu',
      '2026-01-01 00:20:00 Thu',
      '2026-01-01 00:30:00 Thu',
      '2026-01-01 01:10:00 Thu',
    ]);
    expect(runs('50/4 * * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 00:50:00 Thu',
      '2026-01-01 00:54:00 Thu',
      '2026-01-01 00:58:00 Thu',
      '2026-01-01 01:50:00 Thu',
    ]);
  });

  it('hour field', () => {
    expect(runs('0 */6 * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 06:00:00 Thu',
      '2026-01-01 12:00:00 Thu',
      '2026-01-01 18:00:00 Thu',
      '2026-01-02 00:00:00 Fri',
    ]);
    expect(runs('0 9-17/4 * * *', '2026-01-01T00:00')).toEqual([
      '2026-01-01 09:00:00 Thu',
      '2026-01-01 13:00:00 Thu',
      '2026-01-01 17:00:00 Thu',
      '2026-01-02 09:00:00 Fri',
    ]);
  });

  it('6 fields put seconds first', () => {
    expect(runs('*/10 * * * * *', '2026-01-01T00:00:05', 3)).toEqual([
      '2026-01-01 00:00:10 Thu',
      '2026-01-01 00:00:20 Thu',
      '2026-01-01 00:00:30 Thu',
    ]);
    expect(runs('30 0 0 * * *', '2026-01-01T00:00', 2)).toEqual(['2026-01-01 00:00:30 Thu', '2026-01-02 00:00:30 Fri']);
    expect(runs('15,45 59 23 * * *', '2026-01-01T12:00', 3)).toEqual([
      '2026-01-01 23:59:15 Thu',
      '2026-01-01 23:59:45 Thu',
      '2026-01-02 23:59:15 Fri',
    ]);
  });

  it('carries over minute, hour, day, month and year boundaries', () => {
    expect(runs('59 23 31 12 *', '2026-06-01T00:00', 2)).toEqual(['2026-12-31 23:59:00 Thu', '2027-12-31 23:59:00 Fri']);
    expect(runs('0 0 1 1 *', '2026-12-31T23:59:59.999', 1)).toEqual(['2027-01-01 00:00:00 Fri']);
  });

  it('is strictly after: an occurrence instant gives the following one', () => {
    expect(runs('0 12 * * *', '2026-01-01T12:00', 1)).toEqual(['2026-01-02 12:00:00 Fri']);
    expect(runs('0 12 * * *', '2026-01-01T11:59:59.999', 1)).toEqual(['2026-01-01 12:00:00 Thu']);
  });
});

describe('CronRule: day-of-month and month', () => {
  it('lists of days, and days that only some months have', () => {
    expect(days('0 0 1,15 * *', '2026-01-01', 3)).toEqual(['2026-01-15 Thu', '2026-02-01 Sun', '2026-02-15 Sun']);
    expect(days('0 0 31 * *', '2026-01-31')).toEqual(['2026-03-31 Tue', '2026-05-31 Sun', '2026-07-31 Fri', '2026-08-31 Mon']);
  });

  it('month steps, names (any case) and name ranges', () => {
    expect(days('0 0 1 */4 *', '2026-01-01', 3)).toEqual(['2026-05-01 Fri', '2026-09-01 Tue', '2027-01-01 Fri']);
    expect(days('0 0 1 JAN,jul *', '2026-01-01', 2)).toEqual(['2026-07-01 Wed', '2027-01-01 Fri']);
    expect(days('0 0 1 MAR-May *', '2026-01-01')).toEqual(['2026-03-01 Sun', '2026-04-01 Wed', '2026-05-01 Fri', '2027-03-01 Mon']);
  });

  it('L is the last day of the month, leap years included', () => {
    expect(days('0 0 L * *', '2026-01-01')).toEqual(['2026-01-31 Sat', '2026-02-28 Sat', '2026-03-31 Tue', '2026-04-30 Thu']);
    expect(days('0 0 L 2 *', '2027-03-01', 2)).toEqual(['2028-02-29 Tue', '2029-02-28 Wed']);
  });

  it('L-n is n days before the last day', () => {
    expect(days('0 0 L-3 * *', '2026-01-01')).toEqual(['2026-01-28 Wed', '2026-02-25 Wed', '2026-03-28 Sat', '2026-04-27 Mon']);
  });

  it('nW is the nearest weekday within the month (Quartz rules)', () => {
    // Aug 1 is a Saturday: the nearest weekday in August is Monday the 3rd, not Friday July 31.
    expect(days('0 0 1W * *', '2026-07-01')).toEqual(['2026-08-03 Mon', '2026-09-01 Tue', '2026-10-01 Thu', '2026-11-02 Mon']);
    // May 31 is a Sunday: Friday the 29th, not Monday June 1. June has no 31st, so no run.
    expect(days('0 0 31W * *', '2026-05-01')).toEqual(['2026-05-29 Fri', '2026-07-31 Fri', '2026-08-31 Mon', '2026-10-30 Fri']);
    expect(days('0 0 15W * *', '2026-02-01', 5)).toEqual([
      '2026-02-16 Mon',
      '2026-03-16 Mon',
      '2026-04-15 Wed',
      '2026-05-15 Fri',
      '2026-06-15 Mon',
    ]);
    expect(days('0 0 15W 8 *', '2026-01-01', 1)).toEqual(['2026-08-14 Fri']); // Aug 15 is a Saturday
  });

  it('LW is the last weekday of the month', () => {
    expect(days('0 0 LW * *', '2026-01-01', 5)).toEqual([
      '2026-01-30 Fri',
      '2026-02-27 Fri',
      '2026-03-31 Tue',
      '2026-04-30 Thu',
      '2026-05-29 Fri',
    ]);
  });

  it('special and plain days mix in one list', () => {
    expect(days('0 0 1,L * *', '2026-01-01')).toEqual(['2026-01-31 Sat', '2026-02-01 Sun', '2026-02-28 Sat', '2026-03-01 Sun']);
  });

  it('handles leap years: 0 0 29 2 *, also across the 2100 non-leap year', () => {
    expect(days('0 0 29 2 *', '2026-01-01', 3)).toEqual(['2028-02-29 Tue', '2032-02-29 Sun', '2036-02-29 Fri']);
    expect(days('0 0 29 2 *', '2096-03-01', 1)).toEqual(['2104-02-29 Fri']);
  });
});

describe('CronRule: day-of-week', () => {
  it('numbers, names, ranges, and 0 and 7 both Sunday', () => {
    const weekdays = ['2026-01-05 Mon', '2026-01-06 Tue', '2026-01-07 Wed', '2026-01-08 Thu', '2026-01-09 Fri', '2026-01-12 Mon'];
    expect(days('0 0 * * 1-5', '2026-01-02', 6)).toEqual(weekdays);
    expect(days('0 0 * * MON-FRI', '2026-01-02', 6)).toEqual(weekdays);
    expect(days('0 0 * * mon-fri', '2026-01-02', 6)).toEqual(weekdays);
    for (const sunday of ['0', '7', 'SUN', 'sun']) {
      expect(days(`0 0 * * ${sunday}`, '2026-01-01', 2)).toEqual(['2026-01-04 Sun', '2026-01-11 Sun']);
    }
    expect(days('0 0 * * SAT,SUN', '2026-01-01', 3)).toEqual(['2026-01-03 Sat', '2026-01-04 Sun', '2026-01-10 Sat']);
  });

  it('a range ending on SUN or 7 runs through Sunday', () => {
    const friToSun = ['2026-01-02 Fri', '2026-01-03 Sat', '2026-01-04 Sun', '2026-01-09 Fri'];
    expect(days('0 0 * * FRI-SUN', '2026-01-01')).toEqual(friToSun);
    expect(days('0 0 * * 5-7', '2026-01-01')).toEqual(friToSun);
  });

  it('steps start from Sunday', () => {
    expect(days('0 0 * * */2', '2026-01-01')).toEqual(['2026-01-03 Sat', '2026-01-04 Sun', '2026-01-06 Tue', '2026-01-08 Thu']);
  });

  it('d#n is the nth weekday d of the month', () => {
    const secondMondays = ['2026-01-12 Mon', '2026-02-09 Mon', '2026-03-09 Mon', '2026-04-13 Mon'];
    expect(days('0 0 * * 1#2', '2026-01-01')).toEqual(secondMondays);
    expect(days('0 0 * * MON#2', '2026-01-01')).toEqual(secondMondays);
    // Only months with five Fridays.
    expect(days('0 0 * * 5#5', '2026-01-01')).toEqual(['2026-01-30 Fri', '2026-05-29 Fri', '2026-07-31 Fri', '2026-10-30 Fri']);
    expect(days('0 0 * * 1#1,1#3', '2026-01-01', 3)).toEqual(['2026-01-05 Mon', '2026-01-19 Mon', '2026-02-02 Mon']);
  });

  it('nL is the last weekday n of the month', () => {
    const lastFridays = ['2026-01-30 Fri', '2026-02-27 Fri', '2026-03-27 Fri', '2026-04-24 Fri'];
    expect(days('0 0 * * 5L', '2026-01-01')).toEqual(lastFridays);
    expect(days('0 0 * * FRIL', '2026-01-01')).toEqual(lastFridays);
    expect(days('0 0 * * fril', '2026-01-01')).toEqual(lastFridays);
    const lastSundays = ['2026-01-25 Sun', '2026-02-22 Sun', '2026-03-29 Sun', '2026-04-26 Sun'];
    for (const sunday of ['0L', '7L', 'SUNL']) expect(days(`0 0 * * ${sunday}`, '2026-01-01')).toEqual(lastSundays);
  });
});

describe('CronRule: day-of-month and day-of-week together (Vixie cron)', () => {
  it('ORs them when both are restricted', () => {
    // Not "Friday the 13th": the 13th, and every Friday.
    expect(days('0 0 13 * 5', '2026-01-01')).toEqual(['2026-01-02 Fri', '2026-01-09 Fri', '2026-01-13 Tue', '2026-01-16 Fri']);
    expect(days('0 0 L * 1#1', '2026-01-01')).toEqual(['2026-01-05 Mon', '2026-01-31 Sat', '2026-02-02 Mon', '2026-02-28 Sat']);
  });

  it('uses only the restricted one when the other is * or ?', () => {
    expect(days('0 0 13 * *', '2026-01-01', 2)).toEqual(['2026-01-13 Tue', '2026-02-13 Fri']);
    expect(days('0 0 13 * ?', '2026-01-01', 2)).toEqual(['2026-01-13 Tue', '2026-02-13 Fri']);
    expect(days('0 0 * * 5', '2026-01-01', 2)).toEqual(['2026-01-02 Fri', '2026-01-09 Fri']);
    expect(days('0 0 ? * 5', '2026-01-01', 2)).toEqual(['2026-01-02 Fri', '2026-01-09 Fri']);
    expect(days('0 0 ? * ?', '2026-01-01', 2)).toEqual(['2026-01-02 Fri', '2026-01-03 Sat']);
  });

  it('still respects the month field', () => {
    expect(days('0 0 13 2 5', '2026-01-01', 3)).toEqual(['2026-02-06 Fri', '2026-02-13 Fri', '2026-02-20 Fri']);
  });
});

describe('CronRule: nicknames', () => {
  it('expands @yearly @annually @monthly @weekly @daily @midnight @hourly (lowercase only, as Vixie cron and OCPS)', () => {
    expect(days('@yearly', '2026-01-01', 2)).toEqual(['2027-01-01 Fri', '2028-01-01 Sat']);
    expect(days('@annually', '2026-01-01', 1)).toEqual(['2027-01-01 Fri']);
    expect(days('@monthly', '2026-01-01', 2)).toEqual(['2026-02-01 Sun', '2026-03-01 Sun']);
    expect(days('@weekly', '2026-01-01', 2)).toEqual(['2026-01-04 Sun', '2026-01-11 Sun']);
    expect(days('@daily', '2026-01-01', 2)).toEqual(['2026-01-02 Fri', '2026-01-03 Sat']);
    expect(days('@midnight', '2026-01-01', 1)).toEqual(['2026-01-02 Fri']);
    expect(() => new CronRule('@DAILY', 'UTC')).toThrow(/unknown nickname "@DAILY"/);
    expect(() => new CronRule('@Daily', 'UTC')).toThrow(RangeError);
    expect(() => new CronRule('@daily 0 0 * * *', 'UTC')).toThrow(/unknown nickname/);
    expect(runs('@hourly', '2026-01-01T00:00', 2)).toEqual(['2026-01-01 01:00:00 Thu', '2026-01-01 02:00:00 Thu']);
  });
});

describe('CronRule: rules that rarely or never fire', () => {
  it('returns undefined at once for an expression that can never match', () => {
    for (const never of ['0 0 30 2 *', '0 0 31 4,6,9,11 *', '0 0 31W 2 *', '0 0 L-29 2 *', '0 0 30 FEB ?']) {
      expect(new CronRule(never, 'UTC').next(Date.UTC(2026, 0, 1)), never).toBeUndefined();
    }
  });

  it('finds matches decades apart (Feb 29 on a fifth Monday)', () => {
    expect(days('0 0 * 2 1#5', '2026-01-01', 2)).toEqual(['2044-02-29 Mon', '2072-02-29 Mon']);
  });

  it('gives up only beyond the Date range', () => {
    expect(new CronRule('0 0 1 1 *', 'UTC').next(8.64e15 - 1)).toBeUndefined();
  });
});

describe('CronRule: properties and parsing details', () => {
  it('exposes expression, zone and fixedTime', () => {
    const rule = new CronRule(' 30 2 * * * ', 'europe/paris');
    expect(rule.expression).toBe(' 30 2 * * * ');
    expect(rule.zone).toBe('Europe/Paris');
    expect(rule.fixedTime).toBe(true);
  });

  it('fixedTime: second, minute and hour each a single value', () => {
    const fixed = (expression: string) => new CronRule(expression, 'UTC').fixedTime;
    expect(fixed('30 2 * * *')).toBe(true);
    expect(fixed('0 0 * * MON')).toBe(true);
    expect(fixed('0 30 2 * * *')).toBe(true);
    expect(fixed('0 2-2 * * *')).toBe(true);
    expect(fixed('@daily')).toBe(true);
    expect(fixed('@weekly')).toBe(true);
    expect(fixed('0 1-3 * * *')).toBe(false);
    expect(fixed('*/15 * * * *')).toBe(false);
    expect(fixed('0 * * * *')).toBe(false);
    expect(fixed('0,30 2 * * *')).toBe(false);
    expect(fixed('*/5 30 2 * * *')).toBe(false);
    expect(fixed('@hourly')).toBe(false);
  });

  it('accepts any whitespace between fields', () => {
    expect(days('\t0  0\t* *   SUN \n', '2026-01-01', 1)).toEqual(['2026-01-04 Sun']);
  });

  it('rejects a non-finite instant', () => {
    const rule = new CronRule('* * * * *', 'UTC');
    expect(() => rule.next(Number.NaN)).toThrow(RangeError);
    expect(() => rule.next(Infinity)).toThrow('Invalid instant Infinity');
  });

  it('rejects an invalid zone', () => {
    expect(() => new CronRule('* * * * *', 'Mars/Olympus')).toThrow('Invalid time zone "Mars/Olympus"');
  });
});

describe('CronRule: errors name the field and the problem', () => {
  const error = (expression: string) => {
    try {
      new CronRule(expression, 'UTC');
    } catch (e) {
      expect(e).toBeInstanceOf(RangeError);
      return (e as Error).message;
    }
    throw new Error(`no error for "${expression}"`);
  };

  it('wrong number of fields', () => {
    expect(error('* * * *')).toBe(
      'Invalid cron expression "* * * *": wrong number of fields (4): expected 5, 6 (seconds first) or 7 (seconds first, year last)',
    );
    expect(error('* * * * * * * *')).toMatch(/wrong number of fields \(8\): expected 5, 6/);
    expect(error('')).toMatch(/wrong number of fields \(0\)/);
    expect(error('   ')).toMatch(/wrong number of fields \(0\)/);
  });

  it('values out of range', () => {
    expect(error('61 * * * *')).toBe('Invalid cron expression "61 * * * *": minute field value 61 is out of range 0-59');
    expect(error('60 * * * * *')).toMatch(/second field value 60 is out of range 0-59/);
    expect(error('0 24 * * *')).toMatch(/hour field value 24 is out of range 0-23/);
    expect(error('0 0 0 * *')).toMatch(/day-of-month field value 0 is out of range 1-31/);
    expect(error('0 0 32 * *')).toMatch(/day-of-month field value 32 is out of range 1-31/);
    expect(error('0 0 * 13 *')).toMatch(/month field value 13 is out of range 1-12/);
    expect(error('0 0 * 0 *')).toMatch(/month field value 0 is out of range 1-12/);
    expect(error('0 0 * * 8')).toMatch(/day-of-week field value 8 is out of range 0-7/);
    expect(error('0 0-99 * * *')).toMatch(/hour field value 99 is out of range 0-23/);
  });

  it('steps', () => {
    expect(error('0 */0 * * *')).toMatch(/step 0 in hour field/);
    expect(error('*/x * * * *')).toMatch(/invalid step "x" in minute field/);
    expect(error('*/ * * * *')).toMatch(/invalid step "" in minute field/);
    expect(error('1/2/3 * * * *')).toMatch(/invalid value "1\/2\/3" in minute field/);
  });

  it('names', () => {
    expect(error('0 0 * * FOO')).toMatch(/unknown name "FOO" in day-of-week field/);
    expect(error('0 0 1 FOO *')).toMatch(/unknown name "FOO" in month field/);
    expect(error('0 0 * * MONDAY')).toMatch(/unknown name "MONDAY" in day-of-week field/);
    expect(error('MON * * * *')).toMatch(/invalid value "MON" in minute field/);
    expect(error('0 0 JAN * *')).toMatch(/invalid value "JAN" in day-of-month field/);
  });

  it('reversed ranges', () => {
    expect(error('0 5-2 * * *')).toMatch(/range 5-2 is reversed in hour field/);
    expect(error('0 0 * NOV-FEB *')).toMatch(/range NOV-FEB is reversed in month field/);
    expect(error('0 0 * * FRI-MON')).toMatch(/range FRI-MON is reversed in day-of-week field/);
    expect(error('0 0 * * 5-0')).toMatch(/range 5-0 is reversed in day-of-week field/);
  });

  it('misplaced or malformed special characters', () => {
    expect(error('0 ? * * *')).toMatch(/"\?" is only allowed in the day-of-month and day-of-week fields, not in the hour field/);
    expect(error('0 0 * * L')).toMatch(/"L" in day-of-week field needs a weekday/);
    expect(error('0 L * * *')).toMatch(/invalid value "L" in hour field/);
    expect(error('0 0 * * 1#6')).toMatch(/day-of-week field occurrence 1#6 is out of range #1-#5/);
    expect(error('0 0 * * 1#0')).toMatch(/day-of-week field occurrence 1#0 is out of range/);
    expect(error('0 0 * * 8#1')).toMatch(/day-of-week field value 8 is out of range 0-7/);
    expect(error('0 0 L-31 * *')).toMatch(/day-of-month field value L-31 is out of range L-0 to L-30/);
    expect(error('0 0 32W * *')).toMatch(/day-of-month field value 32 is out of range 1-31/);
    expect(error('0 0 W * *')).toMatch(/invalid value "W" in day-of-month field/);
    expect(error('0 0 5L * *')).toMatch(/invalid value "5L" in day-of-month field/);
    expect(error('0 0 * * 5W')).toMatch(/invalid value "5W" in day-of-week field/);
    expect(error('1,,2 * * * *')).toMatch(/empty list item in minute field/);
    expect(error('1- * * * *')).toMatch(/invalid value "" in minute field/);
    expect(error('1-2-3 * * * *')).toMatch(/invalid value "1-2-3" in minute field/);
    expect(error('-1 * * * *')).toMatch(/invalid value "" in minute field/);
  });

  it('unknown nicknames', () => {
    expect(error('@reboot')).toMatch(
      /unknown nickname "@reboot" \(@reboot is not supported: run the task when your program starts\): expected one of @yearly, @annually/,
    );
    expect(error('@every 5m')).toMatch(/unknown nickname "@every 5m"/);
  });

  it('a non-string expression is a TypeError', () => {
    expect(() => new CronRule(5 as unknown as string, 'UTC')).toThrow(TypeError);
    expect(() => new CronRule(undefined as unknown as string, 'UTC')).toThrow('Cron expression must be a string, got undefined');
    expect(() => new CronRule(null as unknown as string, 'UTC')).toThrow('Cron expression must be a string, got null');
  });
});

// OCPS 1.4 (the open cron pattern specification croner 10+ follows) adds a
// year field, the `+` modifier and `#L`; these pin taskheap's reading of it.
describe('CronRule: OCPS 1.4', () => {
  it('a 7th field restricts the year; 6 fields stay seconds-first', () => {
    expect(runs('0 15 10 * * * 2027', '2026-06-01', 2)).toEqual(['2027-01-01 10:15:00 Fri', '2027-01-02 10:15:00 Sat']);
    expect(days('0 0 0 1 1 * 2028,2030-2031', '2026-06-01', 4)).toEqual(['2028-01-01 Sat', '2030-01-01 Tue', '2031-01-01 Wed']);
    expect(days('0 0 0 1 1 * 1970-2199/2', '2025-06-01', 2)).toEqual(['2026-01-01 Thu', '2028-01-01 Sat']);
    expect(days('0 0 0 1 1 * */4', '2025-06-01', 2)).toEqual(['2028-01-01 Sat', '2032-01-01 Thu']); // years divisible by 4, as croner
    expect(days('0 0 0 1 1 * 2027/5', '2025-06-01', 2)).toEqual(['2027-01-01 Fri', '2032-01-01 Thu']);
    expect(days('0 0 0 1 1 * *', '2026-06-01', 1)).toEqual(['2027-01-01 Fri']);
    expect(runs('30 15 10 * * *', '2026-03-10T10:15:29', 1)).toEqual(['2026-03-10 10:15:30 Tue']);
  });

  it('a year far ahead is found, and one that has passed ends the rule', () => {
    expect(days('0 0 0 29 2 * 2400', '2026-01-01', 2)).toEqual(['2400-02-29 Tue']);
    expect(days('0 0 0 29 2 * 2100', '2026-01-01', 1)).toEqual([]); // 2100 is not a leap year
    expect(runs('0 0 0 * * * 2025', '2026-01-01', 1)).toEqual([]);
    expect(days('0 0 0 31 12 * 9999', '9999-01-01', 2)).toEqual(['9999-12-31 Fri']);
  });

  it('year field errors name the field', () => {
    expect(() => new CronRule('0 0 0 * * * 1969', 'UTC')).toThrow(/year field value 1969 is out of range 1970-9999/);
    expect(() => new CronRule('0 0 0 * * * 10000', 'UTC')).toThrow(/year field value 10000 is out of range/);
    expect(() => new CronRule('0 0 0 * * * ?', 'UTC')).toThrow(
      /"\?" is only allowed in the day-of-month and day-of-week fields, not in the year field/,
    );
    expect(() => new CronRule('0 0 0 * * * 2030-2027', 'UTC')).toThrow(/range 2030-2027 is reversed in year field/);
  });

  it('+ before day-of-week combines the day fields with AND', () => {
    // OR (Vixie): the 1st and every Monday; AND: a 1st that is a Monday.
    expect(days('0 0 1 * MON', '2025-08-31', 3)).toEqual(['2025-09-01 Mon', '2025-09-08 Mon', '2025-09-15 Mon']);
    expect(days('0 0 1 * +MON', '2025-08-31', 3)).toEqual(['2025-09-01 Mon', '2025-12-01 Mon', '2026-06-01 Mon']);
    expect(days('0 0 13 * +FRI', '2026-01-01', 2)).toEqual(['2026-02-13 Fri', '2026-03-13 Fri']);
    expect(days('0 0 L * +FRI#L', '2026-01-01', 2)).toEqual(['2026-07-31 Fri', '2027-04-30 Fri']); // months that end on a Friday
    // + with a wildcard on either side leaves the other field alone.
    expect(days('0 0 * * +MON', '2026-01-01', 2)).toEqual(['2026-01-05 Mon', '2026-01-12 Mon']);
    expect(days('0 0 1 * +*', '2026-01-01', 2)).toEqual(['2026-02-01 Sun', '2026-03-01 Sun']);
    expect(days('0 0 1-7 * +MON', '2026-01-01', 2)).toEqual(['2026-01-05 Mon', '2026-02-02 Mon']); // first Monday
  });

  it('+ anywhere else is an error', () => {
    expect(() => new CronRule('0 12 +1 * MON', 'UTC')).toThrow(/"\+" is only allowed as the first character of the day-of-week field/);
    expect(() => new CronRule('0 12 1 * MON,+FRI', 'UTC')).toThrow(/"\+" is only allowed/);
    expect(() => new CronRule('0 12 1 * ++MON', 'UTC')).toThrow(/"\+" is only allowed/);
    expect(() => new CronRule('+0 12 1 * MON', 'UTC')).toThrow(/invalid value "\+0" in minute field/);
    expect(() => new CronRule('0 12 1 * +', 'UTC')).toThrow(/needs a value after it/);
  });

  it('#L is the last weekday of the month, like nL', () => {
    expect(days('0 0 * * FRI#L', '2025-02-01', 2)).toEqual(['2025-02-28 Fri', '2025-03-28 Fri']);
    expect(days('0 0 * * 5#L', '2025-02-01', 1)).toEqual(days('0 0 * * 5L', '2025-02-01', 1));
  });

  it('? is a wildcard in the day fields and an error elsewhere', () => {
    expect(days('0 0 ? * MON', '2026-01-01', 1)).toEqual(['2026-01-05 Mon']);
    expect(days('0 0 1 * ?', '2026-01-01', 1)).toEqual(['2026-02-01 Sun']);
    expect(() => new CronRule('? 12 * * *', 'UTC')).toThrow(/not in the minute field/);
    expect(() => new CronRule('0 0 * ? *', 'UTC')).toThrow(/not in the month field/);
  });

  it('a full-range day-of-month is restricted: with a weekday it ORs to every day', () => {
    expect(days('0 0 1-31 * MON', '2025-10-05', 3)).toEqual(['2025-10-06 Mon', '2025-10-07 Tue', '2025-10-08 Wed']);
    expect(days('0 0 * * MON', '2025-10-05', 2)).toEqual(['2025-10-06 Mon', '2025-10-13 Mon']);
  });

  it('impossible dates parse and simply never fire', () => {
    expect(runs('* * 31 2 *', '2026-01-01', 1)).toEqual([]);
    expect(() => new CronRule('0 12 1-15W * *', 'UTC')).toThrow(RangeError);
    expect(() => new CronRule('0 0 /30 * *', 'UTC')).toThrow(RangeError);
  });
});
