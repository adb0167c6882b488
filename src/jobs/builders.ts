// The fluent builders of recurring jobs (`every()`, `cron()`, `at()`) and
// the options of `run()`: they check a rule as it is built and hand it to the
// scheduler, for a function (in memory) or a handler name (stored).
import { CalendarRule } from '../rules/calendar.js';
import { CronRule } from '../rules/cron.js';
import type { Job } from './job.js';
import { IntervalRule, type Rule } from '../rules/rule.js';
import type { StoredJobOptions } from '../durable/options.js';
import type { StoredJob } from '../durable/store.js';
import type { JobPolicyOptions, LimitOptions, RunOptions } from '../core/options.js';
import type { JobBounds, RulePlan } from '../rules/plan.js';
import type { TaskFunction } from '../core/task.js';
import { toDuration, type Duration } from '../core/duration.js';
import { luxon } from '../core/load-on-use.js';
import { describe, MAX_TIME, toEpoch, type When } from '../core/validate.js';
import { DAY, HOUR, MINUTE, SECOND, TimeZone, validateZone } from '../rules/wall-time.js';

/** Options of `run(module)`: a job's, plus the `payload` its module's handler is given in its thread. */
export interface ModuleJobOptions extends JobOptions {
  /**
   * The handler's second argument, copied by structured clone (checked at
   * the call); the same for every occurrence.
   * @default undefined
   * @example
   * scheduler.every().day().at('03:00').run(new URL('./vacuum.js', import.meta.url), { payload: { table: 'events' } });
   */
  payload?: unknown;
}

/** Options of `run()` with a function: a run's (as a task's, without a dedupe key), its limits and the job's policies. */
export interface JobOptions extends RunOptions, LimitOptions, JobPolicyOptions {
  /** Cancels the job (and its waiting runs) when aborted. */
  signal?: AbortSignal;
  /** A label for logs, errors and `ctx.name`. */
  name?: string;
}

/** The scheduler side of a builder. @internal */
export interface JobFactory {
  readonly timezone: string;
  now(): number;
  createJob(fn: TaskFunction | URL, options: ModuleJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Job;
  createStoredJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob>;
}

/**
 * The steps every recurring rule shares: where it starts and stops, and `run()`.
 */
export abstract class JobBuilder {
  /** @internal */
  protected readonly factory: JobFactory;
  #from: number | undefined = undefined;
  #until = Infinity;
  #times = Infinity;
  #jitter = 0;
  #immediately = false;

  /** @internal */
  constructor(factory: JobFactory) {
    this.factory = factory;
  }

  /**
   * Starts the rule at `when` instead of now: interval rules count from it,
   * calendar rules take their first occurrence at or after it.
   * @example
   * scheduler.every(10).minutes().from(new Date('2026-12-01T09:00:00Z')).run(fn);
   */
  from(when: When): this {
    this.#from = toEpoch(when, 'from');
    return this;
  }

  /**
   * No run is due after `when` (inclusive bound); the job is then `done`.
   * @example
   * scheduler.every().hour().until(Date.now() + 86_400_000).run(fn);
   */
  until(when: When): this {
    this.#until = toEpoch(when, 'until');
    return this;
  }

  /**
   * Stop after `n` scheduled runs.
   * @example
   * scheduler.every(2).seconds().times(5).run(fn);
   */
  times(n: number): this {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`Expected \`times\` to be an integer >= 1, got ${describe(n)}`);
    this.#times = n;
    return this;
  }

  /**
   * Also run once at the start point (now, or `from`), then follow the rule.
   * @example
   * scheduler.every(5).minutes().immediately().run(poll);
   */
  immediately(): this {
    this.#immediately = true;
    return this;
  }

  /**
   * Each run starts up to `ms` late, at random, to spread load: milliseconds
   * or a string such as `'30s'`.
   * @default 0
   * @example
   * scheduler.every().hour().jitter('30s').run(refresh);
   */
  jitter(ms: Duration): this {
    this.#jitter = toDuration(ms, 'jitter');
    return this;
  }

  // The function form last: TypeScript 7 reports a call that matches no overload against the last one (see schedule()).
  /**
   * With a store: registers a durable job that runs the handler `name`
   * (see `scheduler.define()`); resolves once the store has committed it.
   * @example
   * await scheduler.cron('0 9 * * MON-FRI').run('standup', { key: 'standup', payload: { channel: '#team' } });
   */
  run(name: string, options?: StoredJobOptions): Promise<StoredJob>;
  /**
   * Schedules the default export of the module `module` by this rule: each
   * occurrence runs in a worker thread (see `scheduler.threads`), given
   * `options.payload`.
   * @example
   * scheduler.every().hour().run(new URL('./rollup.js', import.meta.url), { payload: { table: 'events' } });
   */
  run(module: URL, options?: ModuleJobOptions): Job;
  /**
   * Schedules `fn` by this rule and returns its `Job`.
   * @example
   * const job = scheduler.every().day().at('10:30').run(async (ctx) => report(ctx.signal));
   */
  run(fn: TaskFunction, options?: JobOptions): Job;
  run(fn: TaskFunction | string | URL, options?: ModuleJobOptions | StoredJobOptions): Job | Promise<StoredJob> {
    if (typeof fn !== 'function' && typeof fn !== 'string' && !(fn instanceof URL)) {
      throw new TypeError(`Expected the job to be a function, a module URL or a handler name, got ${describe(fn)}`);
    }
    const explicit = this.#from !== undefined;
    const start = this.#from ?? this.factory.now();
    const plan = this.plan(start, explicit);
    if (this.#immediately) plan.first = start;
    const bounds = { until: this.#until, times: this.#times, jitter: this.#jitter };
    if (typeof fn === 'string') return this.factory.createStoredJob(fn, options as StoredJobOptions | undefined, plan, bounds);
    return this.factory.createJob(fn, options as JobOptions | undefined, plan, bounds);
  }

  /**
   * The rule and its first occurrence for a start point; `inclusive` when
   * the start was given with `from()`, so an occurrence exactly at it counts.
   * @internal
   */
  protected abstract plan(start: number, inclusive: boolean): RulePlan;
}

type Unit = 'millisecond' | 'second' | 'minute' | 'hour' | 'day' | 'week';

const UNIT_MS: Record<Unit, number> = {
  millisecond: 1,
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 604_800_000,
};

/**
 * The longest step a rule may take: the whole Date range (2 x 8.64e15 ms).
 * A longer one could never fire twice, and the arithmetic on such steps
 * loses precision (every(3e15).weeks() used to loop forever).
 */
const MAX_STEP = 2 * MAX_TIME;

/**
 * The fluent rule builder returned by `scheduler.every(n)`.
 *
 * @example
 * scheduler.every(2).seconds().run(fn);                      // every 2 s from now
 * scheduler.every().day().at('10:30').run(fn);               // daily at 10:30 local
 * scheduler.every().monday().at('08:30', 'Europe/Paris').run(fn);
 * scheduler.every().weekday().at(9, 0).run(fn);              // Mon–Fri at 09:00
 */
export class Every extends JobBuilder {
  readonly #n: number;
  #unit: Unit | undefined = undefined;
  #weekdays: number[] | undefined = undefined;
  #at: [number, number, number] | undefined = undefined;
  #zone: string | undefined = undefined;

  /** @internal use `scheduler.every(n)` */
  constructor(factory: JobFactory, n: number | string) {
    super(factory);
    if (typeof n === 'string') {
      [this.#n, this.#unit] = intervalOf(n);
      return;
    }
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`Expected every(n) to get an integer >= 1, got ${describe(n)}`);
    this.#n = n;
  }

  /** Every n milliseconds (fixed rate). */
  milliseconds(): this {
    return this.#setUnit('millisecond');
  }
  /** Alias of `milliseconds()`. */
  millisecond(): this {
    return this.#setUnit('millisecond');
  }
  /** Every n seconds (fixed rate). */
  seconds(): this {
    return this.#setUnit('second');
  }
  /** Alias of `seconds()`. */
  second(): this {
    return this.#setUnit('second');
  }
  /** Every n minutes (fixed rate); `at(':ss')` picks the second. */
  minutes(): this {
    return this.#setUnit('minute');
  }
  /** Alias of `minutes()`. */
  minute(): this {
    return this.#setUnit('minute');
  }
  /** Every n hours (fixed rate); `at(':mm')` picks the minute. */
  hours(): this {
    return this.#setUnit('hour');
  }
  /** Alias of `hours()`. */
  hour(): this {
    return this.#setUnit('hour');
  }
  /** Every n calendar days, at `at()` or at the start's time of day. */
  days(): this {
    return this.#setUnit('day');
  }
  /** Alias of `days()`. */
  day(): this {
    return this.#setUnit('day');
  }
  /** Every n calendar weeks, on the start's weekday. */
  weeks(): this {
    return this.#setUnit('week');
  }
  /** Alias of `weeks()`. */
  week(): this {
    return this.#setUnit('week');
  }
  /** On Mondays (every n weeks); weekday methods combine: `.monday().thursday()`. */
  monday(): this {
    return this.#addWeekday(1);
  }
  /** On Tuesdays. */
  tuesday(): this {
    return this.#addWeekday(2);
  }
  /** On Wednesdays. */
  wednesday(): this {
    return this.#addWeekday(3);
  }
  /** On Thursdays. */
  thursday(): this {
    return this.#addWeekday(4);
  }
  /** On Fridays. */
  friday(): this {
    return this.#addWeekday(5);
  }
  /** On Saturdays. */
  saturday(): this {
    return this.#addWeekday(6);
  }
  /** On Sundays. */
  sunday(): this {
    return this.#addWeekday(7);
  }
  /** Monday to Friday. */
  weekday(): this {
    return this.#setDays([1, 2, 3, 4, 5], 'weekday()');
  }
  /** Saturday and Sunday. */
  weekend(): this {
    return this.#setDays([6, 7], 'weekend()');
  }

  /**
   * The time of day: `at('HH:mm')`, `at('HH:mm:ss')` or `at(h, m?, s?)` for
   * days and longer (optionally with a zone: `at('08:30', 'Europe/Paris')`);
   * `at(':mm')` for hours; `at(':ss')` for minutes.
   * @example
   * scheduler.every().day().at('10:30').run(fn);
   * scheduler.every().hour().at(':15').run(fn);
   */
  at(time: string | number, minuteOrZone?: number | string, second?: number): this {
    const unit = this.#unit;
    if (unit === undefined) throw new TypeError('Call a unit (day(), monday(), hour()...) before at()');
    if (unit === 'millisecond' || unit === 'second') throw new TypeError(`at() does not apply to ${unit}s`);
    // One time and one zone a rule, as one unit: a second at() is a mistake, not a change of mind.
    if (this.#at !== undefined) throw new TypeError(`every() already has a time (at()); cannot also use at(${describe(time)})`);
    if (typeof time === 'number') {
      if (unit !== 'day' && unit !== 'week')
        throw new TypeError(`at(h, m, s) needs a day or longer unit; use at(':mm') for hours and at(':ss') for minutes`);
      if (typeof minuteOrZone === 'string') throw new TypeError('at(h, m, s) takes numbers; set a zone with timezone(zone)');
      this.#at = [
        checkPart(time, 23, 'hour', time),
        checkPart(minuteOrZone ?? 0, 59, 'minute', time),
        checkPart(second ?? 0, 59, 'second', time),
      ];
      return this;
    }
    if (typeof time !== 'string') throw new TypeError(`Expected at() to get a time string or hour number, got ${describe(time)}`);
    if (minuteOrZone !== undefined) {
      if (typeof minuteOrZone !== 'string') throw new TypeError(`Expected the zone of at() to be a string, got ${describe(minuteOrZone)}`);
      this.#setZone(minuteOrZone);
    }
    this.#at = parseAt(time, unit);
    return this;
  }

  /**
   * The IANA time zone of this rule's calendar arithmetic.
   * @default the scheduler's `timezone`
   * @example
   * scheduler.every().day().at('09:00').timezone('Asia/Tokyo').run(fn);
   */
  timezone(zone: string): this {
    if (typeof zone !== 'string') throw new TypeError(`Expected a time zone name, got ${describe(zone)}`);
    this.#setZone(zone);
    return this;
  }

  #setZone(zone: string): void {
    if (this.#zone !== undefined) throw new TypeError(`every() already has the time zone ${this.#zone}; cannot also use ${describe(zone)}`);
    this.#zone = validateZone(zone);
  }

  /** @internal */
  protected plan(start: number, inclusive: boolean): RulePlan {
    const unit = this.#unit;
    if (unit === undefined) throw new TypeError(`every(${this.#n}) needs a unit before run(): seconds(), day(), monday()...`);
    const zone = this.#zone ?? this.factory.timezone;
    if (unit === 'day' || unit === 'week') {
      // Without at(): the wall time the start shows in the zone (read from Intl, as the rules do: no luxon).
      const [hour, minute, second] = this.#at ?? wallClock(TimeZone.of(zone).wallTime(start));
      const rule = new CalendarRule({ zone, anchor: start, unit, every: this.#n, weekdays: this.#weekdays, hour, minute, second });
      return { rule, first: rule.next(inclusive ? start - 1 : start) };
    }
    const interval = this.#n * UNIT_MS[unit];
    if (this.#at === undefined) {
      const rule = new IntervalRule(start, interval);
      return { rule, first: rule.next(start) };
    }
    // at(':mm') / at(':ss'): the first instant at or after the start whose
    // wall clock shows that minute/second, then every interval from there.
    const local = luxon().DateTime.fromMillis(start, { zone }).set({ millisecond: 0 });
    let aligned = unit === 'hour' ? local.set({ minute: this.#at[1], second: this.#at[2] }) : local.set({ second: this.#at[2] });
    if (aligned.toMillis() < start) aligned = aligned.plus(unit === 'hour' ? { hours: 1 } : { minutes: 1 });
    const rule = new IntervalRule(aligned.toMillis(), interval);
    return { rule, first: aligned.toMillis() };
  }

  #setUnit(unit: Unit): this {
    if (this.#unit !== undefined) throw new TypeError(`every() already has the unit ${this.#unit}; cannot also use ${unit}`);
    if (this.#n * UNIT_MS[unit] > MAX_STEP) {
      throw new RangeError(
        `every(${this.#n}) ${unit}s spans more than the Date range; at most ${Math.floor(MAX_STEP / UNIT_MS[unit])} ${unit}s`,
      );
    }
    this.#unit = unit;
    return this;
  }

  #addWeekday(day: number): this {
    if (this.#unit === 'week' && this.#weekdays !== undefined) {
      if (!this.#weekdays.includes(day)) this.#weekdays.push(day);
      return this;
    }
    this.#setUnit('week');
    this.#weekdays = [day];
    return this;
  }

  #setDays(days: number[], name: string): this {
    if (this.#n !== 1) throw new RangeError(`every(${this.#n}).${name} is ambiguous; use every().${name}`);
    this.#setUnit('day');
    this.#weekdays = days;
    return this;
  }
}

/**
 * `every('15m')`: the interval as a count of the largest unit that divides it
 * exactly, so `at(':ss')` / `at(':mm')` still apply (`every('2h').at(':15')`).
 * Days and weeks are refused: `every('1d')` could mean 24 hours or the same
 * wall time tomorrow, and the two differ across DST.
 */
function intervalOf(text: string): [number, Unit] {
  const ms = toDuration(text, 'every()', 1);
  if (/\d(?:\.\d+)?[dw]/.test(text)) {
    throw new RangeError(
      `every("${text}") is ambiguous across DST: use every().day() / every(n).days() for calendar days at the same wall time, or hours (every("24h")) for elapsed time`,
    );
  }
  if (!Number.isInteger(ms)) throw new RangeError(`Expected every("${text}") to be a whole number of milliseconds, got ${ms} ms`);
  for (const unit of ['hour', 'minute', 'second'] as const) {
    if (ms % UNIT_MS[unit] === 0) return [ms / UNIT_MS[unit], unit];
  }
  return [ms, 'millisecond'];
}

function checkPart(value: unknown, max: number, part: string, whole: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > max) {
    throw new RangeError(`Invalid time ${describe(whole)} for at(): ${part} must be an integer 0-${max}, got ${describe(value)}`);
  }
  return value as number;
}

const DAY_TIME = /^(\d{1,2}):(\d{2})(?::(\d{2}))?$/;
const HOUR_TIME = /^:(\d{2})(?::(\d{2}))?$/;
const MINUTE_TIME = /^:(\d{2})$/;

/** Parses an at() string for a unit into [hour, minute, second]. */
function parseAt(time: string, unit: Unit): [number, number, number] {
  const bad = (why: string) => new RangeError(`Invalid time "${time}" for at() with ${unit}s: ${why}`);
  if (unit === 'day' || unit === 'week') {
    const match = DAY_TIME.exec(time);
    if (match === null) throw bad("expected 'HH:mm' or 'HH:mm:ss'");
    return [part(match[1], 23, 'hour', bad), part(match[2], 59, 'minute', bad), part(match[3], 59, 'second', bad)];
  }
  if (unit === 'hour') {
    const match = HOUR_TIME.exec(time);
    if (match === null) throw bad("expected ':mm' or ':mm:ss'");
    return [0, part(match[1], 59, 'minute', bad), part(match[2], 59, 'second', bad)];
  }
  const match = MINUTE_TIME.exec(time);
  if (match === null) throw bad("expected ':ss'");
  return [0, 0, part(match[1], 59, 'second', bad)];
}

function part(text: string | undefined, max: number, name: string, bad: (why: string) => RangeError): number {
  const value = text === undefined ? 0 : Number(text);
  if (value > max) throw bad(`${name} ${value} is out of range 0-${max}`);
  return value;
}

// Rules are immutable, and apps tend to register many jobs on a few
// patterns: parse each pattern once and let its jobs share it.
const cronRules = new Map<string, CronRule>();
const CRON_CACHE_SIZE = 1_000;

function cronRule(expression: string, zone: string): CronRule {
  const key = `${zone} ${String(expression)}`;
  let rule = cronRules.get(key);
  if (rule === undefined) {
    rule = new CronRule(expression, zone);
    if (cronRules.size >= CRON_CACHE_SIZE) cronRules.clear();
    cronRules.set(key, rule);
  }
  return rule;
}

/** The builder returned by `scheduler.cron(expression)`. */
export class CronBuilder extends JobBuilder {
  readonly #rule: CronRule;

  /** @internal use `scheduler.cron()` */
  constructor(factory: JobFactory, expression: string, zone: string) {
    super(factory);
    this.#rule = cronRule(expression, zone);
  }

  /** @internal */
  protected plan(start: number, inclusive: boolean): RulePlan {
    return { rule: this.#rule, first: this.#rule.next(inclusive ? start - 1 : start) };
  }
}

/** A rule with a single occurrence, for `scheduler.at()`. */
const NEVER_AGAIN: Rule = { next: () => undefined };

/** The builder returned by `scheduler.at(when)`: a one-shot job. */
export class AtBuilder extends JobBuilder {
  readonly #at: number;

  /** @internal use `scheduler.at()` */
  constructor(factory: JobFactory, when: When) {
    super(factory);
    this.#at = toEpoch(when);
  }

  /** @internal */
  protected plan(): RulePlan {
    return { rule: NEVER_AGAIN, first: this.#at };
  }
}

/** The hour, minute and second a wall time (ms, as TimeZone.wallTime gives it) shows. */
function wallClock(wall: number): [number, number, number] {
  const mod = (value: number, unit: number) => ((value % unit) + unit) % unit;
  return [Math.floor(mod(wall, DAY) / HOUR), Math.floor(mod(wall, HOUR) / MINUTE), Math.floor(mod(wall, MINUTE) / SECOND)];
}
