import { describe, expect, it } from 'vitest';
import { DateTime, IANAZone } from 'luxon';
import { TimeZone, civilFromDays, dayOfWeek, daysFromCivil, daysInMonth, systemZone, validateZone } from '../../src/rules/wall-time.js';

const HOUR = 3_600_000;
const wall = (y: number, mo: number, d: number, h = 0, mi = 0, s = 0) => Date.UTC(y, mo - 1, d, h, mi, s);
const iso = (t: number, zone: string) => DateTime.fromMillis(t, { zone }).toISO({ suppressMilliseconds: true });

describe('validateZone', () => {
  it('accepts IANA names and normalises their case', () => {
    expect(validateZone('UTC')).toBe('UTC');
    expect(validateZone('utc')).toBe('UTC');
    expect(validateZone('Europe/Paris')).toBe('Europe/Paris');
    expect(validateZone('europe/paris')).toBe('Europe/Paris');
    expect(validateZone('America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires');
  });

  it('keeps a valid link name as given instead of ICU legacy names', () => {
    expect(validateZone('Asia/Kolkata')).toBe('Asia/Kolkata');
    expect(validateZone('US/Eastern')).toBe('US/Eastern');
  });

  it('rejects unknown zones with a RangeError naming them', () => {
    expect(() => validateZone('Mars/Olympus')).toThrow(RangeError);
    expect(() => validateZone('Mars/Olympus')).toThrow('Invalid time zone "Mars/Olympus"');
    expect(() => validateZone('')).toThrow('Invalid time zone ""');
    // Node 24's Intl would take it, Node 20 and 22 would not: refused on every Node.
    expect(() => validateZone('+05:00')).toThrow(/Invalid time zone "\+05:00".*"Etc\/GMT-5" is UTC\+05:00/);
  });

  it('rejects non-strings with a TypeError', () => {
    expect(() => validateZone(42 as unknown as string)).toThrow(TypeError);
    expect(() => validateZone(undefined as unknown as string)).toThrow(TypeError);
  });
});

describe('systemZone', () => {
  it('is the process zone and valid', () => {
    expect(systemZone()).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
    expect(() => validateZone(systemZone())).not.toThrow();
  });
});

describe('TimeZone offsets', () => {
  it('reads standard, daylight, half-hour and historical offsets', () => {
    const ny = TimeZone.of('America/New_York');
    expect(ny.offset(wall(2026, 1, 15))).toBe(-5 * HOUR);
    expect(ny.offset(wall(2026, 7, 15))).toBe(-4 * HOUR);
    expect(TimeZone.of('Asia/Kolkata').offset(wall(2026, 1, 1))).toBe(5.5 * HOUR);
    expect(TimeZone.of('Australia/Lord_Howe').offset(wall(2026, 6, 1))).toBe(10.5 * HOUR);
    expect(TimeZone.of('Australia/Lord_Howe').offset(wall(2026, 12, 1))).toBe(11 * HOUR);
    // New York local mean time before 1883: -4:56:02.
    expect(ny.offset(wall(1870, 1, 1))).toBe(-(4 * HOUR + 56 * 60_000 + 2000));
    expect(TimeZone.of('UTC').offset(wall(2026, 3, 8))).toBe(0);
  });

  it('shares one instance per zone', () => {
    expect(TimeZone.of('Europe/Paris')).toBe(TimeZone.of('europe/paris'));
    expect(TimeZone.of('Europe/Paris').name).toBe('Europe/Paris');
    expect(() => TimeZone.of('Mars/Olympus')).toThrow('Invalid time zone "Mars/Olympus"');
  });

  it('agrees with luxon at random instants from 1900 to 2100', () => {
    const zones = ['America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'America/Santiago', 'Africa/Casablanca', 'Pacific/Apia'];
    let seed = 12345;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (const name of zones) {
      const tz = TimeZone.of(name);
      const luxon = IANAZone.create(name);
      for (let i = 0; i < 300; i++) {
        const t = Math.floor(wall(1900, 1, 1) + random() * (wall(2100, 1, 1) - wall(1900, 1, 1)));
        expect(tz.offset(t), `${name} at ${new Date(t).toISOString()}`).toBe(Math.round(luxon.offset(t) * 60_000));
      }
    }
  });

  it('finds every 2020-2030 transition to the second, as luxon sees them', () => {
    for (const name of ['America/New_York', 'Australia/Lord_Howe', 'America/Santiago', 'Europe/London']) {
      const tz = TimeZone.of(name);
      const luxon = IANAZone.create(name);
      const expected: number[] = [];
      // luxon day by day, then bisect each day whose offset changed down to the second.
      for (let day = wall(2020, 1, 1); day < wall(2030, 1, 1); day += 24 * HOUR) {
        const before = luxon.offset(day);
        if (before === luxon.offset(day + 24 * HOUR)) continue;
        let [low, high] = [day, day + 24 * HOUR];
        while (high - low > 1000) {
          const mid = low + Math.floor((high - low) / 2000) * 1000;
          if (luxon.offset(mid) === before) low = mid;
          else high = mid;
        }
        expected.push(high);
      }
      expect(expected.length).toBeGreaterThan(10);
      const found: number[] = [];
      let t: number | undefined = wall(2020, 1, 1) - 1;
      while ((t = tz.nextTransition(t, wall(2030, 1, 1) - 1)) !== undefined) found.push(t);
      expect(found).toEqual(expected);
      for (const change of found) expect(tz.offset(change - 1)).not.toBe(tz.offset(change));
    }
  });

  it('has no transitions in a zone without DST', () => {
    expect(TimeZone.of('Asia/Tokyo').nextTransition(wall(2026, 1, 1), wall(2030, 1, 1))).toBeUndefined();
  });

  it('converts instants to wall times', () => {
    const ny = TimeZone.of('America/New_York');
    expect(ny.wallTime(wall(2026, 3, 8, 7))).toBe(wall(2026, 3, 8, 3));
    expect(ny.wallTime(wall(2026, 3, 8, 7) - 1)).toBe(wall(2026, 3, 8, 2) - 1);
  });
});

describe('TimeZone.instants (real time: 0, 1 or 2 instants)', () => {
  const list = (zone: string, w: number) =>
    TimeZone.of(zone)
      .instants(w)
      .map((t) => iso(t, zone));

  it('has one instant for an ordinary wall time', () => {
    expect(list('America/New_York', wall(2026, 7, 1, 12))).toEqual(['2026-07-01T12:00:00-04:00']);
    expect(list('Asia/Tokyo', wall(2026, 3, 8, 2, 30))).toEqual(['2026-03-08T02:30:00+09:00']);
  });

  it('has none inside a spring-forward gap, whatever its length', () => {
    expect(list('America/New_York', wall(2026, 3, 8, 2, 30))).toEqual([]);
    expect(list('America/New_York', wall(2026, 3, 8, 2, 0))).toEqual([]);
    expect(list('Europe/London', wall(2026, 3, 29, 1, 0))).toEqual([]);
    expect(list('Australia/Lord_Howe', wall(2026, 10, 4, 2, 15))).toEqual([]); // 30-minute gap
    expect(list('America/Santiago', wall(2026, 9, 6, 0, 0))).toEqual([]); // midnight does not exist
  });

  it('the gap ends exactly at the transition', () => {
    expect(list('America/New_York', wall(2026, 3, 8, 3, 0))).toEqual(['2026-03-08T03:00:00-04:00']);
    expect(list('America/New_York', wall(2026, 3, 8, 1, 59, 59))).toEqual(['2026-03-08T01:59:59-05:00']);
    expect(list('Australia/Lord_Howe', wall(2026, 10, 4, 2, 30))).toEqual(['2026-10-04T02:30:00+11:00']);
  });

  it('has two, earlier first, inside a fall-back overlap', () => {
    expect(list('America/New_York', wall(2026, 11, 1, 1, 30))).toEqual(['2026-11-01T01:30:00-04:00', '2026-11-01T01:30:00-05:00']);
    expect(list('America/New_York', wall(2026, 11, 1, 1, 0))).toEqual(['2026-11-01T01:00:00-04:00', '2026-11-01T01:00:00-05:00']);
    expect(list('America/New_York', wall(2026, 11, 1, 2, 0))).toEqual(['2026-11-01T02:00:00-05:00']);
    expect(list('Australia/Lord_Howe', wall(2026, 4, 5, 1, 45))).toEqual(['2026-04-05T01:45:00+11:00', '2026-04-05T01:45:00+10:30']);
    expect(list('America/Santiago', wall(2026, 4, 4, 23, 30))).toEqual(['2026-04-04T23:30:00-03:00', '2026-04-04T23:30:00-04:00']);
  });
});

describe('TimeZone.resolve (fixed time: gap -> end of gap, overlap -> first)', () => {
  const resolved = (zone: string, w: number) => iso(TimeZone.of(zone).resolve(w), zone);

  it('moves a gap time to the transition instant, not forward by the gap length', () => {
    expect(resolved('America/New_York', wall(2026, 3, 8, 2, 30))).toBe('2026-03-08T03:00:00-04:00');
    expect(resolved('America/New_York', wall(2026, 3, 8, 2, 0))).toBe('2026-03-08T03:00:00-04:00');
    expect(resolved('Europe/London', wall(2026, 3, 29, 1, 30))).toBe('2026-03-29T02:00:00+01:00');
    expect(resolved('Australia/Lord_Howe', wall(2026, 10, 4, 2, 15))).toBe('2026-10-04T02:30:00+11:00');
    expect(resolved('America/Santiago', wall(2026, 9, 6, 0, 30))).toBe('2026-09-06T01:00:00-03:00');
    // luxon's own choice differs: it shifts by the gap length.
    expect(DateTime.fromObject({ year: 2026, month: 3, day: 8, hour: 2, minute: 30 }, { zone: 'America/New_York' }).toISO()).toBe(
      '2026-03-08T03:30:00.000-04:00',
    );
  });

  it('picks the earlier instant of an overlapped time', () => {
    expect(resolved('America/New_York', wall(2026, 11, 1, 1, 30))).toBe('2026-11-01T01:30:00-04:00');
    expect(resolved('Australia/Sydney', wall(2026, 4, 5, 2, 30))).toBe('2026-04-05T02:30:00+11:00');
    expect(resolved('America/Santiago', wall(2026, 4, 4, 23, 0))).toBe('2026-04-04T23:00:00-03:00');
  });

  it('is the identity on ordinary wall times', () => {
    expect(resolved('Asia/Kolkata', wall(2026, 3, 8, 2, 30))).toBe('2026-03-08T02:30:00+05:30');
    expect(resolved('America/New_York', wall(2026, 3, 8, 3, 0))).toBe('2026-03-08T03:00:00-04:00');
  });

  it('handles the day Samoa skipped (2011-12-30 never happened in Pacific/Apia)', () => {
    expect(TimeZone.of('Pacific/Apia').instants(wall(2011, 12, 30, 12))).toEqual([]);
    expect(resolved('Pacific/Apia', wall(2011, 12, 30, 12))).toBe('2011-12-31T00:00:00+14:00');
  });
});

describe('civil date helpers', () => {
  it('round-trips day numbers like Date.UTC, far into the past and future', () => {
    for (let days = -800_000; days <= 800_000; days += 997) {
      const { year, month, day } = civilFromDays(days);
      const date = new Date(days * 86_400_000);
      expect([year, month, day]).toEqual([date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()]);
      expect(daysFromCivil(year, month, day)).toBe(days);
      expect(dayOfWeek(days)).toBe(date.getUTCDay());
    }
  });

  it('knows month lengths and leap years', () => {
    expect([daysInMonth(2024, 2), daysInMonth(2026, 2), daysInMonth(2000, 2), daysInMonth(2100, 2)]).toEqual([29, 28, 29, 28]);
    expect(daysInMonth(2026, 4)).toBe(30);
    expect(daysInMonth(2026, 12)).toBe(31);
  });
});
