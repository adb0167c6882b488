// Waiters: waitFor(id) and what wakes it. A waiter reads the task again when
// this process settles or cancels it (done()), when another process
// announces it (the store's watch(): PostgreSQL NOTIFY), and, as a safety net
// for an announcement lost while the listener reconnected, when the sweep
// finds it over: every poll interval one read asks which of all the waited
// tasks are over (endedAmong), so 10,000 waiters cost what one does.
// Apart from the claim path: it only reads tasks.
import { ClosedError } from '../core/errors.js';
import { TaskNotFoundError, WaitTimeoutError } from './errors.js';
import { FINAL_STATES, type StoredTask } from './store.js';
import type { StoreContext } from './runner-context.js';

/** Task ids one sweep read asks about. */
const SWEEP_IDS = 1_000;

/** One waitFor() call: `look` reads the task again, `fail` rejects it. */
interface Waiter {
  look(): void;
  fail(error: unknown): void;
}

/** @internal */
export class Waiters {
  readonly #ctx: StoreContext;
  /** waitFor() calls by task id. */
  readonly #byId = new Map<number, Set<Waiter>>();
  /** The store's watch(), once somebody waits. */
  #watching: Promise<void> | undefined = undefined;
  /** The sweep's timer while anybody waits. */
  #sweep: unknown = undefined;

  constructor(ctx: StoreContext) {
    this.#ctx = ctx;
  }

  /**
   * Resolves with the task once it is in a final state (the store is ready).
   * Rejects on `signal`, after `timeout` ms, and when the scheduler closes.
   */
  async waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    signal?.throwIfAborted();
    const store = this.#ctx.store;
    if (store.watch !== undefined) {
      this.#watching ??= store
        .watch((done) => (done === null ? this.#sweepOnce() : this.done(done)))
        .catch((error: unknown) => {
          this.#watching = undefined;
          throw error;
        });
      await this.#watching;
    }
    // close() came while we were getting ready: it has already let its waiters go.
    if (this.#ctx.closed) throw new ClosedError();
    return new Promise<StoredTask>((resolve, reject) => this.#wait(id, signal, timeout, resolve, reject));
  }

  /** Task `id` reached a final state: whoever waits for it looks. */
  done(id: number): void {
    const set = this.#byId.get(id);
    if (set !== undefined) for (const waiter of set) waiter.look();
  }

  /** close(): every waiter rejects with ClosedError. */
  closeAll(): void {
    if (this.#sweep !== undefined) this.#ctx.clock.clearTimer(this.#sweep);
    this.#sweep = undefined;
    for (const set of this.#byId.values()) for (const waiter of set) waiter.fail(new ClosedError());
  }

  /** Every poll interval while anybody waits: a sweep. */
  #swept = (): void => {
    const { clock, poll, unref } = this.#ctx;
    this.#sweep = this.#byId.size === 0 ? undefined : clock.setTimer(this.#swept, poll, unref);
    this.#sweepOnce();
  };

  /** Which waited tasks are over (also right after the listener reconnected), in one read per SWEEP_IDS; their waiters look. */
  #sweepOnce(): void {
    const ids = [...this.#byId.keys()];
    for (let i = 0; i < ids.length; i += SWEEP_IDS) {
      // A failed sweep is retried by the next; a waiter's own read reports a lasting failure.
      this.#ctx.store.endedAmong(ids.slice(i, i + SWEEP_IDS)).then(
        (ended) => {
          for (const id of ended) this.done(id);
        },
        (error: unknown) => this.#ctx.report(error),
      );
    }
  }

  #wait(
    id: number,
    signal: AbortSignal | undefined,
    timeout: number,
    resolve: (task: StoredTask) => void,
    reject: (error: unknown) => void,
  ): void {
    const { store, clock, poll: every, unref } = this.#ctx;
    let settled = false;
    let looking = false;
    let again = false;
    let deadline: unknown;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      const set = this.#byId.get(id);
      set?.delete(waiter);
      if (set?.size === 0) this.#byId.delete(id);
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
      store.getTask(id).then(
        (task) => {
          looking = false;
          if (task === undefined) finish(() => reject(new TaskNotFoundError(id)));
          else if (FINAL_STATES.has(task.state)) finish(() => resolve(task));
          else if (again) {
            again = false;
            look();
          }
        },
        (error: unknown) => {
          looking = false;
          finish(() => reject(error));
        },
      );
    };
    const waiter: Waiter = { look, fail: (error) => finish(() => reject(error)) };
    const aborted = () => finish(() => reject(signal!.reason));
    let set = this.#byId.get(id);
    if (set === undefined) this.#byId.set(id, (set = new Set()));
    set.add(waiter);
    signal?.addEventListener('abort', aborted, { once: true });
    if (timeout !== Infinity) {
      deadline = clock.setTimer(() => finish(() => reject(new WaitTimeoutError(id, timeout))), timeout, unref);
    }
    this.#sweep ??= clock.setTimer(this.#swept, every, unref);
    look();
  }
}
