// The pool of threads behind module tasks: how many threads it may hold
// (live: growing starts threads as work comes, shrinking retires idle
// threads at once and busy ones when they finish), the line of jobs waiting
// for a thread, and closing. Threads start lazily, on the first job that
// finds none idle, and are kept warm (unref'd: an idle thread never keeps
// the process alive). One thread is in thread.ts.
import type { ThreadJob, ThreadSettings } from './thread.js';
import { PoolThread } from './thread.js';
import { ThreadError } from './errors.js';

/** @internal */
export class ThreadPool {
  readonly #settings: ThreadSettings;
  readonly #threads = new Set<PoolThread>();
  /** Jobs waiting for a thread, first come first served (the scheduler already ordered them). */
  #waiting: ThreadJob[] = [];
  #size: number;
  #closed = false;
  #pumping = false;

  constructor(size: number, settings: ThreadSettings) {
    this.#size = size;
    this.#settings = settings;
  }

  /** How many threads the pool may hold. */
  get size(): number {
    return this.#size;
  }

  set size(value: number) {
    this.#size = value;
    this.#retireIdle();
    this.#pump();
  }

  /** Threads alive now (busy or idle). */
  get threads(): number {
    return this.#threads.size;
  }

  /** Threads running a job now. */
  get busy(): number {
    let busy = 0;
    for (const thread of this.#threads) if (thread.busy) busy++;
    return busy;
  }

  /** Runs a job on a thread as soon as one is free; settles with its outcome. */
  run(job: Omit<ThreadJob, 'resolve' | 'reject'>): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.#closed) return reject(new ThreadError('The thread pool is closed', 'ERR_THREAD_EXIT'));
      if (job.signal.aborted) return reject(job.signal.reason);
      const queued: ThreadJob = { ...job, resolve, reject };
      // Aborted while waiting for a thread: it leaves the line and never starts.
      const onAbort = (): void => {
        const at = this.#waiting.indexOf(queued);
        if (at === -1) return;
        this.#waiting.splice(at, 1);
        reject(job.signal.reason);
      };
      job.signal.addEventListener('abort', onAbort, { once: true });
      const settle =
        <T>(fn: (value: T) => void) =>
        (value: T): void => {
          job.signal.removeEventListener('abort', onAbort);
          fn(value);
        };
      queued.resolve = settle(resolve);
      queued.reject = settle(reject);
      this.#waiting.push(queued);
      this.#pump();
    });
  }

  /** Fails waiting jobs and terminates every thread, busy ones included (their jobs fail). */
  async close(): Promise<void> {
    this.#closed = true;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const job of waiting) job.reject(new ThreadError('The thread pool was closed', 'ERR_THREAD_EXIT'));
    const threads = [...this.#threads];
    this.#threads.clear();
    await Promise.all(threads.map((thread) => thread.terminate()));
  }

  /** Hands waiting jobs to idle threads, starting threads while there is room. */
  #pump(): void {
    if (this.#pumping || this.#closed) return;
    this.#pumping = true;
    try {
      while (this.#waiting.length > 0) {
        let thread: PoolThread | undefined;
        for (const candidate of this.#threads)
          if (!candidate.busy && !candidate.dead) {
            thread = candidate;
            break;
          }
        if (thread === undefined) {
          if (this.#threads.size >= this.#size) break;
          try {
            thread = new PoolThread(this.#settings, this.#freed);
          } catch (error) {
            // Node refused to start a thread (a flag in execArgv it does not allow in threads): the job fails with why.
            this.#waiting.shift()!.reject(error);
            continue;
          }
          this.#threads.add(thread);
        }
        thread.run(this.#waiting.shift()!);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** A thread finished its job, or died: a dead one leaves, one over the size retires. */
  #freed = (thread: PoolThread): void => {
    if (thread.dead) this.#threads.delete(thread);
    else if (!thread.busy && this.#threads.size > this.#size) {
      this.#threads.delete(thread);
      void thread.terminate();
    }
    // A job that settled synchronously inside the pump: the pump's loop picks up from here.
    queueMicrotask(() => this.#pump());
  };

  #retireIdle(): void {
    for (const thread of this.#threads) {
      if (this.#threads.size <= this.#size) break;
      if (thread.busy) continue;
      this.#threads.delete(thread);
      void thread.terminate();
    }
  }
}
