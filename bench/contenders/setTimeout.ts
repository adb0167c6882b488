import type { Contender } from './types.js';

/** The baseline: one Node timer per task, what most code does by hand. */
export const contender: Contender = {
  acceptsPast: true,

  oneShot() {
    return {
      // A negative delay is clamped to 1 ms by Node, so "now" works.
      schedule: (at, fn) => setTimeout(fn, at - Date.now()),
      cancel: (handle) => clearTimeout(handle as NodeJS.Timeout),
      close() {},
    };
  },

  recurring() {
    return {
      interval: (minutes, fn) => setInterval(fn, minutes * 60_000),
      stop: (handle) => clearInterval(handle as NodeJS.Timeout),
      close() {},
    };
  },
};
