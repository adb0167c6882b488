// A recurring job in memory (`Job`): its state, its next occurrences under its
// rule, and the overlap and misfire policies that decide which of them run.
import type { MisfirePolicy, OverlapPolicy } from '../core/options.js';
import type { Rule } from '../rules/rule.js';
import { CancelledError } from '../core/errors.js';
import { describe } from '../core/validate.js';
import { IntervalRule } from '../rules/rule.js';
import { misfireStep, overlapStep } from '../rules/job-policy.js';
import { State, type Run, type Task, type TaskContext, type TaskFunction, type TaskJob, type TaskSettings } from '../core/task.js';

/** The life of a recurring job. */
export type JobState = 'scheduled' | 'paused' | 'done' | 'cancelled';

/** Where a job's occurrences come from and where they stop. */
export interface JobPlan {
  rule: Rule;
  /** the first occurrence, or undefined for none */
  first: number | undefined;
  until: number;
  times: number;
  jitter: number;
  overlap: OverlapPolicy;
  misfire: MisfirePolicy;
  /** With misfire 'all': the most missed occurrences run late in one catch-up. */
  catchUp: number;
  settings: TaskSettings;
  signal: AbortSignal | undefined;
}

/** Why a job occurrence did not run (the `skip` event). */
export interface SkipInfo {
  /**
   * The in-memory job whose occurrence was skipped; `undefined` for a stored
   * job (a scheduler with a store), which has no `Job` object: see `key`.
   */
  job: Job | undefined;
  /** The job's name (`name` option) in memory; a stored job's handler name. */
  name: string | undefined;
  /** A stored job's key; `undefined` in memory. */
  key: string | undefined;
  /** When the skipped occurrence was due. */
  scheduledAt: Date;
  /**
   * `overlap`: the previous run was still going; `misfire`: whole periods
   * were missed. One `misfire` event stands for every occurrence missed in
   * one go (with misfire 'all': every one beyond the `catchUp` cap), and
   * `scheduledAt` is the first of them.
   */
  reason: 'overlap' | 'misfire';
}

/** What a job needs from its scheduler. @internal */
export interface JobHost {
  now(): number;
  /** elapsed time (the clock's monotonic reading) */
  monotonic(): number;
  /** the wall time at which to queue an elapsed-time task due at elapsed time `elapsed` */
  wallOf(elapsed: number): number;
  /** queue an occurrence, exempt from maxWaiting (the job was already accepted) */
  enqueue(time: number, fn: TaskFunction, settings: TaskSettings): Task;
  skipped(job: Job, scheduledAt: number, reason: 'overlap' | 'misfire'): void;
  /** the job will plan no more occurrences; `signal` is the one it was created with */
  finished(job: Job, signal: AbortSignal | undefined): void;
}

let nextJobId = 1;

/** The most occurrences `job.nextRuns(n)` lists at once. */
export const MAX_NEXT_RUNS = 10_000;

// The loop asks a job whether an occurrence runs (`admit()`) and tells it of
// its runs' outcomes through `settled()` (it is the
// TaskObserver of its occurrences, structurally): an `implements` clause would
// name a member that the published types strip (it is internal).

/**
 * A recurring (or one-shot) job made by `every()`, `cron()` or `at()`. It
 * keeps exactly one entry in the scheduler's heap: its next occurrence.
 *
 * @example
 * const job = scheduler.every().day().at('09:00').run(sendDigest);
 * job.nextRunAt;      // tomorrow 09:00 in the scheduler's zone
 * job.pause();        // no runs until resume()
 * job.cancel();       // gone for good
 */
export class Job implements TaskJob {
  /** A number unique among jobs in this process. */
  readonly id = nextJobId++;
  readonly #host: JobHost;
  readonly #fn: TaskFunction;
  readonly #plan: JobPlan;
  /** The settings of every occurrence task: the job's task options, and the job as observer. */
  readonly #settings: TaskSettings;
  #state: JobState = 'scheduled';
  /** The heap entry for the next occurrence, and its nominal (un-jittered) time. */
  #next: Task | undefined = undefined;
  #nextAt: number | undefined = undefined;
  /**
   * Occurrences in progress (running, or waiting to retry). Made on the first
   * run: most jobs spend their life waiting, and a Set is not small.
   */
  #inFlight: Set<Task> | undefined = undefined;
  #queued = 0;
  #pausedAt: number | undefined = undefined;
  #runs = 0;
  #scheduledRuns = 0;
  #failures = 0;
  #lastRunAt: number | undefined = undefined;
  #lastError: unknown = undefined;
  /** Missed occurrences run so far in the current catch-up (misfire 'all'). */
  #caughtUp = 0;
  /** The planned occurrence was queued late (at now, not at its time): a catch-up run. */
  #late = false;
  /** The occurrence `admit()` just let run, with the time it stands for (read by its run, in the same dispatch). */
  #admitted: { task: Task; at: number; late: boolean } | undefined = undefined;
  /**
   * Interval rules run on elapsed time: the job's own time line is the wall
   * time it was created at plus elapsed time since, and this is that wall
   * time minus the elapsed reading then. Undefined for calendar, cron and
   * at() rules, which follow the wall clock.
   */
  readonly #axis: number | undefined;

  /** @internal use `scheduler.every()`, `cron()` or `at()` */
  constructor(host: JobHost, fn: TaskFunction, plan: JobPlan) {
    this.#host = host;
    this.#fn = fn;
    this.#plan = plan;
    const elapsed = plan.rule instanceof IntervalRule;
    // The loop's own offset between the two clocks, so an occurrence maps to
    // exactly its time on the wall clock until the wall clock jumps.
    this.#axis = elapsed ? host.wallOf(0) : undefined;
    // A literal, not a spread of plan.settings: every job's settings then
    // share one hidden class (a spread gave each its own, ~300 B per job).
    const base = plan.settings;
    this.#settings = {
      owner: base.owner,
      name: base.name,
      timeout: base.timeout,
      retry: base.retry,
      signal: undefined,
      observer: this,
      job: this,
      elapsed,
      limits: base.limits,
    };
    this.#planAt(plan.first);
  }

  /** Now on the job's time line: the wall clock, or for interval rules elapsed time. */
  #now(): number {
    return this.#axis === undefined ? this.#host.now() : this.#host.monotonic() + this.#axis;
  }

  /** The wall time at which a time on the job's time line is due. */
  #toWall(at: number): number {
    return this.#axis === undefined ? at : this.#host.wallOf(at - this.#axis);
  }

  /** The `name` option, if any. */
  get name(): string | undefined {
    return this.#settings.name;
  }

  /**
   * The rule the job follows: a `CronRule` (its `expression`), a
   * `CalendarRule`, or an `IntervalRule`; `at()` jobs have a rule with no
   * further occurrences.
   */
  get rule(): Rule {
    return this.#plan.rule;
  }

  /** `scheduled`, `paused`, `done` (no occurrences left) or `cancelled`. */
  get state(): JobState {
    return this.#state;
  }

  /** Whether a run of this job is in progress (running or waiting to retry). */
  get running(): boolean {
    return this.#busy();
  }

  /** When the next run is due (jitter included), or undefined if none is planned. */
  get nextRunAt(): Date | undefined {
    return this.#next === undefined ? undefined : new Date(this.#next._time);
  }

  /** When the last run started. */
  get lastRunAt(): Date | undefined {
    return this.#lastRunAt === undefined ? undefined : new Date(this.#lastRunAt);
  }

  /** Runs started (retries of one occurrence count once; `trigger()` counts). */
  get runs(): number {
    return this.#runs;
  }

  /** Runs that failed for good (after their retries). */
  get failures(): number {
    return this.#failures;
  }

  /** The error of the last failed run. */
  get lastError(): unknown {
    return this.#lastError;
  }

  /**
   * The next `n` occurrence times by the rule (without jitter), honouring
   * `until` and `times`. Empty for a paused, done or cancelled job. `n` is at
   * most `MAX_NEXT_RUNS` (10,000): a list is built in memory at once.
   * @example
   * scheduler.cron('0 9 * * MON-FRI').run(fn).nextRuns(5);
   */
  nextRuns(n: number): Date[] {
    if (!Number.isInteger(n) || n < 0 || n > MAX_NEXT_RUNS) {
      throw new RangeError(`Expected \`n\` to be an integer 0-${MAX_NEXT_RUNS}, got ${describe(n)}`);
    }
    const dates: Date[] = [];
    let at = this.#nextAt;
    const left = this.#plan.times - this.#scheduledRuns;
    while (at !== undefined && dates.length < Math.min(n, left) && at <= this.#plan.until) {
      dates.push(new Date(this.#toWall(at)));
      at = this.#plan.rule.next(at);
    }
    return dates;
  }

  /**
   * Stops planning runs until `resume()`. A run in progress is not interrupted.
   * Returns false unless the job was scheduled.
   */
  pause(): boolean {
    if (this.#state !== 'scheduled') return false;
    this.#state = 'paused';
    this.#pausedAt = this.#nextAt;
    this.#unplan();
    return true;
  }

  /**
   * Plans the next occurrence after now; occurrences that fell in the pause
   * are not run. Returns false unless the job was paused.
   */
  resume(): boolean {
    if (this.#state !== 'paused') return false;
    this.#state = 'scheduled';
    const now = this.#now();
    // The occurrence that was next when paused still stands if it has not
    // passed: a rule cannot always recompute it (at(), immediately()).
    const pausedAt = this.#pausedAt;
    this.#planAt(pausedAt !== undefined && pausedAt > now ? pausedAt : this.#plan.rule.next(now));
    return true;
  }

  /**
   * Runs the job now, outside its schedule: the planned occurrences, `times`
   * and the overlap policy are not affected. Returns the run's task.
   * @example
   * await job.trigger().result;
   */
  trigger(): Task {
    if (this.#state === 'cancelled') throw new CancelledError('Cannot trigger a cancelled job');
    return this.#host.enqueue(this.#host.now(), Job.#runNow, this.#settings);
  }

  /**
   * Cancels the job for good: its next occurrence leaves the heap, and runs
   * in progress have their `ctx.signal` aborted. Returns false if it was
   * already cancelled.
   */
  cancel(reason?: unknown): boolean {
    if (!this._stop()) return false;
    if (this.#inFlight !== undefined) for (const task of this.#inFlight) task.cancel(reason);
    return true;
  }

  /** @internal ends the job without touching runs in progress (the scheduler closing) */
  _stop(): boolean {
    if (this.#state === 'cancelled') return false;
    const wasDone = this.#state === 'done';
    this.#state = 'cancelled';
    this.#unplan();
    this.#queued = 0;
    if (!wasDone) this.#host.finished(this, this.#plan.signal);
    return true;
  }

  /**
   * Puts the occurrence at `at` in the heap, or ends the job if there is none.
   * `late`: a missed occurrence caught up; it queues at now, behind work
   * already due, so a long catch-up shares the workers instead of starving them.
   */
  #planAt(at: number | undefined, late = false): void {
    const plan = this.#plan;
    if (at === undefined || at > plan.until || this.#scheduledRuns >= plan.times) {
      this.#nextAt = undefined;
      this.#next = undefined;
      if (this.#state === 'scheduled') {
        this.#state = 'done';
        this.#host.finished(this, this.#plan.signal);
      }
      return;
    }
    this.#nextAt = at;
    const jitter = plan.jitter === 0 ? 0 : Math.floor(Math.random() * plan.jitter);
    const wall = this.#toWall(at);
    this.#late = late;
    this.#next = this.#host.enqueue((late ? Math.max(wall, this.#host.now()) : wall) + jitter, Job.#due, this.#settings);
  }

  #unplan(): void {
    this.#next?.cancel();
    this.#next = undefined;
    this.#nextAt = undefined;
  }

  // Every job's occurrence tasks share these two functions, which find their
  // job through the task's settings, rather than each job making closures.

  /** The body of every occurrence task. */
  static #due(ctx: TaskContext): unknown {
    const run = ctx as Run;
    return (run.task._settings.observer as Job).#onDue(run);
  }

  /** The body of triggered and queued runs. */
  static #runNow(ctx: TaskContext): unknown {
    const run = ctx as Run;
    const job = run.task._settings.observer as Job;
    // A retry of a run that already started: just run it again.
    return run.attempt > 1 ? job.#fn(run) : job.#start(run);
  }

  /**
   * @internal TaskObserver: before an occurrence runs, decides whether it
   * runs (misfire and overlap policies) and plans the next one. A skipped or
   * queued occurrence is no run: the loop ends it without a `start` event.
   */
  admit(task: Task): boolean {
    // Triggered and queued runs, and retries of an occurrence that already ran: they run.
    if (task._fn !== Job.#due || task.attempts > 0) return true;
    const at = this.#nextAt!;
    const late = this.#late;
    const plan = this.#plan;
    // The policies' decisions are the stored jobs' too (rules/job-policy.ts).
    const step = misfireStep(plan.rule, at, this.#now(), plan.misfire, this.#caughtUp, plan.catchUp);
    let run = step.runs;
    if (!run) {
      this.#host.skipped(this, at, 'misfire');
    } else {
      const overlap = overlapStep(plan.overlap, this.#busy());
      if (overlap !== 'run') {
        run = false;
        if (overlap === 'queue') {
          this.#queued++;
          this.#scheduledRuns++;
        } else {
          this.#host.skipped(this, at, 'overlap');
        }
      }
    }
    if (run) this.#scheduledRuns++;
    this.#caughtUp = step.caughtUp;
    // The catch-up cap reached: the rest of the missed occurrences are dropped,
    // reported once, and the job resumes with its next future occurrence.
    if (step.capped !== undefined) this.#host.skipped(this, step.capped, 'misfire');
    this.#planAt(step.next, step.late);
    if (run) this.#admitted = { task, at, late };
    return run;
  }

  /** Runs the occurrence `admit()` let through. */
  #onDue(ctx: Run): unknown {
    // A retry of an occurrence that already ran: just run it again.
    if (ctx.attempt > 1) return this.#fn(ctx);
    const admitted = this.#admitted;
    this.#admitted = undefined;
    if (admitted === undefined || admitted.task !== ctx.task) return this.#start(ctx);
    // A catch-up run was queued at now, but it stands for the occurrence at `at`.
    return this.#start(ctx, admitted.late ? lateContext(ctx, this.#toWall(admitted.at)) : ctx);
  }

  #busy(): boolean {
    return this.#inFlight !== undefined && this.#inFlight.size > 0;
  }

  #start(run: Run, ctx: TaskContext = run): unknown {
    this.#runs++;
    this.#lastRunAt = run.startedAtMs;
    (this.#inFlight ??= new Set()).add(run.task);
    return this.#fn(ctx);
  }

  /** @internal a run of this job reached its final state (TaskObserver) */
  settled(task: Task, state: State, outcome: unknown): void {
    // Occurrences that never started (cancelled by pause or cancel) are not runs.
    if (this.#inFlight === undefined || !this.#inFlight.delete(task)) return;
    if (state === State.Failed || state === State.TimedOut) {
      this.#failures++;
      this.#lastError = outcome;
    }
    if (this.#queued > 0 && !this.#busy() && this.#state !== 'cancelled') {
      this.#queued--;
      // In flight from now on, so an occurrence due before it starts queues behind it.
      this.#inFlight.add(this.#host.enqueue(this.#host.now(), Job.#runNow, this.#settings));
    }
  }
}

/** The context of a catch-up run: the run's own, with the missed occurrence as `scheduledAt`. */
function lateContext(run: Run, scheduledAt: number): TaskContext {
  return {
    get signal() {
      return run.signal;
    },
    scheduledAt: new Date(scheduledAt),
    startedAt: run.startedAt,
    attempt: run.attempt,
    name: run.name,
    progress: (value) => run.progress(value),
    log: (line) => run.log(line),
    step: (name, fn) => run.step(name, fn),
    sleep: (duration) => run.sleep(duration),
    receive: (topic, options) => run.receive(topic, options),
  };
}
