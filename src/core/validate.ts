import { DateTime } from 'luxon';

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
  readonly isValid: boolean;
  toMillis(): number;
}

/** A point in time as users may give it: a `Date`, epoch milliseconds or a luxon `DateTime`. */
export type When = Date | number | DateTimeLike;

/**
 * Converts a `Date`, epoch milliseconds or a luxon `DateTime` to epoch
 * milliseconds, or throws a TypeError/RangeError that names the bad value.
 */
export function toEpoch(when: unknown, what = 'when'): number {
  if (typeof when === 'number') {
    if (Number.isFinite(when)) return when;
    throw new RangeError(`Expected \`${what}\` to be a finite number of epoch milliseconds, got ${describe(when)}`);
  }
  if (when instanceof Date) {
    const ms = when.getTime();
    if (Number.isFinite(ms)) return ms;
    throw new RangeError(`Expected \`${what}\` to be a valid Date, got Invalid Date`);
  }
  if (DateTime.isDateTime(when)) {
    if (when.isValid) return when.toMillis();
    throw new RangeError(`Expected \`${what}\` to be a valid DateTime, got an invalid one (${when.invalidReason ?? 'unknown reason'})`);
  }
  throw new TypeError(`Expected \`${what}\` to be a Date, epoch milliseconds or a luxon DateTime, got ${describe(when)}`);
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

/** A duration in milliseconds: finite and >= `min`. */
export function assertDuration(value: unknown, what: string, min = 0): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new RangeError(`Expected \`${what}\` to be a finite number of milliseconds >= ${min}, got ${describe(value)}`);
  }
}
