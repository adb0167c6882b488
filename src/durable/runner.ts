import { randomUUID } from 'node:crypto';
import type { JobBounds, RulePlan } from '../rules/plan.js';
import type { DurableContext, DurableTaskOptions, Handler, StoredJobOptions, StoredOptions } from './options.js';
import { retryDelay, toRetryPolicy, type RetryOptions, type RetryPolicy } from '../core/retry.js';
import { advanceJob } from './advance-job.js';
import {
  FINAL_STATES, TaskNotFoundError, UnknownHandlerError, WaitTimeoutError, ruleToJson,
  type ClaimedTask, type DueJob, type JobAdvance, type JobFilter, type NewJob, type NewTask, type QueryClient, type Outcome, type Store, type StoredJob, type StoredTask, type TaskFilter,
} from './store.js';
import { assertJobFilter, assertKey, assertName, assertStoredTime, assertTaskFilter, MAX_ATTEMPTS, MAX_TIMER, toPayload, toResult } from './validate.js';
import type { TaskLoop } from '../core/loop.js';
import { State, type Task, type TaskContext, type TaskFunction, type TaskObserver, type TaskSettings } from '../core/task.js';
import { toDuration } from '../core/duration.js';
import { describe, toEpoch } from '../core/validate.js';
import { ClosedError } from '../core/errors.js';
import { toFlow } from '../core/flow-options.js';

const TASK_KEYS = new Set(['payload', 'key', 'timeout', 'retry', 'client', 'rate', 'serial', 'priority']);
const JOB_KEYS = new Set(['payload', 'key', 'timeout', 'retry', 'overlap', 'misfire', 'catchUp', 'name', 'rate', 'serial', 'priority']);
/** Backoff of failed store calls: 100 ms doubling up to this. */
const MAX_BACKOFF = 5_000;
/** The longest wait before a stored retry: a year. */
const MAX_RETRY_DELAY = 365 * 86_400_000;
/** Claim rounds on their way at once: one more than the one being answered keeps workers fed. */
const MAX_CLAIMS = 2;
/** The prefetch that adapts (none given) is at most this many times the workers, */
const MAX_PREFETCH_FACTOR = 32;
/** and at most this many tasks: a claim, and a batch of outcomes, stay statements of moderate size. */
const MAX_ADAPTIVE_PREFETCH = 1_000;
/** How long close() keeps retrying unconfirmed outcomes unless the store says otherwise. */
const CLOSE_TIMEOUT = 5_000;

/**
 * Moves durable work between a store and the scheduler's worker pool:
 * claims due tasks under a lease, runs them as ordinary in-memory tasks,
 * renews their leases while they run, and records how they ended.
 *
 * An outcome is not done until the store confirms it: a finished task waits
 * in `#pending`, still under a renewed lease, while one flush loop writes the
 * outcomes and retries the failed ones with backoff. Only a confirmed write,
 * or the store saying the lease is no longer ours, lets it go.
 *
 * Batching: outcomes that finish in the same turn of the event loop go to
 * the store in one call (one statement in PostgreSQL), and while a batch is
 * on its way the next one gathers. Claims take the free workers and
 * `store.prefetch` more (default: adaptive, see #adaptivePrefetch), which
 * the in-memory loop queues, refilled once half of that is free; a second
 * claim may be on its way beside the first (and beside the outcome batch),
 * so workers rarely wait for a round trip.
 * @internal
 */
export class DurableRunner implements TaskObserver {
  readonly #store: Store;
  readonly #loop: TaskLoop;
  readonly #handlers = new Map<string, Handler>();
  readonly #owner = randomUUID();
  readonly #lease: number;
  readonly #poll: number;
  readonly #closeTimeout: number;
  /** Claimed tasks by stored id, and the other way round. */
  readonly #byId = new Map<number, Task>();
  readonly #claims = new Map<Task, ClaimedTask>();
  /** Finished tasks whose outcome the store has not confirmed yet, by id; their leases are still renewed. */
  readonly #pending = new Map<number, Outcome>();
  /** Claimed tasks with a serial key: their final outcome frees the key, so the next claim should not wait. */
  readonly #serials = new Set<number>();
  /** Ids of `#pending` whose write is on its way (one batch at a time). */
  readonly #sending = new Set<number>();
  /** The defined handler names, as the claim filters by them. */
  #names: string[] = [];
  /** An end-of-turn flush (and claim) is queued. */
  #turnQueued = false;
  /** Set while failed outcome writes wait for their backoff. */
  #flushTimer: unknown = undefined;
  #flushFailures = 0;
  #started: Promise<void> | undefined = undefined;
  /** No more claims (stop()). */
  #closed = false;
  /** No more renewals either (close() is over). */
  #finished = false;
  #timer: unknown = undefined;
  #timerAt = Infinity;
  #renewTimer: unknown = undefined;
  #renewing = false;
  /** Claim rounds on their way (at most MAX_CLAIMS), so close() can wait for them. */
  readonly #rounds = new Set<Promise<number>>();
  /** Tasks asked for by the claims on their way: room already spoken for. */
  #requested = 0;
  /** Moving averages, ms: how long a handler runs, and a claim takes to answer (for the prefetch). */
  #runTime: number | undefined = undefined;
  #claimTime: number | undefined = undefined;
  #tickAgain = false;
  /** The last claim round found nothing due within the poll interval. */
  #nothingDue = false;
  /** Writes to the store still in flight, so close() can wait for them. */
  #writes = new Set<Promise<unknown>>();
  #failures = 0;
  /** waitFor() calls by task id. */
  readonly #waiters = new Map<number, Set<Waiter>>();
  /** The store's watch(), once somebody waits. */
  #watching: Promise<void> | undefined = undefined;
  /** Handler names this process may schedule without defining them (the scheduler's `handlers` option). */
  readonly #known: ReadonlySet<string>;
  /** The store opened and migrated, once: by the first call that needs it, `migrate()` or `start()`. */
  #ready: Promise<void> | undefined = undefined;

  /** Retention ages in ms (null: kept forever). */
  readonly #retention: Retention;
  #sweepTimer: unknown = undefined;
  /** The sweep in flight, so close() can wait for it. */
  #sweeping: Promise<void> = Promise.resolve();
  #sweepBusy = false;

  /**
   * Told of stored job occurrences the job's policies dropped (misfire
   * 'skip', the catch-up cap of 'all', overlap 'skip'), after the claim that
   * decided it committed; the scheduler turns these into `skip` events.
   */
  onSkip: ((key: string, name: string, at: number, reason: 'overlap' | 'misfire') => void) | undefined;

  constructor(store: Store, loop: TaskLoop, known: readonly string[] = [], retention: Retention = DEFAULT_RETENTION) {
    if (typeof store !== 'object' || store === null || typeof store.claim !== 'function' || typeof store.settle !== 'function') {
      throw new TypeError(`Expected \`store\` to be a taskheap store (sqliteStore() or postgresStore()), got ${describe(store)}`);
    }
    this.#store = store;
    this.#loop = loop;
    this.#lease = store.lease ?? 30_000;
    this.#poll = store.poll ?? 5_000;
    this.#closeTimeout = store.closeTimeout ?? CLOSE_TIMEOUT;
    for (const name of known) assertName(name, 'a name in `handlers`');
    this.#known = new Set(known);
    this.#retention = retention;
  }

  /**
   * Opens the store and creates or upgrades its schema, once. Producers get
   * here from their first call; a failure is not remembered, so the next
   * call tries again (the database may be back).
   */
  ready(): Promise<void> {
    if (this.#finished) return Promise.reject(new ClosedError());
    this.#ready ??= this.#store.migrate().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  define(name: string, handler: Handler): void {
    assertName(name, 'the handler name');
    if (typeof handler !== 'function') throw new TypeError(`Expected the handler for "${name}" to be a function, got ${describe(handler)}`);
    this.#handlers.set(name, handler);
    this.#names = [...this.#handlers.keys()];
  }

  /** Migrates, recovers and starts claiming; idempotent. */
  start(): Promise<void> {
    this.#started ??= (async () => {
      await this.ready();
      await this.#store.recover?.();
      await this.#store.subscribe((runAt) => this.#wakeAt(runAt), (id) => this.#cancelLocal(id));
      this.#renewTimer = this.#loop.clock.setTimer(this.#renew, this.#lease / 3, this.#loop.unref);
      this.#tick();
      if (this.#retention.succeeded !== null || this.#retention.failed !== null) {
        this.#sweepTimer = this.#loop.clock.setTimer(this.#sweep, 0, this.#loop.unref);
      }
    })();
    return this.#started;
  }

  get started(): boolean {
    return this.#started !== undefined;
  }

  /** Claimed tasks held by this process: running, or prefetched and about to. */
  get inFlight(): number {
    return this.#claims.size;
  }

  /** Validates at once (throwing at the call), then resolves when the store has committed. */
  schedule(runAt: number, name: string, options: DurableTaskOptions | undefined): Promise<StoredTask> {
    this.#assertHandler(name);
    assertStoredTime(runAt, 'when');
    const { payload, key, stored } = this.#parse(options, TASK_KEYS, 'durable task');
    const client = options?.client;
    if (client !== undefined && (typeof client !== 'object' || client === null || typeof client.query !== 'function')) {
      throw new TypeError(`Expected \`client\` to be a pg Client or PoolClient inside your transaction, got ${describe(client)}`);
    }
    const write = this.ready().then(() => this.#store.addTask({
      name, key, payload, runAt, maxAttempts: stored.retry?.attempts ?? 1, options: JSON.stringify(stored),
      serial: stored.serial ?? null, priority: stored.priority ?? 0,
    }, client));
    return write.then((row) => {
      this.#wakeAt(runAt);
      return row;
    });
  }

  /**
   * Validates every item first (an error names the item's index, and
   * nothing is written), then adds them all in one transaction.
   */
  scheduleMany(items: readonly { runAt: unknown; name: unknown; options: object }[]): Promise<StoredTask[]> {
    const tasks: NewTask[] = [];
    let earliest = Infinity;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      try {
        if (typeof item.name !== 'string') throw new TypeError(`Expected \`name\` to be a handler name (a string), got ${describe(item.name)}`);
        this.#assertHandler(item.name);
        const runAt = toEpoch(item.runAt);
        assertStoredTime(runAt, 'when');
        const { payload, key, stored } = this.#parse(item.options, TASK_KEYS, 'durable task');
        tasks.push({
          name: item.name, key, payload, runAt, maxAttempts: stored.retry?.attempts ?? 1, options: JSON.stringify(stored),
          serial: stored.serial ?? null, priority: stored.priority ?? 0,
        });
        earliest = Math.min(earliest, runAt);
      } catch (error) {
        if (error instanceof Error) error.message = `scheduleMany() item ${i}: ${error.message}`;
        throw error;
      }
    }
    if (tasks.length === 0) return Promise.resolve([]);
    // A producer that never started opens the store here, as schedule() does.
    return this.ready().then(() => this.#store.addTasks(tasks)).then((rows) => {
      this.#wakeAt(earliest);
      return rows;
    });
  }

  addJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    this.#assertHandler(name);
    const { payload, key, stored } = this.#parse(options, JOB_KEYS, 'durable job');
    if (bounds.jitter !== 0) throw new TypeError('jitter() is not supported for stored jobs');
    if (plan.first !== undefined) assertStoredTime(plan.first, 'the first occurrence');
    if (bounds.until !== Infinity) assertStoredTime(bounds.until, 'until');
    if (bounds.times !== Infinity && bounds.times > MAX_ATTEMPTS) {
      throw new RangeError(`Expected \`times\` of a stored job to be at most ${MAX_ATTEMPTS}, got ${describe(bounds.times)}`);
    }
    const job: NewJob = {
      key: key ?? `job:${randomUUID()}`,
      name,
      payload,
      rule: ruleToJson(plan.rule),
      nextRunAt: plan.first ?? null,
      remaining: bounds.times === Infinity ? null : bounds.times,
      until: bounds.until === Infinity ? null : bounds.until,
      options: JSON.stringify(stored),
    };
    // Its counts and last run are read after: registration is rare, one more read is cheap. The
    // schedule is the one the registration wrote (a claim may already have advanced it since).
    const write = this.ready().then(async () => {
      const row = await this.#store.addJob(job);
      const stats = await this.#store.getJob(row.key);
      return stats === undefined ? row : { ...row, lastRunAt: stats.lastRunAt, counts: stats.counts };
    });
    return write.then((row) => {
      if (plan.first !== undefined) this.#wakeAt(plan.first);
      return row;
    });
  }

  async cancel(id: number): Promise<boolean> {
    await this.ready();
    const cancelled = await this.#store.cancel(id);
    this.#cancelLocal(id);
    if (cancelled) {
      this.#done(id);
      // It may have held a serial key: the key's next task need not wait for a poll.
      this.#wakeAt(this.#loop.clock.now());
    }
    return cancelled;
  }

  /** Puts a failed, timed-out or cancelled task back to waiting, due now, with all its attempts. */
  async requeue(id: number): Promise<StoredTask | undefined> {
    await this.ready();
    const task = await this.#store.requeue(id, this.#loop.clock.now());
    if (task !== undefined) this.#wakeAt(task.runAt.getTime());
    return task;
  }

  /**
   * Resolves with the task once it is in a final state. Woken by this
   * process's own writes and, where the store has them, by other processes'
   * announcements (PostgreSQL NOTIFY); a look every poll interval covers an
   * announcement lost while the listener reconnected.
   */
  async waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    await this.ready();
    signal?.throwIfAborted();
    if (this.#store.watch !== undefined) {
      this.#watching ??= this.#store.watch((done) => (done === null ? this.#doneAll() : this.#done(done))).catch((error: unknown) => {
        this.#watching = undefined;
        throw error;
      });
      await this.#watching;
    }
    // close() came while we were getting ready: it has already let its waiters go.
    if (this.#closed) throw new ClosedError();
    const clock = this.#loop.clock;
    return new Promise<StoredTask>((resolve, reject) => {
      let settled = false;
      let looking = false;
      let again = false;
      let poll: unknown;
      let deadline: unknown;
      const finish = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        const set = this.#waiters.get(id);
        set?.delete(waiter);
        if (set?.size === 0) this.#waiters.delete(id);
        if (poll !== undefined) clock.clearTimer(poll);
        if (deadline !== undefined) clock.clearTimer(deadline);
        signal?.removeEventListener('abort', aborted);
        outcome();
      };
      const look = (): void => {
        if (settled) return;
        // One read at a time; a wake during it reads again afterwards.
        if (looking) {
          again = true;
          return;
        }
        looking = true;
        this.#store.getTask(id).then((task) => {
          looking = false;
          if (task === undefined) finish(() => reject(new TaskNotFoundError(id)));
          else if (FINAL_STATES.has(task.state)) finish(() => resolve(task));
          else if (again) {
            again = false;
            look();
          }
        }, (error: unknown) => {
          looking = false;
          finish(() => reject(error));
        });
      };
      const waiter: Waiter = { look, fail: (error) => finish(() => reject(error)) };
      const aborted = () => finish(() => reject(signal!.reason));
      const tick = () => {
        poll = clock.setTimer(tick, this.#poll, this.#loop.unref);
        look();
      };
      let set = this.#waiters.get(id);
      if (set === undefined) this.#waiters.set(id, set = new Set());
      set.add(waiter);
      signal?.addEventListener('abort', aborted, { once: true });
      if (timeout !== Infinity) {
        deadline = clock.setTimer(() => finish(() => reject(new WaitTimeoutError(id, timeout))), timeout, this.#loop.unref);
      }
      poll = clock.setTimer(tick, this.#poll, this.#loop.unref);
      look();
    });
  }

  /** A task reached a final state: whoever waits for it looks. */
  #done(id: number): void {
    const set = this.#waiters.get(id);
    if (set !== undefined) for (const waiter of set) waiter.look();
  }

  #doneAll(): void {
    for (const set of this.#waiters.values()) for (const waiter of set) waiter.look();
  }

  async cancelJob(key: string): Promise<boolean> {
    await this.ready();
    return this.#store.cancelJob(key);
  }

  async getTask(id: number): Promise<StoredTask | undefined> {
    await this.ready();
    return this.#store.getTask(id);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    assertTaskFilter(filter);
    return this.ready().then(() => this.#store.listTasks(filter));
  }

  getJob(key: string): Promise<StoredJob | undefined> {
    assertKey(key, 'key');
    return this.ready().then(() => this.#store.getJob(key));
  }

  listJobs(filter: JobFilter): Promise<StoredJob[]> {
    assertJobFilter(filter);
    return this.ready().then(() => this.#store.listJobs(filter));
  }

  /** Pauses ('scheduled' to 'paused') or resumes a stored job; false if it was not in the state to leave. */
  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    assertKey(key, 'key');
    return this.#setJobState(key, from, to);
  }

  async #setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean> {
    await this.ready();
    const changed = await this.#store.setJobState(key, from, to);
    if (changed && to === 'scheduled') this.#wakeAt(this.#loop.clock.now());
    return changed;
  }

  triggerJob(key: string): Promise<StoredTask | undefined> {
    assertKey(key, 'key');
    return this.#triggerJob(key);
  }

  async #triggerJob(key: string): Promise<StoredTask | undefined> {
    await this.ready();
    const task = await this.#store.triggerJob(key, this.#loop.clock.now());
    if (task !== undefined) this.#wakeAt(task.runAt.getTime());
    return task;
  }

  /**
   * Stops claiming; from now on a cancelled claim goes back to waiting.
   * Leases are still renewed until close() is over: running tasks and
   * unconfirmed outcomes stay ours.
   */
  stop(): void {
    this.#closed = true;
    this.#disarm();
  }

  /**
   * After `stop()`: waits for running tasks, then for their outcomes to be
   * confirmed (at most `closeTimeout` ms), then closes the store.
   */
  async close(idle: Promise<void>): Promise<void> {
    for (const set of this.#waiters.values()) for (const waiter of set) waiter.fail(new ClosedError());
    if (this.#sweepTimer !== undefined) this.#loop.clock.clearTimer(this.#sweepTimer);
    this.#sweepTimer = undefined;
    await this.#sweeping;
    await Promise.all([...this.#rounds]);
    await idle;
    await this.#drain();
    this.#finished = true;
    if (this.#renewTimer !== undefined) this.#loop.clock.clearTimer(this.#renewTimer);
    if (this.#flushTimer !== undefined) this.#loop.clock.clearTimer(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#pending.size > 0) {
      this.#report(new Error(`taskheap: ${this.#pending.size} task outcome(s) could not be recorded within ${this.#closeTimeout} ms of close(); `
        + 'those tasks run again once their lease expires'));
      this.#pending.clear();
    }
    await Promise.allSettled([...this.#writes]);
    await this.#store.close();
  }

  /** Waits (real time: the store's, not the scheduler's clock) until every outcome is confirmed, or the close timeout. */
  async #drain(): Promise<void> {
    const deadline = Date.now() + this.#closeTimeout;
    while (this.#pending.size > 0 && Date.now() < deadline) {
      if (this.#flushTimer !== undefined) {
        // Close is no time for a long backoff: try again now.
        this.#loop.clock.clearTimer(this.#flushTimer);
        this.#flushTimer = undefined;
        this.#flush();
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now()))));
    }
  }

  /** TaskObserver: whether this failed run is retried by the store (attempts left), so not reported yet. */
  retriesLater(task: Task): boolean {
    const claim = this.#claims.get(task);
    if (claim === undefined || claim.attempts >= claim.maxAttempts) return false;
    return (JSON.parse(claim.options) as StoredOptions).retry !== undefined;
  }

  /** TaskObserver: a claimed task reached its final state in memory; hand its outcome to the flush loop. */
  settled(task: Task, state: State, outcome: unknown): void {
    const claim = this.#claims.get(task);
    if (claim === undefined) return;
    this.#claims.delete(task);
    this.#byId.delete(claim.id);
    const result = this.#outcome(claim, state, outcome);
    this.#pending.set(claim.id, result);
    this.#endOfTurn();
  }

  /**
   * Outcomes finishing in the same turn share one write: the flush, and the
   * claim that refills the freed room, wait for the end of the turn: a
   * microtask queued behind the continuations of the other tasks that were
   * started together (a claimed batch starts in one go). A microtask, not a
   * timer: the outcome's write keeps the time it finished (a retry is due
   * from then), and no timer delay is added to every batch.
   */
  #endOfTurn(): void {
    if (this.#turnQueued) return;
    this.#turnQueued = true;
    queueMicrotask(this.#turn);
  }

  #turn = (): void => {
    this.#turnQueued = false;
    this.#flush();
    // Refill once half the capacity is free: fewer, fuller claims.
    if (this.#room() >= this.#refill()) this.#tick();
  };

  /** How many claimed tasks this process holds at most: its workers, and `prefetch` more waiting for one. */
  #capacity(): number {
    const workers = this.#loop.workers;
    if (workers === Infinity) return 64 + (this.#store.prefetch ?? 0);
    return workers + (this.#store.prefetch ?? this.#adaptivePrefetch(workers));
  }

  /**
   * The prefetch when none was given: what the workers get through in two
   * claim round trips, measured (real time, moving averages), at least the
   * workers and at most MAX_PREFETCH_FACTOR times them (and
   * MAX_ADAPTIVE_PREFETCH, unless the workers alone are more). Long tasks (a
   * round trip is little next to one) claim only the workers' worth ahead,
   * so work spreads over processes; short ones claim enough that workers
   * never wait for the database. Until a task has finished: the workers.
   */
  #adaptivePrefetch(workers: number): number {
    if (this.#runTime === undefined || this.#claimTime === undefined) return workers;
    const ahead = Math.ceil((2 * workers * this.#claimTime) / Math.max(this.#runTime, 0.001));
    return Math.max(workers, Math.min(ahead, workers * MAX_PREFETCH_FACTOR, MAX_ADAPTIVE_PREFETCH));
  }

  /**
   * How much room is worth a claim when a task finishes: half the capacity,
   * so a claim is on its way while the other half still keeps workers busy.
   * Unlimited workers run what they claim at once: any room is worth it.
   */
  #refill(): number {
    return this.#loop.workers === Infinity ? 1 : Math.ceil(this.#capacity() / 2);
  }

  #outcome(claim: ClaimedTask, state: State, outcome: unknown): Outcome {
    const id = claim.id;
    // The wrapper of #dispatch turned the handler's value into JSON text (or null).
    if (state === State.Succeeded) return { id, kind: 'complete', state: 'succeeded', error: null, result: outcome as string | null };
    // Cancelled because this process is shutting down: the work is not done, hand it back.
    if (state === State.Cancelled && this.#closed) return { id, kind: 'release' };
    if (state === State.Cancelled) return { id, kind: 'complete', state: 'cancelled', error: errorText(outcome) };
    const options = JSON.parse(claim.options) as StoredOptions;
    if (options.retry !== undefined && claim.attempts < claim.maxAttempts) {
      // A stored time must stay within what the columns hold, whatever the policy says.
      const delay = Math.min(retryDelay(toRetryPolicy(options.retry), claim.attempts), MAX_RETRY_DELAY);
      return { id, kind: 'retry', delay, error: errorText(outcome) };
    }
    // The last attempt: the loop reports it (failure event, onError), once.
    return { id, kind: 'complete', state: state === State.TimedOut ? 'timed-out' : 'failed', error: errorText(outcome) };
  }

  /**
   * The flush loop: sends every pending outcome in one batch. One batch is
   * on its way at a time; what finishes meanwhile goes in the next. While a
   * failed write waits for its backoff, new outcomes wait with it.
   */
  #flush = (): void => {
    if (this.#flushTimer !== undefined || this.#finished || this.#sending.size > 0 || this.#pending.size === 0) return;
    const batch = [...this.#pending.values()];
    for (const outcome of batch) this.#sending.add(outcome.id);
    this.#write(this.#store.settle(this.#owner, batch, this.#loop.clock.now()).then(() => {
      let freed = false;
      for (const outcome of batch) {
        this.#sending.delete(outcome.id);
        if (this.#pending.get(outcome.id) === outcome) this.#pending.delete(outcome.id);
        if (outcome.kind === 'complete') this.#done(outcome.id);
        if (this.#serials.delete(outcome.id) && outcome.kind === 'complete') freed = true;
      }
      // A serial key was let go of: its next task may be due now, and the
      // claim that ran beside this write could not take it yet.
      if (freed) this.#wakeAt(this.#loop.clock.now());
      this.#flushFailures = 0;
      // What finished while this batch was on its way.
      this.#flush();
    }, (error: unknown) => {
      for (const outcome of batch) this.#sending.delete(outcome.id);
      // One report per outage, not one per outcome and round: the claim loop reports too.
      if (this.#flushFailures === 0) this.#report(error);
      this.#flushFailures++;
      if (this.#flushTimer === undefined && !this.#finished) {
        this.#flushTimer = this.#loop.clock.setTimer(() => {
          this.#flushTimer = undefined;
          this.#flush();
        }, backoff(this.#flushFailures), this.#loop.unref);
      }
    }));
  };

  #write(promise: Promise<unknown>): void {
    const tracked = promise.catch((error: unknown) => this.#report(error));
    this.#writes.add(tracked);
    void tracked.finally(() => this.#writes.delete(tracked));
  }

  /**
   * Claims what the pool can take, then sleeps until the next due time (or
   * the poll interval). A second claim goes out while one is on its way if
   * the room not yet asked for is worth a claim: the database answers both
   * at once (another connection, another core), so a batch is ready when
   * the workers finish the one before.
   */
  #tick = (idle = false): void => {
    if (this.#closed || this.#started === undefined) return;
    const out = this.#rounds.size;
    if (out >= MAX_CLAIMS || (out > 0 && this.#room() < this.#refill())) {
      this.#tickAgain = true;
      return;
    }
    this.#disarm();
    const round = this.#claim(idle);
    this.#rounds.add(round);
    void round.then((delay) => {
      this.#rounds.delete(round);
      if (this.#tickAgain) {
        this.#tickAgain = false;
        return this.#tick();
      }
      // The last round to come back knows best when to look again.
      if (this.#rounds.size === 0) this.#arm(delay, this.#nothingDue);
    });
  };

  /** The poll's timer: nothing was known to be due when it was armed. */
  #idleTick = (): void => this.#tick(true);

  /** Room for claimed tasks that no claim on its way has asked for yet. */
  #room(): number {
    return this.#capacity() - this.#claims.size - this.#requested;
  }

  /**
   * One claim round; resolves with how long to sleep. `idle`: the poll after
   * nothing was due, which asks when something is due first and claims only
   * if it is, so an idle process costs one statement per poll, not two.
   */
  async #claim(idle: boolean): Promise<number> {
    const clock = this.#loop.clock;
    this.#nothingDue = false;
    try {
      if (idle) {
        const wait = await this.#store.nextDue(clock.now(), this.#names);
        if (wait === undefined || wait > 0) return this.#sleep(wait);
      }
      const free = this.#room();
      // Full: the end of the turn that frees room claims again.
      if (free <= 0) return this.#poll;
      {
        // Skips are collected per claim and reported only once it committed
        // (a claim that fails is rolled back and decided again).
        let skips: DueJob[] | undefined;
        let skipped: NonNullable<JobAdvance['skipped']>[] | undefined;
        const advance = this.onSkip === undefined ? advanceJob : (job: DueJob, now: number, running: boolean) => {
          const plan = advanceJob(job, now, running);
          if (plan.skipped !== undefined) {
            (skips ??= []).push(job);
            (skipped ??= []).push(plan.skipped);
          }
          return plan;
        };
        this.#requested += free;
        const sent = performance.now();
        let claimed: ClaimedTask[];
        try {
          claimed = await this.#store.claim(this.#owner, clock.now(), this.#lease, free, advance, this.#names);
        } finally {
          this.#requested -= free;
        }
        this.#claimTime = average(this.#claimTime, performance.now() - sent);
        if (skips !== undefined) {
          for (let i = 0; i < skips.length; i++) this.onSkip?.(skips[i]!.key, skips[i]!.name, skipped![i]!.at, skipped![i]!.reason);
        }
        // close() came while the claim was on its way: hand the work straight back.
        if (this.#closed) {
          for (const claim of claimed) this.#pending.set(claim.id, { id: claim.id, kind: 'release' });
          this.#flush();
          return 0;
        }
        for (const claim of claimed) this.#dispatch(claim);
        this.#failures = 0;
        // A full batch suggests more is due: claim again at once if there is
        // room enough; otherwise finishing tasks make room and claim.
        if (claimed.length === free) return this.#room() >= this.#refill() ? 0 : this.#poll;
      }
      // The store says how long until something is due, by its own clock.
      return this.#sleep(await this.#store.nextDue(clock.now(), this.#names));
    } catch (error) {
      // The database went away: keep the scheduler alive and retry with backoff.
      this.#report(error);
      this.#failures++;
      return Math.min(this.#poll, backoff(this.#failures));
    }
  }

  /** How long to sleep when the store says something is due in `wait` ms (undefined: nothing is); at most the poll. */
  #sleep(wait: number | undefined): number {
    const delay = Math.max(0, Math.min(wait ?? this.#poll, this.#poll));
    this.#nothingDue = delay === this.#poll;
    return delay;
  }

  #dispatch(claim: ClaimedTask): void {
    const handler = this.#handlers.get(claim.name);
    const options = JSON.parse(claim.options) as StoredOptions;
    const payload: unknown = JSON.parse(claim.payload);
    const fn: TaskFunction = handler === undefined
      ? () => {
        throw new UnknownHandlerError(claim.name);
      }
      : async (ctx) => {
        const started = performance.now();
        try {
          return toResult(await handler(durableContext(ctx, claim, this.#transaction), payload));
        } finally {
          this.#runTime = average(this.#runTime, performance.now() - started);
        }
      };
    // Due now: the store decided so by its clock, which may differ from ours.
    const task = this.#loop.push(Math.min(claim.runAt, this.#loop.clock.now()), fn, this.#settings(claim.name, options));
    this.#claims.set(task, claim);
    this.#byId.set(claim.id, task);
    if (options.serial !== undefined) this.#serials.add(claim.id);
  }

  /**
   * Retention: deletes finished rows past their age in batches of
   * SWEEP_BATCH, each its own short statement, yielding to the event loop
   * between batches so no lock is held for long and claims go on; then
   * sleeps SWEEP_EVERY. Whichever process runs work does it; several doing
   * it at once skip each other's rows (PostgreSQL) or are one (SQLite).
   */
  #sweep = (): void => {
    // The next sweep is planned from when this one begins, not ends: the
    // cadence does not drift with the database's latency.
    this.#sweepTimer = this.#closed ? undefined : this.#loop.clock.setTimer(this.#sweep, SWEEP_EVERY, this.#loop.unref);
    // A sweep still deleting (a slow database) covers this one.
    if (this.#sweepBusy) return;
    this.#sweepBusy = true;
    this.#sweeping = (async () => {
      const { succeeded, failed } = this.#retention;
      try {
        while (!this.#closed && await this.#store.prune(succeeded, failed, SWEEP_BATCH) >= SWEEP_BATCH) {
          await new Promise((resolve) => setImmediate(resolve));
        }
      } catch (error) {
        this.#report(error);
      } finally {
        this.#sweepBusy = false;
      }
    })();
  };

  /** ctx.transaction(): the handler's writes and the task's completion in one transaction. */
  #transaction = <T>(claim: ClaimedTask, fn: (client: QueryClient) => Promise<T>): Promise<T> => {
    if (typeof fn !== 'function') return Promise.reject(new TypeError(`Expected the ctx.transaction() callback to be a function, got ${describe(fn)}`));
    if (this.#store.completeWithin === undefined) {
      return Promise.reject(new TypeError('ctx.transaction() needs postgresStore(): a SQLite store cannot hand its connection out'));
    }
    return this.#store.completeWithin(this.#owner, claim.id, fn, toResult);
  };

  /** Renews the leases of running tasks and of finished ones whose outcome is not confirmed yet. */
  #renew = (): void => {
    if (this.#finished) return;
    this.#renewTimer = this.#loop.clock.setTimer(this.#renew, this.#lease / 3, this.#loop.unref);
    // A renewal still on its way (a slow database) is not overtaken by another.
    if (this.#renewing) return;
    // Sent with no ids too: a shared store also hands back claims whose answer
    // never arrived. Never while a claim is on its way: its answer may be
    // waiting unread behind a blocked event loop, and the task would then run
    // here and again elsewhere. A claim whose answer was lost has failed here
    // already, so the next renewal hands it back.
    const ids = [...this.#byId.keys(), ...this.#pending.keys()];
    this.#renewing = true;
    this.#write(this.#store.renew(this.#owner, ids, this.#loop.clock.now(), this.#lease, this.#rounds.size === 0).then((lost) => {
      // Another process owns these now (our lease expired) or they were
      // cancelled: stop them here, and stop writing their outcomes.
      for (const id of lost) {
        this.#cancelLocal(id);
        this.#pending.delete(id);
        this.#serials.delete(id);
      }
    }).finally(() => {
      this.#renewing = false;
    }));
  };

  #cancelLocal(id: number): void {
    this.#byId.get(id)?.cancel();
  }

  #wakeAt(runAt: number): void {
    if (this.#closed || this.#started === undefined) return;
    if (this.#rounds.size > 0) {
      this.#tickAgain = true;
      return;
    }
    if (runAt < this.#timerAt) this.#arm(Math.max(0, runAt - this.#loop.clock.now()));
  }

  /** Arms the claim timer; `idle`: it is the poll, nothing being known to be due before it. */
  #arm(delay: number, idle = false): void {
    this.#disarm();
    if (this.#closed) return;
    this.#timerAt = this.#loop.clock.now() + delay;
    this.#timer = this.#loop.clock.setTimer(idle ? this.#idleTick : this.#tick, delay, this.#loop.unref);
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#loop.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  /**
   * Settings of a claimed task: the runner observes how it ends; retries are
   * the store's. Its stored rate, serial key and priority go to the loop:
   * rate limits are kept per process, the serial key is already the
   * database's (at most one task of a key is claimed anywhere), and priority
   * orders the claimed tasks that wait for a worker.
   */
  #settings(name: string, options: StoredOptions): TaskSettings {
    const settings: TaskSettings = { owner: this.#loop, name, timeout: options.timeout ?? Infinity, retry: undefined, signal: undefined, observer: this };
    // Tasks without these options (most) pay nothing more.
    if (options.rate === undefined && options.serial === undefined && options.priority === undefined) return settings;
    const flow = toFlow(options);
    return flow === undefined ? settings : { ...settings, flow };
  }

  /** A store error (or a durable task's failure) for `onError`. */
  #report(error: unknown): void {
    this.#loop.report(error, { task: undefined, name: undefined, attempt: 0 });
  }

  /**
   * A process that names its handlers (defines some, or lists them in
   * `handlers`) may only schedule those: a typo fails at the call. A process
   * that names none is a pure producer and accepts any well-formed name.
   */
  #assertHandler(name: string): void {
    assertName(name, 'the handler name');
    if (this.#handlers.size === 0 && this.#known.size === 0) return;
    if (!this.#handlers.has(name) && !this.#known.has(name)) throw new UnknownHandlerError(name);
  }

  #parse(options: object | undefined, keys: ReadonlySet<string>, what: string) {
    const given = (options ?? {}) as DurableTaskOptions & { overlap?: string; misfire?: string; catchUp?: unknown; name?: string };
    for (const key in given) {
      if (!keys.has(key)) throw new TypeError(`Unknown ${what} option \`${key}\`; expected one of: ${[...keys].join(', ')}`);
    }
    const { payload, key, retry, overlap, misfire, catchUp } = given;
    // Keys go into JSON the database parses (jsonb refuses NUL) and serial into an indexed column.
    if (given.serial !== undefined) assertKey(given.serial, 'serial');
    // Rate, serial key and priority: checked here, at the call, as in memory, before anything is written.
    const flow = toFlow(given);
    const rate = flow?.rate;
    if (rate !== undefined) assertKey(rate.key, 'rate.key');
    if (catchUp !== undefined && (!Number.isInteger(catchUp) || (catchUp as number) < 1 || (catchUp as number) > MAX_ATTEMPTS)) {
      throw new RangeError(`Expected \`catchUp\` to be an integer from 1 to ${MAX_ATTEMPTS}, got ${describe(catchUp)}`);
    }
    if (key !== undefined) assertKey(key, 'key');
    const timeout = given.timeout === undefined ? undefined : toDuration(given.timeout, 'timeout', 1);
    if (timeout !== undefined && timeout > MAX_TIMER) {
      throw new RangeError(`Expected \`timeout\` of a stored task to be at most ${MAX_TIMER} ms (the timer limit), got ${describe(timeout)}`);
    }
    if (overlap !== undefined && overlap !== 'skip' && overlap !== 'allow') {
      throw new RangeError(`Expected \`overlap\` of a stored job to be 'skip' or 'allow', got ${describe(overlap)}`);
    }
    if (misfire !== undefined && misfire !== 'once' && misfire !== 'skip' && misfire !== 'all') {
      throw new RangeError(`Expected \`misfire\` to be 'once', 'skip' or 'all', got ${describe(misfire)}`);
    }
    const policy = retry === undefined ? undefined : toRetryPolicy(retry);
    if (policy !== undefined && policy.attempts > MAX_ATTEMPTS) {
      throw new RangeError(`Expected \`retry.attempts\` of a stored task to be at most ${MAX_ATTEMPTS} (what the attempts column holds), got ${describe(policy.attempts)}`);
    }
    const stored: StoredOptions = {
      timeout,
      retry: policy === undefined ? undefined : storable(policy),
      overlap: overlap as StoredOptions['overlap'],
      misfire: misfire as StoredOptions['misfire'],
      catchUp: catchUp as number | undefined,
      rate: rate === undefined ? undefined : { key: rate.key, limit: rate.limit, interval: rate.interval },
      serial: flow?.serial,
      priority: flow === undefined || flow.priority === 0 ? undefined : flow.priority,
    };
    return { payload: toPayload(payload), key: key ?? null, stored };
  }
}

/** How long finished rows are kept, ms; null: forever. */
export interface Retention {
  readonly succeeded: number | null;
  readonly failed: number | null;
}

/** A day for succeeded tasks, a week for failed, timed-out and cancelled ones (and finished jobs). */
export const DEFAULT_RETENTION: Retention = { succeeded: 86_400_000, failed: 7 * 86_400_000 };
/** Rows one retention statement deletes at most. */
export const SWEEP_BATCH = 500;
/** ms between retention sweeps. */
export const SWEEP_EVERY = 60_000;

/** One waitFor() call: `look` reads the task again, `fail` rejects it. */
interface Waiter {
  look(): void;
  fail(error: unknown): void;
}

/** A moving average: the last value weighs a tenth. */
function average(mean: number | undefined, value: number): number {
  return mean === undefined ? value : mean + (value - mean) / 10;
}

/** The wait after `failures` failed store calls in a row: 100 ms doubling, at most MAX_BACKOFF. */
function backoff(failures: number): number {
  return Math.min(MAX_BACKOFF, 100 * 2 ** Math.min(failures, 10));
}

/** A retry policy as JSON can hold it: JSON has no Infinity, so the default is left out. */
function storable(policy: RetryPolicy): RetryOptions {
  return policy.maxDelay === Infinity ? { ...policy, maxDelay: undefined } : policy;
}

/** The context a handler sees: the run's, with the stored attempt count and due time. */
function durableContext(ctx: TaskContext, claim: ClaimedTask, transaction: <T>(claim: ClaimedTask, fn: (client: QueryClient) => Promise<T>) => Promise<T>): DurableContext {
  return {
    id: claim.id,
    transaction: (fn) => transaction(claim, fn as never),
    get signal() {
      return ctx.signal;
    },
    scheduledAt: new Date(claim.runAt),
    startedAt: ctx.startedAt,
    attempt: claim.attempts,
    name: claim.name,
  };
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return String(error);
}
