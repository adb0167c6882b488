// What the thread tests share: the fixture modules' URLs, and a steering
// board (a SharedArrayBuffer) that handlers in threads count themselves on
// and are released from, so no test waits on time or machine speed.
import { setTimeout as sleep } from 'node:timers/promises';

export const fixture = (name: string): URL => new URL(`../fixtures/threads/${name}.js`, import.meta.url);

/** Slot 0: handlers started; slot 1: nonzero releases them. */
export function board() {
  const shared = new SharedArrayBuffer(8);
  const view = new Int32Array(shared);
  return {
    shared,
    started: () => Atomics.load(view, 0),
    /** Resolves once `n` handlers have started (polls; no deadline of its own). */
    async until(n: number): Promise<void> {
      while (Atomics.load(view, 0) < n) await sleep(2);
    },
    release(): void {
      Atomics.store(view, 1, 1);
    },
  };
}
