import { CronJob, CronTime } from 'cron';
import type { Contender } from './types.js';

/** kelektiv's `cron` package: one timer per CronJob; a Date cronTime is a one-shot. */
export const contender: Contender = {
  // CronJob throws "Date in past. Will never be fired." for a past Date.
  acceptsPast: false,

  oneShot() {
    return {
      schedule: (at, fn) => CronJob.from({ cronTime: new Date(at), onTick: fn, start: true }),
      cancel: (job) => void (job as CronJob).stop(),
      close() {},
    };
  },

  recurring() {
    return {
      cron: (pattern, fn) => CronJob.from({ cronTime: pattern, onTick: fn, start: true }),
      stop: (job) => void (job as CronJob).stop(),
      close() {},
    };
  },

  async nextRun(pattern, zone) {
    const time = new CronTime(pattern, zone);
    return (after) => time.getNextDateFrom(new Date(after), zone).toMillis();
  },
};
