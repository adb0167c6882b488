// The option groups that work of every kind takes, each declared once with
// its documentation, its keys and its validator:
// - run options (`timeout`, `retry`): how each run is bounded and repeated;
// - limit options (`rate`, `serial`, `concurrency`, `priority`, `queue`):
//   which limits a task starts under (declared beside the limits' own
//   validators, limit-options.ts, and exported from here too);
// - dedupe options (`key`, `dedupe`): how a task meets one with its key;
// - job policy (`overlap`, `misfire`, `catchUp`, `jitter`): a recurring job's.
// The public option types (`TaskOptions`, `JobOptions`, `DurableTaskOptions`,
// `StoredJobOptions`, a DAG's tasks) extend these groups. Each group's
// keys come from a record typed by the group, so a field added to a group
// and not to its record does not compile, and every list of known keys is
// built from the records. Memory, the durable enqueue, DAGs and jobs call the
// same validator of each group; a store passes its tighter rules
// (`StoreRules`: what its columns hold), which is the one place memory and a
// store differ.
import { toDuration, type Duration } from './duration.js';
import type { DedupeMode } from './limit-options.js';
import { toRetryPolicy, type RetryOptions, type RetryPolicy } from './retry.js';
import { describe, keysOf, type StoreRules } from './validate.js';

export { LIMIT_KEYS, toLimits, type LimitOptions } from './limit-options.js';

/** How each run is bounded and repeated. */
export interface RunOptions {
  /**
   * A run still going after this long (milliseconds, or a string such as
   * `'30s'`) has its `ctx.signal` aborted with a `TimeoutError`, ends as
   * `timed-out` and frees its worker slot.
   * @default Infinity
   */
  timeout?: Duration;
  /** Retry failed or timed-out runs: a policy, or a number of attempts. */
  retry?: RetryOptions | number;
}

/** How a task meets a task with the same key. Tasks only, not jobs. */
export interface DedupeOptions {
  /**
   * A dedupe key: what the call does when a task with the same key exists
   * is the `dedupe` mode's; the returned task's `enqueued` tells what it
   * did. 1 to 512 characters.
   * @default none
   * @example `digest:${userId}`
   */
  key?: string;
  /**
   * With a `key`: what the call does when a task with the key exists.
   * - `'replace'`: replaces a waiting task (new payload, time, options);
   *   a running one is left alone.
   * - `'keep'`: returns the existing task if one is waiting or running.
   * - `{ throttle: period }`: returns the key's last task if it was added
   *   less than `period` ago, finished or not.
   * - `{ debounce: period }`: replaces a waiting task and is due `period`
   *   after its time, so the last of a burst runs once the calls stop for
   *   `period`.
   * - `'rerun'`: replaces a waiting task; while one runs, adds one task
   *   that starts after it ends (never beside it), which later calls
   *   replace: a trigger during a run gets exactly one more run.
   *
   * In memory a running task is left alone and the new one added beside it;
   * a store keeps one task per key, decided atomically by the database, and
   * returns the running one: see docs/dedupe.md. A period is a duration (ms
   * or a string such as `'1m'`): up to a day in memory, ten years in a store.
   * @default 'replace'
   * @example { debounce: '2s' }
   */
  dedupe?: DedupeMode;
}

/** What a recurring job does with a run due while the previous one still runs. */
export type OverlapPolicy = 'skip' | 'queue' | 'allow';
/** What a recurring job does with occurrences it missed. */
export type MisfirePolicy = 'once' | 'skip' | 'all';

/** A recurring job's policies. */
export interface JobPolicyOptions {
  /**
   * A run that comes due while the previous one is still going is skipped
   * (`'skip'`, reported by the `skip` event), run after it (`'queue'`, in
   * memory only), or run alongside it (`'allow'`).
   * @default 'skip'
   */
  overlap?: OverlapPolicy;
  /**
   * Occurrences missed (the loop was blocked, the clock jumped, or no
   * process was running) collapse into one late run (`'once'`), are
   * dropped (`'skip'`), or all run (`'all'`).
   * @default 'once'
   */
  misfire?: MisfirePolicy;
  /**
   * With `misfire: 'all'`, the most missed occurrences one catch-up runs
   * late; the rest are dropped (in memory, reported by one `skip` event with
   * reason `'misfire'`) and the job resumes at its next future occurrence.
   * @default 1000
   */
  catchUp?: number;
  /**
   * Each run starts up to this long after its time, at random: milliseconds
   * or a string such as `'30s'`. In memory only.
   * @default 0
   */
  jitter?: Duration;
}

/** The keys of each group (the limit options' are beside them, in limit-options.ts). */
export const RUN_KEYS = keysOf<RunOptions>({ timeout: true, retry: true });
export const DEDUPE_KEYS = keysOf<DedupeOptions>({ key: true, dedupe: true });
export const JOB_POLICY_KEYS = keysOf<JobPolicyOptions>({ overlap: true, misfire: true, catchUp: true, jitter: true });

/** Run options validated: `timeout` in ms (Infinity for none), `retry` as a policy. */
export interface RunSettings {
  readonly timeout: number;
  readonly retry: RetryPolicy | undefined;
}

/** Validates the run options (`store`: a stored task's, with its columns' bounds). */
export function toRun(options: RunOptions, store?: StoreRules): RunSettings {
  const timeout = options.timeout === undefined || options.timeout === Infinity ? Infinity : toDuration(options.timeout, 'timeout', 1);
  if (store !== undefined && timeout !== Infinity && timeout > store.maxTimeout) {
    throw new RangeError(
      `Expected \`timeout\` of a stored task to be at most ${store.maxTimeout} ms (the timer limit), got ${describe(options.timeout)}`,
    );
  }
  const retry = options.retry === undefined ? undefined : toRetryPolicy(options.retry);
  if (store !== undefined && retry !== undefined && retry.attempts > store.maxCount) {
    throw new RangeError(
      `Expected \`retry.attempts\` of a stored task to be at most ${store.maxCount} (what the attempts column holds), got ${describe(retry.attempts)}`,
    );
  }
  return { timeout, retry };
}

/** A recurring job's policies validated. */
export interface JobPolicy {
  readonly overlap: OverlapPolicy;
  readonly misfire: MisfirePolicy;
  readonly catchUp: number | undefined;
  readonly jitter: number | undefined;
}

/**
 * Validates a job's policies (`store`: a stored job's: no `'queue'` overlap,
 * no jitter, `catchUp` within its column).
 */
export function toJobPolicy(options: JobPolicyOptions, store?: StoreRules): JobPolicy {
  const { overlap = 'skip', misfire = 'once', catchUp } = options;
  if (store === undefined && overlap !== 'skip' && overlap !== 'queue' && overlap !== 'allow') {
    throw new RangeError(`Expected \`overlap\` to be 'skip', 'queue' or 'allow', got ${describe(overlap)}`);
  }
  if (store !== undefined && overlap !== 'skip' && overlap !== 'allow') {
    throw new RangeError(`Expected \`overlap\` of a stored job to be 'skip' or 'allow', got ${describe(overlap)}`);
  }
  if (misfire !== 'once' && misfire !== 'skip' && misfire !== 'all') {
    throw new RangeError(`Expected \`misfire\` to be 'once', 'skip' or 'all', got ${describe(misfire)}`);
  }
  const most = store?.maxCount ?? Number.MAX_SAFE_INTEGER;
  if (catchUp !== undefined && (!Number.isInteger(catchUp) || catchUp < 1 || catchUp > most)) {
    throw new RangeError(
      store === undefined
        ? `Expected \`catchUp\` to be an integer >= 1, got ${describe(catchUp)}`
        : `Expected \`catchUp\` to be an integer from 1 to ${most}, got ${describe(catchUp)}`,
    );
  }
  const jitter = options.jitter === undefined ? undefined : toDuration(options.jitter, 'jitter');
  return { overlap, misfire, catchUp, jitter };
}
