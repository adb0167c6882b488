// The named handlers of a process: the ones it defined (and runs) and the
// ones it only schedules (the scheduler's `handlers` option). Enqueue checks
// names against them, the claimer claims only defined ones, the dispatcher
// runs them.
import { describe } from '../core/validate.js';
import type { Handler } from './options.js';
import { UnknownHandlerError } from './store.js';
import { assertName } from './validate.js';

/** @internal */
export class Handlers {
  readonly #defined = new Map<string, Handler>();
  /** Handler names this process may schedule without defining them. */
  readonly #known: ReadonlySet<string>;
  /** The defined names, as the claim filters by them (rebuilt by define(), read by every claim). */
  names: readonly string[] = [];

  constructor(known: readonly string[]) {
    for (const name of known) assertName(name, 'a name in `handlers`');
    this.#known = new Set(known);
  }

  define(name: string, handler: Handler): void {
    assertName(name, 'the handler name');
    if (typeof handler !== 'function') throw new TypeError(`Expected the handler for "${name}" to be a function, got ${describe(handler)}`);
    this.#defined.set(name, handler);
    this.names = [...this.#defined.keys()];
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
