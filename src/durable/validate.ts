// What the durable layer checks at the call, before anything reaches a
// database: values a column cannot hold, and payloads JSON would change.
import { assertStorableText, describe, label, type StoreRules, keysOf } from '../core/validate.js';
import { TASK_STATES, type JobFilter, type TaskCountFilter, type TaskFilter } from './store.js';

/** The longest delay setTimeout keeps (2^31 - 1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_TIMER = 2 ** 31 - 1;
/** The largest count an `integer` column holds (attempts, times). */
export const MAX_ATTEMPTS = 2 ** 31 - 1;
/** Longest handler name, in UTF-16 code units. */
const MAX_NAME_LENGTH = 255;
/** Longest key (tasks and jobs); keys are indexed, and an index entry must fit in a PostgreSQL page. */
const MAX_KEY_LENGTH = 512;
/** Stored times: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, what both stores and ISO dates hold. */
const MIN_TIME = -62_135_596_800_000;
const MAX_TIME = 253_402_300_799_999;

/** What a store's columns hold, for the option groups' validators (core/options.ts). */
export const STORE_RULES: StoreRules = {
  key: (value, what) => assertKey(value, what),
  maxTimeout: MAX_TIMER,
  maxCount: MAX_ATTEMPTS,
  // Ten years: a debounced task is due its period after \`when\`, and that too must be storable.
  longestPeriod: { ms: 10 * 365.25 * 24 * 3_600_000, words: 'ten years' },
};

/** A handler name: a non-empty string without NUL, at most MAX_NAME_LENGTH long. */
export function assertName(name: unknown, what: string): asserts name is string {
  assertText(name, what, MAX_NAME_LENGTH);
}

/** A task or job key: a non-empty string without NUL, at most MAX_KEY_LENGTH long. */
export function assertKey(key: unknown, what: string): asserts key is string {
  assertText(key, what, MAX_KEY_LENGTH);
}

function assertText(value: unknown, what: string, max: number): void {
  if (typeof value !== 'string' || value === '')
    throw new TypeError(`Expected ${label(what)} to be a non-empty string, got ${describe(value)}`);
  if (value.length > max) throw new RangeError(`Expected ${label(what)} to be at most ${max} characters long, got ${value.length}`);
  assertStorableText(value, what);
}

/** An epoch-ms time both stores can hold. */
export function assertStoredTime(ms: number, what: string): void {
  if (!Number.isFinite(ms) || ms < MIN_TIME || ms > MAX_TIME) {
    throw new RangeError(
      `Expected ${label(what)} of a stored task to be between years 1 and 9999 (epoch ms ${MIN_TIME} to ${MAX_TIME}), got ${describe(ms)}`,
    );
  }
}

/**
 * Serialises a payload, or throws a TypeError naming the path of the first
 * value JSON would change or drop (`payload.items[2]`): a handler must get
 * back exactly what was scheduled.
 *
 * Allowed: null, booleans, finite numbers, strings, arrays, plain objects.
 * Object properties whose value is `undefined` are left out (reading them
 * back gives `undefined` again); anywhere else `undefined` is refused.
 */
export function toPayload(payload: unknown): string {
  if (payload === undefined) return 'null';
  check(payload, 'payload', []);
  return JSON.stringify(payload);
}

/**
 * Serialises a handler's return value like a payload: `undefined` (no
 * value) is stored as SQL NULL; anything JSON would change throws a
 * TypeError naming its path (`result.when`), which fails the attempt.
 */
export function toResult(value: unknown): string | null {
  if (value === undefined) return null;
  check(value, 'result', []);
  return JSON.stringify(value);
}

function check(value: unknown, path: string, parents: object[]): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(path, `${String(value)} becomes null in JSON`);
      return;
    case 'undefined':
      refuse(path, 'undefined becomes null in a JSON array');
      return;
    case 'bigint':
    case 'function':
    case 'symbol':
      refuse(path, `a ${typeof value} is not JSON`);
      return;
    default:
      break;
  }
  if (value === null) return;
  const object = value as object;
  if (parents.includes(object)) refuse(path, 'it refers to itself (a cycle)');
  if (Array.isArray(object)) {
    parents.push(object);
    for (let i = 0; i < object.length; i++) {
      if (!(i in object)) refuse(`${path}[${i}]`, 'a hole in an array becomes null in JSON');
      check(object[i], `${path}[${i}]`, parents);
    }
    parents.pop();
    return;
  }
  const proto = Object.getPrototypeOf(object) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    const kind =
      object instanceof Date
        ? 'a Date becomes a string in JSON; pass date.toISOString() or date.getTime()'
        : object instanceof Map || object instanceof Set
          ? `a ${object.constructor.name} becomes {} in JSON; pass an array or a plain object`
          : `a ${(object.constructor as { name?: string } | undefined)?.name ?? 'class'} instance loses its class in JSON; pass a plain object`;
    refuse(path, kind);
  }
  if (Object.getOwnPropertySymbols(object).length > 0) refuse(path, 'symbol keys are dropped by JSON');
  parents.push(object);
  for (const key of Object.keys(object)) {
    const child = (object as Record<string, unknown>)[key];
    if (child === undefined) continue;
    check(child, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, parents);
  }
  parents.pop();
}

function refuse(path: string, why: string): never {
  const root = /^\w+/.exec(path)?.[0] ?? 'payload';
  throw new TypeError(`Expected \`${root}\` to be JSON that reads back unchanged, but \`${path}\` is not: ${why}`);
}

/** A count option: an integer from 0 to MAX_ATTEMPTS. */
export function assertCount(value: unknown, what: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_ATTEMPTS) {
    throw new RangeError(`Expected ${label(what)} to be an integer from 0 to ${MAX_ATTEMPTS}, got ${describe(value)}`);
  }
}

const STATES: ReadonlySet<string> = new Set(TASK_STATES);
const JOB_STATES = new Set(['scheduled', 'paused', 'done', 'cancelled']);
const COUNT_FILTER: Record<keyof Required<TaskCountFilter>, true> = {
  name: true,
  keyPrefix: true,
  jobKey: true,
  queue: true,
  from: true,
  to: true,
};
const TASK_FILTER_KEYS: ReadonlySet<string> = new Set(
  keysOf<TaskFilter>({ ...COUNT_FILTER, state: true, after: true, limit: true, order: true }),
);
const COUNT_FILTER_KEYS: ReadonlySet<string> = new Set(keysOf<TaskCountFilter>(COUNT_FILTER));
const JOB_FILTER_KEYS: ReadonlySet<string> = new Set(
  keysOf<JobFilter>({ state: true, name: true, keyPrefix: true, after: true, limit: true }),
);
/** The most rows one list call returns. */
const MAX_LIST = 10_000;

/** A `listTasks` filter (or with `count`, a `countTasks` one): known keys, each of the right kind. */
export function assertTaskFilter(filter: unknown, count = false): void {
  const f = assertFilter(filter, count ? COUNT_FILTER_KEYS : TASK_FILTER_KEYS, STATES, count ? 'countTasks' : 'listTasks');
  if (f.jobKey !== undefined) assertKey(f.jobKey, 'jobKey');
  if (f.queue !== undefined) assertKey(f.queue, 'queue');
  if (f.order !== undefined && f.order !== 'asc' && f.order !== 'desc')
    throw new RangeError(`Expected \`order\` to be 'asc' or 'desc', got ${describe(f.order)}`);
  for (const what of ['from', 'to'] as const) if (f[what] !== undefined) assertFilterTime(f[what], what);
  if (f.after !== undefined) {
    const after = f.after as { runAt?: unknown; id?: unknown } | null;
    if (typeof after !== 'object' || after === null)
      throw new TypeError(`Expected \`after\` to be the last task of the previous page ({ runAt, id }), got ${describe(after)}`);
    assertFilterTime(after.runAt, 'after.runAt');
    if (typeof after.id !== 'number' || !Number.isSafeInteger(after.id))
      throw new TypeError(`Expected \`after.id\` to be a task id, got ${describe(after.id)}`);
  }
}

/** A `listJobs` filter. */
export function assertJobFilter(filter: unknown): void {
  const f = assertFilter(filter, JOB_FILTER_KEYS, JOB_STATES, 'listJobs');
  if (f.after !== undefined) assertKey(f.after, 'after');
}

function assertFilter(filter: unknown, keys: ReadonlySet<string>, states: ReadonlySet<string>, what: string): Record<string, unknown> {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter))
    throw new TypeError(`Expected the ${what} filter to be an object, got ${describe(filter)}`);
  const f = filter as Record<string, unknown>;
  for (const key of Object.keys(f)) {
    if (!keys.has(key)) throw new TypeError(`Unknown ${what} filter \`${key}\`; expected one of: ${[...keys].join(', ')}`);
  }
  if (f.state !== undefined && !states.has(f.state as string)) {
    throw new RangeError(`Expected \`state\` to be one of ${[...states].map((s) => `'${s}'`).join(', ')}, got ${describe(f.state)}`);
  }
  if (f.name !== undefined) assertName(f.name, 'name');
  if (f.keyPrefix !== undefined) assertKey(f.keyPrefix, 'keyPrefix');
  if (f.limit !== undefined && (typeof f.limit !== 'number' || !Number.isInteger(f.limit) || f.limit < 1 || f.limit > MAX_LIST)) {
    throw new RangeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LIST}, got ${describe(f.limit)}`);
  }
  return f;
}

function assertFilterTime(value: unknown, what: string): void {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number') throw new TypeError(`Expected \`${what}\` to be a Date or epoch milliseconds, got ${describe(value)}`);
  if (!Number.isFinite(ms) || ms < MIN_TIME || ms > MAX_TIME) {
    throw new RangeError(`Expected \`${what}\` to be between years 1 and 9999, got ${describe(value)}`);
  }
}
