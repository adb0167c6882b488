// The pool of threads behind module tasks: how many threads it may hold
// (live: growing starts threads as work comes, shrinking retires idle
// threads at once and busy ones when they finish), the line of jobs waiting
// for a thread, and closing. Threads start lazily, on the first job that
// finds none idle, and are kept warm (unref'd: an idle thread never keeps
// the process alive). One thread is in thread.ts, loaded with the first job:
// a scheduler that never runs a module task never loads worker_threads.
import type { PoolThread, ThreadSettings } from './thread.js';
import { ThreadError } from './errors.js';
import type { ThreadJob } from './job.js';

/** @internal */
export class ThreadPool {
  readonly #settings: ThreadSettings;
  readonly #threads = new Set<PoolThread>();
  /** Jobs waiting for a thread from `#head` on, first come first served (the scheduler already ordered them). */
  #waiting: ThreadJob[] = [];
  #head = 0;
  #size: number;
  #closed = false;
  #pumping = false;
  /** thread.ts's `PoolThread`, once the first job has loaded it. */
  #Thread: typeof PoolThread | undefined = undefined;
  #loading = false;

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

  /** Runs a job on a thread as soon as one is free; settles it with its outcome. */
  run(job: ThreadJob): void {
    if (this.#closed) return job.reject(new ThreadError('The thread pool is closed', 'ERR_THREAD_EXIT'));
    if (job.source.aborted) return job.reject(job.source.abortReason);
    // Aborted while waiting for a thread: it leaves the line and never starts (one listener for the whole line).
    job.source.onAbort = this.#sweep;
    this.#waiting.push(job);
    this.#pump();
  }

  /** Fails waiting jobs and terminates every thread, busy ones included (their jobs fail). */
  async close(): Promise<void> {
    this.#closed = true;
    const waiting = this.#waiting.slice(this.#head);
    this.#waiting = [];
    this.#head = 0;
    for (const job of waiting) {
      job.source.onAbort = undefined;
      job.reject(new ThreadError('The thread pool was closed', 'ERR_THREAD_EXIT'));
    }
    const threads = [...this.#threads];
    this.#threads.clear();
    await Promise.all(threads.map((thread) => thread.terminate()));
  }

  /** The next waiting job, out of the line. */
  #next(): ThreadJob {
    const job = this.#waiting[this.#head]!;
    this.#waiting[this.#head++] = undefined!;
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
    job.source.onAbort = undefined;
    return job;
  }

  /** A waiting job was aborted: every aborted one leaves the line, failed with its reason. */
  readonly #sweep = (): void => {
    const kept: ThreadJob[] = [];
    for (let at = this.#head; at < this.#waiting.length; at++) {
      const job = this.#waiting[at]!;
      if (!job.source.aborted) kept.push(job);
      else {
        job.source.onAbort = undefined;
        job.reject(job.source.abortReason);
      }
    }
    this.#waiting = kept;
    this.#head = 0;
  };

  /** Loads thread.ts, then pumps; if it cannot load, the jobs waiting fail with why. */
  #load(): void {
    this.#loading = true;
    import('./thread.js').then(
      ({ PoolThread }) => {
        this.#Thread = PoolThread;
        this.#pump();
      },
      (error: unknown) => {
        this.#loading = false;
        while (this.#head < this.#waiting.length) this.#next().reject(error);
      },
    );
  }

  /** Hands waiting jobs to idle threads, starting threads while there is room. */
  #pump(): void {
    if (this.#pumping || this.#closed) return;
    const Thread = this.#Thread;
    if (Thread === undefined) {
      if (!this.#loading && this.#head < this.#waiting.length) this.#load();
      return;
    }
    this.#pumping = true;
    try {
      while (this.#head < this.#waiting.length) {
        let thread: PoolThread | undefined;
        for (const candidate of this.#threads)
          if (!candidate.busy && !candidate.dead) {
            thread = candidate;
            break;
          }
        if (thread === undefined) {
          if (this.#threads.size >= this.#size) break;
          try {
            thread = new Thread(this.#settings, this.#freed);
          } catch (error) {
            // Node refused to start a thread (a flag in execArgv it does not allow in threads): the job fails with why.
            this.#next().reject(error);
            continue;
          }
          this.#threads.add(thread);
        }
        thread.run(this.#next());
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
    // Hands it the next job now (inside the pump, a job that settled at once: the pump's loop goes on).
    this.#pump();
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
