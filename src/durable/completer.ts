// The completer: records how claimed tasks ended. An outcome is not done
// until the store confirms it: a finished task waits in `#pending`, its
// lease still renewed (leases.ts), while one flush loop writes the outcomes
// and retries the failed ones with backoff. Only a confirmed write, or the
// store saying the lease is no longer ours, lets it go.
//
// Batching: outcomes that finish in the same turn of the event loop go to
// the store in one call (one statement in PostgreSQL), and while a batch is
// on its way the next one gathers. It knows nothing of claims: the end of a
// turn and a freed serial group reach the claimer through callbacks.
import { retryDelay, toRetryPolicy, type RetryOptions } from '../core/retry.js';
import { isStepMismatch } from '../core/steps.js';
import { State, type Task, type TaskObserver } from '../core/task.js';
import type { ClaimedTask, FinalState, Outcome } from './store.js';
import type { Holdings } from './holdings.js';
import { backoff, type RunnerContext } from './runner-context.js';

/** The longest wait before a stored retry: a year. */
const MAX_RETRY_DELAY = 365 * 86_400_000;

/** What the completer tells the other parts. @internal */
export interface CompleterEvents {
  /** The end of a turn in which tasks finished: their room may be worth a claim. */
  turn(): void;
  /** Work may be due at `at` (a serial group was let go of). */
  wake(at: number): void;
  /** Task `id` reached a final state in the store. */
  done(id: number): void;
  /** Whether task `id`, ended in `state`, may go from the store with its outcome (retention 0, nobody here waiting). */
  discards(id: number, state: FinalState): boolean;
}

/** @internal */
export class Completer implements TaskObserver {
  readonly #ctx: RunnerContext;
  readonly #holdings: Holdings;
  readonly #events: CompleterEvents;
  /** Finished tasks whose outcome the store has not confirmed yet, by id; their leases are still renewed. */
  readonly #pending = new Map<number, Outcome>();
  /** Ids of `#pending` whose write is on its way (one batch at a time). */
  readonly #sending = new Set<number>();
  /** The batch on its way, so close() can wait for it. */
  #write: Promise<void> | undefined = undefined;
  /** An end-of-turn flush (and claim) is queued. */
  #turnQueued = false;
  /** Set while failed outcome writes wait for their backoff. */
  #flushTimer: unknown = undefined;
  #flushFailures = 0;
  #batches = 0;

  constructor(ctx: RunnerContext, holdings: Holdings, events: CompleterEvents) {
    this.#ctx = ctx;
    this.#holdings = holdings;
    this.#events = events;
  }

  /** How many batches of outcomes the store has confirmed: whether work finished here since a given moment. */
  get batches(): number {
    return this.#batches;
  }

  /** TaskObserver: the delay after which the store retries this failed run (attempts left), or undefined: its last attempt. */
  retriesLater(task: Task, error: unknown): number | undefined {
    const held = this.#holdings.get(task);
    if (held === undefined || held.claim.attempts >= held.claim.maxAttempts || held.options.retry === undefined) return undefined;
    if (isStepMismatch(error)) return undefined;
    return Math.min(retryDelay(toRetryPolicy(held.options.retry), held.claim.attempts), MAX_RETRY_DELAY);
  }

  /** TaskObserver: a claimed task reached its final state in memory; hand its outcome to the flush loop. */
  settled(task: Task, state: State, outcome: unknown): void {
    const held = this.#holdings.take(task);
    if (held === undefined) return;
    this.#pending.set(held.claim.id, this.#outcome(held.claim, held.options.retry, state, outcome));
    this.#endOfTurn();
  }

  /** TaskObserver: a step suspended the run until `until`; the store keeps the task waiting, its step record with it. */
  suspended(task: Task, until: number): void {
    const held = this.#holdings.take(task);
    if (held === undefined) return;
    const steps = held.steps!;
    const delay = Math.min(Math.max(0, until - this.#ctx.loop.clock.now()), MAX_RETRY_DELAY);
    const waitingOn = steps.waitingOn ?? null;
    this.#pending.set(held.claim.id, { id: held.claim.id, kind: 'suspend', delay, steps: JSON.stringify(steps.records), waitingOn });
    this.#endOfTurn();
  }

  /** Claims that arrived after stop(): back to waiting, unrun. */
  handBack(claims: readonly ClaimedTask[]): void {
    for (const claim of claims) this.#pending.set(claim.id, { id: claim.id, kind: 'release' });
    this.#flush();
  }

  /** Ids whose outcome is not confirmed: their leases are still ours to renew. */
  ids(): IterableIterator<number> {
    return this.#pending.keys();
  }

  /** The lease of `id` is lost (taken over, or cancelled): its outcome is no longer ours to write. */
  forget(id: number): void {
    this.#pending.delete(id);
  }

  /** Waits (real time: the store's, not the scheduler's clock) until every outcome is confirmed, or `timeout` ms. */
  async drain(timeout: number): Promise<void> {
    const deadline = Date.now() + timeout;
    while (this.#pending.size > 0 && Date.now() < deadline) {
      if (this.#flushTimer !== undefined) {
        // Close is no time for a long backoff: try again now.
        this.#ctx.loop.clock.clearTimer(this.#flushTimer);
        this.#flushTimer = undefined;
        this.#flush();
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, Math.max(1, deadline - Date.now()))));
    }
  }

  /** After drain() and `finished`: gives up on what is still unconfirmed (those tasks run again once their lease expires). */
  stop(timeout: number): void {
    if (this.#flushTimer !== undefined) this.#ctx.loop.clock.clearTimer(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#pending.size > 0) {
      this.#ctx.report(
        new Error(
          `taskheap: ${this.#pending.size} task outcome(s) could not be recorded within ${timeout} ms of close(); ` +
            'those tasks run again once their lease expires',
        ),
      );
      this.#pending.clear();
    }
  }

  /** The batch on its way, settled (never rejects). */
  idle(): Promise<void> {
    return this.#write ?? Promise.resolve();
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
    this.#events.turn();
  };

  #outcome(claim: ClaimedTask, retry: RetryOptions | undefined, state: State, outcome: unknown): Outcome {
    const id = claim.id;
    // The dispatcher's wrapper turned the handler's value into JSON text (or null).
    if (state === State.Succeeded) {
      const discard = this.#events.discards(id, 'succeeded');
      return { id, kind: 'complete', state: 'succeeded', error: null, result: outcome as string | null, discard };
    }
    // Cancelled because this process is shutting down: the work is not done, hand it back.
    if (state === State.Cancelled && this.#ctx.closed) return { id, kind: 'release' };
    // Handed back unstarted, its queue paused: back to waiting as well.
    if (state === State.Cancelled && this.#holdings.handedBack.delete(id)) return { id, kind: 'release' };
    if (state === State.Cancelled) return this.#final(id, 'cancelled', outcome);
    if (retry !== undefined && claim.attempts < claim.maxAttempts && !isStepMismatch(outcome)) {
      // A stored time must stay within what the columns hold, whatever the policy says.
      const delay = Math.min(retryDelay(toRetryPolicy(retry), claim.attempts), MAX_RETRY_DELAY);
      return { id, kind: 'retry', delay, error: errorText(outcome) };
    }
    // The last attempt: the loop reports it (failure event, onError), once.
    return this.#final(id, state === State.TimedOut ? 'timed-out' : 'failed', outcome);
  }

  /** A final state other than success, its error the text of `error`. */
  #final(id: number, state: Exclude<FinalState, 'succeeded'>, error: unknown): Outcome {
    return { id, kind: 'complete', state, error: errorText(error), discard: this.#events.discards(id, state) };
  }

  /**
   * The flush loop: sends every pending outcome in one batch. One batch is
   * on its way at a time; what finishes meanwhile goes in the next. While a
   * failed write waits for its backoff, new outcomes wait with it.
   */
  #flush = (): void => {
    if (this.#flushTimer !== undefined || this.#ctx.finished || this.#sending.size > 0 || this.#pending.size === 0) return;
    const batch = [...this.#pending.values()];
    for (const outcome of batch) this.#sending.add(outcome.id);
    const { store, owner, loop } = this.#ctx;
    this.#write = store
      .settle(owner, batch, loop.clock.now())
      .then(
        () => this.#confirmed(batch),
        (error: unknown) => this.#failed(batch, error),
      )
      .catch((error: unknown) => this.#ctx.report(error));
  };

  #confirmed(batch: readonly Outcome[]): void {
    let freed = false;
    for (const outcome of batch) {
      this.#sending.delete(outcome.id);
      if (this.#pending.get(outcome.id) === outcome) this.#pending.delete(outcome.id);
      if (outcome.kind === 'complete') this.#events.done(outcome.id);
      if (this.#holdings.serials.delete(outcome.id) && outcome.kind === 'complete') freed = true;
    }
    // A serial group was let go of: its next task may be due now, and the
    // claim that ran beside this write could not take it yet.
    if (freed) this.#events.wake(this.#ctx.loop.clock.now());
    this.#flushFailures = 0;
    this.#batches++;
    // What finished while this batch was on its way.
    this.#flush();
  }

  #failed(batch: readonly Outcome[], error: unknown): void {
    for (const outcome of batch) this.#sending.delete(outcome.id);
    // One report per outage, not one per outcome and round: the claim loop reports too.
    if (this.#flushFailures === 0) this.#ctx.report(error);
    this.#flushFailures++;
    if (this.#flushTimer === undefined && !this.#ctx.finished) {
      this.#flushTimer = this.#ctx.loop.clock.setTimer(
        () => {
          this.#flushTimer = undefined;
          this.#flush();
        },
        backoff(this.#flushFailures),
        this.#ctx.loop.unref,
      );
    }
  }
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return String(error);
}
