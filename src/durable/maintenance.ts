// Maintenance: the retention sweep, which deletes finished rows past their
// age (the store's prune() also sweeps serial groups no live task holds, and
// deletes limit rows that limit nothing now).
// Apart from the claim path: it only reads the retention ages, whether the
// runner has stopped, and whether work finished here since the last sweep.
import type { RunnerContext } from './runner-context.js';
import type { FinalState } from './store.js';

/** How long finished rows are kept, ms; null: forever; 0: not at all (the settle deletes what nothing else keeps). */
export interface Retention {
  readonly succeeded: number | null;
  readonly failed: number | null;
}

/** Whether `retention` keeps nothing of final state `state` (failed, timed-out and cancelled share `failed`). */
export function keepsNothing(retention: Retention, state: FinalState): boolean {
  return (state === 'succeeded' ? retention.succeeded : retention.failed) === 0;
}

/** A day for succeeded tasks, a week for failed, timed-out and cancelled ones (and finished jobs). */
export const DEFAULT_RETENTION: Retention = { succeeded: 86_400_000, failed: 7 * 86_400_000 };
/** Rows one retention statement deletes at most. */
const SWEEP_BATCH = 500;
/** ms between retention sweeps while work finishes in this process. */
const SWEEP_EVERY = 60_000;
/**
 * ms between sweeps of a process where nothing finished since its last one:
 * an idle worker sends the database nothing for this long (a serverless
 * PostgreSQL can suspend), and rows still age out within it.
 */
const IDLE_SWEEP_EVERY = 3_600_000;

/** @internal */
export class Maintenance {
  readonly #ctx: RunnerContext;
  /** Retention ages in ms (null: kept forever). */
  readonly #retention: Retention;
  #timer: unknown = undefined;
  /** The sweep in flight, so close() can wait for it. */
  #sweeping: Promise<void> = Promise.resolve();
  #busy = false;
  /** How much work has finished here (the completer's confirmed batches): read at each sweep. */
  readonly #finished: () => number;
  #finishedAtSweep = -1;
  #lastSweep = -Infinity;

  constructor(ctx: RunnerContext, retention: Retention, finished: () => number) {
    this.#ctx = ctx;
    this.#retention = retention;
    this.#finished = finished;
  }

  /** Sweeps now and every SWEEP_EVERY (idle limit rows go even when every finished row is kept). */
  start(): void {
    this.#timer = this.#ctx.loop.clock.setTimer(this.#sweep, 0, this.#ctx.loop.unref);
  }

  /** No more sweeps; resolves once the one in flight is over. */
  stop(): Promise<void> {
    if (this.#timer !== undefined) this.#ctx.loop.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    return this.#sweeping;
  }

  /**
   * Retention: deletes finished rows past their age in batches of
   * SWEEP_BATCH, each its own short statement, yielding to the event loop
   * between batches so no lock is held for long and claims go on; then
   * sleeps SWEEP_EVERY, or IDLE_SWEEP_EVERY while nothing finishes here.
   * Whichever process runs work does it; several doing it at once skip
   * each other's rows (PostgreSQL) or are one (SQLite).
   */
  #sweep = (): void => {
    const { closed, loop } = this.#ctx;
    // The next sweep is planned from when this one begins, not ends: the
    // cadence does not drift with the database's latency.
    this.#timer = closed ? undefined : loop.clock.setTimer(this.#sweep, SWEEP_EVERY, loop.unref);
    // A sweep still deleting (a slow database) covers this one.
    if (this.#busy) return;
    // Nothing finished here since the last sweep: nothing new to delete but rows aging out, which can wait.
    const finished = this.#finished();
    const now = loop.clock.now();
    if (finished === this.#finishedAtSweep && now - this.#lastSweep < IDLE_SWEEP_EVERY) return;
    this.#finishedAtSweep = finished;
    this.#lastSweep = now;
    this.#busy = true;
    this.#sweeping = (async () => {
      const { succeeded, failed } = this.#retention;
      try {
        while (!this.#ctx.closed && (await this.#ctx.store.prune(succeeded, failed, SWEEP_BATCH)) >= SWEEP_BATCH) {
          await new Promise((resolve) => setImmediate(resolve));
        }
      } catch (error) {
        this.#ctx.report(error);
      } finally {
        this.#busy = false;
      }
    })();
  };
}
