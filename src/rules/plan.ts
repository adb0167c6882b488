// What a builder hands over to be scheduled: a rule with its first
// occurrence and bounds (`from`, `until`, `times`, the catch-up cap).
import type { Rule } from './rule.js';

/** A rule with its first occurrence after the start point, as a builder hands it over. @internal */
export interface RulePlan {
  rule: Rule;
  /** the first occurrence after the start point */
  first: number | undefined;
}

/** The limits set on a builder: last time, number of runs, random delay. @internal */
export interface JobBounds {
  until: number;
  times: number;
  jitter: number;
}

/**
 * With misfire 'all', the most missed occurrences one catch-up runs late (in
 * memory) or inserts (in a store); the rest are dropped. A per-second job
 * that was down for 30 days would otherwise run 2.6 million times at once.
 * A job's `catchUp` option overrides it.
 */
export const DEFAULT_CATCH_UP = 1_000;
