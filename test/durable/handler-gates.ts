// Helpers of the durable tests: gates a test opens to let a handler
// finish, and awaits of a condition (bounded in real time, naming what hung).

/** Handlers wait at a named gate until the test opens it (opened first: no wait). */
export class Gate {
  readonly #open = new Set<string>();
  readonly #waiting = new Map<string, (() => void)[]>();

  wait(name: string): Promise<void> {
    if (this.#open.has(name)) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#waiting.get(name) ?? [];
      list.push(resolve);
      this.#waiting.set(name, list);
    });
  }

  open(name: string): void {
    this.#open.add(name);
    for (const resolve of this.#waiting.get(name) ?? []) resolve();
    this.#waiting.delete(name);
  }
}

/** Lets pending store calls and their continuations run (SQLite answers within a few turns). */
export async function ticks(turns = 50): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Resolves once `condition` holds; rejects after `timeout` ms of real time, naming `what`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
