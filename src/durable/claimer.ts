// The claimer: claim rounds and when to run them. It claims what the pool
// can take (Prefetch), hands each claim to the dispatcher, and sleeps until
// the next due time, the poll interval, or a wake-up (work added here, or
// announced by another process; a serial key let go of; room freed at the
// end of a turn). A second claim may be on its way beside the first (and
// beside the outcome batch), so workers rarely wait for a round trip.
import { advanceJob } from './advance-job.js';
import type { ClaimedTask, ClaimLimits, DueJob, JobAdvance, QueueRooms } from './store.js';
import type { Dispatcher } from './dispatch.js';
import type { Handlers } from './handlers.js';
import type { Holdings } from './holdings.js';
import type { Prefetch } from './prefetch.js';
import { backoff, type RunnerContext } from './runner-context.js';

/** Claim rounds on their way at once: one more than the one being answered keeps workers fed. */
const MAX_CLAIMS = 2;

/** Told of stored job occurrences the job's policies dropped, once the claim that decided it committed. @internal */
export type SkipListener = (key: string, name: string, at: number, reason: 'overlap' | 'misfire') => void;

/** @internal */
export class Claimer {
  readonly #ctx: RunnerContext;
  readonly #handlers: Handlers;
  readonly #holdings: Holdings;
  readonly #prefetch: Prefetch;
  readonly #dispatcher: Dispatcher;
  /** Claims that came back after stop(): handed back unrun (the completer). */
  readonly #handBack: (claims: readonly ClaimedTask[]) => void;
  /** Claim rounds on their way (at most MAX_CLAIMS), so close() can wait for them. */
  readonly #rounds = new Set<Promise<number>>();
  /** Tasks asked for by the claims on their way: room already spoken for. */
  #requested = 0;
  /** A wake-up came while rounds were on their way: claim again when one is back. */
  #tickAgain = false;
  /** The last claim round found nothing due within the poll interval. */
  #nothingDue = false;
  /** The scheduler-wide rate last stored (`store.setRate`), as `limit/interval`; '' for none. */
  #storedRate = '';
  /** Workers the last claim round found free for limited tasks. */
  #workersFree = 0;
  /** Failed claim rounds in a row (the database is away). */
  #failures = 0;
  #started = false;
  #timer: unknown = undefined;
  #timerAt = Infinity;
  /** See SkipListener; the scheduler turns these into `skip` events. */
  onSkip: SkipListener | undefined = undefined;

  constructor(
    ctx: RunnerContext,
    handlers: Handlers,
    holdings: Holdings,
    prefetch: Prefetch,
    dispatcher: Dispatcher,
    handBack: (claims: readonly ClaimedTask[]) => void,
  ) {
    this.#ctx = ctx;
    this.#handlers = handlers;
    this.#holdings = holdings;
    this.#prefetch = prefetch;
    this.#dispatcher = dispatcher;
    this.#handBack = handBack;
  }

  /** Starts claiming (the first round goes out now). */
  start(): void {
    this.#started = true;
    this.#tick();
  }

  /** No more claims (stop()); rounds on their way come back to settled(). */
  stop(): void {
    this.#disarm();
  }

  /** True while a claim round is on its way (its answer may be unread). */
  get claiming(): boolean {
    return this.#rounds.size > 0;
  }

  /** Resolves once the rounds on their way have come back. */
  async settled(): Promise<void> {
    await Promise.all([...this.#rounds]);
  }

  /** Work is due at `runAt`: look then, unless a look is planned sooner. */
  wakeAt(runAt: number): void {
    if (this.#ctx.closed || !this.#started) return;
    if (this.#rounds.size > 0) {
      this.#tickAgain = true;
      return;
    }
    if (runAt < this.#timerAt) this.#arm(Math.max(0, runAt - this.#ctx.loop.clock.now()));
  }

  /** Tasks finished and their room was freed: refill once half the capacity is free (fewer, fuller claims). */
  refill(): void {
    // A queue at its concurrency here had a task end: its room is worth a claim of its own.
    const reopened = this.#holdings.queues.reopened;
    this.#holdings.queues.reopened = false;
    if (this.#room() >= this.#prefetch.refill() || (reopened && this.#room() > 0)) this.#tick();
  }

  /**
   * Claims what the pool can take, then sleeps until the next due time (or
   * the poll interval). A second claim goes out while one is on its way if
   * the room not yet asked for is worth a claim: the database answers both
   * at once (another connection, another core), so a batch is ready when
   * the workers finish the one before.
   */
  #tick = (idle = false): void => {
    if (this.#ctx.closed || !this.#started) return;
    const out = this.#rounds.size;
    if (out >= MAX_CLAIMS || (out > 0 && this.#room() < this.#prefetch.refill())) {
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
    return this.#prefetch.capacity() - this.#holdings.size - this.#requested;
  }

  /**
   * One claim round; resolves with how long to sleep. `idle`: the poll after
   * nothing was due, which asks when something is due first and claims only
   * if it is, so an idle process costs one statement per poll, not two.
   */
  async #claim(idle: boolean): Promise<number> {
    const { store, loop, poll } = this.#ctx;
    this.#nothingDue = false;
    try {
      if (idle) {
        const wait = await store.nextDue(loop.clock.now(), this.#handlers.names, this.#holdings.queues.rooms(), loop.rate !== undefined);
        if (wait === undefined || wait > 0) return this.#sleep(wait);
      }
      const free = this.#room();
      // Full: the end of the turn that frees room claims again.
      if (free <= 0) return poll;
      // The rooms of queues limited here are spoken for until the claimed tasks are held.
      const rooms = this.#holdings.queues.reserve();
      let claimed: ClaimedTask[];
      try {
        claimed = this.#reportExpired(await this.#claimUpTo(free, rooms));
        // close() came while the claim was on its way: hand the work straight back.
        if (this.#ctx.closed) {
          this.#handBack(claimed);
          return 0;
        }
        for (const claim of claimed) this.#dispatcher.dispatch(claim);
      } finally {
        this.#holdings.queues.unreserve(rooms);
      }
      this.#failures = 0;
      // A full batch suggests more is due: claim again at once if there is
      // room enough; otherwise finishing tasks make room and claim.
      if (claimed.length === free) return this.#room() >= this.#prefetch.refill() ? 0 : poll;
      // Every worker is busy, so limited work (which is claimed only to start at once)
      // waits: the end of a turn frees a worker and claims again.
      if (this.#workersFree === 0) return poll;
      // The store says how long until something is due, by its own clock.
      return this.#sleep(
        await store.nextDue(loop.clock.now(), this.#handlers.names, this.#holdings.queues.rooms(), loop.rate !== undefined),
      );
    } catch (error) {
      // The database went away: keep the scheduler alive and retry with backoff.
      this.#ctx.report(error);
      this.#failures++;
      return Math.min(poll, backoff(this.#failures));
    }
  }

  /**
   * Claims up to `free` tasks, the room counted as spoken for meanwhile.
   * Skips are collected per claim and reported only once it committed (a
   * claim that fails is rolled back and decided again).
   */
  async #claimUpTo(free: number, rooms: QueueRooms | undefined): Promise<ClaimedTask[]> {
    const { store, loop, owner, lease } = this.#ctx;
    let skips: DueJob[] | undefined;
    let skipped: NonNullable<JobAdvance['skipped']>[] | undefined;
    const advance =
      this.onSkip === undefined
        ? advanceJob
        : (job: DueJob, now: number, running: boolean) => {
            const plan = advanceJob(job, now, running);
            if (plan.skipped !== undefined) {
              (skips ??= []).push(job);
              (skipped ??= []).push(plan.skipped);
            }
            return plan;
          };
    const limits = await this.#limits(free);
    this.#requested += free;
    const sent = performance.now();
    let claimed: ClaimedTask[];
    try {
      claimed = await store.claim(owner, loop.clock.now(), lease, free, advance, this.#handlers.names, rooms, limits);
    } finally {
      this.#requested -= free;
    }
    this.#prefetch.claimed(performance.now() - sent);
    if (skips !== undefined) {
      for (let i = 0; i < skips.length; i++) this.onSkip?.(skips[i]!.key, skips[i]!.name, skipped![i]!.at, skipped![i]!.reason);
    }
    return claimed;
  }

  /** Reports the tasks the claim failed for their lease expiries; the ones it claimed. */
  #reportExpired(claimed: ClaimedTask[]): ClaimedTask[] {
    if (!claimed.some((claim) => claim.failedAfterExpiries !== undefined)) return claimed;
    const taken: ClaimedTask[] = [];
    for (const claim of claimed) {
      if (claim.failedAfterExpiries === undefined) taken.push(claim);
      else this.#dispatcher.reportExpired(claim);
    }
    return taken;
  }

  /**
   * What the claim must respect besides the stored limits: limited tasks
   * only into workers free now (nothing hoarded), and the scheduler-wide
   * rate, stored first when it changed (\`scheduler.rate\` is live).
   */
  async #limits(room: number): Promise<ClaimLimits> {
    const { loop, store } = this.#ctx;
    const rate = loop.rate as { limit: number; interval: number } | undefined;
    const stored = rate === undefined ? '' : `${rate.limit}/${rate.interval}`;
    if (stored !== this.#storedRate && store.setRate !== undefined) {
      await store.setRate(rate);
      this.#storedRate = stored;
    }
    const workers = loop.workers === Infinity ? room : loop.workers - this.#holdings.size - this.#requested;
    this.#workersFree = Math.max(0, Math.min(room, workers));
    return { free: this.#workersFree, rate };
  }

  /** How long to sleep when the store says something is due in `wait` ms (undefined: nothing is); at most the poll. */
  #sleep(wait: number | undefined): number {
    const poll = this.#ctx.poll;
    const delay = Math.max(0, Math.min(wait ?? poll, poll));
    this.#nothingDue = delay === poll;
    return delay;
  }

  /** Arms the claim timer; `idle`: it is the poll, nothing being known to be due before it. */
  #arm(delay: number, idle = false): void {
    this.#disarm();
    if (this.#ctx.closed) return;
    const { clock, unref } = this.#ctx.loop;
    this.#timerAt = clock.now() + delay;
    this.#timer = clock.setTimer(idle ? this.#idleTick : this.#tick, delay, unref);
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#ctx.loop.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }
}
