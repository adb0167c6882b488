import { Cron } from 'croner';
import type { Contender } from './types.js';

/** croner: one timer per Cron instance; a Date pattern makes a one-shot. */
export const contender: Contender = {
  // A Date earlier in the current second fires at once, an older one never
  // does (nextRun() is null): treated as refusing past times.
  acceptsPast: false,

  oneShot() {
    return {
      schedule: (at, fn) => new Cron(new Date(at), fn),
      cancel: (job) => (job as Cron).stop(),
      close() {},
    };
  },

  recurring() {
    return {
      cron: (pattern, fn) => new Cron(pattern, fn),
      // croner's documented way to run on an interval: a per-second pattern
      // throttled by `interval` (minimum seconds between runs).
      interval: (minutes, fn) => new Cron('* * * * * *', { interval: minutes * 60 }, fn),
      stop: (job) => (job as Cron).stop(),
      close() {},
    };
  },

  async nextRun(pattern, zone) {
    const cron = new Cron(pattern, { paused: true, timezone: zone });
    return (after) => cron.nextRun(new Date(after))?.getTime();
  },
};
