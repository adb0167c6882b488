// The durable worker: what a process that runs stored work adds to the
// client (client.ts), composed of one part per role (as River's producer,
// completer and maintenance services, or Oban's producer and plugins):
//   claimer.ts      claim rounds, wake-ups, timers and the idle poll (prefetch.ts: how much to claim)
//   dispatch.ts     a claim into the in-memory loop, its stored options parsed once
//   completer.ts    outcomes, batched, written until confirmed (backoff on failure)
//   leases.ts       renewal of what this process holds, hand-back of lost claims
//   maintenance.ts  the retention sweep
// sharing runner-context.ts (store, loop, owner, timings, shutdown flags),
// holdings.ts (the claims held in memory) and handlers.ts (the named
// handlers, which the client checks adds against). This file wires them:
// start, stop and close.
import type { TaskLoop } from '../core/loop.js';
import type { Task } from '../core/task.js';
import type { Store } from './store.js';
import { Claimer, type SkipListener } from './claimer.js';
import { DurableClient } from './client.js';
import { Completer } from './completer.js';
import { Dispatcher } from './dispatch.js';
import { Handlers } from './handlers.js';
import { Holdings } from './holdings.js';
import { Leases } from './leases.js';
import { DEFAULT_RETENTION, keepsNothing, Maintenance, type Retention } from './maintenance.js';
import { Prefetch } from './prefetch.js';
import { RunnerContext } from './runner-context.js';
import { DurableQueue, QueueBook, type DurableQueueOptions } from './queues.js';

export { DEFAULT_RETENTION, type Retention } from './maintenance.js';

/** How long close() keeps retrying unconfirmed outcomes unless the store says otherwise. */
const CLOSE_TIMEOUT = 5_000;

/**
 * Moves durable work between a store and the scheduler's worker pool:
 * claims due tasks under a lease, runs them as ordinary in-memory tasks,
 * renews their leases while they run, and records how they ended. Its
 * `client` adds, reads and manages stored work.
 * @internal
 */
export class DurableWorker {
  readonly #ctx: RunnerContext;
  readonly #holdings: Holdings;
  readonly #claimer: Claimer;
  readonly #completer: Completer;
  readonly #leases: Leases;
  readonly #maintenance: Maintenance;
  readonly #dispatcher: Dispatcher;
  readonly #closeTimeout: number;
  /** Adds, reads and manages stored work; tells this worker of work due and of cancels. */
  readonly client: DurableClient;
  #started: Promise<void> | undefined = undefined;

  constructor(
    store: Store,
    loop: TaskLoop,
    known: readonly string[] = [],
    retention: Retention = DEFAULT_RETENTION,
    queues?: Map<string, DurableQueueOptions>,
  ) {
    const ctx = (this.#ctx = new RunnerContext(store, loop));
    this.#closeTimeout = store.closeTimeout ?? CLOSE_TIMEOUT;
    const handlers = new Handlers(known);
    const holdings = (this.#holdings = new Holdings(new QueueBook(queues)));
    const wake = (runAt: number): void => this.#claimer.wakeAt(runAt);
    this.client = new DurableClient(ctx, handlers, holdings.queues, { wake, cancelled: (id) => holdings.cancel(id) });
    const prefetch = new Prefetch(loop, store);
    this.#completer = new Completer(ctx, holdings, {
      turn: () => this.#claimer.refill(),
      wake,
      done: (id) => this.client.waiters.done(id),
      discards: (id, state) => keepsNothing(retention, state) && !this.client.waiters.waiting(id),
    });
    const dispatcher = (this.#dispatcher = new Dispatcher(ctx, handlers, holdings, prefetch, this.#completer));
    this.#claimer = new Claimer(ctx, handlers, holdings, prefetch, dispatcher, (claims) => this.#completer.handBack(claims));
    this.#leases = new Leases(ctx, holdings, this.#completer, this.#claimer);
    this.#maintenance = new Maintenance(ctx, retention, () => this.#completer.batches);
  }

  /**
   * Told of stored job occurrences the job's policies dropped (misfire
   * 'skip', the catch-up cap of 'all', overlap 'skip'), after the claim that
   * decided it committed; the scheduler turns these into \`skip\` events.
   */
  get onSkip(): SkipListener | undefined {
    return this.#claimer.onSkip;
  }

  set onSkip(listener: SkipListener | undefined) {
    this.#claimer.onSkip = listener;
  }

  /** The id of the stored task a task of the loop was claimed for, or undefined (the dashboard's waiting tasks). */
  claimedId(task: Task): number | undefined {
    return this.#holdings.get(task)?.claim.id;
  }

  /** The handle of a named queue (see DurableQueue). */
  queue(name: string): DurableQueue {
    return new DurableQueue(
      this.#holdings.queues,
      () => this.client.ready().then(() => this.#ctx.store),
      () => this.#claimer.refill(),
      (queue) => this.#holdings.handBack(queue),
      name,
    );
  }

  /** Migrates, recovers and starts claiming; idempotent once it succeeded (a failed start may be called again). */
  start(): Promise<void> {
    this.#started ??= (async () => {
      await this.client.ready();
      const store = this.#ctx.store;
      // What a dead owner left running and recovery failed (lease expiries): reported here, once.
      for (const failed of await store.recover()) this.#dispatcher.reportExpired(failed);
      // The `queues` option's global concurrencies and rates: the most recent process to start decides.
      for (const [name, change] of this.#holdings.queues.startup) await store.setQueue(name, change);
      await store.subscribe(
        (runAt) => this.#claimer.wakeAt(runAt),
        (id) => this.#holdings.cancel(id),
        (queue) => this.#holdings.handBack(queue),
      );
      // Before the first claim: claims right after start() find their connections ready.
      const { owner, lease, loop } = this.#ctx;
      const ownLimits = this.#holdings.queues.rooms() !== undefined || loop.rate !== undefined;
      await store.warm({ owner, lease, names: this.client.handlers.names, ownLimits });
      this.#leases.start();
      this.#claimer.start();
      this.#maintenance.start();
    })().catch((error: unknown) => {
      // Nothing was started (every step that can fail comes before): a later start() tries again,
      // as ready() does (a directory created, a server back).
      this.#started = undefined;
      throw error;
    });
    return this.#started;
  }

  /**
   * Stops claiming; from now on a cancelled claim goes back to waiting.
   * Leases are still renewed until close() is over: running tasks and
   * unconfirmed outcomes stay ours.
   */
  stop(): void {
    this.#ctx.closed = true;
    this.#claimer.stop();
  }

  /**
   * After `stop()`: waits for running tasks, then for their outcomes to be
   * confirmed (at most `closeTimeout` ms), then closes the store.
   */
  async close(idle: Promise<void>): Promise<void> {
    this.client.waiters.closeAll();
    await this.#maintenance.stop();
    await this.#claimer.settled();
    await idle;
    await this.#completer.drain(this.#closeTimeout);
    this.#ctx.finished = true;
    const renewal = this.#leases.stop();
    this.#completer.stop(this.#closeTimeout);
    await Promise.allSettled([renewal, this.#completer.idle()]);
    await this.#ctx.store.close();
  }
}
