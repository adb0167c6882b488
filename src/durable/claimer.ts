// The claimer: claim rounds and when to run them. It claims what the pool
// can take (Prefetch), hands each claim to the dispatcher, and sleeps until
// the next due time, the idle check (the poll, or a long safety net where
// new work is announced: idleCheck()), or a wake-up (work added here, or
// announced by another process; a serial group let go of; room or a worker
// freed at the end of a turn). A second claim may be on its way beside the
// first (and beside the outcome batch), so workers rarely wait for a round
// trip. No wake-up is lost, whatever rounds are on their way: see #missed.
import { advanceJob } from './advance-job.js';
import type { ClaimedTask, ClaimLimits, ClaimParams, DueJob, JobAdvance, NextDueParams, QueueRooms } from './store.js';
import type { Dispatcher } from './dispatch.js';
import type { Handlers } from './handlers.js';
import type { Holdings } from './holdings.js';
import type { Prefetch } from './prefetch.js';
import { backoff, type RunnerContext } from './runner-context.js';

/** Claim rounds on their way at once: one more than the one being answered keeps workers fed. */
const MAX_CLAIMS = 2;

/** The longest an idle process sleeps where new work is announced to it (unless `poll` is longer). */
const IDLE_CHECK_MAX = 300_000;

/**
 * ms an idle process sleeps (nothing due that it knows of) where every
 * change that makes work due elsewhere is announced to it (LISTEN): 60
 * polls, at most 5 minutes, never less than the poll (5 minutes at the
 * default 5 s poll). The announcements and the next due time the store
 * gives carry the latency; this check only catches a wake-up lost on a
 * listening connection that died unnoticed (a reconnect it sees wakes the
 * claimer at once). So an idle worker sends nothing for minutes, and a
 * serverless database can suspend. Tied to the poll, as the waiters'
 * safetyPoll(), so a process that chose a short poll gets a quicker net.
 */
function idleCheck(poll: number): number {
  return Math.max(poll, Math.min(60 * poll, IDLE_CHECK_MAX));
}

/** What a claim round found: how long to sleep, and why. */
interface Answer {
  /** How long to sleep, ms; undefined: it did not ask (another round was on its way), so the last round back looks again at once. */
  readonly delay: number | undefined;
  /** Nothing is known to be due before `delay` (the poll): the timer asks first, then claims (#claim's `idle`). */
  readonly idle: boolean;
  /** It could claim no limited task: no worker was free (each held a task, or was spoken for by a claim on its way). */
  readonly workersTaken: boolean;
}

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
  readonly #rounds = new Set<Promise<Answer>>();
  /** Tasks asked for by the claims on their way (until what they claimed is held): room and workers spoken for. */
  #requested = 0;
  /**
   * A wake-up that no whole round has answered yet. A round is whole when no
   * other claim was unanswered as it asked: its room and its free workers
   * are then this process's own, none spoken for by a claim that may come
   * back with less than it asked (a round beside one on its way asks with
   * that claim's room counted as workers taken, so it cannot claim a
   * limited task, and it may have read the store before the work the
   * wake-up announced). Set by every wake-up that finds rounds on their way
   * (or no room for a round beside them); cleared only when a whole round
   * asks; while it is set, each round that comes back claims again, or
   * leaves it to the round whose claim is still unanswered. So the claimer
   * never sleeps with a wake-up unanswered.
   */
  #missed = false;
  /** A round found every worker taken: the next worker to free claims, whatever the room (limited work may wait for it). */
  #waitingForWorker = false;
  /** The scheduler-wide rate last stored (`store.setRate`), as `limit/interval`; '' for none. */
  #storedRate = '';
  /** The claim's and the next-due question's parameters: one object each, changed per round (the store reads them at the call). */
  readonly #claimParams: ClaimParams;
  readonly #dueParams: NextDueParams = { now: 0 };
  /** Failed claim rounds in a row (the database is away). */
  #failures = 0;
  #lastFailure = -Infinity;
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
    this.#claimParams = { owner: ctx.owner, now: 0, lease: ctx.lease, limit: 0, advance: advanceJob };
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

  /** When (clock ms) a claim round last failed: its answer may have been lost, its tasks claimed here unknown. */
  get lastFailure(): number {
    return this.#lastFailure;
  }

  /** Resolves once the rounds on their way have come back. */
  async settled(): Promise<void> {
    await Promise.all([...this.#rounds]);
  }

  /** Work is due at `runAt`: look then, unless a look is planned sooner. */
  wakeAt(runAt: number): void {
    if (this.#ctx.closed || !this.#started) return;
    if (this.#rounds.size > 0) {
      // The rounds on their way may have read the store before this work was
      // committed: it is missed until a whole round asks. Due now, it gets a
      // round of its own beside them (#tick decides if there is room for
      // one): waiting for them would cost a round trip or two (their claim,
      // then their nextDue) every time, and a chain of dependent tasks pays
      // that at every step.
      this.#missed = true;
      if (runAt <= this.#ctx.loop.clock.now() && this.#rounds.size < MAX_CLAIMS) this.#tick();
      return;
    }
    if (runAt < this.#timerAt) this.#arm(Math.max(0, runAt - this.#ctx.loop.clock.now()));
  }

  /**
   * Tasks finished and their room was freed: refill once half the capacity
   * is free (fewer, fuller claims), or at once if a worker is free and a
   * round found every worker taken (limited work claims only into a free one).
   */
  refill(): void {
    // A queue at its concurrency here had a task end: its room is worth a claim of its own.
    const reopened = this.#holdings.queues.reopened;
    this.#holdings.queues.reopened = false;
    const room = this.#room();
    if (room >= this.#prefetch.refill() || (room > 0 && (reopened || (this.#waitingForWorker && this.#workersFree(room) > 0)))) {
      this.#tick();
    }
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
      // The rounds on their way claim again once back.
      this.#missed = true;
      return;
    }
    this.#disarm();
    const round = this.#claim(idle);
    this.#rounds.add(round);
    void round.then((answer) => this.#back(round, answer));
  };

  /** The poll's timer: nothing was known to be due when it was armed. */
  #idleTick = (): void => this.#tick(true);

  /** A round came back: claim again if a wake-up is unanswered, else the last round back sleeps as it says. */
  #back(round: Promise<Answer>, answer: Answer): void {
    this.#rounds.delete(round);
    if (answer.workersTaken) {
      // It relied on a turn's end to free a worker and claim; if one freed while it was on its way
      // (or was only spoken for by a claim that came back with less), that end has passed.
      if (this.#ctx.loop.workers - this.#holdings.size > 0) this.#missed = true;
      else this.#waitingForWorker = true;
    }
    if (this.#missed) {
      // Claimed now, a round is whole; while a claim is unanswered, its round claims again once back.
      if (this.#requested === 0) this.#tick();
      return;
    }
    // The last round to come back knows best when to look again; one that
    // did not ask (undefined) looks again at once.
    if (this.#rounds.size > 0) return;
    if (answer.delay === undefined) return this.#tick();
    this.#arm(answer.delay, answer.idle);
  }

  /** Room for claimed tasks that no claim on its way has asked for yet. */
  #room(): number {
    return this.#prefetch.capacity() - this.#holdings.size - this.#requested;
  }

  /** Workers with no task held and none spoken for by a claim on its way, at most `room`. */
  #workersFree(room: number): number {
    const loop = this.#ctx.loop;
    const workers = loop.workers === Infinity ? room : loop.workers - this.#holdings.size - this.#requested;
    return Math.max(0, Math.min(room, workers));
  }

  /**
   * One claim round; resolves with how long to sleep. `idle`: the poll after
   * nothing was due, which asks when something is due first and claims only
   * if it is, so an idle process costs one statement per poll, not two.
   */
  async #claim(idle: boolean): Promise<Answer> {
    const { poll } = this.#ctx;
    const held = (delay: number, workersTaken = false): Answer => ({ delay, idle: false, workersTaken });
    let asked = 0;
    let answering = false;
    let rooms: QueueRooms | undefined;
    try {
      if (idle) {
        const wait = await this.#nextDue();
        if (wait === undefined || wait > 0) return this.#sleep(wait);
      }
      const rate = await this.#rate();
      const free = this.#room();
      if (free <= 0) {
        // Full: the end of the turn that frees room claims again.
        if (this.#requested === 0) this.#missed = false;
        return held(poll);
      }
      // From here to the claim's call, nothing else runs: what this round asks for is counted at once.
      // Limited tasks only into workers free now (nothing hoarded); a claim on its way speaks for its room's worth.
      const whole = this.#requested === 0;
      // A whole round answers the wake-ups missed so far: it must ask when the next work is due (below).
      answering = whole && this.#missed;
      const workersFree = this.#workersFree(free);
      this.#requested += asked = free;
      if (whole) {
        this.#missed = false;
        if (workersFree > 0) this.#waitingForWorker = false;
      }
      // The rooms of queues limited here are spoken for until the claimed tasks are held.
      rooms = this.#holdings.queues.reserve();
      const claimed = this.#reportExpired(await this.#claimUpTo(free, rooms, { free: workersFree, rate }));
      // close() came while the claim was on its way: hand the work straight back.
      if (this.#ctx.closed) {
        this.#handBack(claimed);
        return held(0);
      }
      for (const claim of claimed) this.#dispatcher.dispatch(claim);
      // Held now: no longer spoken for.
      this.#requested -= asked;
      asked = 0;
      this.#holdings.queues.unreserve(rooms);
      rooms = undefined;
      this.#failures = 0;
      // A full batch suggests more is due: claim again at once if there is
      // room enough; otherwise finishing tasks make room and claim.
      if (claimed.length === free) return held(this.#room() >= this.#prefetch.refill() ? 0 : poll);
      // Every worker is busy (or spoken for), so limited work (which is claimed only to start at once)
      // waits: the end of a turn frees a worker and claims again (#back checks it still will).
      if (workersFree === 0) return held(poll, true);
      // Another round is on its way: the last round back asks when something
      // is due (or, not having asked, claims again at once); one question is
      // enough. A chain of dependent tasks asked twice per step: the refill
      // claim racing each outcome asked too. But a round answering a wake-up
      // leaves it missed: the others may have asked before the work it
      // announces was committed (a retry due in 10 ms, slept through for
      // the poll), so the last one back claims, and asks, once more.
      if (this.#rounds.size > 1) {
        if (answering) this.#missed = true;
        return { delay: undefined, idle: false, workersTaken: false };
      }
      // The store says how long until something is due, by its own clock.
      return this.#sleep(await this.#nextDue());
    } catch (error) {
      // The database went away: keep the scheduler alive and retry with backoff.
      this.#ctx.report(error);
      this.#lastFailure = this.#ctx.loop.clock.now();
      this.#failures++;
      return held(Math.min(poll, backoff(this.#failures)));
    } finally {
      this.#requested -= asked;
      if (rooms !== undefined) this.#holdings.queues.unreserve(rooms);
    }
  }

  /**
   * Claims up to `free` tasks. Skips are collected per claim and reported
   * only once it committed (a claim that fails is rolled back and decided
   * again).
   */
  async #claimUpTo(free: number, rooms: QueueRooms | undefined, limits: ClaimLimits): Promise<ClaimedTask[]> {
    const { store, loop } = this.#ctx;
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
    const sent = performance.now();
    const params = this.#claimParams;
    params.now = loop.clock.now();
    params.limit = free;
    params.advance = advance;
    params.names = this.#handlers.names;
    params.rooms = rooms;
    params.limits = limits;
    params.announceLease = this.#holdings.size === 0;
    const claimed = await store.claim(params);
    this.#prefetch.claimed(performance.now() - sent);
    if (skips !== undefined) {
      for (let i = 0; i < skips.length; i++) this.onSkip?.(skips[i]!.key, skips[i]!.name, skipped![i]!.at, skipped![i]!.reason);
    }
    return claimed;
  }

  /** ms until the store has something due for this process (undefined: nothing is). */
  #nextDue(): Promise<number | undefined> {
    const { store, loop } = this.#ctx;
    const params = this.#dueParams;
    params.now = loop.clock.now();
    params.names = this.#handlers.names;
    params.rooms = this.#holdings.queues.rooms();
    params.rated = loop.rate !== undefined;
    return store.nextDue(params);
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
   * The scheduler-wide rate the claim must respect besides the stored
   * limits, stored first when it changed (\`scheduler.rate\` is live).
   */
  async #rate(): Promise<ClaimLimits['rate']> {
    const { loop, store } = this.#ctx;
    const rate = loop.rate as { limit: number; interval: number } | undefined;
    const stored = rate === undefined ? '' : `${rate.limit}/${rate.interval}`;
    if (stored !== this.#storedRate) {
      await store.setRate(rate);
      this.#storedRate = stored;
    }
    return rate;
  }

  /** The answer when the store says something is due in `wait` ms (undefined: nothing is); at most the idle check. */
  #sleep(wait: number | undefined): Answer {
    // While new work is announced here (Store.listening), the idle check is a long safety net; else the poll.
    const idle = this.#ctx.store.listening ? idleCheck(this.#ctx.poll) : this.#ctx.poll;
    const delay = Math.max(0, Math.min(wait ?? idle, idle));
    return { delay, idle: delay === idle, workersTaken: false };
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
