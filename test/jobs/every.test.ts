import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { START, setup } from '../helpers.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A scheduler in a fixed zone starting at a given local time. */
function at(iso: string, zone = 'UTC') {
  const clock = new ManualClock(DateTime.fromISO(iso, { zone }).toMillis());
  const scheduler = new Scheduler({ clock, timezone: zone, onError: () => {} });
  const runs: string[] = [];
  const record = () => {
    runs.push(DateTime.fromMillis(clock.now(), { zone }).toISO({ suppressMilliseconds: true })!);
  };
  return { clock, scheduler, runs, record };
}

describe('interval units', () => {
  it('every(2).seconds() runs at start + 2 s, 4 s, ... (fixed rate, no drift)', async () => {
    const { clock, scheduler } = setup();
    const offsets: number[] = [];
    scheduler
      .every(2)
      .seconds()
      .run(async () => {
        offsets.push(clock.now() - START);
        await new Promise<void>((resolve) => clock.setTimer(resolve, 700)); // run time does not shift the rate
      });
    await clock.advance(9_000);
    expect(offsets).toEqual([2_000, 4_000, 6_000, 8_000]);
  });

  it('supports milliseconds, minutes and hours', async () => {
    const { clock, scheduler } = setup();
    const seen: Record<string, number> = { ms: 0, min: 0, h: 0 };
    scheduler
      .every(250)
      .milliseconds()
      .run(() => void seen.ms++);
    scheduler
      .every(15)
      .minutes()
      .run(() => void seen.min++);
    scheduler
      .every()
      .hour()
      .run(() => void seen.h++);
    await clock.advance(2 * HOUR);
    expect(seen).toEqual({ ms: 2 * 4 * 3600, min: 8, h: 2 });
  });

  it('immediately() also runs at the start', async () => {
    const { clock, scheduler } = setup();
    const offsets: number[] = [];
    scheduler
      .every(10)
      .seconds()
      .immediately()
      .run(() => offsets.push(clock.now() - START));
    await clock.advance(25_000);
    expect(offsets).toEqual([0, 10_000, 20_000]);
  });

  it('from(), until() and times() bound the runs', async () => {
    const { clock, scheduler } = setup();
    const a: number[] = [];
    const b: number[] = [];
    const jobA = scheduler
      .every(10)
      .minutes()
      .from(START + HOUR)
      .until(START + 2 * HOUR)
      .run(() => a.push((clock.now() - START) / 60_000));
    const jobB = scheduler
      .every(1)
      .minute()
      .times(3)
      .run(() => b.push((clock.now() - START) / 60_000));
    expect(jobA.nextRunAt?.getTime()).toBe(START + HOUR + 10 * 60_000);
    await clock.advance(3 * HOUR);
    expect(a).toEqual([70, 80, 90, 100, 110, 120]);
    expect(b).toEqual([1, 2, 3]);
    expect(jobA.state).toBe('done');
    expect(jobB.state).toBe('done');
    expect(jobB.nextRunAt).toBeUndefined();
  });

  it("hours().at(':mm') and minutes().at(':ss') align to the wall clock", async () => {
    const { clock, scheduler, runs, record } = at('2026-05-01T10:20:00');
    scheduler.every(2).hours().at(':15').run(record);
    scheduler.every().minute().at(':30').times(2).run(record);
    await clock.advance(5 * HOUR);
    expect(runs).toEqual([
      '2026-05-01T10:20:30Z',
      '2026-05-01T10:21:30Z',
      '2026-05-01T11:15:00Z',
      '2026-05-01T13:15:00Z',
      '2026-05-01T15:15:00Z',
    ]);
  });
});

describe('calendar units', () => {
  it('every().day().at() runs daily at that wall time', async () => {
    const { clock, scheduler, runs, record } = at('2026-05-01T12:00:00', 'Europe/Paris');
    scheduler.every().day().at('10:30').run(record);
    await clock.advance(3 * DAY);
    expect(runs).toEqual(['2026-05-02T10:30:00+02:00', '2026-05-03T10:30:00+02:00', '2026-05-04T10:30:00+02:00']);
  });

  it('at() takes HH:mm, HH:mm:ss and numbers', () => {
    const { scheduler } = at('2026-05-01T00:00:00');
    const a = scheduler
      .every()
      .day()
      .at('7:05:09')
      .run(() => {});
    const b = scheduler
      .every()
      .day()
      .at(7, 5, 9)
      .run(() => {});
    expect(a.nextRunAt).toEqual(new Date('2026-05-01T07:05:09Z'));
    expect(b.nextRunAt).toEqual(a.nextRunAt);
  });

  it('every().monday().at() runs weekly; weekday() and weekend() pick days', () => {
    const { scheduler } = at('2026-05-01T12:00:00'); // a Friday
    const monday = scheduler
      .every()
      .monday()
      .at('08:30')
      .run(() => {});
    expect(monday.nextRuns(3).map((d) => d.toISOString())).toEqual([
      '2026-05-04T08:30:00.000Z',
      '2026-05-11T08:30:00.000Z',
      '2026-05-18T08:30:00.000Z',
    ]);
    const weekdays = scheduler
      .every()
      .weekday()
      .at(9, 0)
      .run(() => {});
    expect(weekdays.nextRuns(4).map((d) => d.toISOString().slice(0, 10))).toEqual(['2026-05-04', '2026-05-05', '2026-05-06', '2026-05-07']);
    const weekend = scheduler
      .every()
      .weekend()
      .at('10:00')
      .run(() => {});
    expect(weekend.nextRuns(3).map((d) => d.toISOString().slice(0, 10))).toEqual(['2026-05-02', '2026-05-03', '2026-05-09']);
    const twice = scheduler
      .every()
      .tuesday()
      .thursday()
      .at('18:00')
      .run(() => {});
    expect(twice.nextRuns(3).map((d) => d.toISOString().slice(0, 10))).toEqual(['2026-05-05', '2026-05-07', '2026-05-12']);
  });

  it('every(3).days() and every(2).weeks() count calendar days from the start', () => {
    const { scheduler } = at('2026-05-01T12:00:00');
    const days = scheduler
      .every(3)
      .days()
      .at('06:00')
      .run(() => {});
    expect(days.nextRuns(3).map((d) => d.toISOString().slice(0, 10))).toEqual(['2026-05-04', '2026-05-07', '2026-05-10']);
    const weeks = scheduler
      .every(2)
      .weeks()
      .at('06:00')
      .run(() => {});
    expect(weeks.nextRuns(2).map((d) => d.toISOString().slice(0, 10))).toEqual(['2026-05-15', '2026-05-29']);
  });

  it('without at(), a day rule keeps the time of day of its start', () => {
    const { scheduler } = at('2026-05-01T12:34:56');
    const job = scheduler
      .every()
      .day()
      .run(() => {});
    expect(job.nextRunAt).toEqual(new Date('2026-05-02T12:34:56Z'));
    // In a zone, the time of day its clock shows (offsets of 5:45 and -2:30 included), a day later.
    const nepal = scheduler
      .every()
      .day()
      .timezone('Asia/Kathmandu')
      .run(() => {});
    expect(nepal.nextRunAt).toEqual(new Date('2026-05-02T12:34:56Z'));
    const newfoundland = scheduler
      .every(2)
      .days()
      .timezone('America/St_Johns')
      .run(() => {});
    expect(newfoundland.nextRunAt).toEqual(new Date('2026-05-03T12:34:56Z'));
  });

  it('at(time, zone) and timezone(zone) set the rule zone', () => {
    const { scheduler } = at('2026-05-01T00:00:00');
    const paris = scheduler
      .every()
      .monday()
      .at('08:30', 'Europe/Paris')
      .run(() => {});
    const tokyo = scheduler
      .every()
      .day()
      .at('09:00')
      .timezone('Asia/Tokyo')
      .run(() => {});
    expect(paris.nextRunAt).toEqual(new Date('2026-05-04T06:30:00Z'));
    expect(tokyo.nextRunAt).toEqual(new Date('2026-05-02T00:00:00Z'));
  });

  it('day rules are calendar arithmetic across DST, never + 24 h', async () => {
    const { clock, scheduler, runs, record } = at('2026-03-07T12:00:00', 'America/New_York');
    scheduler.every().day().at('09:00').run(record);
    await clock.advance(3 * DAY);
    expect(runs).toEqual(['2026-03-08T09:00:00-04:00', '2026-03-09T09:00:00-04:00', '2026-03-10T09:00:00-04:00']);
  });

  it('a fixed time in the spring-forward gap runs once at the end of the gap', async () => {
    const { clock, scheduler, runs, record } = at('2026-03-07T12:00:00', 'America/New_York');
    scheduler.every().day().at('02:30').run(record);
    await clock.advance(3 * DAY);
    expect(runs).toEqual(['2026-03-08T03:00:00-04:00', '2026-03-09T02:30:00-04:00', '2026-03-10T02:30:00-04:00']);
  });

  it('a fixed time in the fall-back overlap runs once, at its first occurrence', async () => {
    const { clock, scheduler, runs, record } = at('2026-10-31T12:00:00', 'America/New_York');
    scheduler.every().day().at('01:30').run(record);
    await clock.advance(2 * DAY);
    expect(runs).toEqual(['2026-11-01T01:30:00-04:00', '2026-11-02T01:30:00-05:00']);
  });
});

describe('at and cron', () => {
  it('at(when).run() runs one time and is then done', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const job = scheduler.at(START + 1_000).run(() => void runs++);
    expect(job.nextRunAt).toEqual(new Date(START + 1_000));
    await clock.advance(5_000);
    expect(runs).toBe(1);
    expect(job.state).toBe('done');
    expect(job.lastRunAt).toEqual(new Date(START + 1_000));
  });

  it('at() with a past time runs at once', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    scheduler.at(START - DAY).run(() => void runs++);
    await clock.advance(0);
    expect(runs).toBe(1);
  });

  it('cron() runs on the expression in its zone', async () => {
    const { clock, scheduler, runs, record } = at('2026-05-01T08:50:00', 'Asia/Tokyo');
    scheduler.cron('*/15 9-10 * * MON-FRI').run(record);
    await clock.advance(4 * DAY);
    expect(runs.slice(0, 9)).toEqual([
      '2026-05-01T09:00:00+09:00',
      '2026-05-01T09:15:00+09:00',
      '2026-05-01T09:30:00+09:00',
      '2026-05-01T09:45:00+09:00',
      '2026-05-01T10:00:00+09:00',
      '2026-05-01T10:15:00+09:00',
      '2026-05-01T10:30:00+09:00',
      '2026-05-01T10:45:00+09:00',
      '2026-05-04T09:00:00+09:00',
    ]);
  });

  it('cron() takes a timezone option different from the scheduler', () => {
    const { scheduler } = at('2026-05-01T00:00:00');
    const job = scheduler.cron('0 9 * * *', { timezone: 'America/New_York' }).run(() => {});
    expect(job.nextRunAt).toEqual(new Date('2026-05-01T13:00:00Z'));
  });

  it('from() includes an occurrence exactly at the start', () => {
    const { scheduler } = at('2026-05-01T00:00:00');
    const job = scheduler
      .cron('0 9 * * *')
      .from(new Date('2026-05-03T09:00:00Z'))
      .run(() => {});
    expect(job.nextRunAt).toEqual(new Date('2026-05-03T09:00:00Z'));
  });
});

describe('rules are validated when built', () => {
  it('rejects bad every(), at() and units at the call', () => {
    const { scheduler } = setup();
    expect(() => scheduler.every(0)).toThrow(RangeError);
    expect(() => scheduler.every(-1)).toThrow(/-1/);
    expect(() => scheduler.every(1.5)).toThrow(RangeError);
    expect(() => scheduler.every().day().at('25:00')).toThrow(/hour 25 is out of range/);
    expect(() => scheduler.every().day().at('10:60')).toThrow(/minute 60/);
    expect(() => scheduler.every().day().at('10h30')).toThrow(/HH:mm/);
    expect(() => scheduler.every().day().at(24, 0)).toThrow(/hour must be an integer 0-23/);
    expect(() => scheduler.every().hour().at('10:30')).toThrow(/':mm'/);
    expect(() => scheduler.every().minute().at(':75')).toThrow(/second 75/);
    expect(() => scheduler.every(5).seconds().at(':10')).toThrow(/does not apply/);
    expect(() => scheduler.every().at('10:00')).toThrow(/unit/);
    expect(() => scheduler.every().day().hours()).toThrow(/already has the unit/);
    // One time and one zone a rule, as one unit: a second is refused, not last-wins.
    expect(() => scheduler.every().day().at('10:00').at('11:00')).toThrow(
      new TypeError('every() already has a time (at()); cannot also use at("11:00" (string))'),
    );
    expect(() => scheduler.every().day().at(10).at(11)).toThrow(/already has a time/);
    expect(() => scheduler.every().day().at('10:00', 'UTC').timezone('Europe/Paris')).toThrow(
      new TypeError('every() already has the time zone UTC; cannot also use "Europe/Paris" (string)'),
    );
    expect(() => scheduler.every().day().timezone('UTC').at('10:00', 'Asia/Tokyo')).toThrow(/already has the time zone UTC/);
    expect(() => scheduler.every(2).weekday()).toThrow(/ambiguous/);
    expect(() => scheduler.every().day().at('10:00', 'Mars/Olympus')).toThrow(RangeError);
    expect(() => scheduler.every().day().timezone('Nowhere')).toThrow(RangeError);
    expect(() => scheduler.every().seconds().times(0)).toThrow(/times/);
    expect(() => scheduler.every().seconds().until(NaN)).toThrow(/until/);
    expect(() => scheduler.every().seconds().jitter(-5)).toThrow(/jitter/);
    expect(() => scheduler.every(3).run(() => {})).toThrow(/needs a unit/);
    expect(() => scheduler.cron('61 * * * *')).toThrow(/minute/);
    expect(() => scheduler.cron('* * * *')).toThrow(RangeError);
    expect(() => scheduler.cron('* * * * *', { timezone: 'Nowhere' })).toThrow(RangeError);
    expect(() => scheduler.cron('* * * * *', { zone: 'UTC' } as never)).toThrow(/Unknown cron option/);
    expect(() => scheduler.at(NaN)).toThrow(RangeError);
  });

  it('rejects bad run() arguments and leaves existing jobs alone', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    scheduler
      .every(1)
      .second()
      .run(() => void runs++);
    expect(() =>
      scheduler
        .every()
        .second()
        .run('x' as never),
    ).toThrow(TypeError);
    expect(() =>
      scheduler
        .every()
        .second()
        .run(() => {}, { overlap: 'sometimes' as never }),
    ).toThrow(/overlap/);
    expect(() =>
      scheduler
        .every()
        .second()
        .run(() => {}, { misfire: 'never' as never }),
    ).toThrow(/misfire/);
    expect(() =>
      scheduler
        .every()
        .second()
        .run(() => {}, { urgency: 1 } as never),
    ).toThrow(/Unknown job option `urgency`/);
    expect(() =>
      scheduler
        .every()
        .second()
        .run(() => {}, { timeout: -1 }),
    ).toThrow(/timeout/);
    expect(scheduler.jobs()).toHaveLength(1);
    await clock.advance(3_000);
    expect(runs).toBe(3);
  });
});
