import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import type { JobBounds, RulePlan } from '../rules/plan.js';
import type { DurableContext, DurableTaskOptions, Handler, StoredJobOptions, StoredOptions } from './options.js';
import { retryDelay, toRetryPolicy, type RetryOptions, type RetryPolicy } from '../core/retry.js';
import { advanceJob } from './advance-job.js';
import {
  UnknownHandlerError, ruleToJson, toPayload,
  type ClaimedTask, type Store, type StoredJob, type StoredTask, type TaskFilter,
} from './store.js';
import type { TaskLoop } from '../core/loop.js';
import { State, type Task, type TaskContext, type TaskFunction, type TaskObserver, type TaskSettings } from '../core/task.js';
import { assertDuration, describe } from '../core/validate.js';

const TASK_KEYS = new Set(['payload', 'key', 'timeout', 'retry']);
const JOB_KEYS = new Set(['payload', 'key', 'timeout', 'retry', 'overlap', 'misfire', 'name']);

/**
 * Moves durable work between a store and the scheduler's worker pool:
 * claims due tasks under a lease, runs them as ordinary in-memory tasks,
 * renews their leases while they run, and records how they ended.
 * @internal
 */
export class DurableRunner implements TaskObserver {
  readonly #store: Store;
  readonly #loop: TaskLoop;
  readonly #handlers = new Map<string, Handler>();
  readonly #owner = randomUUID();
  readonly #lease: number;
  readonly #poll: number;
  /** Claimed tasks by stored id, and the other way round. */
  readonly #byId = new Map<number, Task>();
  readonly #claims = new Map<Task, ClaimedTask>();
  #started: Promise<void> | undefined = undefined;
  #closed = false;
  #timer: unknown = undefined;
  #timerAt = Infinity;
  #renewTimer: unknown = undefined;
  #ticking = false;
  /** The claim round in flight, so close() can wait for it. */
  #claiming: Promise<number> = Promise.resolve(0);
  #tickAgain = false;
  /** Writes to the store still in flight, so close() can wait for them. */
  #writes = new Set<Promise<unknown>>();
  #failures = 0;

  constructor(store: Store, loop: TaskLoop) {
    if (typeof store !== 'object' || store === null || typeof store.claim !== 'function') {
      throw new TypeError(`Expected \`store\` to be a taskheap store (sqliteStore() or postgresStore()), got ${describe(store)}`);
    }
    this.#store = store;
    this.#loop = loop;
    this.#lease = store.lease ?? 30_000;
    this.#poll = store.poll ?? 5_000;
  }

  define(name: string, handler: Handler): void {
    if (typeof name !== 'string' || name === '') throw new TypeError(`Expected the handler name to be a non-empty string, got ${describe(name)}`);
    if (typeof handler !== 'function') throw new TypeError(`Expected the handler for "${name}" to be a function, got ${describe(handler)}`);
    this.#handlers.set(name, handler);
  }

  /** Migrates, recovers and starts claiming; idempotent. */
  start(): Promise<void> {
    this.#started ??= (async () => {
      await this.#store.migrate();
      await this.#store.recover?.();
      await this.#store.subscribe((runAt) => this.#wakeAt(runAt), (id) => this.#cancelLocal(id));
      this.#renewTimer = this.#loop.clock.setTimer(this.#renew, this.#lease / 3, this.#loop.unref);
      this.#tick();
    })();
    return this.#started;
  }

  get started(): boolean {
    return this.#started !== undefined;
  }

  /** Claimed tasks being run by this process. */
  get inFlight(): number {
    return this.#claims.size;
  }

  /** Validates at once (throwing at the call), then resolves when the store has committed. */
  schedule(runAt: number, name: string, options: DurableTaskOptions | undefined): Promise<StoredTask> {
    this.#assertHandler(name);
    const { payload, key, stored } = this.#parse(options, TASK_KEYS, 'durable task');
    const write = this.#store.addTask({
      name, key, payload, runAt, maxAttempts: stored.retry?.attempts ?? 1, options: JSON.stringify(stored),
    });
    return write.then((row) => {
      this.#wakeAt(runAt);
      return row;
    });
  }

  addJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    this.#assertHandler(name);
    const { payload, key, stored } = this.#parse(options, JOB_KEYS, 'durable job');
    if (bounds.jitter !== 0) throw new TypeError('jitter() is not supported for stored jobs');
    const write = this.#store.addJob({
      key: key ?? `job:${randomUUID()}`,
      name,
      payload,
      rule: ruleToJson(plan.rule),
      nextRunAt: plan.first ?? null,
      remaining: bounds.times === Infinity ? null : bounds.times,
      until: bounds.until === Infinity ? null : bounds.until,
      options: JSON.stringify(stored),
    });
    return write.then((row) => {
      if (plan.first !== undefined) this.#wakeAt(plan.first);
      return row;
    });
  }

  async cancel(id: number): Promise<boolean> {
    const cancelled = await this.#store.cancel(id);
    this.#cancelLocal(id);
    return cancelled;
  }

  cancelJob(key: string): Promise<boolean> {
    return this.#store.cancelJob(key);
  }

  getTask(id: number): Promise<StoredTask | undefined> {
    return this.#store.getTask(id);
  }

  listTasks(filter: TaskFilter): Promise<StoredTask[]> {
    return this.#store.listTasks(filter);
  }

  /** Stops claiming and renewing; from now on a cancelled claim goes back to waiting. */
  stop(): void {
    this.#closed = true;
    this.#disarm();
    if (this.#renewTimer !== undefined) this.#loop.clock.clearTimer(this.#renewTimer);
  }

  /** After `stop()`: waits for running tasks and their writes, then closes the store. */
  async close(idle: Promise<void>): Promise<void> {
    await this.#claiming;
    await idle;
    await Promise.allSettled([...this.#writes]);
    await this.#store.close();
  }

  /** TaskObserver: a claimed task reached its final state in memory; write it down. */
  settled(task: Task, state: State, outcome: unknown): void {
    const claim = this.#claims.get(task);
    if (claim === undefined) return;
    this.#claims.delete(task);
    this.#byId.delete(claim.id);
    this.#write(this.#record(claim, state, outcome));
    this.#tick();
  }

  #record(claim: ClaimedTask, state: State, outcome: unknown): Promise<void> {
    const store = this.#store;
    if (state === State.Succeeded) return store.complete(this.#owner, claim.id, 'succeeded', null);
    // Cancelled because this process is shutting down: the work is not done, hand it back.
    if (state === State.Cancelled && this.#closed) return store.release(this.#owner, claim.id);
    if (state === State.Cancelled) return store.complete(this.#owner, claim.id, 'cancelled', errorText(outcome));
    const options = JSON.parse(claim.options) as StoredOptions;
    if (options.retry !== undefined && claim.attempts < claim.maxAttempts) {
      const runAt = this.#loop.clock.now() + retryDelay(toRetryPolicy(options.retry), claim.attempts);
      return store.retry(this.#owner, claim.id, runAt, errorText(outcome));
    }
    this.#report(outcome);
    return store.complete(this.#owner, claim.id, state === State.TimedOut ? 'timed-out' : 'failed', errorText(outcome));
  }

  #write(promise: Promise<unknown>): void {
    const tracked = promise.catch((error: unknown) => this.#report(error));
    this.#writes.add(tracked);
    void tracked.finally(() => this.#writes.delete(tracked));
  }

  /** Claims what the pool can take, then sleeps until the next due time (or the poll interval). */
  #tick = (): void => {
    if (this.#closed || this.#started === undefined) return;
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    this.#ticking = true;
    this.#disarm();
    this.#claiming = this.#claim();
    void this.#claiming.then((delay) => {
      this.#ticking = false;
      if (this.#tickAgain) {
        this.#tickAgain = false;
        return this.#tick();
      }
      this.#arm(delay);
    });
  };

  /** One claim round; resolves with how long to sleep. */
  async #claim(): Promise<number> {
    const clock = this.#loop.clock;
    try {
      const workers = this.#loop.workers;
      const free = workers === Infinity ? 64 : workers - this.#claims.size;
      if (free > 0) {
        const now = clock.now();
        const claimed = await this.#store.claim(this.#owner, now, this.#lease, free, advanceJob);
        // close() came while the claim was on its way: hand the work straight back.
        if (this.#closed) {
          for (const claim of claimed) this.#write(this.#store.release(this.#owner, claim.id));
          return 0;
        }
        for (const claim of claimed) this.#dispatch(claim);
        // A full batch suggests more is due: claim again at once.
        if (claimed.length === free) return 0;
      }
      this.#failures = 0;
      const next = await this.#store.nextDue();
      const wait = next === undefined ? this.#poll : next - clock.now();
      return Math.max(0, Math.min(wait, this.#poll));
    } catch (error) {
      // The database went away: keep the scheduler alive and retry with backoff.
      this.#report(error);
      this.#failures++;
      return Math.min(this.#poll, 100 * 2 ** Math.min(this.#failures, 10));
    }
  }

  #dispatch(claim: ClaimedTask): void {
    const handler = this.#handlers.get(claim.name);
    const options = JSON.parse(claim.options) as StoredOptions;
    const payload: unknown = JSON.parse(claim.payload);
    const fn: TaskFunction = handler === undefined
      ? () => {
        throw new UnknownHandlerError(claim.name);
      }
      : (ctx) => handler(durableContext(ctx, claim), payload);
    const task = this.#loop.push(claim.runAt, fn, this.#settings(claim.name, options.timeout ?? Infinity));
    this.#claims.set(task, claim);
    this.#byId.set(claim.id, task);
  }

  #renew = (): void => {
    if (this.#closed) return;
    const ids = [...this.#byId.keys()];
    const until = this.#loop.clock.now() + this.#lease;
    const renewal = ids.length === 0 ? Promise.resolve([]) : this.#store.renew(this.#owner, ids, until);
    this.#write(renewal.then((lost) => {
      // Another process owns these now (our lease expired) or they were cancelled: stop them here.
      for (const id of lost) this.#cancelLocal(id);
    }));
    this.#renewTimer = this.#loop.clock.setTimer(this.#renew, this.#lease / 3, this.#loop.unref);
  };

  #cancelLocal(id: number): void {
    this.#byId.get(id)?.cancel();
  }

  #wakeAt(runAt: number): void {
    if (this.#closed || this.#started === undefined) return;
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    if (runAt < this.#timerAt) this.#arm(Math.max(0, runAt - this.#loop.clock.now()));
  }

  #arm(delay: number): void {
    this.#disarm();
    if (this.#closed) return;
    this.#timerAt = this.#loop.clock.now() + delay;
    this.#timer = this.#loop.clock.setTimer(this.#tick, delay, this.#loop.unref);
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#loop.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  /** Settings of a claimed task: the runner observes how it ends; retries are the store's. */
  #settings(name: string, timeout: number): TaskSettings {
    return { owner: this.#loop, name, timeout, retry: undefined, signal: undefined, observer: this };
  }

  /** A store error (or a durable task's failure) for `onError`. */
  #report(error: unknown): void {
    this.#loop.report(error, { task: undefined, name: undefined, attempt: 0 });
  }

  #assertHandler(name: string): void {
    if (!this.#handlers.has(name)) throw new UnknownHandlerError(name);
  }

  #parse(options: object | undefined, keys: ReadonlySet<string>, what: string) {
    const given = (options ?? {}) as DurableTaskOptions & { overlap?: string; misfire?: string; name?: string };
    for (const key in given) {
      if (!keys.has(key)) throw new TypeError(`Unknown ${what} option \`${key}\`; expected one of: ${[...keys].join(', ')}`);
    }
    const { payload, key, timeout, retry, overlap, misfire } = given;
    if (key !== undefined && (typeof key !== 'string' || key === '')) throw new TypeError(`Expected \`key\` to be a non-empty string, got ${describe(key)}`);
    if (timeout !== undefined) assertDuration(timeout, 'timeout', 1);
    if (overlap !== undefined && overlap !== 'skip' && overlap !== 'allow') {
      throw new RangeError(`Expected \`overlap\` of a stored job to be 'skip' or 'allow', got ${describe(overlap)}`);
    }
    if (misfire !== undefined && misfire !== 'once' && misfire !== 'skip' && misfire !== 'all') {
      throw new RangeError(`Expected \`misfire\` to be 'once', 'skip' or 'all', got ${describe(misfire)}`);
    }
    const stored: StoredOptions = {
      timeout,
      retry: retry === undefined ? undefined : storable(toRetryPolicy(retry)),
      overlap: overlap as StoredOptions['overlap'],
      misfire: misfire as StoredOptions['misfire'],
    };
    return { payload: toPayload(payload), key: key ?? null, stored };
  }
}

/** A retry policy as JSON can hold it: JSON has no Infinity, so the default is left out. */
function storable(policy: RetryPolicy): RetryOptions {
  return policy.maxDelay === Infinity ? { ...policy, maxDelay: undefined } : policy;
}

/** The context a handler sees: the run's, with the stored attempt count and due time. */
function durableContext(ctx: TaskContext, claim: ClaimedTask): DurableContext {
  return {
    id: claim.id,
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
