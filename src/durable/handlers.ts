// The named handlers of a process: the ones it defined (and runs) and the
// ones it only schedules (the scheduler's `handlers` option). Enqueue checks
// names against them, the claimer claims only defined ones, the dispatcher
// runs them.
import { describe } from '../core/validate.js';
import type { Handler } from './options.js';
import { UnknownHandlerError } from './errors.js';
import { assertName } from './validate.js';
import { assertQueueName } from './queues.js';

/** Options of `scheduler.define(name, handler, options)`. */
export interface DefineOptions {
  /**
   * The queue the handler's tasks and jobs belong to when they name none,
   * for tasks scheduled by a process that defines the handler (a process
   * that only schedules it, without defining it, should give `queue`).
   * @default 'default'
   * @example scheduler.define('email', send, { queue: 'emails' });
   */
  queue?: string;
}

/** @internal */
export class Handlers {
  readonly #defined = new Map<string, Handler>();
  /** The queue each handler that names one gives its tasks by default. */
  readonly #queues = new Map<string, string>();
  /** Handler names this process may schedule without defining them. */
  readonly #known: ReadonlySet<string>;
  /** The defined names, as the claim filters by them (rebuilt by define(), read by every claim). */
  names: readonly string[] = [];

  constructor(known: readonly string[]) {
    for (const name of known) assertName(name, 'a name in `handlers`');
    this.#known = new Set(known);
  }

  define(name: string, handler: Handler, options?: DefineOptions): void {
    assertName(name, 'the handler name');
    if (typeof handler !== 'function') throw new TypeError(`Expected the handler for "${name}" to be a function, got ${describe(handler)}`);
    if (options !== undefined) {
      if (typeof options !== 'object' || options === null)
        throw new TypeError(`Expected the options of define("${name}") to be an object like { queue: 'emails' }, got ${describe(options)}`);
      for (const key of Object.keys(options))
        if (key !== 'queue') throw new TypeError(`Unknown define() option ${describe(key)}; expected \`queue\``);
      if (options.queue !== undefined) assertQueueName(options.queue, 'queue');
    }
    this.#defined.set(name, handler);
    if (options?.queue !== undefined) this.#queues.set(name, options.queue);
    else this.#queues.delete(name);
    this.names = [...this.#defined.keys()];
  }

  /** The queue handler `name` gives its tasks that name none, if it names one. */
  queueOf(name: string): string | undefined {
    return this.#queues.get(name);
  }

  get(name: string): Handler | undefined {
    return this.#defined.get(name);
  }

  /**
   * A process that names its handlers (defines some, or lists them in
   * `handlers`) may only schedule those: a typo fails at the call. A process
   * that names none is a pure producer and accepts any well-formed name.
   */
  assertSchedulable(name: string): void {
    assertName(name, 'the handler name');
    if (this.#defined.size === 0 && this.#known.size === 0) return;
    if (!this.#defined.has(name) && !this.#known.has(name)) throw new UnknownHandlerError(name);
  }
}
