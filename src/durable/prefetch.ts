// Prefetch: how many claimed tasks this process holds at most (its workers,
// and `store.prefetch` more queued for one), and how much free room is worth
// a claim. Without a `prefetch` it adapts to what it measures: how long a
// handler runs and a claim takes to answer. Its own file because it is a
// policy with its own numbers; the claimer asks it, the dispatcher feeds it.
import type { TaskLoop } from '../core/loop.js';
import type { Store } from './store.js';

/** The prefetch that adapts (none given) is at most this many times the workers, */
const MAX_PREFETCH_FACTOR = 32;
/** and at most this many tasks: a claim, and a batch of outcomes, stay statements of moderate size. */
const MAX_ADAPTIVE_PREFETCH = 1_000;

/** @internal */
export class Prefetch {
  readonly #loop: TaskLoop;
  /** Its `prefetch` (undefined: adaptive). */
  readonly #store: Store;
  /** Moving averages, ms: how long a handler runs, and a claim takes to answer. */
  #runTime: number | undefined = undefined;
  #claimTime: number | undefined = undefined;

  constructor(loop: TaskLoop, store: Store) {
    this.#loop = loop;
    this.#store = store;
  }

  /** A handler ran for `ms` (real time). */
  ran(ms: number): void {
    this.#runTime = average(this.#runTime, ms);
  }

  /** A claim took `ms` (real time) to answer. */
  claimed(ms: number): void {
    this.#claimTime = average(this.#claimTime, ms);
  }

  /** How many claimed tasks this process holds at most: its workers, and `prefetch` more waiting for one. */
  capacity(): number {
    const workers = this.#loop.workers;
    if (workers === Infinity) return 64 + (this.#store.prefetch ?? 0);
    return workers + (this.#store.prefetch ?? this.#adaptive(workers));
  }

  /**
   * How much room is worth a claim when a task finishes: half the capacity,
   * so a claim is on its way while the other half still keeps workers busy.
   * Unlimited workers run what they claim at once: any room is worth it.
   */
  refill(): number {
    return this.#loop.workers === Infinity ? 1 : Math.ceil(this.capacity() / 2);
  }

  /**
   * The prefetch when none was given: the whole tasks the workers get
   * through in two claim round trips, measured (real time, moving
   * averages), at most MAX_PREFETCH_FACTOR times the workers and
   * MAX_ADAPTIVE_PREFETCH. Short tasks claim enough that workers never wait
   * for the database; long ones (a round trip is little next to one) claim
   * none ahead, only what the workers can start, as River and BullMQ do: a
   * task held here waiting for a worker is one an idle process cannot run
   * (with the workers' worth ahead, a process that added 8 tasks
   * of 300 ms kept them all, batch after batch, while another sat idle).
   * Until a task has finished, nothing is measured: the workers' worth.
   */
  #adaptive(workers: number): number {
    if (this.#runTime === undefined || this.#claimTime === undefined) return workers;
    const ahead = Math.floor((2 * workers * this.#claimTime) / Math.max(this.#runTime, 0.001));
    return Math.min(ahead, workers * MAX_PREFETCH_FACTOR, MAX_ADAPTIVE_PREFETCH);
  }
}

/** A moving average: the last value weighs a tenth. */
function average(mean: number | undefined, value: number): number {
  return mean === undefined ? value : mean + (value - mean) / 10;
}
