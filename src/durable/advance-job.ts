// A due stored job's advance: which occurrences to insert and when it is due
// next, under its misfire and overlap policies (the decisions of in-memory
// jobs: rules/job-policy.ts).
import { misfireStep, overlapStep } from '../rules/job-policy.js';
import { DEFAULT_CATCH_UP } from '../rules/plan.js';
import type { StoredOptions } from './options.js';
import { ruleFromJson } from './rule-json.js';
import type { DueJob, JobAdvance } from './store.js';

/**
 * When a paused job is due again on resume: the occurrence that was next
 * when it was paused, if it has not passed; otherwise the rule's next after
 * `now`. Occurrences that fell in the pause are not run, as with an
 * in-memory job's resume(). Null: none is left (past \`until\`, no \`times\`).
 */
export function resumedAt(job: DueJob, now: number): number | null {
  if (job.remaining === 0) return null;
  const next = job.nextRunAt > now ? job.nextRunAt : ruleFromJson(job.rule).next(now);
  return next === undefined || (job.until !== null && next > job.until) ? null : next;
}

/**
 * Which occurrences of a due job to insert, and its next due time, by its
 * misfire policy: the decisions of in-memory jobs (rules/job-policy.ts),
 * stepped through every occurrence due by `now` at once, including the
 * catch-up cap of misfire 'all' (`DEFAULT_CATCH_UP`, or the job's `catchUp` option). `running` says an
 * occurrence is still running under a live lease (overlap 'skip').
 */
export function advanceJob(job: DueJob, now: number, running = false): JobAdvance {
  const rule = ruleFromJson(job.rule);
  const options = JSON.parse(job.options) as StoredOptions;
  const misfire = options.misfire ?? 'once';
  const catchUp = Number.isInteger(options.catchUp) && options.catchUp! >= 1 ? options.catchUp! : DEFAULT_CATCH_UP;
  let occurrences: number[] = [];
  let next: number | undefined;
  let skipped: JobAdvance['skipped'];
  // At most `catchUp` rows, whatever the outage: the rest are dropped and the
  // job goes on from its next future occurrence, reported as in memory (one
  // event, at the first dropped occurrence).
  for (let at = job.nextRunAt, caughtUp = 0; ; ) {
    const step = misfireStep(rule, at, now, misfire, caughtUp, catchUp);
    if (step.runs) occurrences.push(at);
    else skipped = { at, reason: 'misfire' };
    if (step.capped !== undefined) skipped = { at: step.capped, reason: 'misfire' };
    next = step.next;
    if (!step.late) break;
    at = step.next!;
    caughtUp = step.caughtUp;
  }
  if (overlapStep(options.overlap ?? 'skip', running) !== 'run' && occurrences.length > 0) {
    skipped ??= { at: occurrences[0]!, reason: 'overlap' };
    occurrences = [];
  }
  if (job.until !== null) {
    occurrences = occurrences.filter((at) => at <= job.until!);
    if (next !== undefined && next > job.until) next = undefined;
  }
  let remaining = job.remaining;
  if (remaining !== null) {
    occurrences = occurrences.slice(0, remaining);
    remaining -= occurrences.length;
    if (remaining === 0) next = undefined;
  }
  return skipped === undefined
    ? { occurrences, nextRunAt: next ?? null, remaining }
    : { occurrences, nextRunAt: next ?? null, remaining, skipped };
}
