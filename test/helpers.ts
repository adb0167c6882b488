import v8 from 'node:v8';
import vm from 'node:vm';
import { Scheduler, type SchedulerOptions, type TaskContext } from '../src/index.js';
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

/**
 * Calls ctx.log() and ctx.progress() with text a store cannot keep (NUL, a
 * lone surrogate), in a line, a progress string, a nested string and a key;
 * what each threw, as `Class: message` (UNSTORABLE_MESSAGES when all refuse).
 * test/fixtures/threads/report.js makes the same calls in a worker thread.
 */
export function tryUnstorable(ctx: Pick<TaskContext, 'log' | 'progress'>): string[] {
  const refused: string[] = [];
  for (const call of [
    () => ctx.log('a\0b'),
    () => ctx.log('y\udc00'),
    () => ctx.progress('a\0b'),
    () => ctx.progress({ phase: 'x\0', n: 1 }),
    () => ctx.progress({ 'k\0': 1 }),
    () => ctx.progress(['ok', 'x\ud800']),
  ]) {
    try {
      call();
    } catch (error) {
      refused.push(`${(error as Error).constructor.name}: ${(error as Error).message}`);
    }
  }
  return refused;
}

/** What tryUnstorable() gets: each call refused, naming the bad value. */
export const UNSTORABLE_MESSAGES = [
  'TypeError: Expected the ctx.log() line to contain no NUL character, got one at index 1 of "a\\u0000b"',
  'TypeError: Expected the ctx.log() line to be well-formed text, got a lone surrogate (\\udc00) at index 1 of "y\\udc00"',
  'TypeError: Expected the ctx.progress() value to contain no NUL character, got one at index 1 of "a\\u0000b"',
  'TypeError: Expected `progress.phase` of ctx.progress() to contain no NUL character, got one at index 1 of "x\\u0000"',
  'TypeError: Expected a key of `progress` in ctx.progress() to contain no NUL character, got one at index 1 of "k\\u0000"',
  'TypeError: Expected `progress[1]` of ctx.progress() to be well-formed text, got a lone surrogate (\\ud800) at index 1 of "x\\ud800"',
];

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
