import cron from 'node-cron';
import type { ScheduledTask } from 'node-cron';
import type { Contender } from './types.js';

/** node-cron: cron patterns only, one timer per task. */
export const contender: Contender = {
  acceptsPast: false,

  recurring() {
    return {
      cron: (pattern, fn) => cron.schedule(pattern, fn),
      // destroy() is node-cron's cancel: stop() would keep the task registered.
      stop: (task) => void (task as ScheduledTask).destroy(),
      close() {},
    };
  },
};
