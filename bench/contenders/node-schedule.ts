import { createRequire } from 'node:module';
import schedule from 'node-schedule';
import type { Job } from 'node-schedule';
import type { Contender } from './types.js';

// node-schedule computes cron occurrences with cron-parser (its own
// dependency); it is reached through node-schedule's resolution so the bench
// uses exactly the version node-schedule runs.
interface CronParser {
  parseExpression(
    pattern: string,
    options: { currentDate?: Date; tz?: string },
  ): {
    reset(date: Date): void;
    next(): { getTime(): number };
  };
}
const requireFromNodeSchedule = createRequire(createRequire(import.meta.url).resolve('node-schedule'));

export const contender: Contender = {
  // scheduleJob() returns null for a Date that is not in the future.
  acceptsPast: false,

  oneShot() {
    return {
      schedule(at, fn) {
        const job = schedule.scheduleJob(new Date(at), fn);
        if (job === null) throw new Error('node-schedule refused a date that is not in the future');
        return job;
      },
      cancel: (job) => (job as Job).cancel(),
      close() {},
    };
  },

  recurring() {
    return {
      cron: (pattern, fn) => schedule.scheduleJob(pattern, fn),
      stop: (job) => (job as Job).cancel(),
      close() {},
    };
  },

  async nextRun(pattern, zone) {
    const parser = requireFromNodeSchedule('cron-parser') as CronParser;
    const expression = parser.parseExpression(pattern, { tz: zone });
    return (after) => {
      // cron-parser is an iterator: reset it to the instant, then step once.
      expression.reset(new Date(after));
      return expression.next().getTime();
    };
  },
};
