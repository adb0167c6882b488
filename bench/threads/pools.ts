/**
 * The contenders of bench/threads.ts behind one small interface: a pool of
 * `size` threads that runs a piece of work (`spin` or `trivial`, from
 * bench/workloads/threads-work.js) and closes. taskheap runs it as a module
 * task, piscina and tinypool as their handler by name, Bree as a job (a
 * fresh thread per run, at most `size` at once: Bree has no pool, so the
 * bench caps it like the others), and "main thread" as a taskheap function
 * task on the main thread.
 */
import Bree from 'bree';
import { Piscina } from 'piscina';
import { Tinypool } from 'tinypool';
import { Scheduler } from '../../src/index.js';
import work, { type Work } from '../workloads/threads-work.js';

export const CONTENDERS = ['taskheap', 'piscina', 'tinypool', 'bree', 'main thread'] as const;
export type Contender = (typeof CONTENDERS)[number];

/**
 * Node flags of every contender's threads: none. (Threads inherit the main
 * thread's by default, and this process may run under `--import tsx`, which
 * would load tsx into every new thread: the work is plain JavaScript.)
 */
const execArgv: string[] = [];
const WORK = new URL('../workloads/threads-work.js', import.meta.url);
const BREE_JOB = new URL('../workloads/threads-bree.js', import.meta.url);

export interface Pool {
  run(payload: Work): Promise<unknown>;
  /** Lets the pool hold `size` threads from now on (taskheap only: the others fix their bounds at construction). */
  resize?(size: number): void;
  close(): Promise<void>;
}

/**
 * A pool of `size` threads. `min` (piscina, tinypool) is the threads kept
 * started, by default `size`; taskheap starts threads as tasks need them and
 * keeps them.
 */
export async function open(contender: Contender, size: number, min = size): Promise<Pool> {
  switch (contender) {
    case 'taskheap': {
      const scheduler = new Scheduler({ threads: size, workers: Infinity, threadOptions: { execArgv } });
      return {
        run: (payload) => scheduler.after(0, WORK, { payload }).result,
        resize: (n) => {
          scheduler.threads = n;
        },
        close: () => scheduler.close(),
      };
    }
    case 'main thread': {
      const scheduler = new Scheduler({ workers: Infinity });
      return { run: (payload) => scheduler.after(0, () => work(undefined, payload)).result, close: () => scheduler.close() };
    }
    case 'piscina': {
      const pool = new Piscina({ filename: WORK.href, name: 'pool', minThreads: min, maxThreads: size, execArgv });
      return { run: (payload) => pool.run(payload) as Promise<unknown>, close: () => pool.destroy() };
    }
    case 'tinypool': {
      const pool = new Tinypool({ filename: WORK.href, name: 'pool', minThreads: min, maxThreads: size, execArgv });
      return { run: (payload) => pool.run(payload) as Promise<unknown>, close: () => pool.destroy() };
    }
    case 'bree':
      return breePool(size);
  }
}

/** Bree: each run adds a job, runs it in a new thread, takes its result message and removes the job. */
async function breePool(size: number): Promise<Pool> {
  const results = new Map<string, unknown>();
  const done = new Map<string, (value: unknown) => void>();
  const bree = new Bree({
    root: false,
    logger: false,
    jobs: [],
    worker: { execArgv },
    workerMessageHandler: ({ name, message }: { name: string; message: unknown }) => {
      if (typeof message === 'object' && message !== null && 'result' in message) results.set(name, message.result);
    },
  });
  bree.on('worker deleted', (name: string) => {
    const resolve = done.get(name);
    done.delete(name);
    resolve?.(results.get(name));
    results.delete(name);
  });
  // At most `size` jobs at once: a finishing job hands its slot to the next in line.
  let running = 0;
  const waiting: (() => void)[] = [];
  const acquire = (): Promise<void> | undefined =>
    running < size ? void running++ : new Promise<void>((resolve) => waiting.push(resolve));
  const release = (): void => {
    const next = waiting.shift();
    if (next === undefined) running--;
    else next();
  };
  let next = 0;
  return {
    async run(payload) {
      await acquire();
      const name = `job-${next++}`;
      try {
        await bree.add({ name, path: BREE_JOB.pathname, worker: { workerData: { work: payload } } });
        const result = new Promise((resolve) => done.set(name, resolve));
        await bree.run(name);
        const value = await result;
        await bree.remove(name);
        return value;
      } finally {
        release();
      }
    },
    close: () => bree.stop(),
  };
}
