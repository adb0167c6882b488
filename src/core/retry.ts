import { assertDuration, assertKnownKeys, describe } from './validate.js';

/** How a failed or timed-out run is retried. */
export interface RetryOptions {
  /**
   * Total number of attempts, the first run included.
   * @default 3
   */
  attempts?: number;
  /**
   * Wait before the second attempt, in milliseconds.
   * @default 1000
   */
  delay?: number;
  /**
   * `'fixed'` waits `delay` every time; `'exponential'` doubles it after each failure.
   * @default 'exponential'
   */
  backoff?: 'fixed' | 'exponential';
  /**
   * Upper bound on the wait, in milliseconds.
   * @default Infinity
   */
  maxDelay?: number;
  /**
   * Up to this many random milliseconds are added to each wait, so that many
   * tasks failing together do not retry in lockstep.
   * @default 0
   */
  jitter?: number;
}

/** A validated, complete retry policy. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly delay: number;
  readonly backoff: 'fixed' | 'exponential';
  readonly maxDelay: number;
  readonly jitter: number;
}

const KEYS = new Set(['attempts', 'delay', 'backoff', 'maxDelay', 'jitter']);

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
  const { attempts = 3, delay = 1000, backoff = 'exponential', maxDelay = Infinity, jitter = 0 } = options;
  if (!Number.isInteger(attempts) || attempts < 1) {
    throw new RangeError(`Expected \`retry.attempts\` to be an integer >= 1, got ${describe(attempts)}`);
  }
  assertDuration(delay, 'retry.delay');
  if (backoff !== 'fixed' && backoff !== 'exponential') {
    throw new RangeError(`Expected \`retry.backoff\` to be 'fixed' or 'exponential', got ${describe(backoff)}`);
  }
  if (typeof maxDelay !== 'number' || Number.isNaN(maxDelay) || maxDelay < 0) {
    throw new RangeError(`Expected \`retry.maxDelay\` to be a number of milliseconds >= 0, got ${describe(maxDelay)}`);
  }
  assertDuration(jitter, 'retry.jitter');
  return { attempts, delay, backoff, maxDelay, jitter };
}

/** The wait before the next attempt, after `failures` failed attempts (>= 1). */
export function retryDelay(policy: RetryPolicy, failures: number): number {
  const base = policy.backoff === 'fixed' ? policy.delay : policy.delay * 2 ** (failures - 1);
  const capped = Math.min(base, policy.maxDelay);
  return policy.jitter === 0 ? capped : capped + Math.random() * policy.jitter;
}
