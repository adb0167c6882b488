// The in-memory engine: the heap of waiting tasks, the pool of workers, the
// pump that starts due tasks (through the gate when rate limits, serial groups
// or priorities are in use), and what becomes of each run: success, retry,
// failure, timeout, cancellation; then `close()`. Its timer and its reading
// of time are its base class (loop-clock.ts), its types are in loop-types.ts,
// its read-only views of the waiting tasks in waiting.ts.
import type { Emitter } from './emitter.js';
import { ClosedError, QueueFullError, TimeoutError } from './errors.js';
import { Gate } from './gate.js';
import { toRate, type Rate, type RateLimit } from './limit-options.js';
import { LatenessRecorder } from './lateness.js';
import { Journal, type TaskLogLine } from './journal.js';
import { assertCount, type Cancellable, type ErrorInfo, type LoopOptions, type SchedulerStats, type TaskEvents } from './loop-types.js';
import { LoopClock } from './loop-clock.js';
import { countByName, listWaiting, type WaitingCounts } from './waiting.js';
import { retryDelay } from './retry.js';
import { SignalRegistry } from './signal-registry.js';
import { isStepMismatch, StepLog, SUSPENDED_CURSOR } from './steps.js';
import { toSettings, type TaskOptions } from './task-options.js';
import { materialize, Run, State, Task, type TaskFunction, type TaskOwner, type TaskSettings } from './task.js';
import { TaskQueue } from './task-queue.js';
import { describe } from './validate.js';

let nextId = 1;

/** The function of a task that never runs (failUnrun). */
const NOTHING: TaskFunction = () => undefined;

/**
 * The in-memory engine behind `Scheduler`: waiting tasks sit in one min-heap,
 * a single timer is armed for the earliest, and due tasks run on a bounded,
 * resizable pool of worker slots. Jobs and durable work feed it through
 * `push()`; it knows nothing of either.
 * @internal
 */
export class TaskLoop extends LoopClock implements TaskOwner {
  /** Shared by every task scheduled without options. */
  readonly defaults: TaskSettings = {
    owner: this,
    name: undefined,
    timeout: Infinity,
    retry: undefined,
    signal: undefined,
    observer: undefined,
  };
  readonly #queue = new TaskQueue();
  readonly #events: Emitter<TaskEvents>;
  readonly #signals = new SignalRegistry<Cancellable>((member, reason) => member.cancel(reason));
  readonly #lateness = new LatenessRecorder();
  readonly #onError: (error: unknown, info: ErrorInfo) => void;
  #workers: number;
  readonly maxWaiting: number;

  #running = 0;
  /** Runs of async tasks in flight, so `close({ abort: true })` can reach them. */
  readonly #active = new Set<Run>();
  /** The run of a synchronous task while its function executes. */
  #current: Run | undefined = undefined;
  #pumpQueued = false;
  #pumping = false;
  /** Waiting tasks whose time follows elapsed time (settings.elapsed). */
  #elapsedWaiting = 0;
  #closed = false;
  #idleWaiters: (() => void)[] = [];

  #succeeded = 0;
  #failed = 0;
  #retried = 0;
  #timedOut = 0;
  #cancelled = 0;

  /**
   * Rate limits, serial groups and priorities: made by the first task that
   * uses one (or a scheduler-wide `rate`), and from then on every due task
   * passes through it. Undefined until then, so a scheduler that uses none
   * pumps exactly as before: one check per pump.
   */
  #gate: Gate | undefined = undefined;
  /** The scheduler-wide limit as given (for the `rate` getter). */
  #rate: RateLimit | undefined = undefined;
  /** Starts made before the gate exists, and the last one's elapsed time: a first `rate` counts them. */
  #starts = 0;
  #lastStart = -Infinity;
  /** The step records of tasks that used steps or were sent messages, until each ends (steps.ts). */
  #stepLogs: Map<Task, StepLog> | undefined = undefined;

  constructor(options: LoopOptions, events: Emitter<TaskEvents>) {
    super(options.clock, options.unref);
    this.#workers = options.workers;
    this.maxWaiting = options.maxWaiting;
    this.#onError = options.onError;
    this.#events = events;
    if (options.rate !== undefined) this.#setRate(options.rate);
  }

  /** The scheduler-wide rate limit; undefined for none. */
  get rate(): RateLimit | undefined {
    return this.#rate === undefined ? undefined : { ...this.#rate };
  }

  /**
   * Sets (or with undefined removes) the scheduler-wide rate limit. Starts
   * already made still count against the new window; waiting tasks are
   * re-evaluated at once.
   */
  set rate(value: RateLimit | undefined) {
    const rate = value === undefined ? undefined : toRate(value, 'rate', false);
    this.#setRate(rate);
    this.#pump();
  }

  #setRate(rate: Rate | undefined): void {
    this.#rate = rate === undefined ? undefined : { limit: rate.limit, interval: rate.interval };
    this.gate().setRate(rate, this.readElapsed());
  }

  /** The gate, made on first use (queues use it too); it learns what ran before it. */
  gate(): Gate {
    return (this.#gate ??= new Gate(this.#running, this.#starts, this.#lastStart));
  }

  /** The gate if it exists: reading a queue's settings never makes it. */
  get currentGate(): Gate | undefined {
    return this.#gate;
  }

  /** Starts what a changed setting allows (a queue's), at once. */
  pump(): void {
    this.#pump();
  }

  /** Calls `fn` for every waiting task (the time heap's, then the gate's), in no particular order. */
  forEachWaiting(fn: (task: Task) => void): void {
    this.#queue.forEach(fn);
    this.#gate?.forEach(fn);
  }

  /** Calls `fn` for the task of every run in flight (a synchronous run ends before anyone can look). */
  forEachRunning(fn: (task: Task) => void): void {
    for (const run of this.#active) fn(run.task);
  }

  get workers(): number {
    return this.#workers;
  }

  set workers(value: number) {
    assertCount(value, 'workers');
    this.#workers = value;
    this.#pump();
  }

  get size(): number {
    return this.#gate === undefined ? this.#queue.size : this.#queue.size + this.#gate.size;
  }

  get running(): number {
    return this.#running;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The checks every new piece of work passes: open, room left. */
  assertAccepting(): void {
    if (this.#closed) throw new ClosedError();
    if (this.size >= this.maxWaiting) throw new QueueFullError(this.maxWaiting);
  }

  /** A user's task: validated, checked against the limits, then queued. */
  // biome-ignore lint/suspicious/noExplicitAny: the scheduler types the task it hands back; the loop holds tasks of every result type
  add(time: number, fn: TaskFunction, options: TaskOptions | undefined): Task<any> {
    if (typeof fn !== 'function') throw new TypeError(`Expected the task to be a function, got ${describe(fn)}`);
    const settings = options === undefined ? this.defaults : toSettings(options, this.defaults);
    this.assertAccepting();
    const signal = settings.signal;
    if (signal?.aborted) throw signal.reason;
    // A dedupe key: the gate's keys decide whether (and when) to insert.
    const dedupe = settings.limits?.dedupe;
    if (dedupe !== undefined) return this.gate().dedupe.add(dedupe, time, this.readElapsed(), (at) => this.#insert(at, fn, settings));
    return this.#insert(time, fn, settings);
  }

  #insert(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    const task = this.push(time, fn, settings);
    if (settings.signal !== undefined) this.#signals.add(settings.signal, task);
    return task;
  }

  /** A new task into the heap, past every check: jobs and the store's claims land here too. */
  push(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    const task = new Task(nextId++, time, fn, settings);
    if (settings.limits !== undefined) this.#scheduled(task);
    this.#enqueue(task);
    return task;
  }

  /** A task with limit options is scheduled: the gate comes into use, and its key's limit is this task's. */
  #scheduled(task: Task): void {
    this.gate().scheduled(task, this.readElapsed());
  }

  /** Cancels `member` when `signal` aborts (one listener per signal, however many members). */
  watch(signal: AbortSignal, member: Cancellable): void {
    this.#signals.add(signal, member);
  }

  unwatch(signal: AbortSignal, member: Cancellable): void {
    this.#signals.delete(signal, member);
  }

  /**
   * A task that failed for good without running here (a stored task whose
   * leases ran out too often, failed by this process's claim): counted as
   * failed, `failure` emitted and `onError` told, as after a last run.
   */
  failUnrun(time: number, settings: TaskSettings, error: unknown, attempt: number): Task {
    const task = new Task(nextId++, time, NOTHING, settings);
    task._finish(State.Failed, error);
    this.#failed++;
    if (this.#events.has('failure')) this.#events.emit('failure', task, error);
    this.report(error, { task, name: task.name, attempt });
    return task;
  }

  /** Reports a failure to `onError`; a throwing `onError` surfaces as an uncaught exception. */
  report(error: unknown, info: ErrorInfo): void {
    try {
      this.#onError(error, info);
    } catch (thrown) {
      queueMicrotask(() => {
        throw thrown;
      });
    }
  }

  onIdle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  stats(): SchedulerStats {
    const held = this.#gate === undefined ? 0 : this.#gate.size;
    const waiting = this.#queue.size + held;
    return {
      waiting,
      // Held tasks are all due: waiting for their key, their bucket or a worker.
      due: this.#queue.countDue(this.clock.now()) + held,
      running: this.#running,
      workers: this.#workers,
      succeeded: this.#succeeded,
      failed: this.#failed,
      retried: this.#retried,
      timedOut: this.#timedOut,
      cancelled: this.#cancelled,
      lateness: this.#lateness.summary(),
    };
  }

  waitingTasks(limit = Infinity, keyPrefix?: string): Task[] {
    return listWaiting(this.#queue, this.#gate, limit, keyPrefix);
  }

  /** Waiting and due counts per task name ('' for unnamed), in one pass over the heap. */
  waitingByName(): Map<string, WaitingCounts> {
    return countByName(this.#queue, this.#gate, this.clock.now());
  }

  /** Stops taking work and cancels every waiting task; resolves when running ones settle. */
  close(): Promise<void> {
    this.#closed = true;
    this.disarm();
    const reason = new ClosedError();
    this.#elapsedWaiting = 0;
    // Held tasks first: the gate is emptied before any serial group could be handed on.
    const held = this.#gate === undefined ? [] : this.#gate.clear();
    for (const task of this.#queue.clear()) this.#cancelWaiting(task, reason, false);
    for (const task of held) this.#cancelWaiting(task, reason, false);
    return this.onIdle();
  }

  /** Aborts the signal of every running task (`close({ abort: true })`). */
  abortRunning(reason: unknown): void {
    if (this.#current !== undefined) this.#abortRun(this.#current, reason);
    for (const run of this.#active) this.#abortRun(run, reason);
  }

  /** @internal the `task.cancel()` implementation */
  cancelTask(task: Task, reason: unknown): boolean {
    if (task._state === State.Waiting || task._state === State.Held) {
      this.#cancelWaiting(task, reason, true);
      // A cancelled key holder or bucket head lets the next task of its key go.
      if (task._settings.limits !== undefined) this.#pump();
      this.#checkIdle();
      return true;
    }
    const run = task._run;
    if (task._state !== State.Running || !(run instanceof Run) || run.aborted) return false;
    this.#abortRun(run, materialize(reason));
    return true;
  }

  /** @internal `ctx.progress()`: kept on the run's journal (a stored task's is also written by its store), announced. */
  noteProgress(run: Run, value: unknown, storedId: number | undefined): boolean {
    if (run.done) return false;
    (run.journal ??= new Journal()).progress = value;
    if (this.#events.has('progress')) this.#events.emit('progress', run.task, value, storedId);
    return true;
  }

  /** @internal `ctx.log()`: as `noteProgress`. */
  noteLog(run: Run, text: string, storedId: number | undefined): TaskLogLine | undefined {
    if (run.done) return undefined;
    const line: TaskLogLine = { at: new Date(this.clock.now()), attempt: run.attempt, line: text };
    (run.journal ??= new Journal()).add(line);
    if (this.#events.has('log')) this.#events.emit('log', run.task, line, storedId);
    return line;
  }

  /** @internal The record of a task's steps, kept until the task ends. */
  stepLog(run: Run): StepLog {
    // A step called after its run ended (not awaited by the handler) keeps nothing.
    return run.done ? new StepLog() : this.#logOf(run.task);
  }

  /** @internal `task` uses `log` as its step record: a caller that runs one piece of work as several tasks (one per retry) keeps one record for all. */
  keepSteps(task: Task, log: StepLog): void {
    (this.#stepLogs ??= new Map()).set(task, log);
  }

  /** The step record kept for `task` until it ends, made on first use. */
  #logOf(task: Task): StepLog {
    const logs = (this.#stepLogs ??= new Map());
    let log = logs.get(task);
    if (log === undefined) logs.set(task, (log = new StepLog()));
    return log;
  }

  /** @internal */
  stepNow(): number {
    return this.clock.now();
  }

  /**
   * `scheduler.send()` in memory (its arguments checked: toSendArgs()): keeps `message` for `task`'s
   * `ctx.receive(topic)`; a task suspended waiting on that topic is due at
   * once. False if the task has ended.
   */
  send(to: Task | { key: string }, topic: string, message: unknown): boolean {
    const task = to instanceof Task ? to : this.#gate?.dedupe.unfinished(to.key);
    if (task === undefined) return false;
    const state = task._state;
    if (state !== State.Waiting && state !== State.Held && state !== State.Running) return false;
    if (!this.#logOf(task).deliver(topic, message) || state !== State.Waiting) return true;
    if (this.#queue.moveEarlier(task, this.clock.now())) {
      this.disarm();
      this.#pump();
    }
    return true;
  }

  /** Cooperative: the run sees its signal abort, and if it then fails it ends `cancelled`. */
  #abortRun(run: Run, reason: unknown): void {
    run.cancelled = true;
    run.abort(reason);
  }

  #enqueue(task: Task): void {
    this.#queue.push(task);
    if (task._settings.elapsed === true) this.#elapsedWaiting++;
    // Arming is deferred to a microtask: scheduling a burst of tasks in one
    // tick then costs one timer update, not one per task, and tasks already
    // due in the same tick still start in due-time order.
    if (task._time < this.timerAt && !this.#pumpQueued) {
      this.#pumpQueued = true;
      queueMicrotask(this.#queuedPump);
    }
  }

  #queuedPump = (): void => {
    this.#pumpQueued = false;
    this.#pump();
  };

  /** The timer fired: due tasks may start. */
  protected override wake(): void {
    this.#pump();
  }

  /** Starts due tasks while workers are free, then arms the timer for what is left. */
  #pump(): void {
    // A task that resizes the pool or settles synchronously calls back in
    // here; the loop below already re-reads everything it depends on.
    // A yield under way (timerAt -Infinity): its immediate pumps once the event loop has turned.
    if (this.#pumping || this.#closed || this.timerAt === -Infinity) return;
    this.#pumping = true;
    const queue = this.#queue;
    const monotonic = this.readElapsed;
    const elapsed = monotonic();
    const deadline = this.sliceEnd(elapsed);
    const offset = this.wallOffset(elapsed);
    try {
      if (this.#gate !== undefined) {
        if (this.#pumpGate(this.#gate, offset, deadline)) return;
      } else
        while (this.#running < this.#workers) {
          const task = queue.peek();
          if (task === undefined) break;
          // One clock read per task: the wall time follows elapsed time within a pump.
          const current = monotonic();
          const now = current + offset;
          if (task._time > now) break;
          if (current > deadline) return this.yieldTurn();
          queue.pop();
          if (task._settings.elapsed === true) this.#elapsedWaiting--;
          this.#starts++;
          this.#lastStart = current;
          this.#dispatch(task, now);
        }
    } finally {
      this.#pumping = false;
    }
    this.#arm();
  }

  /**
   * The pump once the gate is in use: every due task enters the gate first
   * (so the best of them is chosen, not merely the earliest), then the gate
   * hands out what may start. Returns true if it yielded.
   */
  #pumpGate(gate: Gate, offset: number, deadline: number): boolean {
    const queue = this.#queue;
    const monotonic = this.readElapsed;
    while (this.#running < this.#workers) {
      let current = monotonic();
      for (let task = queue.peek(); task !== undefined && task._time <= current + offset; task = queue.peek()) {
        if (current > deadline) {
          this.yieldTurn();
          return true;
        }
        queue.pop();
        if (task._settings.elapsed === true) this.#elapsedWaiting--;
        gate.admit(task, current);
        current = monotonic();
      }
      gate.wake(current);
      if (!gate.hasReady()) break;
      if (current > deadline) {
        this.yieldTurn();
        return true;
      }
      const task = gate.take(current);
      if (task === undefined) break;
      this.#dispatch(task, current + offset);
    }
    return false;
  }

  /**
   * The wall clock jumped against elapsed time: elapsed-time tasks move with
   * it (an interval job set back an hour keeps its pace), wall-time tasks stay.
   */
  protected override jumped(delta: number): void {
    if (this.#elapsedWaiting === 0) return;
    this.#queue.shift(delta, (task) => task._settings.elapsed === true);
    this.disarm();
  }

  #arm(): void {
    const next = this.#running < this.#workers ? this.#queue.peek() : undefined;
    if (this.#gate !== undefined && this.#running < this.#workers) return this.armAt(this.#gateWake(next));
    // With no free worker, the next settling task pumps; no timer needed.
    if (next === undefined) return this.disarm();
    this.armAt(next._time);
  }

  /** The earliest of the next due task and the gate's next wake, as a wall time. */
  #gateWake(next: Task | undefined): number {
    const elapsed = this.readElapsed();
    const wake = this.#gate!.wakeAt(elapsed);
    const at = next === undefined ? Infinity : next._time;
    return wake === Infinity ? at : Math.min(at, wake + (this.clock.now() - elapsed));
  }

  #dispatch(task: Task, now: number): void {
    // A job's occurrence that its overlap or misfire policy skips is no run: no start, no outcome, no counts.
    const admit = task._settings.observer?.admit;
    if (admit !== undefined && !admit.call(task._settings.observer, task)) return this.#skipRun(task);
    this.#running++;
    task._state = State.Running;
    const run = new Run(task, now);
    task._run = run;
    this.#lateness.record(now - task._time);
    if (this.#events.has('start')) this.#events.emit('start', task);
    let value: unknown;
    this.#current = run;
    try {
      value = task._fn(run);
    } catch (error) {
      this.#current = undefined;
      return this.#fail(run, error, false);
    }
    this.#current = undefined;
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return this.#succeed(run, value);
    // The user's value is read once and called inside a try: a `then` getter
    // or a `then()` that throws is the task's failure, never an exception
    // escaping the pump (which would stop the loop and kill the process).
    let then: unknown;
    try {
      then = (value as PromiseLike<unknown>).then;
    } catch (error) {
      return this.#fail(run, error, false);
    }
    if (typeof then !== 'function') return this.#succeed(run, value);
    this.#active.add(run);
    const timeout = task._settings.timeout;
    if (timeout !== Infinity) run.timer = this.clock.setTimer(() => this.#fail(run, new TimeoutError(timeout, task.name), true), timeout);
    try {
      (then as PromiseLike<unknown>['then']).call(
        value,
        (result) => this.#succeed(run, result),
        (error) => this.#fail(run, error, false),
      );
    } catch (error) {
      this.#fail(run, error, false);
    }
  }

  /** An occurrence its job skipped: it ends without running, reported by the job's `skip` event only. */
  #skipRun(task: Task): void {
    this.#gate?.ended(task);
    this.#detach(task);
    this.#finish(task, State.Succeeded, undefined);
    this.#afterRun();
  }

  #succeed(run: Run, value: unknown): void {
    if (run.done) return;
    if (run.suspendedUntil !== undefined) return this.#suspend(run);
    this.#release(run);
    const task = run.task;
    this.#detach(task);
    this.#finish(task, State.Succeeded, value);
    this.#succeeded++;
    if (this.#events.has('success')) this.#events.emit('success', task, value);
    this.#afterRun();
  }

  #fail(run: Run, error: unknown, timedOut: boolean): void {
    if (run.done) return;
    // A run that suspended ends so whatever became of its StepSuspended, unless its timeout came first.
    if (run.suspendedUntil !== undefined && !timedOut) return this.#suspend(run);
    if (timedOut) run.abort(error);
    this.#release(run);
    const task = run.task;
    const retry = task._settings.retry;
    if (run.cancelled) {
      this.#detach(task);
      this.#finish(task, State.Cancelled, error);
      this.#cancelled++;
      if (this.#events.has('cancel')) this.#events.emit('cancel', task, error);
    } else if (retry !== undefined && run.attempt < retry.attempts && !this.#closed && !isStepMismatch(error)) {
      const delay = retryDelay(retry, run.attempt);
      task._state = State.Waiting;
      task._time = this.clock.now() + delay;
      this.#enqueue(task);
      this.#retried++;
      if (this.#events.has('retry')) this.#events.emit('retry', task, error, delay);
    } else {
      this.#detach(task);
      // A durable task retried by its store reports a `retry` (the store runs it
      // again after `later` ms), and only its last attempt as failed, as in memory.
      const later = task._settings.observer?.retriesLater?.(task, error);
      this.#finish(task, timedOut ? State.TimedOut : State.Failed, error);
      if (later !== undefined) {
        this.#retried++;
        if (this.#events.has('retry')) this.#events.emit('retry', task, error, later);
      } else {
        if (timedOut) this.#timedOut++;
        else this.#failed++;
        if (this.#events.has('failure')) this.#events.emit('failure', task, error);
        this.report(error, { task, name: task.name, attempt: task.attempts });
      }
    }
    this.#afterRun();
  }

  /**
   * A run that a step suspended (a sleep, a wait for a message): the task
   * lets go of its worker and waits for its wake time, keeping its attempt
   * count and (as a retry does) its serial group's slot.
   */
  #suspend(run: Run): void {
    this.#release(run);
    const task = run.task;
    const observer = task._settings.observer;
    if (run.cancelled) {
      this.#detach(task);
      this.#finish(task, State.Cancelled, run.abortReason);
      this.#cancelled++;
      if (this.#events.has('cancel')) this.#events.emit('cancel', task, run.abortReason);
    } else if (observer?.suspended !== undefined) {
      // A stored task: its store keeps it waiting; here it is done with.
      this.#detach(task);
      if (task._settings.limits !== undefined) this.#gate?.settled(task, this.readElapsed());
      task._state = State.Succeeded;
      observer.suspended(task, run.suspendedUntil!);
    } else {
      task._state = State.Waiting;
      run.stepCursor = SUSPENDED_CURSOR;
      // A message on the topic it waits on came while it ran: due at once.
      const log = this.#stepLogs?.get(task);
      const waiting = log?.waitingOn;
      task._time = waiting !== undefined && log!.has(waiting) ? this.clock.now() : run.suspendedUntil!;
      this.#enqueue(task);
    }
    this.#afterRun();
  }

  /** Frees the run's worker slot; later outcomes of its function are ignored. */
  #release(run: Run): void {
    run.done = true;
    this.#running--;
    if (run.timer !== undefined) this.clock.clearTimer(run.timer);
    this.#active.delete(run);
    // Its queue runs one task fewer.
    this.#gate?.ended(run.task);
  }

  #afterRun(): void {
    this.#pump();
    this.#checkIdle();
  }

  #cancelWaiting(task: Task, reason: unknown, inQueue: boolean): void {
    const held = task._state === State.Held;
    task._state = State.Cancelled;
    if (inQueue && held) {
      this.#gate!.discard(task, this.readElapsed());
    } else if (inQueue) {
      this.#queue.discard();
      if (task._settings.elapsed === true) this.#elapsedWaiting--;
    }
    this.#detach(task);
    this.#finish(task, State.Cancelled, reason);
    this.#cancelled++;
    if (this.#events.has('cancel')) this.#events.emit('cancel', task, materialize(reason));
  }

  #finish(task: Task, state: State, outcome: unknown): void {
    // Its serial group goes to the next task of the key (which may start at the next pump).
    if (task._settings.limits !== undefined) this.#gate?.settled(task, this.readElapsed());
    task._finish(state, outcome);
    this.#stepLogs?.delete(task);
    task._settings.observer?.settled(task, state, outcome);
  }

  #detach(task: Task): void {
    const signal = task._settings.signal;
    if (signal !== undefined) this.#signals.delete(signal, task);
  }

  #isIdle(): boolean {
    return this.#running === 0 && this.size === 0;
  }

  #checkIdle(): void {
    if (!this.#isIdle()) return;
    const waiters = this.#idleWaiters;
    if (waiters.length > 0) {
      this.#idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
    if (this.#events.has('idle')) this.#events.emit('idle');
  }
}
