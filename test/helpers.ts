import v8 from 'node:v8';
import vm from 'node:vm';
import { Scheduler, type SchedulerOptions } from '../src/index.js';
import { ManualClock } from '../src/testing.js';

export const START = Date.UTC(2026, 0, 1, 12, 0, 0);

/** A scheduler on a ManualClock, with failures collected instead of logged. */
export function setup(options: SchedulerOptions = {}) {
  const clock = new ManualClock(START);
  const errors: unknown[] = [];
  const scheduler = new Scheduler({ clock, onError: (error) => errors.push(error), ...options });
  return { clock, scheduler, errors };
}

/** A promise with its resolve function exposed, to hold a task open. */
export function gate<T = void>() {
  let open!: (value: T) => void;
  let fail!: (reason: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

/** Lets pending promise reactions run. */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

let gc: (() => void) | undefined;

/** Heap in use after two full collections (memory tests; `gc` is exposed on first use). */
export function heapUsed(): number {
  if (gc === undefined) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Async tasks that log `label+start` and `label-end` and take `ms` of (manual) time; `fail` first attempts fail. */
export function worker(clock: { now(): number; setTimer(cb: () => void, ms: number): unknown }, log: string[]) {
  return (label: string, ms: number, fail = 0) => {
    let failures = fail;
    return () => {
      log.push(`${label}+${clock.now() - START}`);
      return new Promise<void>((resolve, reject) =>
        clock.setTimer(() => {
          log.push(`${label}-${clock.now() - START}`);
          if (failures-- > 0) reject(new Error(`${label} failed`));
          else resolve();
        }, ms),
      );
    };
  };
}
