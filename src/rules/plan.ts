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
