// A task: the handle users get (`Task`), its context, settings and states,
// and the interfaces by which its owner and observers hear how it ends.
import { CancelledError } from './errors.js';
import type { DedupeOutcome, TaskLimits } from './limit-options.js';
import type { RetryPolicy } from './retry.js';
import type { Duration } from './duration.js';
import { toLogLine, toProgress, type Journal, type TaskLogLine } from './journal.js';
import { memoryHost, StepCursor, type SleepFor, type StepLog } from './steps.js';

/**
 * The life of a task: `waiting` until it starts (for its time, a worker, or its
 * queue, keys or rate), then `running`, then one of the final states. The same
 * words as a stored task's (`StoredState`; see docs/design.md, "One vocabulary").
 */
export type TaskState = 'waiting' | 'running' | 'succeeded' | 'failed' | 'timed-out' | 'cancelled';

/** What a task function receives. */
export interface TaskContext {
  /** Aborted when the task is cancelled, times out, or the scheduler closes with `abort: true`. */
  readonly signal: AbortSignal;
  /** When this run was due. */
  readonly scheduledAt: Date;
  /** When this run started. */
  readonly startedAt: Date;
  /** 1 for the first run, 2 for the first retry, and so on. */
  readonly attempt: number;
  /** The task's `name` option. */
  readonly name: string | undefined;
  /**
   * Reports how far the run is: a finite number (a percentage, say) or a
   * JSON value of at most 1,024 characters (`{ done: 3, of: 10 }`). The task
   * keeps the latest (`task.progress`, a stored task's `progress`) and the
   * scheduler emits `progress`. Calls after the run ended are ignored.
   * @example
   * scheduler.after(0, async (ctx) => { for (let i = 1; i <= 10; i++) { await step(i); ctx.progress(i * 10); } });
   */
  progress(value: unknown): void;
  /**
   * Adds a line to the task's log (`task.logs`, a stored task's `logs`): the
   * latest 100 lines are kept, each cut to 1,000 characters; the scheduler
   * emits `log`. Calls after the run ended are ignored.
   * @example
   * scheduler.after(0, (ctx) => ctx.log('fetched 42 rows'));
   */
  log(line: string): void;
  /**
   * Runs `fn` once for this task and keeps what it returned (as JSON): when
   * the handler runs again (a retry, after `sleep` or `receive`), the
   * finished step returns the kept value without running `fn`. A step that
   * throws fails the run and is run again by the next one. Steps are matched
   * by name and order; the same name in a loop is told apart by its count
   * (see the steps guide). In memory and with a store.
   * @example
   * scheduler.after(0, async (ctx) => {
   *   const order = await ctx.step('charge', () => charge(card));
   *   await ctx.step('email', () => sendReceipt(order));
   * });
   */
  step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T>;
  /**
   * Lets go of the worker until `duration` (ms, or a string such as `'1d'`)
   * has passed, or until `{ until }` a time; the handler then runs again from
   * its start, its finished steps returning their kept values. Let the error
   * it throws to stop the run through (`StepSuspended`).
   * @example
   * await ctx.sleep('1d');
   */
  sleep(duration: SleepFor): Promise<void>;
  /**
   * Waits for a message on `topic` (`scheduler.send()`), up to `timeout`,
   * without holding a worker; resolves with the message, or undefined once
   * the timeout passed without one. A message sent before the wait is kept
   * for it; each is taken once.
   * @example
   * const answer = await ctx.receive<string>('reply', { timeout: '1h' });
   */
  receive<T = unknown>(topic: string, options: { timeout: Duration }): Promise<T | undefined>;
}

/** A task body: sync or async, given its context. */
export type TaskFunction<R = unknown> = (ctx: TaskContext) => R;

/**
 * What a task knows besides its time and function. Tasks scheduled without
 * options all share their scheduler's default settings, so a plain task
 * stays small; a job shares one settings object among its occurrences.
 */
export interface TaskSettings {
  readonly owner: TaskOwner;
  readonly name: string | undefined;
  readonly timeout: number;
  readonly retry: RetryPolicy | undefined;
  readonly signal: AbortSignal | undefined;
  /** told synchronously when a task with these settings reaches a final state (jobs use it) */
  readonly observer?: TaskObserver | undefined;
  /** The recurring job whose occurrences these settings are (`task.job`). */
  readonly job?: TaskJob;
  /**
   * The task's time follows elapsed time, not the wall clock (interval jobs):
   * when the wall clock is set back or forward, the loop moves it by as much.
   */
  readonly elapsed?: boolean;
  /** Rate limit group, serial group and priority (see limit-options.ts); undefined for tasks using none. */
  readonly limits?: TaskLimits | undefined;
  /**
   * The attempt the task's first run is (default 1): a durable task claimed
   * for its third attempt runs here as attempt 3, so `onError` and
   * `task.attempts` tell the stored count.
   */
  readonly firstAttempt?: number;
}

/**
 * The recurring job a task is an occurrence of, as `task.job` gives it: the
 * `Job` object itself (`task.job === job`), typed here by what identifies it.
 */
export interface TaskJob {
  /** A number unique among jobs in this process. */
  readonly id: number;
  /** The job's `name` option, if any. */
  readonly name: string | undefined;
}

/** Learns of a task's final state the moment it is reached. */
export interface TaskObserver {
  settled(task: Task, state: State, outcome: unknown): void;
  /**
   * Asked when a run fails for good in memory: the delay (ms) after which it
   * runs again elsewhere (a durable task with attempts left in its store), so
   * the loop reports a `retry` and the `failure` event and `onError` wait for
   * its last attempt; undefined when this was its last attempt.
   */
  retriesLater?(task: Task, error: unknown): number | undefined;
  /**
   * Asked before a due task runs: false when it is not to run at all (a job's
   * occurrence skipped by its overlap or misfire policy). It then ends without
   * a run: no `start` event, no outcome, nothing counted.
   */
  admit?(task: Task): boolean;
  /**
   * A run that a step suspended until `until` (ms): a stored task's observer
   * hands it to its store, which keeps it waiting, and the loop lets the
   * task go; without this the loop keeps it waiting itself.
   */
  suspended?(task: Task, until: number): void;
}

/** The scheduler side of a task: what `task.cancel()` calls. */
export interface TaskOwner {
  cancelTask(task: Task, reason: unknown): boolean;
  /** @internal `ctx.progress()` of a run (with its stored id, for a stored task): kept and announced; false if the run is over. */
  noteProgress(run: Run, value: unknown, storedId: number | undefined): boolean;
  /** @internal `ctx.log()` of a run: kept and announced; the line as kept, or undefined if the run is over. */
  noteLog(run: Run, line: string, storedId: number | undefined): TaskLogLine | undefined;
  /** @internal The step record of a run's task (made on first use), for `ctx.step()` and the others. */
  stepLog(run: Run): StepLog;
  /** @internal The scheduler's clock, as steps read it. */
  stepNow(): number;
}

export enum State {
  Waiting,
  Running,
  Succeeded,
  Failed,
  TimedOut,
  Cancelled,
  /**
   * Due, but held back by a rate limit, a serial group or a full pool of
   * workers in the gate (gate.ts): still `waiting` to users. Last, so the
   * numbering of the others does not change.
   */
  Held,
}

/**
 * Stands for "a new CancelledError" until somebody looks: an Error captures a
 * stack trace, which would make cancelling a million tasks cost seconds and
 * hundreds of megabytes for errors nobody reads.
 */
const DEFAULT_CANCEL: unique symbol = Symbol('taskheap.defaultCancel');

/** The real reason behind a possibly-deferred cancel reason. */
export function materialize(reason: unknown): unknown {
  return reason === DEFAULT_CANCEL ? new CancelledError() : reason;
}

const STATE_NAMES: readonly TaskState[] = ['waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled', 'waiting'];

/** A promise with its settle functions, created only when somebody reads `task.result`. */
class Deferred<T = unknown> {
  readonly promise: Promise<T>;
  resolve!: (value: T) => void;
  reject!: (reason: unknown) => void;

  constructor() {
    this.promise = new Promise<T>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // `result` is a report, not an obligation: an unobserved rejection must
    // never crash the process.
    this.promise.catch(noop);
  }
}

/** The outcome of a task that finished without ever running (cancelled or closed while waiting). */
class Settled {
  constructor(readonly outcome: unknown) {}
}

function noop(): void {}

/**
 * A handle on one scheduled function. Returned by `scheduler.schedule()` and
 * `scheduler.after()`.
 *
 * @example
 * const task = scheduler.after(5_000, () => 'hello');
 * task.cancel();            // true: it never runs
 * await task.result;        // rejects with CancelledError
 */
export class Task<T = unknown> {
  /** A number unique within the process, increasing in scheduling order. */
  readonly id: number;
  /**
   * Set on tasks scheduled with a `key`: what the call that returned the
   * task did: `'inserted'` (a new task), `'replaced'` (a new task, the
   * waiting one with the key cancelled) or `'existing'` (this task already
   * had the key; nothing was added). A later call returning the same task
   * sets it again: read it right after the call.
   * @example
   * const task = scheduler.after(0, sync, { key: 'sync', dedupe: 'keep' });
   * if (task.enqueued === 'existing') console.log('already on its way');
   */
  declare enqueued?: DedupeOutcome;

  // Internal state is plain properties, read by the scheduler on the hot path.
  /** @internal due time, epoch ms */
  _time: number;
  /** @internal */
  _fn: TaskFunction;
  /** @internal */
  _state: State = State.Waiting;
  /** @internal */
  _settings: TaskSettings;
  /**
   * @internal One slot for the run and the outcome, because every field of
   * a Task costs 8 bytes on each of a million waiting tasks: the current or
   * last `Run` (its `attempt` counts the runs so far; it carries `result`'s
   * Deferred and the outcome), or, before any run, the Deferred of a `result`
   * that was read, or the outcome of a task that finished without running.
   */
  _run: Run | Deferred | Settled | undefined = undefined;

  /** @internal */
  constructor(id: number, time: number, fn: TaskFunction, settings: TaskSettings) {
    this.id = id;
    this._time = time;
    this._fn = fn;
    this._settings = settings;
  }

  /** The `name` option, if any. */
  get name(): string | undefined {
    return this._settings.name;
  }

  /** The `key` option (its dedupe key), if any: what `waitingTasks({ keyPrefix })` matches. */
  get key(): string | undefined {
    return this._settings.limits?.dedupe?.key;
  }

  /**
   * The recurring job this task is an occurrence of (a run of `every()`,
   * `cron()` or `job.trigger()`); undefined for other tasks. It is the `Job`
   * itself: `task.job === job`. A stored task says `jobKey` instead.
   */
  get job(): TaskJob | undefined {
    return this._settings.job;
  }

  /** When the task is (or was last) due; a retry moves it to the retry time. */
  get runAt(): Date {
    return new Date(this._time);
  }

  /** Where the task is in its life. */
  get state(): TaskState {
    return STATE_NAMES[this._state]!;
  }

  /** The number of runs started so far (retries included). */
  get attempts(): number {
    const run = this._run;
    return run instanceof Run ? run.attempt : 0;
  }

  /** The latest value its runs passed to `ctx.progress()`; undefined if none did. */
  get progress(): unknown {
    const run = this._run;
    return run instanceof Run ? run.journal?.progress : undefined;
  }

  /** The latest lines its runs passed to `ctx.log()` (retries included), oldest first: at most 100. */
  get logs(): TaskLogLine[] {
    const run = this._run;
    return run instanceof Run && run.journal !== undefined ? [...run.journal.lines] : [];
  }

  /**
   * Settles with the task's return value, or rejects with its error, a
   * `TimeoutError`, the cancel reason, or `ClosedError`. Created on first
   * read, so tasks nobody awaits cost no promise.
   */
  get result(): Promise<T> {
    const slot = this._run;
    const run = slot instanceof Run ? slot : undefined;
    const existing = run === undefined ? slot : run.deferred;
    if (existing instanceof Deferred) return existing.promise as Promise<T>;
    const deferred = new Deferred();
    const outcome = run !== undefined ? run.outcome : slot instanceof Settled ? slot.outcome : undefined;
    if (this._state === State.Succeeded) deferred.resolve(outcome);
    else if (this._state >= State.Failed && this._state !== State.Held) deferred.reject(materialize(outcome));
    if (run === undefined) this._run = deferred;
    else run.deferred = deferred;
    return deferred.promise as Promise<T>;
  }

  /** @internal Whether `result` was read: its reader handles the outcome (the default `onError` then says nothing). */
  get _resultRead(): boolean {
    const slot = this._run;
    return slot instanceof Run ? slot.deferred !== undefined : slot instanceof Deferred;
  }

  /**
   * Cancels the task. A waiting task leaves the scheduler at once and never
   * runs; a running task has its `ctx.signal` aborted (cancellation of a run
   * is cooperative). Returns false if the task had already finished.
   * @param reason The rejection of `result` and the signal's reason. Default: a `CancelledError`.
   */
  cancel(reason?: unknown): boolean {
    return this._settings.owner.cancelTask(this, reason === undefined ? DEFAULT_CANCEL : reason);
  }

  /** @internal settles `result` (if anyone is waiting) and keeps the outcome. */
  _finish(state: State, outcome: unknown): void {
    this._state = state;
    const slot = this._run;
    const run = slot instanceof Run ? slot : undefined;
    const deferred = run === undefined ? slot : run.deferred;
    if (deferred instanceof Deferred) {
      if (state === State.Succeeded) deferred.resolve(outcome);
      else deferred.reject(materialize(outcome));
    } else if (run !== undefined) {
      run.outcome = outcome;
    } else {
      this._run = new Settled(outcome);
    }
  }
}

/**
 * One run of a task; it is the `ctx` the task function receives. The
 * AbortController and the Dates are made only if the function asks for them,
 * which keeps dispatch of plain tasks down to this one allocation.
 * @internal
 */
export class Run implements TaskContext {
  readonly task: Task;
  readonly startedAtMs: number;
  readonly attempt: number;
  /** settled, timed out or released: later outcomes of the function are ignored */
  done = false;
  cancelled = false;
  timer: unknown = undefined;
  /** @internal the task's `result`, once read (carried from run to run) */
  deferred: Deferred | undefined;
  /** @internal the task's outcome, once it finished with nobody reading `result` */
  outcome: unknown = undefined;
  /** @internal progress and log lines (carried from run to run), made on the first */
  journal: Journal | undefined;
  /** @internal called once when the run is aborted: how a thread task hears of it without an AbortSignal and its listeners */
  onAbort: (() => void) | undefined = undefined;
  /** @internal set when a step call suspended the run: when the task is due again (its outcome is then ignored) */
  suspendedUntil: number | undefined = undefined;
  /** @internal this run's walk through its steps, made on the first step call (a stored task's by its dispatcher) */
  stepCursor: StepCursor | undefined = undefined;
  #controller: AbortController | undefined = undefined;
  #aborted = false;
  #reason: unknown = undefined;

  constructor(task: Task, startedAt: number) {
    this.task = task;
    this.startedAtMs = startedAt;
    const previous = task._run;
    // A run after a suspension (a sleep, a wait) goes on with the same attempt.
    this.attempt =
      previous instanceof Run ? previous.attempt + (previous.suspendedUntil === undefined ? 1 : 0) : (task._settings.firstAttempt ?? 1);
    this.deferred = previous instanceof Run ? previous.deferred : previous instanceof Deferred ? previous : undefined;
    this.journal = previous instanceof Run ? previous.journal : undefined;
  }

  progress(value: unknown): void {
    this.task._settings.owner.noteProgress(this, toProgress(value), undefined);
  }

  log(line: string): void {
    this.task._settings.owner.noteLog(this, toLogLine(line), undefined);
  }

  step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    return this.#cursor().step(name, fn);
  }

  sleep(duration: SleepFor): Promise<void> {
    return this.#cursor().sleep(duration);
  }

  receive<T = unknown>(topic: string, options: { timeout: Duration }): Promise<T | undefined> {
    return this.#cursor().receive<T>(topic, options);
  }

  #cursor(): StepCursor {
    if (this.stepCursor !== undefined) return this.stepCursor;
    const owner = this.task._settings.owner;
    const host = memoryHost(
      owner.stepLog(this),
      () => owner.stepNow(),
      (until) => {
        this.suspendedUntil = until;
      },
    );
    return (this.stepCursor = new StepCursor(host));
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get scheduledAt(): Date {
    return new Date(this.task._time);
  }

  get startedAt(): Date {
    return new Date(this.startedAtMs);
  }

  get name(): string | undefined {
    return this.task._settings.name;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** @internal what the run was aborted with */
  get abortReason(): unknown {
    return this.#reason;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    this.onAbort?.();
  }
}
