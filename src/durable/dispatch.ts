// Dispatch: turns a claimed task into an in-memory task of the loop. Its
// stored options are parsed here, once per claim, and kept with the claim
// (Holdings): the settings come from them now, the retry policy when the
// run ends (completer.ts). The handler runs with a durable context
// (stored id, attempt, ctx.transaction()).
import { TaskheapError } from '../core/errors.js';
import type { Run, TaskFunction, TaskObserver, TaskSettings } from '../core/task.js';
import { toLogLine, toProgress } from '../core/journal.js';
import { JournalWriter } from './journal-writer.js';
import { describe } from '../core/validate.js';
import { toLimits } from '../core/limit-options.js';
import type { DurableContext, StoredOptions, TransactionClient } from './options.js';
import { hasFlows, hasSteps, type ClaimedTask, type DependencyInfo, type QueryClient } from './store.js';
import { toResult } from './validate.js';
import { LeaseExpiredError, LeaseLostError, UnknownHandlerError } from './errors.js';
import { StepCursor, StepLog, type SleepFor, type StepRecord } from '../core/steps.js';
import type { Duration } from '../core/duration.js';
import type { Handlers } from './handlers.js';
import type { Holdings } from './holdings.js';
import type { Prefetch } from './prefetch.js';
import type { RunnerContext } from './runner-context.js';

/** @internal */
export class Dispatcher {
  readonly #ctx: RunnerContext;
  readonly #handlers: Handlers;
  readonly #holdings: Holdings;
  readonly #prefetch: Prefetch;
  /** Told how each dispatched task ends (the completer). */
  readonly #observer: TaskObserver;
  /** ctx.progress() and ctx.log() on their way to the store. */
  readonly #journal: JournalWriter;
  /** What the handlers' contexts ask of this dispatcher. */
  readonly #services: RunServices;

  constructor(ctx: RunnerContext, handlers: Handlers, holdings: Holdings, prefetch: Prefetch, observer: TaskObserver) {
    this.#ctx = ctx;
    this.#handlers = handlers;
    this.#holdings = holdings;
    this.#prefetch = prefetch;
    this.#observer = observer;
    this.#journal = new JournalWriter(ctx);
    this.#services = { journal: this.#journal, transaction: this.#transaction, dependencies: this.#dependencies, steps: this.#steps };
  }

  /** Pushes a claimed task into the loop (it runs when a worker is free) and holds it. */
  dispatch(claim: ClaimedTask): void {
    const handler = this.#handlers.get(claim.name);
    const options = JSON.parse(claim.options) as StoredOptions;
    const payload: unknown = JSON.parse(claim.payload);
    const fn: TaskFunction =
      handler === undefined
        ? () => {
            throw new UnknownHandlerError(claim.name);
          }
        : async (ctx) => {
            // Prefetched: the store learns that it started with the next renewal.
            if (!claim.started) this.#holdings.starts.add(claim.id);
            const started = performance.now();
            try {
              return toResult(await handler(new StoredRunContext(ctx as Run, claim, this.#services), payload));
            } finally {
              this.#prefetch.ran(performance.now() - started);
              // What it told is written before its outcome is (a write already on its way included).
              const written = this.#journal.written(claim.id);
              if (written !== undefined) await written;
            }
          };
    const loop = this.#ctx.loop;
    // Due now: the store decided so by its clock, which may differ from ours.
    const task = loop.push(Math.min(claim.runAt, loop.clock.now()), fn, this.#settings(claim, options));
    this.#holdings.add(task, { claim, options });
  }

  /**
   * A task the claim (or a recovery) failed for good, its lease having run
   * out too often: reported here, once (`failure`, `onError`), never run.
   */
  reportExpired(claim: ClaimedTask): void {
    const settings = { ...this.#settings(claim, JSON.parse(claim.options) as StoredOptions), observer: undefined };
    const error = new LeaseExpiredError(claim.id, claim.failedAfterExpiries ?? 0);
    this.#ctx.loop.failUnrun(claim.runAt, settings, error, claim.attempts);
  }

  /**
   * Settings of a claimed task: the completer observes how it ends; retries
   * are the store's, so its one run here is the stored attempt (what
   * `onError` and the `failure` event tell). Only its priority goes to the
   * loop (it orders the claimed tasks that wait for a worker): its rate,
   * serial group, concurrency group and queue (rooms, slots, pause, rate) are
   * the store's, which claimed it only because it may start now (a slot
   * taken, a token spent), so holding it again here would make it wait twice.
   */
  #settings(claim: ClaimedTask, options: StoredOptions): TaskSettings {
    const settings: TaskSettings = {
      owner: this.#ctx.loop,
      name: claim.name,
      timeout: options.timeout ?? Infinity,
      retry: undefined,
      signal: undefined,
      observer: this.#observer,
      firstAttempt: claim.attempts,
    };
    // Tasks without a priority (most) pay nothing more.
    if (options.priority === undefined) return settings;
    const limits = toLimits({ priority: options.priority });
    return limits === undefined ? settings : { ...settings, limits };
  }

  /** ctx.dependencies() (flows): what the task's dependencies ended as, those its rule ignores left out. */
  #dependencies = async (id: number): Promise<DependencyInfo[]> => {
    const store = this.#ctx.store;
    if (!hasFlows(store)) return [];
    return (await store.getDependencies(id)).filter((dep) => dep.onFailure !== 'ignore' || dep.state === 'succeeded');
  };

  /**
   * The run's walk through its steps (ctx.step, ctx.sleep, ctx.receive),
   * made on its first step call: the record comes from the claim, and each
   * finished step is written to the store before the handler goes on.
   */
  #steps = (run: Run, claim: ClaimedTask): StepCursor => {
    if (run.stepCursor !== undefined) return run.stepCursor;
    const { store, owner, loop } = this.#ctx;
    if (!hasSteps(store))
      throw new TaskheapError(
        'ctx.step(), ctx.sleep() and ctx.receive() need a store that keeps steps (its capabilities.steps is false)',
        'ERR_STEPS_NOT_STORED',
      );
    const id = claim.id;
    // A step called after its run ended (not awaited by the handler): the task is no longer this run's.
    const held = this.#holdings.get(run.task);
    if (held === undefined) throw new LeaseLostError(id);
    const log = (held.steps ??= readSteps(claim.steps));
    return (run.stepCursor = new StepCursor({
      log,
      now: () => loop.clock.now(),
      suspend: (until) => {
        run.suspendedUntil = until;
      },
      take: async (topic, position) => {
        const body = await store.takeMessage({ owner, id, topic, position });
        return body === undefined ? undefined : { message: JSON.parse(body) as unknown };
      },
      recorded: async () => {
        if (!(await store.recordSteps({ owner, id, steps: JSON.stringify(log.records) }))) throw new LeaseLostError(id);
      },
      // The capability says the store has it (StepStore.recordStepsWithin).
      within: store.capabilities.transactionsWithClient
        ? (body) => store.recordStepsWithin!(owner, id, body, () => JSON.stringify(log.records))
        : undefined,
    }));
  };

  /** ctx.transaction(): the handler's writes and the task's completion in one transaction. */
  #transaction = <T>(claim: ClaimedTask, fn: (client: QueryClient) => Promise<T>): Promise<T> => {
    if (typeof fn !== 'function')
      return Promise.reject(new TypeError(`Expected the ctx.transaction() callback to be a function, got ${describe(fn)}`));
    const store = this.#ctx.store;
    if (!store.capabilities.transactionsWithClient) {
      return Promise.reject(new TypeError('ctx.transaction() needs postgresStore(): a SQLite store cannot hand its connection out'));
    }
    // The capability says the store has it (Store.completeWithin).
    return store.completeWithin!(this.#ctx.owner, claim.id, fn, toResult);
  };
}

/** What each stored run's context asks of its dispatcher; one object for all of them. */
interface RunServices {
  readonly journal: JournalWriter;
  transaction<T>(claim: ClaimedTask, fn: (client: QueryClient) => Promise<T>): Promise<T>;
  dependencies(id: number): Promise<DependencyInfo[]>;
  steps(run: Run, claim: ClaimedTask): StepCursor;
}

/**
 * The context a handler sees: the run's, with the stored task's id, attempt
 * count and due time. One object a run, its methods on the prototype (as the
 * in-memory run's are): a closure per method for every stored task was most
 * of what making it cost.
 */
class StoredRunContext implements DurableContext {
  readonly #run: Run;
  readonly #claim: ClaimedTask;
  readonly #services: RunServices;

  constructor(run: Run, claim: ClaimedTask, services: RunServices) {
    this.#run = run;
    this.#claim = claim;
    this.#services = services;
  }

  get id(): number {
    return this.#claim.id;
  }

  get name(): string {
    return this.#claim.name;
  }

  get attempt(): number {
    return this.#claim.attempts;
  }

  get scheduledAt(): Date {
    return new Date(this.#claim.runAt);
  }

  get startedAt(): Date {
    return this.#run.startedAt;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  // The loop's run keeps and announces them; the journal writes them.
  progress(value: unknown): void {
    const kept = toProgress(value);
    if (this.#run.task._settings.owner.noteProgress(this.#run, kept, this.#claim.id)) this.#services.journal.progress(this.#claim.id, kept);
  }

  log(text: string): void {
    const line = this.#run.task._settings.owner.noteLog(this.#run, toLogLine(text), this.#claim.id);
    if (line !== undefined) this.#services.journal.log(this.#claim.id, line);
  }

  transaction<T>(fn: (client: TransactionClient) => Promise<T>): Promise<T> {
    return this.#services.transaction(this.#claim, fn);
  }

  dependencies(): Promise<DependencyInfo[]> {
    return this.#services.dependencies(this.#claim.id);
  }

  step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    return this.#steps((cursor) => cursor.step(name, fn));
  }

  sleep(duration: SleepFor): Promise<void> {
    return this.#steps((cursor) => cursor.sleep(duration));
  }

  receive<T = unknown>(topic: string, options: { timeout: Duration }): Promise<T | undefined> {
    return this.#steps((cursor) => cursor.receive<T>(topic, options));
  }

  transactionStep<T>(name: string, fn: (client: TransactionClient) => Promise<T>): Promise<T> {
    return this.#steps((cursor) => cursor.transactionStep(name, fn));
  }

  /** A step call on the run's cursor; its store's refusal (no steps) as the call's rejection. */
  #steps<T>(call: (cursor: StepCursor) => Promise<T>): Promise<T> {
    try {
      return call(this.#services.steps(this.#run, this.#claim));
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

/** A claim's step record (JSON from its store), as the log its run replays. */
function readSteps(json: string | undefined): StepLog {
  const log = new StepLog();
  // A hole (null in the JSON) stays one: the call at that place has not finished.
  if (json !== undefined)
    for (const [i, record] of (JSON.parse(json) as (StepRecord | null)[]).entries()) if (record !== null) log.records[i] = record;
  return log;
}
