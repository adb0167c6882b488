// A recurring job's policies (`misfire`, `catchUp`, `overlap`) as decisions:
// which due occurrence runs, which one comes next, and whether a run in
// progress holds it back. Two users: in-memory jobs (jobs/job.ts, `admit()`:
// one occurrence at a time, as each falls due) and stored jobs
// (durable/advance-job.ts, `advanceJob`: a claim steps through every
// occurrence due by its `now` at once; PostgreSQL and SQLite both call it).
import type { MisfirePolicy, OverlapPolicy } from '../core/options.js';
import type { Rule } from './rule.js';

/** What a job does with its occurrence due at `at`, under its misfire policy. */
export interface MisfireStep {
  /** Whether the occurrence runs: false when it was missed under misfire 'skip' (dropped and reported). */
  runs: boolean;
  /** The occurrence after it, or undefined for none. */
  next: number | undefined;
  /** `next` was missed too and is caught up (misfire 'all'): due at once. */
  late: boolean;
  /** Missed occurrences caught up so far in this catch-up, counting this one (0 once none is late). */
  caughtUp: number;
  /** Misfire 'all' reached its `catchUp` cap: the first missed occurrence dropped with the rest (reported once). */
  capped: number | undefined;
}

/**
 * The occurrence at `at`, due by `now`, under `misfire`; `caughtUp` missed
 * ones already run late in the current catch-up, at most `catchUp` in all.
 * Missed: the rule's next occurrence after `at` is due too, so whole
 * periods went by (the loop was blocked, the process down, the clock
 * jumped). 'once' runs the missed occurrence and goes on from the next one
 * after `now`; 'skip' drops it and does the same; 'all' runs every missed
 * occurrence, one after another, up to the cap, then goes on after `now`.
 */
export function misfireStep(
  rule: Pick<Rule, 'next'>,
  at: number,
  now: number,
  misfire: MisfirePolicy,
  caughtUp: number,
  catchUp: number,
): MisfireStep {
  const following = rule.next(at);
  if (following === undefined || following > now) return { runs: true, next: following, late: false, caughtUp: 0, capped: undefined };
  if (misfire !== 'all') return { runs: misfire === 'once', next: rule.next(now), late: false, caughtUp, capped: undefined };
  if (caughtUp + 1 < catchUp) return { runs: true, next: following, late: true, caughtUp: caughtUp + 1, capped: undefined };
  return { runs: true, next: rule.next(now), late: false, caughtUp: 0, capped: following };
}

/**
 * An occurrence that may run while a run of its job is `busy` (running, or
 * in memory waiting for its retry): it runs, waits for that run (`'queue'`,
 * memory only) or is skipped and reported.
 */
export function overlapStep(overlap: OverlapPolicy, busy: boolean): 'run' | 'queue' | 'skip' {
  return busy && overlap !== 'allow' ? overlap : 'run';
}
