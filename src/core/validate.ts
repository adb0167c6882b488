// Checks shared by every public call: how a bad value is described in an
// error, what a time (`When`) may be, and text a database keeps as given.
import { luxon } from './load-on-use.js';

/** Describes a bad value for an error message: `0 (number)`, `"x" (string)`. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return `"${value}" (string)`;
  if (typeof value === 'bigint') return `${value}n (bigint)`;
  if (value instanceof Date) return `${value.toString()} (Date)`;
  if (value === null) return 'null';
  if (typeof value === 'object') return `${Object.prototype.toString.call(value)} (object)`;
  if (typeof value === 'function') return 'a function';
  return `${String(value)} (${typeof value})`;
}

/**
 * The part of a luxon `DateTime` taskheap reads. It is structural on purpose:
 * the published .d.ts files must not import luxon's types, or every user would
 * need `@types/luxon` (TS7016 with `skipLibCheck: false`, and `When` silently
 * becoming `any` with `skipLibCheck: true`). Any luxon `DateTime` matches it;
 * at run time `toEpoch` still accepts only real luxon DateTimes.
 */
export interface DateTimeLike {
  /** False for an invalid DateTime, which is refused. */
  readonly isValid: boolean;
  /** The instant, epoch ms. */
  toMillis(): number;
}

/**
 * An ISO-8601 date-time string, as the type system can tell one:
 * `'2026-12-24T18:00:00Z'` fits, `'tomorrow'` does not. At run time it must
 * also carry its offset (`Z` or `+01:00`): no zone is ever guessed.
 */
export type IsoInstant = `${number}-${number}-${number}T${string}`;

/**
 * A point in time as users may give it: a `Date`, epoch milliseconds, a luxon
 * `DateTime`, or an ISO-8601 string that carries its offset
 * (`'2026-12-24T18:00:00Z'`, `'2026-12-24T19:00:00+01:00'`).
 */
export type When = Date | number | DateTimeLike | IsoInstant;

/**
 * The latest (and, negated, the earliest) instant accepted anywhere: the range
 * of an ECMAScript `Date`, ±8.64e15 ms (±100,000,000 days around 1970, about
 * years -271821 to 275760). Every accepted time can then be shown as a Date,
 * and arithmetic on it stays exact.
 */
export const MAX_TIME = 8.64e15;

// Date and time with seconds optional, fraction optional, and a mandatory
// offset: a string without one would be read in some implicit zone, which is
// exactly the ambiguity a scheduler must not guess at.
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)$/i;

function inRange(ms: number, what: string, when: unknown): number {
  if (ms >= -MAX_TIME && ms <= MAX_TIME) return ms;
  throw new RangeError(`Expected \`${what}\` to be within ±8.64e15 epoch milliseconds (the Date range), got ${describe(when)}`);
}

/**
 * Converts a `Date`, epoch milliseconds, a luxon `DateTime` or an ISO-8601
 * string with an offset to epoch milliseconds, or throws a
 * TypeError/RangeError that names the bad value. Accepted times lie within
 * ±`MAX_TIME`.
 */
export function toEpoch(when: unknown, what = 'when'): number {
  if (typeof when === 'number') {
    if (Number.isFinite(when)) return inRange(when, what, when);
    throw new RangeError(`Expected \`${what}\` to be a finite number of epoch milliseconds, got ${describe(when)}`);
  }
  if (when instanceof Date) {
    const ms = when.getTime();
    if (Number.isFinite(ms)) return ms;
    throw new RangeError(`Expected \`${what}\` to be a valid Date, got Invalid Date`);
  }
  // luxon's own test (DateTime.isDateTime), which holds for a DateTime of any copy of luxon.
  if (isDateTime(when)) {
    if (when.isValid) return inRange(when.toMillis(), what, when);
    throw new RangeError(`Expected \`${what}\` to be a valid DateTime, got an invalid one (${when.invalidReason ?? 'unknown reason'})`);
  }
  if (typeof when === 'string') {
    if (!ISO_INSTANT.test(when)) {
      throw new TypeError(
        `Expected \`${what}\` to be an ISO-8601 time with an offset or Z ('2026-12-24T18:00:00Z'), got ${describe(when)}`,
      );
    }
    const parsed = luxon().DateTime.fromISO(when, { setZone: true });
    if (parsed.isValid) return inRange(parsed.toMillis(), what, when);
    throw new RangeError(`Expected \`${what}\` to be a valid ISO-8601 time, got ${describe(when)} (${parsed.invalidReason ?? 'invalid'})`);
  }
  throw new TypeError(
    `Expected \`${what}\` to be a Date, epoch milliseconds, a luxon DateTime or an ISO-8601 string, got ${describe(when)}`,
  );
}

function isDateTime(value: unknown): value is DateTimeLike & { invalidReason: string | null } {
  return typeof value === 'object' && value !== null && (value as { isLuxonDateTime?: unknown }).isLuxonDateTime === true;
}

/** Throws a TypeError naming the first key of `options` that is not in `known`. */
export function assertKnownKeys(options: object, known: ReadonlySet<string>, what: string): void {
  for (const key in options) {
    if (!known.has(key)) {
      throw new TypeError(`Unknown ${what} option \`${key}\`; expected one of: ${[...known].join(', ')}`);
    }
  }
}

/** Throws unless `options` is undefined or a plain object. */
export function assertOptionsObject(options: unknown, what: string): asserts options is object | undefined {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`Expected ${what} options to be an object, got ${describe(options)}`);
  }
}

/** How an error names what it checked: an option or a path in backticks (`rate.key`), a phrase as it is (the handler name). */
export function label(what: string): string {
  return /^[\w.]+$/.test(what) ? `\`${what}\`` : what;
}

/**
 * Throws a TypeError unless `value` is text every store keeps as given: no
 * NUL character (PostgreSQL's text and jsonb cannot hold it, and C-string
 * APIs would cut it short) and well-formed UTF-16 (`assertWellFormed`).
 * Names, keys, log lines and the strings of progress values all go through it.
 */
export function assertStorableText(value: string, what: string): void {
  const at = value.indexOf('\0');
  if (at >= 0) throw new TypeError(`Expected ${label(what)} to contain no NUL character, got one at index ${at} of ${excerpt(value, at)}`);
  assertWellFormed(value, what);
}

/**
 * Throws unless `value` is well-formed UTF-16: a lone surrogate (half of a
 * pair) cannot be encoded as UTF-8, so a database stores it as U+FFFD and
 * two different keys (`'x\ud800'`, `'x\udc00'`) would become one; in JSON it
 * is an escape PostgreSQL's jsonb refuses.
 */
export function assertWellFormed(value: string, what: string): void {
  const at = value.search(/\p{Cs}/u);
  if (at >= 0) {
    const unit = value.charCodeAt(at).toString(16);
    throw new TypeError(
      `Expected ${label(what)} to be well-formed text, got a lone surrogate (\\u${unit}) at index ${at} of ${excerpt(value, at)}`,
    );
  }
}

/** The text around index `at` of `value` (at most 60 code units) as a JSON string, so NUL and lone surrogates show as escapes. */
function excerpt(value: string, at: number): string {
  const start = Math.max(0, Math.min(at - 30, value.length - 60));
  const end = Math.min(value.length, start + 60);
  return `${start > 0 ? '…' : ''}${JSON.stringify(value.slice(start, end))}${end < value.length ? '…' : ''}`;
}

/** A record with every key of `T`: a key missing from it (or one too many) does not compile. */
type EveryKey<T> = { readonly [K in keyof Required<T>]: true };

/** The keys of an options group, from a record that must name each of them (see core/options.ts). */
export function keysOf<T>(record: EveryKey<T>): readonly (keyof T & string)[] {
  return Object.keys(record) as (keyof T & string)[];
}

/**
 * What a store's columns hold, applied on top of the checks memory makes
 * (durable/validate.ts gives them; core/options.ts's validators take them): the one difference between a task in
 * memory and a stored one.
 */
export interface StoreRules {
  /** Checks a key or queue name a column and an index must hold (`what`: the option). */
  key(value: unknown, what: string): void;
  /** The longest `timeout` (a timer's limit). */
  readonly maxTimeout: number;
  /** The most `retry.attempts` and `catchUp` (an integer column). */
  readonly maxCount: number;
  /** The longest throttle or debounce period (a due time must stay storable). */
  readonly longestPeriod: { readonly ms: number; readonly words: string };
}
