import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDuration, Scheduler, TimeoutError } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { START, setup } from '../helpers.js';

const UNIT_MS = { w: 604_800_000, d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
const ORDER = Object.keys(UNIT_MS) as Unit[];

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['30s', 30_000],
    ['10m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1w', 604_800_000],
    ['1h30m', 5_400_000],
    ['1h 30m', 5_400_000],
    ['1m30s500ms', 90_500],
    ['1.5s', 1_500],
    ['1.1s', 1_100],
    ['0.5ms', 0.5],
    ['0s', 0],
    ['007m', 420_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    ['', /empty/],
    ['10', /cannot read "10"/],
    ['m', /cannot read "m"/],
    ['10 m', /cannot read "10 m" \(no space between a number and its unit\)/],
    ['10minutes', /unknown unit "minutes"; expected/],
    ['10min', /unknown unit "min"; expected .*units ms, s, m, h, d, w/],
    ['2 hours', /unknown unit "hours"/],
    ['10 minutes', /unknown unit "minutes"; expected/],
    ['10M', /unknown unit "M"/],
    ['1H', /unknown unit "H"/],
    ['-5s', /cannot read "-5s"/],
    ['+5s', /cannot read/],
    ['.5s', /cannot read/],
    ['5.s', /cannot read/],
    ['1e3ms', /cannot read/],
    [' 5s', /cannot read/],
    ['5s ', /ends with a space/],
    ['1h  30m', /cannot read " 30m"/],
    ['30m1h', /largest to smallest/],
    ['1m1m', /largest to smallest/],
    ['1y', /unknown unit "y"/],
    ['5 s', /cannot read/],
  ])('refuses %j with a RangeError that quotes it', (text, why) => {
    let error: unknown;
    try {
      parseDuration(text);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toContain(`"${text}"`);
    expect((error as Error).message).toMatch(why);
  });

  it('refuses a value that is not a string with a TypeError', () => {
    expect(() => parseDuration(5 as never)).toThrow(TypeError);
    expect(() => parseDuration(undefined as never)).toThrow(/duration string/);
  });

  it('refuses a length that does not fit in a number', () => {
    expect(() => parseDuration(`${'9'.repeat(400)}w`)).toThrow(/too large/);
  });

  // Reference: format parts (largest unit first, each once) and sum them by hand.
  const part = fc.record({
    n: fc.integer({ min: 0, max: 100_000 }),
    fraction: fc.option(fc.integer({ min: 0, max: 999 }), { nil: undefined }),
  });
  const duration = fc.tuple(fc.subarray(ORDER, { minLength: 1 }), fc.array(part, { minLength: 6, maxLength: 6 }), fc.boolean());

  it('format → parse gives the sum of the parts (property)', () => {
    fc.assert(
      fc.property(duration, ([units, parts, spaced]) => {
        let expected = 0;
        const text = units
          .map((unit, i) => {
            const { n, fraction } = parts[i]!;
            const digits = fraction === undefined ? `${n}` : `${n}.${String(fraction).padStart(3, '0')}`;
            expected += fraction === undefined ? n * UNIT_MS[unit] : ((n * 1000 + fraction) * UNIT_MS[unit]) / 1000;
            return `${digits}${unit}`;
          })
          .join(spaced ? ' ' : '');
        const got = parseDuration(text);
        // Sums of fractions may differ from the reference in the last bit only.
        expect(Math.abs(got - expected)).toBeLessThanOrEqual(Math.abs(expected) * 1e-12);
      }),
      { numRuns: 500 },
    );
  });

  it('accepts exactly the strings of the grammar (property, against a regular-expression reference)', () => {
    const grammar = /^\d+(?:\.\d+)?(?:ms|w|d|h|m|s)(?: ?\d+(?:\.\d+)?(?:ms|w|d|h|m|s))*$/;
    const ordered = (text: string) => {
      const units = [...text.matchAll(/\d(ms|w|d|h|m|s)/g)].map((m) => ORDER.indexOf(m[1] as Unit));
      return units.every((u, i) => i === 0 || u > units[i - 1]!);
    };
    const alphabet = fc.constantFrom('1', '2', '0', '.', ' ', 'm', 's', 'h', 'd', 'w', 'M', '-');
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 10 }).map((chars) => chars.join('')),
        (text) => {
          const valid = grammar.test(text) && ordered(text);
          let parsed = true;
          try {
            parseDuration(text);
          } catch (error) {
            expect(error).toBeInstanceOf(RangeError);
            parsed = false;
          }
          expect(parsed).toBe(valid);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('durations as strings where a duration is accepted', () => {
  it("after('10m') runs ten minutes later", async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after('10m', () => clock.now() - START);
    expect(task.runAt).toEqual(new Date(START + 600_000));
    await clock.advance('9m59s');
    expect(task.state).toBe('waiting');
    await clock.advance(1_000);
    expect(await task.result).toBe(600_000);
  });

  it("timeout: '30s' times the run out after 30 s", async () => {
    const { clock, scheduler } = setup();
    const task = scheduler.after(0, () => new Promise(() => {}), { timeout: '30s' });
    await clock.advance(29_999);
    expect(task.state).toBe('running');
    await clock.advance(1);
    await expect(task.result).rejects.toBeInstanceOf(TimeoutError);
  });

  it("retry: { delay: '1s', maxDelay: '3s', jitter: '0ms' } waits 1 s, 2 s, then 3 s (capped)", async () => {
    const { clock, scheduler } = setup();
    const at: number[] = [];
    const task = scheduler.after(
      0,
      () => {
        at.push(clock.now() - START);
        throw new Error('again');
      },
      { retry: { attempts: 4, delay: '1s', maxDelay: '3s', jitter: '0ms', backoff: 'exponential' } },
    );
    await clock.advance('1m');
    await expect(task.result).rejects.toThrow('again');
    expect(at).toEqual([0, 1_000, 3_000, 6_000]);
  });

  it("every('15m') is every(15).minutes(), and at(':30') still applies", async () => {
    const { clock, scheduler } = setup();
    const job = scheduler.every('15m').run(() => {});
    expect(job.nextRuns(3)).toEqual([15, 30, 45].map((m) => new Date(START + m * 60_000)));
    const aligned = scheduler
      .every('2h')
      .at(':15')
      .run(() => {});
    expect(aligned.nextRunAt).toEqual(new Date(START + 15 * 60_000));
    const odd = scheduler.every('1.5s').run(() => {});
    expect(odd.nextRuns(2)).toEqual([new Date(START + 1_500), new Date(START + 3_000)]);
    await clock.advance(0);
  });

  it("every('1d') is refused: calendar days and 24 hours differ across DST", () => {
    const { scheduler } = setup();
    expect(() => scheduler.every('1d')).toThrow(/every\(\)\.day\(\)/);
    expect(() => scheduler.every('1w')).toThrow(RangeError);
    expect(() => scheduler.every('0s')).toThrow(/at least 1 ms/);
    expect(() => scheduler.every('15m').minutes()).toThrow(/already has the unit/);
  });

  it("jitter('30s') and the jitter option take strings", async () => {
    const { scheduler } = setup();
    expect(
      scheduler
        .every()
        .hour()
        .jitter('30s')
        .run(() => {})
        .nextRunAt!.getTime(),
    ).toBeLessThan(START + 3_600_000 + 30_000);
    expect(
      scheduler
        .every()
        .hour()
        .run(() => {}, { jitter: '30s' })
        .nextRunAt!.getTime(),
    ).toBeLessThan(START + 3_600_000 + 30_000);
    expect(() => scheduler.every().hour().jitter('30 s')).toThrow(/Invalid `jitter` "30 s"/);
  });

  it('a bad string throws at the call, naming the option and the text, and schedules nothing', () => {
    const { scheduler } = setup();
    expect(() => scheduler.after('10 minutes', () => {})).toThrow(/Invalid `delay` "10 minutes"/);
    expect(() => scheduler.after(0, () => {}, { timeout: '0s' })).toThrow(/`timeout`.*at least 1 ms.*"0s"/);
    expect(() => scheduler.after(0, () => {}, { retry: { delay: '1 sec' } })).toThrow(/Invalid `retry.delay` "1 sec"/);
    expect(() => scheduler.after(0, () => {}, { retry: { maxDelay: 'soon' } })).toThrow(/Invalid `retry.maxDelay` "soon"/);
    expect(() => scheduler.after({} as never, () => {})).toThrow(TypeError);
    expect(() => scheduler.after(-1, () => {})).toThrow(RangeError);
    expect(scheduler.size).toBe(0);
  });

  it('stores take strings for lease and poll, and refuse bad ones at the call', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
    expect(sqliteStore(path, { lease: '2m' }).lease).toBe(120_000);
    expect(() => sqliteStore(path, { lease: 'forever' })).toThrow(/Invalid `lease` "forever"/);
    expect(postgresStore({ lease: '45s', poll: '1.5s' })).toMatchObject({ lease: 45_000, poll: 1_500 });
    expect(() => postgresStore({ poll: '0ms' })).toThrow(/`poll`.*at least 1 ms/);
  });

  it("durable tasks take timeout: '30s' and keep it as milliseconds", async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, store: sqliteStore(path), onError: () => {} });
    scheduler.define('slow', () => new Promise(() => {}));
    await scheduler.start();
    const task = await scheduler.schedule(START, 'slow', { timeout: '30s', retry: { attempts: 1, delay: '1s' } });
    await clock.advance('29s');
    expect((await scheduler.getTask(task.id))!.state).toBe('running');
    await clock.advance('1s');
    expect((await scheduler.getTask(task.id))!.state).toBe('timed-out');
    expect(() => scheduler.schedule(START, 'slow', { timeout: '30' })).toThrow(/Invalid `timeout` "30"/);
    const later = await scheduler.after('1h30m', 'slow');
    expect(later.runAt).toEqual(new Date(clock.now() + 5_400_000));
    await scheduler.close();
  });
});
