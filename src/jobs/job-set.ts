// The in-memory jobs of one scheduler (`JobSet`): creates them on its loop
// and keeps those that still plan occurrences.
import type { Emitter } from '../core/emitter.js';
import type { TaskLoop } from '../core/loop.js';
import { JOB_POLICY_KEYS, LIMIT_KEYS, RUN_KEYS, toJobPolicy } from '../core/options.js';
import { LABEL_KEYS, toSettings } from '../core/task-options.js';
import type { Task, TaskFunction, TaskSettings } from '../core/task.js';
import { assertKnownKeys, assertOptionsObject, describe } from '../core/validate.js';
import { DEFAULT_CATCH_UP, type JobBounds, type RulePlan } from '../rules/plan.js';
import type { JobOptions } from './builders.js';
import { Job, type JobHost, type SkipInfo } from './job.js';

/** A job's options: a run's (as a task's, without a dedupe key), and its policies. */
const JOB_KEYS: ReadonlySet<string> = new Set([...LABEL_KEYS, ...RUN_KEYS, ...LIMIT_KEYS, ...JOB_POLICY_KEYS]);

/**
 * The in-memory jobs of one scheduler: creates them on its loop and keeps
 * those that still plan occurrences (not done or cancelled).
 * @internal
 */
export class JobSet implements JobHost {
  readonly #loop: TaskLoop;
  readonly #events: Emitter<{ skip: [info: SkipInfo] }>;
  readonly #live = new Set<Job>();

  constructor(loop: TaskLoop, events: Emitter<{ skip: [info: SkipInfo] }>) {
    this.#loop = loop;
    this.#events = events;
  }

  /** Validates the options, then starts the job. */
  create(fn: TaskFunction, options: JobOptions | undefined, plan: RulePlan, bounds: JobBounds): Job {
    assertOptionsObject(options, 'job');
    if (options !== undefined) assertKnownKeys(options, JOB_KEYS, 'job');
    const policy = toJobPolicy(options?.jitter === undefined ? { ...options, jitter: bounds.jitter } : options);
    const { overlap, misfire } = policy;
    const catchUp = policy.catchUp ?? DEFAULT_CATCH_UP;
    const jitter = policy.jitter ?? 0;
    const signal = options?.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(`Expected \`signal\` to be an AbortSignal, got ${describe(signal)}`);
    }
    const loop = this.#loop;
    // The job watches its signal itself (a cancelled job is gone for good), so its runs' settings carry none.
    const settings =
      options === undefined
        ? loop.defaults
        : toSettings(
            {
              name: options.name,
              timeout: options.timeout,
              retry: options.retry,
              rate: options.rate,
              serial: options.serial,
              concurrency: options.concurrency,
              priority: options.priority,
              queue: options.queue,
            },
            loop.defaults,
          );
    loop.assertAccepting();
    if (signal?.aborted) throw signal.reason;
    const job = new Job(this, fn, {
      rule: plan.rule,
      first: plan.first,
      until: bounds.until,
      times: bounds.times,
      jitter,
      overlap,
      misfire,
      catchUp,
      settings,
      signal,
    });
    if (job.state === 'scheduled') {
      this.#live.add(job);
      if (signal !== undefined) loop.watch(signal, job);
    }
    return job;
  }

  /** Jobs that are scheduled or paused, in creation order. */
  list(): Job[] {
    return [...this.#live];
  }

  /** Ends every job without touching runs in progress (the scheduler closing). */
  stop(): void {
    for (const job of this.#live) job._stop();
  }

  // JobHost: what each job calls back.

  now(): number {
    return this.#loop.clock.now();
  }

  monotonic(): number {
    return this.#loop.monotonic();
  }

  wallOf(elapsed: number): number {
    return this.#loop.wallOf(elapsed);
  }

  enqueue(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    return this.#loop.push(time, fn, settings);
  }

  skipped(job: Job, scheduledAt: number, reason: 'overlap' | 'misfire'): void {
    if (this.#events.has('skip'))
      this.#events.emit('skip', { job, name: job.name, key: undefined, scheduledAt: new Date(scheduledAt), reason });
  }

  finished(job: Job, signal: AbortSignal | undefined): void {
    this.#live.delete(job);
    if (signal !== undefined) this.#loop.unwatch(signal, job);
  }
}
