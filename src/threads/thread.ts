// One thread of the pool: a `Worker` running the bootstrap (bootstrap.ts),
// one job at a time. It posts the job in, turns the thread's answer into the
// job's outcome, forwards an abort and, when the handler ignores it for the
// grace period, terminates the thread; a crash, an exit or running out of
// memory fails the job under it with a `ThreadError`. A dead thread is
// never reused: the pool (pool.ts) starts another.
import { type ResourceLimits, Worker } from 'node:worker_threads';
import { BOOTSTRAP } from './bootstrap.js';
import { type ErrorMessage, ThreadError, toError } from './errors.js';
import type { ThreadJob } from './job.js';

/** How threads are started. @internal */
export interface ThreadSettings {
  readonly execArgv: readonly string[] | undefined;
  readonly resourceLimits: ResourceLimits | undefined;
  /** ms a handler has to settle once its signal aborted, before its thread is terminated. */
  readonly grace: number;
}

/**
 * What the thread posts back: `[id, value]` when the job `id` succeeded
 * (the common case, kept small), else an object: its failure, or its
 * handler's progress (JSON) or log line.
 */
type Answer = [id: number, value: unknown] | DoneMessage;
interface DoneMessage {
  type: 'done' | 'progress' | 'log';
  json?: string;
  line?: string;
  id: number;
  ok: boolean;
  value?: unknown;
  error?: ErrorMessage;
  /** The outcome could not be cloned; `error` is the DataCloneError. */
  clone?: true;
  /** The handler threw its signal's reason (the abort it was told of). */
  aborted?: true;
}

let nextJobId = 1;

/** @internal */
export class PoolThread {
  readonly #worker: Worker;
  readonly #grace: number;
  /** Told once, when the job ends (whatever way) or the thread dies. */
  readonly #onFree: (thread: PoolThread) => void;
  #job: ThreadJob | undefined = undefined;
  #jobId = 0;
  #graceTimer: NodeJS.Timeout | undefined = undefined;
  #dead = false;
  /** The worker keeps the process alive (while it runs a job). */
  #referenced = false;
  /** The one abort listener of this thread, set on the job it runs. */
  readonly #aborted = (): void => this.#abort();

  constructor(settings: ThreadSettings, onFree: (thread: PoolThread) => void) {
    this.#grace = settings.grace;
    this.#onFree = onFree;
    this.#worker = new Worker(BOOTSTRAP, {
      eval: true,
      ...(settings.execArgv === undefined ? {} : { execArgv: [...settings.execArgv] }),
      ...(settings.resourceLimits === undefined ? {} : { resourceLimits: settings.resourceLimits }),
    });
    this.#worker.unref();
    this.#worker.on('message', (message: Answer) => this.#answer(message));
    this.#worker.on('error', (error: Error & { code?: string }) => this.#crash(error));
    this.#worker.on('exit', (code) => this.#exit(code));
  }

  /** Running a job. */
  get busy(): boolean {
    return this.#job !== undefined;
  }

  /** Terminated, crashed or exited: never given a job again. */
  get dead(): boolean {
    return this.#dead;
  }

  /** Runs `job` here; the thread must be idle and alive. */
  run(job: ThreadJob): void {
    this.#job = job;
    const id = (this.#jobId = nextJobId++);
    if (!this.#referenced) {
      this.#worker.ref();
      this.#referenced = true;
    }
    try {
      // An array, not an object: no key is written and read per task (the bootstrap's `run` message).
      this.#worker.postMessage([id, job.module.href, job.payload, job.attempt, job.scheduledAt, job.startedAt, job.name, job.taskId]);
    } catch (error) {
      // Checked at the call for tasks in memory; a payload reaching here is a durable one, JSON, so cloneable.
      return this.#end(new TypeError(`The payload of ${job.what()} cannot be sent to a thread (structured clone): ${String(error)}`));
    }
    if (job.source.aborted) return this.#abort();
    job.source.onAbort = this.#aborted;
  }

  /** Ends the thread now; a job in it fails with `reason`. */
  terminate(reason?: unknown): Promise<void> {
    // Dead first: the pool, told the thread is free, must not hand it another job.
    this.#dead = true;
    if (this.#job !== undefined) this.#end(reason ?? new ThreadError('The thread pool was closed', 'ERR_THREAD_EXIT'));
    return this.#worker.terminate().then(() => undefined);
  }

  /** The task was aborted: tell the handler (its signal aborts), and stop it for good after the grace period. */
  #abort(): void {
    const job = this.#job;
    if (job === undefined || this.#graceTimer !== undefined) return;
    job.source.onAbort = undefined;
    const reason = job.source.abortReason;
    const id = this.#jobId;
    const plain = reason instanceof Error ? reason : new Error(String(reason));
    this.#worker.postMessage({
      type: 'abort',
      id,
      reason: { name: plain.name, message: plain.message, code: (plain as { code?: unknown }).code },
    });
    this.#graceTimer = setTimeout(() => {
      if (this.#jobId !== id || this.#job === undefined) return;
      // The handler ignored its signal: the thread is given up, the task ends with the abort's reason.
      void this.terminate(reason);
    }, this.#grace);
    this.#graceTimer.unref();
  }

  #answer(message: Answer): void {
    if (Array.isArray(message)) {
      if (message[0] === this.#jobId && this.#job !== undefined) this.#end(undefined, message[1], true);
      return;
    }
    if (message.type !== 'done') return this.#tell(message);
    if (message.id !== this.#jobId || this.#job === undefined) return;
    if (message.ok) return this.#end(undefined, message.value, true);
    const error = message.error ?? {};
    // The handler gave up with the reason its signal was aborted with: the task ends with the original reason.
    if (message.aborted === true && this.#job.source.aborted) return this.#end(this.#job.source.abortReason);
    if (message.clone === true) {
      const job = this.#job;
      return this.#end(
        new ThreadError(
          `The outcome of ${job.what()} cannot be sent back from its thread (structured clone): ${error.message}`,
          'ERR_THREAD_CLONE',
          {
            cause: toError(error),
          },
        ),
      );
    }
    this.#end(toError(error));
  }

  /** Progress or a log line of the running job (checked in the thread, at the handler's call). */
  #tell(message: DoneMessage): void {
    const job = this.#job;
    if (message.id !== this.#jobId || job === undefined) return;
    try {
      if (message.type === 'progress') job.ctx.progress(JSON.parse(message.json!));
      else job.ctx.log(message.line!);
    } catch (error) {
      // Checked in the thread already: nothing reaches here but a run that ended meanwhile.
      void error;
    }
  }

  #crash(error: Error & { code?: string }): void {
    this.#dead = true;
    const job = this.#job;
    if (job === undefined) return;
    if (error.code === 'ERR_WORKER_OUT_OF_MEMORY')
      return this.#end(
        new ThreadError(`The thread of ${job.what()} ran out of memory (resourceLimits): ${error.message}`, 'ERR_THREAD_OUT_OF_MEMORY', {
          cause: error,
        }),
      );
    this.#end(
      new ThreadError(`The thread of ${job.what()} crashed (an uncaught exception): ${error.message}`, 'ERR_THREAD_CRASHED', {
        cause: error,
      }),
    );
  }

  #exit(code: number): void {
    this.#dead = true;
    const job = this.#job;
    if (job !== undefined)
      this.#end(new ThreadError(`The thread of ${job.what()} exited with code ${code} while running it`, 'ERR_THREAD_EXIT'));
    // An idle thread that died (a timer its last handler left behind threw): the pool lets go of it.
    else this.#onFree(this);
  }

  /** Settles the current job (an error, or `value` when `ok`) and frees the thread. */
  #end(error: unknown, value?: unknown, ok = false): void {
    const job = this.#job!;
    this.#job = undefined;
    this.#jobId = 0;
    if (this.#graceTimer !== undefined) {
      clearTimeout(this.#graceTimer);
      this.#graceTimer = undefined;
    }
    if (job.source.onAbort === this.#aborted) job.source.onAbort = undefined;
    if (ok) job.resolve(value);
    else job.reject(error);
    this.#onFree(this);
    // Not given another job meanwhile: an idle thread does not keep the process alive.
    if (this.#job === undefined && this.#referenced && !this.#dead) {
      this.#worker.unref();
      this.#referenced = false;
    }
  }
}
