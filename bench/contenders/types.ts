/**
 * The uniform face every contender shows the workloads. A library implements
 * only what it can do; the registry (index.ts) says what it cannot, and why.
 */

/** A task body. Workloads pass one shared function where they can, so closures do not count as library memory. */
export type Fn = () => void;

/** One-shot timed tasks: taskheap's `schedule`, `setTimeout`, a Cron with a Date... */
export interface OneShot {
  /** Schedules `fn` at epoch ms `at`; returns whatever `cancel` needs. */
  schedule(at: number, fn: Fn): unknown;
  /** Cancels a pending task by its handle. */
  cancel(handle: unknown): void;
  /** Resolves when nothing is pending or running, where the library can tell (taskheap's `onIdle`). */
  idle?(): Promise<void>;
  /** Only the tinyqueue floor: it has no timer, so the harness pops and runs due items itself. */
  runDue?(now: number): void;
  /** Releases timers so the process can exit cleanly. */
  close(): void | Promise<void>;
}

/** Recurring jobs. A method is absent when the library has no such rule. */
export interface Recurring {
  cron?(pattern: string, fn: Fn): unknown;
  /** A fixed interval of `minutes`, where the library has a rule for it. */
  interval?(minutes: number, fn: Fn): unknown;
  stop(handle: unknown): void;
  close(): void | Promise<void>;
}

/** The next occurrence strictly after `after` (epoch ms), or undefined. */
export type NextFn = (after: number) => number | undefined;

export interface Contender {
  /** Whether a due time in the past is accepted (and runs at once). */
  acceptsPast: boolean;
  /** A fresh one-shot scheduler; `workers` only matters to taskheap. */
  oneShot?(options: { workers?: number }): OneShot;
  /** A fresh recurring scheduler, or undefined if the library's API is not built yet. */
  recurring?(): Recurring | undefined;
  /** A next-occurrence function for `pattern` in `zone`, or undefined if not built yet. */
  nextRun?(pattern: string, zone: string): Promise<NextFn | undefined>;
}
