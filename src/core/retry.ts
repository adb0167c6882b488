// The retry policy: its options, their validation, and the delay before each
// retry (fixed or exponential, capped, with jitter).
import { toDuration, type Duration } from './duration.js';
import { assertKnownKeys, describe, keysOf } from './validate.js';

/** How a failed or timed-out run is retried. */
export interface RetryOptions {
  /**
   * Total number of attempts, the first run included.
   * @default 3
   */
  attempts?: number;
  /**
   * Wait before the second attempt: milliseconds, or a string such as `'1s'`.
   * @default 1000
   */
  delay?: Duration;
  /**
   * `'fixed'` waits `delay` every time; `'exponential'` doubles it after each failure.
   * @default 'exponential'
   */
  backoff?: 'fixed' | 'exponential';
  /**
   * Upper bound on the wait: milliseconds, or a string such as `'1h'`.
   * @default Infinity
   */
  maxDelay?: Duration;
  /**
   * Up to this much random time is added to each wait, so that many tasks
   * failing together do not retry in lockstep: milliseconds or a string.
   * @default 0
   */
  jitter?: Duration;
}

/** A validated, complete retry policy. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly delay: number;
  readonly backoff: 'fixed' | 'exponential';
  readonly maxDelay: number;
  readonly jitter: number;
}

const KEYS: ReadonlySet<string> = new Set(
  keysOf<RetryOptions>({ attempts: true, delay: true, backoff: true, maxDelay: true, jitter: true }),
);

/**
 * Validates `retry` as given to `schedule()`: a number is shorthand for
 * `{ attempts }`.
 */
export function toRetryPolicy(retry: RetryOptions | number): RetryPolicy {
  const options = typeof retry === 'number' ? { attempts: retry } : retry;
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`retry\` to be a number of attempts or an options object, got ${describe(retry)}`);
  }
  assertKnownKeys(options, KEYS, 'retry');
  const { attempts = 3, backoff = 'exponential' } = options;
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new RangeError(`Expected \`retry.attempts\` to be an integer >= 1, got ${describe(attempts)}`);
  }
  const delay = toDuration(options.delay ?? 1000, 'retry.delay');
  if (backoff !== 'fixed' && backoff !== 'exponential') {
    throw new RangeError(`Expected \`retry.backoff\` to be 'fixed' or 'exponential', got ${describe(backoff)}`);
  }
  const maxDelay =
    options.maxDelay === undefined || options.maxDelay === Infinity ? Infinity : toDuration(options.maxDelay, 'retry.maxDelay');
  const jitter = toDuration(options.jitter ?? 0, 'retry.jitter');
  return { attempts, delay, backoff, maxDelay, jitter };
}

/** The wait before the next attempt, after `failures` failed attempts (>= 1). */
export function retryDelay(policy: RetryPolicy, failures: number): number {
  const base = policy.backoff === 'fixed' ? policy.delay : policy.delay * 2 ** (failures - 1);
  const capped = Math.min(base, policy.maxDelay);
  return policy.jitter === 0 ? capped : capped + Math.random() * policy.jitter;
}
