// A module task on its way to a thread, or in one (`ThreadJob`), and how it
// hears it was aborted (`AbortSource`): the loop's run itself, whose abort
// calls one hook, or, for a durable task, an adapter over its `ctx.signal`.
// No AbortController, AbortSignal or listener is made per task unless a
// durable one asks: dispatching trivial tasks is bound by what each costs
// the main thread.
import type { TaskContext } from '../core/task.js';
import { Run } from '../core/task.js';

/**
 * Where a job learns it was aborted. One listener at a time: the pool's
 * while the job waits for a thread, then its thread's while it runs.
 * @internal
 */
export interface AbortSource {
  readonly aborted: boolean;
  readonly abortReason: unknown;
  onAbort: (() => void) | undefined;
}

/** An `AbortSource` over an AbortSignal (a durable task's `ctx`): the listener is added only while one is set. */
class SignalSource implements AbortSource {
  readonly #signal: AbortSignal;
  #listener: (() => void) | undefined = undefined;

  constructor(signal: AbortSignal) {
    this.#signal = signal;
  }

  get aborted(): boolean {
    return this.#signal.aborted;
  }

  get abortReason(): unknown {
    return this.#signal.reason;
  }

  get onAbort(): (() => void) | undefined {
    return this.#listener;
  }

  set onAbort(listener: (() => void) | undefined) {
    if (this.#listener !== undefined) this.#signal.removeEventListener('abort', this.#listener);
    this.#listener = listener;
    if (listener !== undefined) this.#signal.addEventListener('abort', listener, { once: true });
  }
}

/** A task on its way to a thread, or in one: what the thread is sent, and where its outcome goes. @internal */
export class ThreadJob {
  readonly module: URL;
  readonly payload: unknown;
  readonly attempt: number;
  readonly scheduledAt: number;
  readonly startedAt: number;
  readonly name: string | undefined;
  /** A stored task's id (durable work), handed to the handler as `ctx.id`. */
  readonly taskId: number | undefined;
  readonly source: AbortSource;
  /** The run's context: the handler's `ctx.progress()` and `ctx.log()` in the thread are forwarded to its own. */
  readonly ctx: TaskContext;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;

  constructor(
    module: URL,
    ctx: TaskContext & { id?: number },
    payload: unknown,
    resolve: (value: unknown) => void,
    reject: (error: unknown) => void,
  ) {
    this.module = module;
    this.payload = payload;
    this.attempt = ctx.attempt;
    this.name = ctx.name;
    this.taskId = ctx.id;
    this.ctx = ctx;
    this.resolve = resolve;
    this.reject = reject;
    if (ctx instanceof Run) {
      // The loop's own run: its times as numbers (no Dates) and its abort hook (no AbortSignal).
      this.scheduledAt = ctx.task._time;
      this.startedAt = ctx.startedAtMs;
      this.source = ctx;
    } else {
      this.scheduledAt = ctx.scheduledAt.getTime();
      this.startedAt = ctx.startedAt.getTime();
      this.source = new SignalSource(ctx.signal);
    }
  }

  /** The job's task for an error message: `task "thumbnail" (file:///app/thumbnail.js)`. */
  what(): string {
    return `task ${this.name === undefined ? '' : `"${this.name}" `}(${this.module.href})`;
  }
}
