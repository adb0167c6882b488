import { CronJob, SimpleIntervalJob, Task, ToadScheduler } from 'toad-scheduler';
import type { Job } from 'toad-scheduler';
import type { Contender } from './types.js';

/** toad-scheduler: interval jobs (one setInterval each) and cron jobs (croner inside). */
export const contender: Contender = {
  acceptsPast: false,

  recurring() {
    const scheduler = new ToadScheduler();
    return {
      cron(pattern, fn) {
        const job = new CronJob({ cronExpression: pattern }, new Task('bench', fn));
        scheduler.addCronJob(job);
        return job;
      },
      interval(minutes, fn) {
        const job = new SimpleIntervalJob({ minutes }, new Task('bench', fn));
        scheduler.addSimpleIntervalJob(job);
        return job;
      },
      stop: (job) => (job as Job).stop(),
      close: () => scheduler.stop(),
    };
  },
};
