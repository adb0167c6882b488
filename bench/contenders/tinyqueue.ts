import TinyQueue from 'tinyqueue';
import type { Contender, Fn } from './types.js';

interface Item {
  t: number;
  fn: Fn;
}

/**
 * The floor: what a bare heap push costs, with no handle, no cancellation,
 * no timer. SPEC §3 asks taskheap to stay within 2x of this when scheduling.
 */
export const contender: Contender = {
  acceptsPast: true,

  oneShot() {
    const queue = new TinyQueue<Item>([], (a, b) => a.t - b.t);
    return {
      schedule(t, fn) {
        const item = { t, fn };
        queue.push(item);
        return item;
      },
      cancel() {
        throw new Error('tinyqueue cannot remove an item');
      },
      runDue(now) {
        while (queue.length > 0 && queue.peek()!.t <= now) queue.pop()!.fn();
      },
      close() {},
    };
  },
};
