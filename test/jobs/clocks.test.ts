import { describe, expect, it } from 'vitest';
import { DEFAULT_CATCH_UP, Scheduler, type SkipInfo } from '../../src/index.js';
import { advanceJob } from '../../src/durable/advance-job.js';
import { ruleToJson } from '../../src/durable/rule-json.js';
import { IntervalRule } from '../../src/rules/rule.js';
import { ManualClock } from '../../src/testing.js';
import { START, setup } from '../helpers.js';

const SECOND = 1_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;

describe('ManualClock models a wall clock and elapsed time', () => {
  it('advance() moves both, set() only the wall clock, stall() both without firing timers', async () => {
    const clock = new ManualClock(START);
    const fired: number[] = [];
    clock.setTimer(() => fired.push(clock.monotonic()), 10_000);
    await clock.advance(5_000);
    expect([clock.now() - START, clock.monotonic()]).toEqual([5_000, 5_000]);
    clock.set(START - HOUR);
    expect([clock.now(), clock.monotonic()]).toEqual([START - HOUR, 5_000]);
    clock.stall(20_000);
    expect([clock.now(), clock.monotonic()]).toEqual([START - HOUR + 20_000, 25_000]);
    expect(fired).toEqual([]);
    await clock.advance(0); // the overdue timer fires late, time does not go back
    expect(fired).toEqual([25_000]);
  });
});

describe('interval jobs follow elapsed time; calendar and cron rules the wall clock', () => {
  it('every(10).seconds() keeps its pace after the wall clock is set back an hour', async () => {
    const { clock, scheduler } = setup();
    const runs: number[] = [];
    scheduler
      .every(10)
      .seconds()
      .run(() => void runs.push(clock.monotonic()));
    await clock.advance(25 * SECOND);
    clock.set(clock.now() - HOUR);
    await clock.advance(30 * SECOND);
    expect(runs).toEqual([10, 20, 30, 40, 50].map((s) => s * SECOND));
  });

  it('every(10).seconds() neither bunches nor skips after the wall clock is set forward', async () => {
    const { clock, scheduler } = setup();
    const runs: number[] = [];
    const skips: SkipInfo[] = [];
    scheduler.on('skip', (info) => skips.push(info));
    const job = scheduler
      .every(10)
      .seconds()
      .run(() => void runs.push(clock.monotonic()), { misfire: 'all' });
    await clock.advance(15 * SECOND);
    clock.set(clock.now() + HOUR);
    await clock.advance(30 * SECOND);
    expect(runs).toEqual([10, 20, 30, 40].map((s) => s * SECOND));
    expect(skips).toEqual([]);
    // nextRunAt is on the wall clock as it reads now.
    expect(job.nextRunAt!.getTime()).toBe(clock.now() + 5 * SECOND);
  });

  it('with the system clock, interval occurrences sit exactly on start + k * interval', async () => {
    const scheduler = new Scheduler();
    const from = Date.UTC(2030, 0, 1);
    const job = scheduler
      .every(7)
      .hours()
      .from(from)
      .run(() => {});
    expect(job.nextRunAt!.getTime()).toBe(from + 7 * HOUR);
    expect(job.nextRuns(3).map((d) => d.getTime())).toEqual([7, 14, 21].map((h) => from + h * HOUR));
    await scheduler.close();
  });

  it('a cron rule follows the wall clock: set forward past its time, it runs (within the 30 s re-check)', async () => {
    const { clock, scheduler } = setup();
    const runs: number[] = [];
    scheduler.cron('0 13 * * *', { timezone: 'UTC' }).run(() => void runs.push(clock.now()));
    await clock.advance(0);
    clock.set(START + HOUR + SECOND); // 13:00:01 UTC
    await clock.advance(30 * SECOND);
    expect(runs).toHaveLength(1);
  });

  it('a one-shot task for a wall time is not fired early when the clock is set back', async () => {
    const { clock, scheduler } = setup();
    let ran = false;
    scheduler.schedule(START + MINUTE, () => void (ran = true));
    await clock.advance(0);
    clock.set(START - HOUR);
    await clock.advance(2 * MINUTE);
    expect(ran).toBe(false);
  });
});

describe("misfire 'all' is capped and does not starve other work", () => {
  it('runs at most `catchUp` missed occurrences, then reports the rest once and resumes', async () => {
    const { clock, scheduler } = setup();
    const skips: SkipInfo[] = [];
    scheduler.on('skip', (info) => skips.push(info));
    const job = scheduler
      .every(1)
      .second()
      .run(() => {}, { misfire: 'all', catchUp: 5 });
    clock.stall(HOUR); // the loop was stuck an hour
    await clock.advance(0);
    expect(job.runs).toBe(5);
    expect(skips).toHaveLength(1);
    expect(skips[0]).toMatchObject({ reason: 'misfire', scheduledAt: new Date(START + 6 * SECOND) });
    expect(job.nextRunAt).toEqual(new Date(START + HOUR + SECOND));
    await clock.advance(SECOND);
    expect(job.runs).toBe(6);
  });

  it(`defaults to ${DEFAULT_CATCH_UP} late runs (a per-second job down an hour would run 3,600)`, async () => {
    const { clock, scheduler } = setup();
    const job = scheduler
      .every(1)
      .second()
      .run(() => {}, { misfire: 'all' });
    clock.stall(HOUR);
    await clock.advance(0);
    expect(job.runs).toBe(DEFAULT_CATCH_UP);
  });

  it('catch-up runs see the missed occurrence as ctx.scheduledAt', async () => {
    const { clock, scheduler } = setup();
    const seen: number[] = [];
    scheduler
      .every(1)
      .minute()
      .run((ctx) => void seen.push((ctx.scheduledAt.getTime() - START) / MINUTE), { misfire: 'all' });
    clock.stall(5 * MINUTE + SECOND);
    await clock.advance(0);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
  });

  it('late runs queue behind work already due', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const starts: string[] = [];
    scheduler
      .every(1)
      .second()
      .run(() => void starts.push('job'), { misfire: 'all' });
    clock.stall(HOUR);
    scheduler.after(0, () => void starts.push('task'));
    await clock.advance(0);
    expect(starts.indexOf('task')).toBeLessThanOrEqual(1);
  });

  it('rejects a bad catchUp at the call', () => {
    const { scheduler } = setup();
    for (const bad of [0, -1, 1.5, NaN, '10']) {
      expect(() =>
        scheduler
          .every(1)
          .second()
          .run(() => {}, { misfire: 'all', catchUp: bad as number }),
      ).toThrow(RangeError);
    }
    expect(scheduler.size).toBe(0);
  });

  it('stores insert at most `catchUp` occurrences (30 days of a per-second job used to be 2.6 M rows)', () => {
    const rule = new IntervalRule(0, SECOND);
    const now = 30 * 24 * HOUR;
    const job = { key: 'k', name: 'tick', payload: 'null', rule: ruleToJson(rule), nextRunAt: SECOND, remaining: null, until: null };
    const plan = advanceJob({ ...job, options: JSON.stringify({ misfire: 'all' }) }, now);
    expect(plan.occurrences).toHaveLength(DEFAULT_CATCH_UP);
    expect(plan.occurrences[0]).toBe(SECOND);
    expect(plan.nextRunAt).toBe(now + SECOND);
    const capped = advanceJob({ ...job, options: JSON.stringify({ misfire: 'all', catchUp: 10 }) }, now);
    expect(capped.occurrences).toHaveLength(10);
    expect(capped.nextRunAt).toBe(now + SECOND);
    // A short outage is caught up whole.
    const short = advanceJob({ ...job, options: JSON.stringify({ misfire: 'all' }) }, 10 * SECOND);
    expect(short.occurrences).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((s) => s * SECOND));
    expect(short.nextRunAt).toBe(11 * SECOND);
  });
});
