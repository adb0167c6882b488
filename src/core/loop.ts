import { systemClock, type Clock } from './clock.js';
import type { Emitter } from './emitter.js';
import { ClosedError, QueueFullError, TimeoutError } from './errors.js';
import { Flow } from './flow.js';
import { toRate, type Rate, type RateLimit } from './flow-options.js';
import { byDueTime } from './held-queue.js';
import { LatenessRecorder, type Lateness } from './lateness.js';
import { retryDelay } from './retry.js';
import { SignalRegistry } from './signal-registry.js';
import { toSettings, type TaskOptions } from './task-options.js';
import { materialize, Run, State, Task, type TaskFunction, type TaskOwner, type TaskSettings } from './task.js';
import { TaskQueue } from './task-queue.js';
import { describe } from './validate.js';

/** What `onError` is told about a failure. */
export interface ErrorInfo {
  /** The failed task; undefined for an error of the store (a lost database connection). */
  task: Task | undefined;
  /** The task's `name` option. */
  name: string | undefined;
  /** The attempt that failed (1 for the first run); 0 for store errors. */
  attempt: number;
}

/** A snapshot returned by `scheduler.stats()`. */
export interface SchedulerStats {
  /** Tasks waiting for their time or for a worker. */
  pending: number;
  /** Tasks running now. */
  running: number;
  /** Pending tasks already due, waiting for a free worker (or for their rate limit, serial key or priority turn). */
  waiting: number;
  /** The pool size. */
  workers: number;
  /** Tasks that succeeded, since the scheduler was created. */
  succeeded: number;
  /** Tasks that failed for good (after their retries). */
  failed: number;
  /** Tasks whose last attempt timed out. */
  timedOut: number;
  /** Tasks cancelled before or while running (including by `close()`). */
  cancelled: number;
  /** How late runs started (ms), over the last 1,024 runs; `max` over all. */
  lateness: Lateness;
}

/** The events of the loop itself; the scheduler adds the jobs' `skip`. */
export interface TaskEvents {
  /** A run started. */
  start: [task: Task];
  /** A task succeeded, with its value. */
  success: [task: Task, value: unknown];
  /** A task failed for good, with its last error. */
  failure: [task: Task, error: unknown];
  /** A run failed and will be retried after `delay` ms. */
  retry: [task: Task, error: unknown, delay: number];
  /** A task was cancelled (pending, or running and then gave up). */
  cancel: [task: Task, reason: unknown];
  /** Nothing is pending or running any more. */
  idle: [];
}

/** Something an AbortSignal can cancel: a task or a job. */
export interface Cancellable {
  cancel(reason?: unknown): boolean;
}

/** The loop's settings, validated by the scheduler. @internal */
export interface LoopOptions {
  workers: number;
  maxPending: number;
  unref: boolean;
  clock: Clock;
  onError: (error: unknown, info: ErrorInfo) => void;
  /** The scheduler-wide rate limit, validated. */
  rate?: Rate | undefined;
}

// A sleep never lasts longer than this, so a wall clock that jumps or a
// machine that sleeps is noticed within this time (and setTimeout's 2^31-1 ms
// limit is never reached).
const MAX_SLEEP = 30_000;
// A burst of due tasks stops starting tasks after this many ms of elapsed time
// and yields to the event loop. The budget spans every pump of one event-loop
// turn (pumps called back from settling async tasks included), and is half of
// the ~10 ms the loop aims for: the tasks it started settle after it, in the
// same turn. So timers and I/O run about every 10 ms whatever the tasks do.
const PUMP_BUDGET = 5;
// A change of the wall clock against elapsed time larger than this is a jump
// (someone set the clock, NTP stepped it); smaller ones are drift and ignored.
const JUMP = 1_000;

let nextId = 1;

/** Throws a RangeError unless `value` is a valid pool size. */
export function assertWorkers(value: unknown): asserts value is number {
  if (value !== Infinity && (!Number.isInteger(value) || (value as number) < 1)) {
    throw new RangeError(`Expected \`workers\` to be an integer >= 1 or Infinity, got ${describe(value)}`);
  }
}

/**
 * The in-memory engine behind `Scheduler`: pending tasks sit in one min-heap,
 * a single timer is armed for the earliest, and due tasks run on a bounded,
 * resizable pool of worker slots. Jobs and durable work feed it through
 * `push()`; it knows nothing of either.
 * @internal
 */
export class TaskLoop implements TaskOwner {
  readonly clock: Clock;
  /** Shared by every task scheduled without options. */
  readonly defaults: TaskSettings = { owner: this, name: undefined, timeout: Infinity, retry: undefined, signal: undefined, observer: undefined };
  readonly #queue = new TaskQueue();
  readonly #events: Emitter<TaskEvents>;
  readonly #signals = new SignalRegistry<Cancellable>((member, reason) => member.cancel(reason));
  readonly #lateness = new LatenessRecorder();
  readonly #unref: boolean;
  readonly #onError: (error: unknown, info: ErrorInfo) => void;
  #workers: number;
  readonly maxPending: number;

  #running = 0;
  /** Runs of async tasks in flight, so `close({ abort: true })` can reach them. */
  readonly #active = new Set<Run>();
  /** The run of a synchronous task while its function executes. */
  #current: Run | undefined = undefined;
  #timer: unknown = undefined;
  /** Due time the timer was armed for; Infinity when none is armed. */
  #timerAt = Infinity;
  #pumpQueued = false;
  #pumping = false;
  /** Reads elapsed time: the clock's monotonic(), or its now() if it has none. */
  readonly #monotonic: () => number;
  /** Wall minus elapsed time, as the pending elapsed-time tasks were placed. */
  #offset: number;
  /** Pending tasks whose time follows elapsed time (settings.elapsed). */
  #elapsedPending = 0;
  /** Elapsed time the current slice (the pumps of this event-loop turn) began; NaN when none is open. */
  #sliceStart = NaN;
  /**
   * Whether a slice spans every pump of an event-loop turn: with the system
   * clock. Another clock (a ManualClock) has its own notion of time, which a
   * test moves between steps that may share a turn; there the budget counts
   * per pump on that clock, so a test never sees a yield it did not cause.
   */
  readonly #spanSlices: boolean;
  #closed = false;
  #idleWaiters: (() => void)[] = [];

  #succeeded = 0;
  #failed = 0;
  #timedOut = 0;
  #cancelled = 0;

  /**
   * Rate limits, serial keys and priorities: made by the first task that
   * uses one (or a scheduler-wide `rate`), and from then on every due task
   * passes through it. Undefined until then, so a scheduler that uses none
   * pumps exactly as before: one check per pump.
   */
  #flow: Flow | undefined = undefined;
  /** The scheduler-wide limit as given (for the `rate` getter). */
  #rate: RateLimit | undefined = undefined;
  /** Starts made before the flow exists, and the last one's elapsed time: a first `rate` counts them. */
  #starts = 0;
  #lastStart = -Infinity;

  constructor(options: LoopOptions, events: Emitter<TaskEvents>) {
    const clock = options.clock;
    this.clock = clock;
    this.#monotonic = clock.monotonic === undefined ? () => clock.now() : () => clock.monotonic!();
    this.#offset = clock.now() - this.#monotonic();
    this.#spanSlices = clock === systemClock;
    this.#workers = options.workers;
    this.maxPending = options.maxPending;
    this.#unref = options.unref;
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
    this.flow().setRate(rate, this.#monotonic());
  }

  /** The flow, made on first use (issue 22: queues use it too); it learns what ran before it. */
  flow(): Flow {
    return (this.#flow ??= new Flow(this.#running, this.#starts, this.#lastStart));
  }

  /** The flow if it exists: reading a queue's settings never makes it. */
  get currentFlow(): Flow | undefined {
    return this.#flow;
  }

  /** Starts what a changed setting allows (a queue's), at once. */
  pump(): void {
    this.#pump();
  }

  /** Calls `fn` for every pending task (the time heap's, then the flow's), in no particular order. */
  forEachPending(fn: (task: Task) => void): void {
    this.#queue.forEach(fn);
    this.#flow?.forEach(fn);
  }

  get workers(): number {
    return this.#workers;
  }

  set workers(value: number) {
    assertWorkers(value);
    this.#workers = value;
    this.#pump();
  }

  get size(): number {
    return this.#flow === undefined ? this.#queue.size : this.#queue.size + this.#flow.size;
  }

  get running(): number {
    return this.#running;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get unref(): boolean {
    return this.#unref;
  }

  /** The checks every new piece of work passes: open, room left. */
  assertAccepting(): void {
    if (this.#closed) throw new ClosedError();
    if (this.size >= this.maxPending) throw new QueueFullError(this.maxPending);
  }

  /** A user's task: validated, checked against the limits, then queued. */
  add(time: number, fn: TaskFunction, options: TaskOptions | undefined): Task<any> {
    if (typeof fn !== 'function') throw new TypeError(`Expected the task to be a function, got ${describe(fn)}`);
    const settings = options === undefined ? this.defaults : toSettings(options, this.defaults);
    this.assertAccepting();
    const signal = settings.signal;
    if (signal?.aborted) throw signal.reason;
    // A dedupe key: the flow's keys decide whether (and when) to insert.
    const dedupe = settings.flow?.dedupe;
    if (dedupe !== undefined) return this.flow().dedupe.add(dedupe, time, this.#monotonic(), (at) => this.#insert(at, fn, settings));
    return this.#insert(time, fn, settings);
  }

  #insert(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    const task = this.push(time, fn, settings);
    if (settings.signal !== undefined) this.#signals.add(settings.signal, task);
    return task;
  }

  /** Elapsed time, ms (the clock's monotonic reading). */
  monotonic(): number {
    return this.#monotonic();
  }

  /**
   * The wall time to give an elapsed-time task (settings.elapsed) due at the
   * elapsed time `elapsed`: on the same footing as the pending ones, so a
   * clock jump noticed later moves them all alike.
   */
  wallOf(elapsed: number): number {
    return elapsed + this.#offset;
  }

  /** A new task into the heap, past every check: jobs and the store's claims land here too. */
  push(time: number, fn: TaskFunction, settings: TaskSettings): Task {
    const task = new Task(nextId++, time, fn, settings);
    if (settings.flow !== undefined) this.#scheduled(task);
    this.#enqueue(task);
    return task;
  }

  /** A task with flow options is scheduled: the flow comes into use, and its key's limit is this task's. */
  #scheduled(task: Task): void {
    this.flow().scheduled(task, this.#monotonic());
  }

  /** Cancels `member` when `signal` aborts (one listener per signal, however many members). */
  watch(signal: AbortSignal, member: Cancellable): void {
    this.#signals.add(signal, member);
  }

  unwatch(signal: AbortSignal, member: Cancellable): void {
    this.#signals.delete(signal, member);
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
    const held = this.#flow === undefined ? 0 : this.#flow.size;
    return {
      pending: this.#queue.size + held,
      running: this.#running,
      // Held tasks are all due: waiting for their key, their bucket or a worker.
      waiting: this.#queue.countDue(this.clock.now()) + held,
      workers: this.#workers,
      succeeded: this.#succeeded,
      failed: this.#failed,
      timedOut: this.#timedOut,
      cancelled: this.#cancelled,
      lateness: this.#lateness.summary(),
    };
  }

  pendingTasks(limit = Infinity): Task[] {
    const tasks = limit >= this.#queue.size ? this.#queue.toSortedArray() : this.#queue.earliest(limit);
    if (this.#flow === undefined || this.#flow.size === 0) return tasks;
    // Held tasks are all due, so they come before most of the heap's; merged by a sort (introspection, not the hot path).
    this.#flow.forEach((task) => tasks.push(task));
    tasks.sort(byDueTime);
    if (tasks.length > limit) tasks.length = limit;
    return tasks;
  }

  /** Pending and due-and-waiting counts per task name ('' for unnamed), in one pass over the heap. */
  pendingByName(): Map<string, { pending: number; waiting: number }> {
    const now = this.clock.now();
    const counts = new Map<string, { pending: number; waiting: number }>();
    this.#queue.forEach((task) => {
      const name = task._settings.name ?? '';
      let entry = counts.get(name);
      if (entry === undefined) counts.set(name, (entry = { pending: 0, waiting: 0 }));
      entry.pending++;
      if (task._time <= now) entry.waiting++;
    });
    this.#flow?.forEach((task) => {
      const name = task._settings.name ?? '';
      let entry = counts.get(name);
      if (entry === undefined) counts.set(name, (entry = { pending: 0, waiting: 0 }));
      entry.pending++;
      entry.waiting++;
    });
    return counts;
  }

  /** Stops taking work and cancels every pending task; resolves when running ones settle. */
  close(): Promise<void> {
    this.#closed = true;
    this.#disarm();
    const reason = new ClosedError();
    this.#elapsedPending = 0;
    // Held tasks first: the flow is emptied before any serial key could be handed on.
    const held = this.#flow === undefined ? [] : this.#flow.clear();
    for (const task of this.#queue.clear()) this.#cancelPending(task, reason, false);
    for (const task of held) this.#cancelPending(task, reason, false);
    return this.onIdle();
  }

  /** Aborts the signal of every running task (`close({ abort: true })`). */
  abortRunning(reason: unknown): void {
    if (this.#current !== undefined) this.#abortRun(this.#current, reason);
    for (const run of this.#active) this.#abortRun(run, reason);
  }

  /** @internal the `task.cancel()` implementation */
  cancelTask(task: Task, reason: unknown): boolean {
    if (task._state === State.Pending || task._state === State.Held) {
      this.#cancelPending(task, reason, true);
      // A cancelled key holder or bucket head lets the next task of its key go.
      if (task._settings.flow !== undefined) this.#pump();
      this.#checkIdle();
      return true;
    }
    const run = task._run;
    if (task._state !== State.Running || !(run instanceof Run) || run.aborted) return false;
    this.#abortRun(run, materialize(reason));
    return true;
  }

  /** Cooperative: the run sees its signal abort, and if it then fails it ends `cancelled`. */
  #abortRun(run: Run, reason: unknown): void {
    run.cancelled = true;
    run.abort(reason);
  }

  #enqueue(task: Task): void {
    this.#queue.push(task);
    if (task._settings.elapsed === true) this.#elapsedPending++;
    // Arming is deferred to a microtask: scheduling a burst of tasks in one
    // tick then costs one timer update, not one per task, and tasks already
    // due in the same tick still start in due-time order.
    if (task._time < this.#timerAt && !this.#pumpQueued) {
      this.#pumpQueued = true;
      queueMicrotask(this.#queuedPump);
    }
  }

  #queuedPump = (): void => {
    this.#pumpQueued = false;
    this.#pump();
  };

  #wake = (): void => {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    // A timer or the yield's immediate: a new event-loop turn, a new slice.
    this.#sliceStart = NaN;
    this.#pump();
  };

  /** Runs once the event loop turns: the next pump begins a fresh slice. */
  #closeSlice = (): void => {
    this.#sliceStart = NaN;
  };

  /** Starts due tasks while workers are free, then arms the timer for what is left. */
  #pump(): void {
    // A task that resizes the pool or settles synchronously calls back in
    // here; the loop below already re-reads everything it depends on.
    // A yield pending (timerAt -Infinity): its immediate pumps once the event loop has turned.
    if (this.#pumping || this.#closed || this.#timerAt === -Infinity) return;
    this.#pumping = true;
    const clock = this.clock;
    const queue = this.#queue;
    const monotonic = this.#monotonic;
    const elapsed = monotonic();
    // Async tasks settle in microtasks and pump from there, never returning
    // to the event loop; so the budget runs from the first pump of this turn,
    // and only an immediate (which runs once the turn is over) resets it.
    if (!this.#spanSlices) {
      this.#sliceStart = elapsed;
    } else if (this.#sliceStart !== this.#sliceStart) {
      this.#sliceStart = elapsed;
      const immediate = setImmediate(this.#closeSlice);
      immediate.unref();
    }
    const offset = clock.now() - elapsed;
    if (offset - this.#offset > JUMP || this.#offset - offset > JUMP) this.#rebase(offset);
    const deadline = this.#sliceStart + PUMP_BUDGET;
    try {
      if (this.#flow !== undefined) {
        if (this.#pumpFlow(this.#flow, offset, deadline)) return;
      } else while (this.#running < this.#workers) {
        const task = queue.peek();
        if (task === undefined) break;
        // One clock read per task: the wall time follows elapsed time within a pump.
        const current = monotonic();
        const now = current + offset;
        if (task._time > now) break;
        if (current > deadline) return this.#yield();
        queue.pop();
        if (task._settings.elapsed === true) this.#elapsedPending--;
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
   * The pump once the flow is in use: every due task enters the flow first
   * (so the best of them is chosen, not merely the earliest), then the flow
   * hands out what may start. Returns true if it yielded.
   */
  #pumpFlow(flow: Flow, offset: number, deadline: number): boolean {
    const queue = this.#queue;
    const monotonic = this.#monotonic;
    while (this.#running < this.#workers) {
      let current = monotonic();
      for (let task = queue.peek(); task !== undefined && task._time <= current + offset; task = queue.peek()) {
        if (current > deadline) {
          this.#yield();
          return true;
        }
        queue.pop();
        if (task._settings.elapsed === true) this.#elapsedPending--;
        flow.admit(task, current);
        current = monotonic();
      }
      flow.wake(current);
      if (!flow.hasReady()) break;
      if (current > deadline) {
        this.#yield();
        return true;
      }
      const task = flow.take(current);
      if (task === undefined) break;
      this.#dispatch(task, current + offset);
    }
    return false;
  }

  /**
   * The wall clock jumped against elapsed time: elapsed-time tasks move with
   * it (an interval job set back an hour keeps its pace), wall-time tasks stay.
   */
  #rebase(offset: number): void {
    const delta = offset - this.#offset;
    this.#offset = offset;
    if (this.#elapsedPending === 0) return;
    this.#queue.shift(delta, (task) => task._settings.elapsed === true);
    this.#disarm();
  }

  /** Lets I/O and other timers run in the middle of a long burst of due tasks. */
  #yield(): void {
    this.#disarm();
    this.#timerAt = -Infinity;
    const immediate = setImmediate(this.#wake);
    if (this.#unref) immediate.unref();
    this.#timer = immediate;
  }

  #arm(): void {
    const next = this.#running < this.#workers ? this.#queue.peek() : undefined;
    if (this.#flow !== undefined && this.#running < this.#workers) return this.#armAt(this.#flowWake(next));
    // With no free worker, the next settling task pumps; no timer needed.
    if (next === undefined) return this.#disarm();
    this.#armAt(next._time);
  }

  /** The earliest of the next due task and the flow's next wake, as a wall time. */
  #flowWake(next: Task | undefined): number {
    const elapsed = this.#monotonic();
    const wake = this.#flow!.wakeAt(elapsed);
    const at = next === undefined ? Infinity : next._time;
    return wake === Infinity ? at : Math.min(at, wake + (this.clock.now() - elapsed));
  }

  #armAt(at: number): void {
    if (at === this.#timerAt) return;
    this.#disarm();
    if (at === Infinity) return;
    const delay = Math.min(Math.max(at - this.clock.now(), 0), MAX_SLEEP);
    this.#timerAt = at;
    this.#timer = this.clock.setTimer(this.#wake, delay, this.#unref);
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    if (this.#timerAt === -Infinity) clearImmediate(this.#timer as NodeJS.Immediate);
    else this.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #dispatch(task: Task, now: number): void {
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
      (then as PromiseLike<unknown>['then']).call(value, (result) => this.#succeed(run, result), (error) => this.#fail(run, error, false));
    } catch (error) {
      this.#fail(run, error, false);
    }
  }

  #succeed(run: Run, value: unknown): void {
    if (run.done) return;
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
    if (timedOut) run.abort(error);
    this.#release(run);
    const task = run.task;
    const retry = task._settings.retry;
    if (run.cancelled) {
      this.#detach(task);
      this.#finish(task, State.Cancelled, error);
      this.#cancelled++;
      if (this.#events.has('cancel')) this.#events.emit('cancel', task, error);
    } else if (retry !== undefined && run.attempt < retry.attempts && !this.#closed) {
      const delay = retryDelay(retry, run.attempt);
      task._state = State.Pending;
      task._time = this.clock.now() + delay;
      this.#enqueue(task);
      if (this.#events.has('retry')) this.#events.emit('retry', task, error, delay);
    } else {
      this.#detach(task);
      // A durable task retried by its store reports only its last attempt, as in memory.
      const later = task._settings.observer?.retriesLater?.(task) === true;
      this.#finish(task, timedOut ? State.TimedOut : State.Failed, error);
      if (timedOut) this.#timedOut++;
      else this.#failed++;
      if (!later && this.#events.has('failure')) this.#events.emit('failure', task, error);
      if (!later) this.report(error, { task, name: task.name, attempt: task.attempts });
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
    this.#flow?.ended(run.task);
  }

  #afterRun(): void {
    this.#pump();
    this.#checkIdle();
  }

  #cancelPending(task: Task, reason: unknown, inQueue: boolean): void {
    const held = task._state === State.Held;
    task._state = State.Cancelled;
    if (inQueue && held) {
      this.#flow!.discard(task, this.#monotonic());
    } else if (inQueue) {
      this.#queue.discard();
      if (task._settings.elapsed === true) this.#elapsedPending--;
    }
    this.#detach(task);
    this.#finish(task, State.Cancelled, reason);
    this.#cancelled++;
    if (this.#events.has('cancel')) this.#events.emit('cancel', task, materialize(reason));
  }

  #finish(task: Task, state: State, outcome: unknown): void {
    // Its serial key goes to the next task of the key (which may start at the next pump).
    if (task._settings.flow !== undefined) this.#flow?.settled(task, this.#monotonic());
    task._finish(state, outcome);
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
