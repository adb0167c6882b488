// The limit options, which decide when due work may start (docs/limits.md):
// rate limits, serial and concurrency groups, priorities and queues. A group
// is the tasks that name the same group string (a chat, a tenant): they share
// one limit. Their types
// and validation live here so the in-memory loop and the durable stores read
// them the same way.
import { toDuration, type Duration } from './duration.js';
import { assertWellFormed, describe, keysOf, type StoreRules } from './validate.js';

/**
 * A rate limit: at most `limit` runs start in any window of `interval`
 * (a sliding window, so no burst at a window's edge).
 * @example { limit: 30, interval: '1s' }
 */
export interface RateLimit {
  /** Starts allowed per window: an integer >= 1. */
  limit: number;
  /** The window: milliseconds, or a string such as `'1s'` or `'1m'`. */
  interval: Duration;
}

/**
 * A rate limit shared by every task that names the same `group` (a chat id,
 * a route): the group's own bucket, on top of the scheduler's `rate`.
 * @example { group: `chat:${chatId}`, limit: 1, interval: '1s' }
 */
export interface GroupRateLimit extends RateLimit {
  /** The group's name: a non-empty string (at most 512 characters). */
  group: string;
}

/**
 * A concurrency limit of a group: at most `limit` tasks naming the same
 * `group` (a tenant, a customer) run at once, whatever the pool's size;
 * `serial: group` is `{ group, limit: 1 }`.
 * @example { group: `tenant:${tenantId}`, limit: 2 }
 */
export interface ConcurrencyLimit {
  /** The group's name: a non-empty string (at most 512 characters). */
  group: string;
  /** Tasks of the group that may run at once: an integer >= 1. */
  limit: number;
}

/**
 * A share of the workers for a group (a tenant, a chat): when more tasks are
 * due than workers are free, starts go round the groups with due work in
 * turn, by weight.
 * @example { group: `tenant:${tenantId}`, weight: 2 }
 */
export interface FairShare {
  /** The group's name: a non-empty string (at most 512 characters). */
  group: string;
  /** Its share: a group of weight 2 gets twice the starts of one of weight 1. An integer from 1 to 1,000. @default 1 */
  weight?: number;
}

/** A validated rate limit, interval in milliseconds. */
export interface Rate {
  readonly group: string | undefined;
  readonly limit: number;
  readonly interval: number;
}

/** A validated rate limit of a group. */
interface GroupRate extends Rate {
  readonly group: string;
}

/** Longest group (rate, serial or concurrency), dedupe key or queue name accepted, in UTF-16 code units. */
const MAX_KEY_LENGTH = 512;
/** The priority range: a PostgreSQL `integer`. */
const MIN_PRIORITY = -2_147_483_648;
const MAX_PRIORITY = 2_147_483_647;
/** The most starts a window may allow. */
const MAX_RATE_LIMIT = 1_000_000;
/** The longest window: a day. */
const MAX_RATE_INTERVAL = 86_400_000;
/** The largest weight of a fair share. */
const MAX_WEIGHT = 1_000;
/** The largest concurrency limit of a group or queue: a PostgreSQL `integer`. */
const MAX_CONCURRENCY = 2_147_483_647;
/** The queue of tasks and jobs that name none. */
export const DEFAULT_QUEUE = 'default';

/**
 * Validates a rate limit. `option` names it in errors (`rate`); `grouped`
 * requires (and keeps) a `group`, otherwise a group is refused.
 */
export function toRate(value: unknown, option: string, grouped: boolean): Rate {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(
      `Expected \`${option}\` to be an object like { ${grouped ? "group: 'chat:1', " : ''}limit: 30, interval: '1s' }, got ${describe(value)}`,
    );
  }
  const { group, limit, interval } = value as Partial<GroupRateLimit>;
  for (const name of Object.keys(value)) {
    if (name !== 'limit' && name !== 'interval' && !(grouped && name === 'group')) {
      throw new TypeError(
        `Unknown \`${option}\` option ${describe(name)}; expected ${grouped ? '`group`, ' : ''}\`limit\` and \`interval\``,
      );
    }
  }
  if (grouped) assertKey(group, `${option}.group`);
  if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > MAX_RATE_LIMIT) {
    throw new RangeError(`Expected \`${option}.limit\` to be an integer from 1 to ${MAX_RATE_LIMIT}, got ${describe(limit)}`);
  }
  const ms = toDuration(interval, `${option}.interval`, 1);
  if (ms > MAX_RATE_INTERVAL)
    throw new RangeError(`Expected \`${option}.interval\` to be at most a day (${MAX_RATE_INTERVAL} ms), got ${describe(interval)}`);
  return { group: grouped ? (group as string) : undefined, limit: limit as number, interval: ms };
}

/** Throws unless `value` is a usable key, group or queue name: a non-empty string of at most MAX_KEY_LENGTH. */
function assertKey(value: unknown, option: string): asserts value is string {
  if (typeof value !== 'string') throw new TypeError(`Expected \`${option}\` to be a string, got ${describe(value)}`);
  if (value.length === 0 || value.length > MAX_KEY_LENGTH) {
    throw new RangeError(`Expected \`${option}\` to be 1 to ${MAX_KEY_LENGTH} characters long, got ${describe(value)}`);
  }
  assertWellFormed(value, option);
}

/**
 * Validates a concurrency limit of a group (`{ group, limit }`); `option` names it in errors.
 * @example toConcurrency({ group: 'tenant:7', limit: 2 }, 'concurrency');
 */
function toConcurrency(value: unknown, option = 'concurrency'): ConcurrencyLimit {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected \`${option}\` to be an object like { group: 'tenant:1', limit: 2 }, got ${describe(value)}`);
  }
  for (const name of Object.keys(value)) {
    if (name !== 'group' && name !== 'limit')
      throw new TypeError(`Unknown \`${option}\` option ${describe(name)}; expected \`group\` and \`limit\``);
  }
  const { group, limit } = value as Partial<ConcurrencyLimit>;
  assertKey(group, `${option}.group`);
  assertLimit(limit, `${option}.limit`, false);
  return { group, limit };
}

/** Validates a fair share (`{ group, weight? }`), weight 1 by default. */
function toFairShare(value: unknown): Required<FairShare> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected \`fair\` to be an object like { group: 'tenant:1', weight: 2 }, got ${describe(value)}`);
  }
  for (const name of Object.keys(value)) {
    if (name !== 'group' && name !== 'weight')
      throw new TypeError(`Unknown \`fair\` option ${describe(name)}; expected \`group\` and \`weight\``);
  }
  const { group, weight = 1 } = value as Partial<FairShare>;
  assertKey(group, 'fair.group');
  if (!Number.isInteger(weight) || weight < 1 || weight > MAX_WEIGHT) {
    throw new RangeError(`Expected \`fair.weight\` to be an integer from 1 to ${MAX_WEIGHT}, got ${describe(weight)}`);
  }
  return { group, weight };
}

/** Throws unless `value` is a concurrency limit: an integer from 1 to MAX_CONCURRENCY (or Infinity when `infinite`). */
export function assertLimit(value: unknown, option: string, infinite: boolean): asserts value is number {
  if (infinite && value === Infinity) return;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_CONCURRENCY) {
    throw new RangeError(
      `Expected \`${option}\` to be an integer from 1 to ${MAX_CONCURRENCY}${infinite ? ' or Infinity' : ''}, got ${describe(value)}`,
    );
  }
}

/** Throws unless `value` is a usable queue name: a non-empty string of at most MAX_KEY_LENGTH. */
export function assertQueueName(value: unknown, option = 'queue'): asserts value is string {
  assertKey(value, option);
}

/** Throws unless `value` is an integer priority in [MIN_PRIORITY, MAX_PRIORITY]. */
function assertPriority(value: unknown, option = 'priority'): asserts value is number {
  if (!Number.isInteger(value) || (value as number) < MIN_PRIORITY || (value as number) > MAX_PRIORITY) {
    throw new RangeError(`Expected \`${option}\` to be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${describe(value)}`);
  }
}

/**
 * What a task carries of these options once validated: shared by every task
 * scheduled with the same settings, and absent (undefined) from tasks that
 * use none of them, which is how the loop keeps their path unchanged.
 */
export interface TaskLimits {
  /** The group's bucket the task also needs room in. */
  readonly rate: GroupRate | undefined;
  /** The serial group as given (its limit-1 concurrency group is `concurrency`). */
  readonly serial: string | undefined;
  /**
   * The concurrency group the task holds a place in from its start to its
   * final state (retries included): `serial: group` gives `{ group, limit: 1 }`.
   */
  readonly concurrency?: ConcurrencyLimit | undefined;
  /** Higher runs first among due tasks; 0 by default. */
  readonly priority: number;
  /** The task's queue; undefined for the default queue. */
  readonly queue?: string | undefined;
  /** Its dedupe key and mode (in-memory tasks only). */
  readonly dedupe?: Dedupe | undefined;
  /** Its fair share. */
  readonly fair?: Readonly<Required<FairShare>> | undefined;
}

/**
 * What a task with a `key` does when another task with the key exists
 * (see `TaskOptions.dedupe`).
 * @example { debounce: '500ms' }
 */
export type DedupeMode =
  | 'replace'
  | 'keep'
  | 'rerun'
  | {
      /** At most one task of the key per this period (ms or `'1s'`), finished ones included. */
      throttle: Duration;
    }
  | {
      /** Each call replaces the waiting task and is due this much (ms or `'1s'`) after its time. */
      debounce: Duration;
    };

/** What a call with a `key` did: see `Task.enqueued`. */
export type DedupeOutcome = 'inserted' | 'replaced' | 'existing';

/** A validated dedupe key and mode (period in ms; 0 for replace, keep and rerun). */
export interface Dedupe {
  /** The `key` option. */
  readonly key: string;
  /** The `dedupe` option's mode. */
  readonly mode: 'replace' | 'keep' | 'rerun' | 'throttle' | 'debounce';
  /** A throttle's or debounce's period, ms (0 for the others). */
  readonly period: number;
}

/** The dedupe shapes, as errors name them. */
const DEDUPE_SHAPES = `'replace', 'keep', 'rerun', { throttle: duration } or { debounce: duration }`;

/** The longest throttle or debounce period: a day in memory (its keys live there); a store's is longer. */
const MEMORY_DEDUPE_PERIOD = { ms: MAX_RATE_INTERVAL, words: 'a day' } as const;

/**
 * Validates the `key` and `dedupe` options, in memory and for a store
 * (whose `longest` period is its own, and which checks its key itself);
 * undefined without a key (a `dedupe` without a `key` is a TypeError).
 * @example toDedupe('digest:7', { debounce: '1s' }); // { key: 'digest:7', mode: 'debounce', period: 1000 }
 */
export function toDedupe(key: unknown, dedupe: unknown, longest: { ms: number; words: string } = MEMORY_DEDUPE_PERIOD): Dedupe | undefined {
  let mode: Dedupe['mode'] = 'replace';
  let period = 0;
  if (dedupe === 'keep' || dedupe === 'rerun') mode = dedupe;
  else if (typeof dedupe === 'string' && dedupe !== 'replace')
    throw new RangeError(`Expected \`dedupe\` to be ${DEDUPE_SHAPES}, got ${describe(dedupe)}`);
  else if (dedupe !== undefined && dedupe !== 'replace') {
    if (typeof dedupe !== 'object' || dedupe === null || Array.isArray(dedupe)) {
      throw new TypeError(`Expected \`dedupe\` to be ${DEDUPE_SHAPES}, got ${describe(dedupe)}`);
    }
    const names = Object.keys(dedupe);
    const name = names[0];
    if (names.length !== 1 || (name !== 'throttle' && name !== 'debounce')) {
      throw new TypeError(
        `Expected \`dedupe\` to be ${DEDUPE_SHAPES} (one of them), got an object with ${names.length === 0 ? 'no key' : `keys ${names.map((n) => `\`${n}\``).join(', ')}`}`,
      );
    }
    mode = name;
    const given = (dedupe as Record<string, unknown>)[name];
    period = toDuration(given, `dedupe.${name}`, 1);
    if (period > longest.ms)
      throw new RangeError(`Expected \`dedupe.${name}\` to be at most ${longest.words} (${longest.ms} ms), got ${describe(given)}`);
  }
  if (key === undefined || key === null) {
    if (dedupe === undefined) return undefined;
    const shown = period === 0 ? `'${mode}'` : `{ ${mode}: ${period} }`;
    throw new TypeError(`Expected a \`key\` with \`dedupe: ${shown}\`: deduplication is by key, and this task has none`);
  }
  assertKey(key, 'key');
  return { key, mode, period };
}

/**
 * The limits a task starts under. With a store they are enforced by the
 * store when it claims: with PostgreSQL across every process, by the
 * database's clock (a retry is a start).
 */
export interface LimitOptions {
  /**
   * A rate limit of a group (a chat, a route), on top of the scheduler's
   * `rate`: at most `limit` starts in any window of `interval`; the task
   * starts only when the group's bucket has room. The bucket's limit is the
   * one of the most recently scheduled task naming the group.
   * @example { group: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: GroupRateLimit;
  /**
   * Tasks naming the same serial group run one at a time, in due order (due
   * time, then id: priority does not reorder one group's tasks); a task holds
   * the group from its start to its final state, retries included. The same
   * as `concurrency: { group, limit: 1 }` (the two share their groups); a
   * task gives one or the other, not both.
   * @example `chat:${chatId}`
   */
  serial?: string;
  /**
   * A concurrency limit of a group: at most `limit` tasks naming `group` run
   * at once (one tenant cannot take every worker). The group's tasks start in
   * due order (priority does not reorder them) and each holds its place from
   * its start to its final state, retries included; a full group holds back
   * only its own tasks. The limit is the one of the most recently scheduled
   * task naming the group. Not with `serial` (which is `limit: 1`).
   * @default none
   * @example { group: `tenant:${tenantId}`, limit: 2 }
   */
  concurrency?: ConcurrencyLimit;
  /**
   * Among tasks due at once with too few free workers (or too little room
   * in the scheduler's `rate`), higher runs first: an integer. Strict:
   * lower priorities wait while higher ones are due.
   * @default 0
   */
  priority?: number;
  /**
   * The queue the task belongs to: a name (see `scheduler.queue(name)`);
   * queues have their own concurrency, rate limit and pause switch. A queue
   * nobody configured has no limits.
   * @default 'default' (with a store: the handler's queue, `define(name, handler, { queue })`, else 'default')
   * @example 'emails'
   */
  queue?: string;
  /**
   * A share of the workers for a group (a tenant, a chat): when more tasks
   * are due than workers are free, starts go round the groups with due work
   * in turn, `weight` starts each (in due order within a group), so a flood
   * from one group does not hold back the others. A group with nothing due
   * takes no turn and saves none for later. Among tasks of one priority; a
   * group is per queue, and a queue's tasks without it take turns as one
   * group. With a store, shared tasks are claimed only into free workers,
   * and the database keeps the turns (a task's turn is fixed when it comes
   * due; a task with a `rate` or `concurrency` group keeps that group's
   * order, outside the turns); a store whose `capabilities.fairShares` is
   * false refuses it at the call.
   * @default none
   * @example { group: `tenant:${tenantId}` }
   */
  fair?: FairShare;
}

/** The keys of the limit options. */
export const LIMIT_KEYS = keysOf<LimitOptions>({ rate: true, serial: true, concurrency: true, priority: true, queue: true, fair: true });

/**
 * Validates the limit options into what `TaskSettings.limits` holds; undefined
 * when none is given (or only `priority: 0` and the default queue), so such
 * tasks stay plain. `serial` and `concurrency` exclude each other (a
 * TypeError): `serial: group` is the concurrency limit `{ group, limit: 1 }`. The
 * durable runner calls it with a claimed task's stored options (a stored
 * rate's interval is already a number of milliseconds, which `toRate` accepts).
 * @example
 * toLimits({ rate: { group: 'chat:1', limit: 1, interval: 1_000 }, serial: 'chat:1', priority: 5 });
 */
function checkLimits(options: LimitOptions): TaskLimits | undefined {
  const { rate, serial, priority, queue } = options;
  const bucket = rate === undefined ? undefined : (toRate(rate, 'rate', true) as GroupRate);
  if (serial !== undefined) assertKey(serial, 'serial');
  let concurrency = options.concurrency === undefined ? undefined : toConcurrency(options.concurrency, 'concurrency');
  if (serial !== undefined && concurrency !== undefined) {
    throw new TypeError('Expected either `serial` or `concurrency`, not both: `serial: group` is `concurrency: { group, limit: 1 }`');
  }
  if (serial !== undefined) concurrency = { group: serial, limit: 1 };
  if (priority !== undefined) assertPriority(priority);
  if (queue !== undefined) assertQueueName(queue);
  const fair = options.fair === undefined ? undefined : toFairShare(options.fair);
  const named = queue === undefined || queue === DEFAULT_QUEUE ? undefined : queue;
  if (
    bucket === undefined &&
    concurrency === undefined &&
    named === undefined &&
    fair === undefined &&
    (priority === undefined || priority === 0)
  )
    return undefined;
  if (concurrency === undefined && named === undefined && fair === undefined) return { rate: bucket, serial, priority: priority ?? 0 };
  return { rate: bucket, serial, concurrency, priority: priority ?? 0, queue: named, fair };
}

/**
 * Validates the limit options (`checkLimits`); with `store`, the groups and
 * the queue name must also fit its columns, and its rules speak first.
 */
export function toLimits(options: LimitOptions, store?: StoreRules): TaskLimits | undefined {
  if (store !== undefined) {
    // Groups go into JSON the database parses and into indexed columns.
    if (options.serial !== undefined) store.key(options.serial, 'serial');
    if (options.queue !== undefined) store.key(options.queue, 'queue');
  }
  const limits =
    options.rate === undefined &&
    options.serial === undefined &&
    options.priority === undefined &&
    options.concurrency === undefined &&
    options.queue === undefined &&
    options.fair === undefined
      ? undefined
      : checkLimits(options);
  if (store !== undefined && limits !== undefined) {
    if (limits.concurrency !== undefined && options.serial === undefined) store.key(limits.concurrency.group, 'concurrency.group');
    if (limits.rate !== undefined) store.key(limits.rate.group, 'rate.group');
  }
  return limits;
}
