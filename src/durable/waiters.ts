// Waiters: waitFor(id) and what wakes it. A waited task is read when a
// waiter of it starts, when this process settles or cancels it (done()), and
// when another process announces its final state (the store's watch():
// PostgreSQL NOTIFY on taskheap_done, whose ids wake only their own
// waiters). Reads asked for in the same turn go together, one statement per
// 1,000 ids that returns only the tasks over (endedTasks): 10,000 waitFor()
// calls made at once cost ten reads, not 10,000. Waiting itself reads
// nothing but the sweep, one timer for all waiters, which asks the same of
// every waited task, as does a reconnect of the listener (announcements may
// have been lost meanwhile). A waiter's first read marks its task, if still
// to run, as awaited, so that a worker elsewhere whose retention keeps
// nothing keeps that row (endedTasks); later reads and the sweep only read.
// (This process's own worker asks waiting() instead: its settle may be on
// another connection than the mark, and SQLite has no mark.) Where
// announcements reach this process the sweep is only a safety net and runs
// every safetyPoll(); where none do (SQLite, PgBouncer without a listening
// connection) it is how waiters learn and runs every poll. Apart from the
// claim path: it reads tasks and writes nothing but that mark.
import { ClosedError } from '../core/errors.js';
import { TaskNotFoundError, WaitTimeoutError } from './errors.js';
import type { EndedTasks, StoredTask } from './store.js';
import type { StoreContext } from './runner-context.js';

/** Task ids one read asks about. */
const READ_IDS = 1_000;

/** The longest between two safety sweeps where announcements reach this process (unless `poll` is longer). */
const SAFETY_POLL_MAX = 60_000;

/**
 * ms between sweeps where final states are announced to this process:
 * 12 polls, at most a minute, never more often than the poll (a minute at
 * the default 5 s poll). Announcements carry the latency; this net only
 * catches what none told: an announcement lost on a listening connection
 * that died unnoticed (TCP keepalive takes minutes to give up on a silent
 * peer; a reconnect it sees sweeps at once), or a task that ended without
 * one (failed by another process's claim when its lease ran out for the
 * last time). Those are rare and already late by a lease, so up to a
 * minute more is acceptable, and one read per 1,000 waited tasks a minute
 * is next to nothing (10,000 waiters: 10 reads a minute, where every poll
 * cost 120). Tied to the poll so that a process that chose a short poll
 * for latency gets a proportionally quicker net.
 */
export function safetyPoll(poll: number): number {
  return Math.max(poll, Math.min(12 * poll, SAFETY_POLL_MAX));
}

/** One waitFor() call. */
interface Waiter {
  resolve(task: StoredTask): void;
  reject(error: unknown): void;
}

/** @internal */
export class Waiters {
  readonly #ctx: StoreContext;
  /** waitFor() calls by task id. */
  readonly #byId = new Map<number, Set<Waiter>>();
  /** Ids to read at the end of this turn. */
  readonly #toRead = new Set<number>();
  /** Ids of new waiters, not read yet: their first read marks them awaited (endedTasks). */
  readonly #firstLooks = new Set<number>();
  /** Ids whose read is on its way. */
  readonly #reading = new Set<number>();
  /** Ids woken while their read was on its way: read again after it, unless it found them over. */
  readonly #again = new Set<number>();
  /** The store's watch(), once somebody waits. */
  #watching: Promise<void> | undefined = undefined;
  /** The sweep's timer while anybody waits. */
  #sweep: unknown = undefined;
  /** ms between sweeps: the poll, or safetyPoll() once the store said other processes' final states reach this one. */
  #every: number;

  constructor(ctx: StoreContext) {
    this.#ctx = ctx;
    this.#every = ctx.poll;
  }

  /**
   * Resolves with the task once it is in a final state (the store is ready).
   * Rejects on `signal`, after `timeout` ms, and when the scheduler closes.
   */
  async waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    signal?.throwIfAborted();
    this.#watching ??= this.#ctx.store
      .watch((done) => (done === null ? this.#sweepOnce() : this.done(done)))
      .then(
        (announced) => {
          this.#every = announced ? safetyPoll(this.#ctx.poll) : this.#ctx.poll;
        },
        (error: unknown) => {
          this.#watching = undefined;
          throw error;
        },
      );
    await this.#watching;
    // close() came while we were getting ready: it has already let its waiters go.
    if (this.#ctx.closed) throw new ClosedError();
    return new Promise<StoredTask>((resolve, reject) => this.#wait(id, signal, timeout, resolve, reject));
  }

  /** Task `id` reached a final state: if anybody waits for it, it is read (with the others of this turn). */
  done(id: number): void {
    if (!this.#byId.has(id)) return;
    if (this.#reading.has(id)) {
      this.#again.add(id);
      return;
    }
    if (this.#toRead.size === 0) queueMicrotask(this.#readAll);
    this.#toRead.add(id);
  }

  /** Whether a waitFor() call of this process waits for task `id` (its worker then keeps the row: retention 0). */
  waiting(id: number): boolean {
    return this.#byId.has(id);
  }

  /** close(): every waiter rejects with ClosedError. */
  closeAll(): void {
    if (this.#sweep !== undefined) this.#ctx.clock.clearTimer(this.#sweep);
    this.#sweep = undefined;
    for (const set of [...this.#byId.values()]) for (const waiter of [...set]) waiter.reject(new ClosedError());
  }

  /** End of the turn: the ids asked for are read, READ_IDS to a read; a failed read rejects their waiters. */
  #readAll = (): void => {
    const ids = [...this.#toRead].filter((id) => this.#byId.has(id));
    this.#toRead.clear();
    for (const id of ids) this.#reading.add(id);
    for (let i = 0; i < ids.length; i += READ_IDS) {
      const chunk = ids.slice(i, i + READ_IDS);
      let first = false;
      for (const id of chunk) if (this.#firstLooks.delete(id)) first = true;
      this.#ctx.store.endedTasks(chunk, first).then(
        (ended) => {
          for (const id of chunk) this.#reading.delete(id);
          this.#found(ended);
          for (const id of chunk) if (this.#again.delete(id)) this.done(id);
        },
        (error: unknown) => {
          for (const id of chunk) {
            this.#reading.delete(id);
            this.#again.delete(id);
            for (const waiter of [...(this.#byId.get(id) ?? [])]) waiter.reject(error);
          }
        },
      );
    }
  };

  /** Every #every ms while anybody waits: a sweep. */
  #swept = (): void => {
    const { clock, unref } = this.#ctx;
    this.#sweep = this.#byId.size === 0 ? undefined : clock.setTimer(this.#swept, this.#every, unref);
    this.#sweepOnce();
  };

  /**
   * Which waited tasks are over (also right after the listener reconnected),
   * READ_IDS to a read; their waiters resolve. The reads go one after
   * another: a sweep never needs more than one connection (ten at once
   * opened pooled connections that closed again before the next sweep, and
   * a server process started costs more than the reads).
   */
  #sweepOnce(): void {
    const ids = [...this.#byId.keys()];
    const next = (i: number): void => {
      if (i >= ids.length || this.#ctx.closed) return;
      this.#ctx.store.endedTasks(ids.slice(i, i + READ_IDS)).then(
        (ended) => {
          this.#found(ended);
          next(i + READ_IDS);
        },
        // A failed sweep is retried by the next; a task's own read reports a lasting failure.
        (error: unknown) => this.#ctx.report(error),
      );
    };
    next(0);
  }

  /** Waiters of the tasks over resolve (each with a copy of its own), those of tasks gone reject. */
  #found({ tasks, gone }: EndedTasks): void {
    for (const task of tasks) {
      let first = true;
      for (const waiter of [...(this.#byId.get(task.id) ?? [])]) {
        waiter.resolve(first ? task : structuredClone(task));
        first = false;
      }
    }
    for (const id of gone) for (const waiter of [...(this.#byId.get(id) ?? [])]) waiter.reject(new TaskNotFoundError(id));
  }

  #wait(
    id: number,
    signal: AbortSignal | undefined,
    timeout: number,
    resolve: (task: StoredTask) => void,
    reject: (error: unknown) => void,
  ): void {
    const { clock, unref } = this.#ctx;
    let deadline: unknown;
    let set = this.#byId.get(id);
    if (set === undefined) this.#byId.set(id, (set = new Set()));
    const waiters = set;
    const finish = (outcome: () => void) => {
      if (!waiters.delete(waiter)) return;
      if (waiters.size === 0 && this.#byId.get(id) === waiters) {
        this.#byId.delete(id);
        this.#firstLooks.delete(id);
      }
      if (deadline !== undefined) clock.clearTimer(deadline);
      signal?.removeEventListener('abort', aborted);
      outcome();
    };
    const waiter: Waiter = {
      resolve: (task) => finish(() => resolve(task)),
      reject: (error) => finish(() => reject(error)),
    };
    const aborted = () => finish(() => reject(signal!.reason));
    waiters.add(waiter);
    signal?.addEventListener('abort', aborted, { once: true });
    if (timeout !== Infinity) {
      deadline = clock.setTimer(() => finish(() => reject(new WaitTimeoutError(id, timeout))), timeout, unref);
    }
    this.#sweep ??= clock.setTimer(this.#swept, this.#every, unref);
    // Its first look: the task may be over already.
    this.#firstLooks.add(id);
    this.done(id);
  }
}
