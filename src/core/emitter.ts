// A minimal typed event emitter for the scheduler's events.
type Listener<Args extends unknown[]> = (...args: Args) => void;

/**
 * A minimal typed event emitter. Listener lists are copied on write so a
 * listener may add or remove listeners while an event is being delivered.
 */
export class Emitter<Events extends { [K in keyof Events]: unknown[] }> {
  // No prototype: an event called `toString` or `__proto__` must not find Object's members.
  #listeners: { [K in keyof Events]?: Listener<Events[K]>[] } = Object.create(null) as { [K in keyof Events]?: Listener<Events[K]>[] };

  /** Whether anybody listens to `event`: lets hot paths skip building the payload. */
  has(event: keyof Events): boolean {
    return this.#listeners[event] !== undefined;
  }

  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): void {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected the listener for "${String(event)}" to be a function, got ${typeof listener}`);
    }
    this.#listeners[event] = [...(this.#listeners[event] ?? []), listener];
  }

  off<K extends keyof Events>(event: K, listener: Listener<Events[K]>): void {
    const list = this.#listeners[event];
    if (list === undefined) return;
    const index = list.findIndex((fn) => fn === listener || (fn as OnceListener).listener === listener);
    if (index === -1) return;
    const rest = list.filter((_, i) => i !== index);
    if (rest.length === 0) delete this.#listeners[event];
    else this.#listeners[event] = rest;
  }

  once<K extends keyof Events>(event: K, listener: Listener<Events[K]>): void {
    // Checked here, not when the event first fires: a missing listener is a mistake at this call.
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected the listener for "${String(event)}" to be a function, got ${typeof listener}`);
    }
    const wrapper: Listener<Events[K]> & OnceListener = (...args) => {
      this.off(event, wrapper);
      listener(...args);
    };
    wrapper.listener = listener;
    this.on(event, wrapper);
  }

  emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    const list = this.#listeners[event];
    if (list === undefined) return;
    for (const listener of list) {
      try {
        listener(...args);
      } catch (error) {
        // A broken listener must not corrupt the scheduler's bookkeeping, but
        // it must not vanish either: surface it as an uncaught exception, the
        // way a throwing EventEmitter listener would.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

interface OnceListener {
  listener?: unknown;
}
