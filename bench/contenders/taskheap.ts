import { Scheduler } from '../../src/index.js';
import type { Task } from '../../src/index.js';
import type { Contender, Fn, NextFn } from './types.js';

// The recurring layer (SPEC §2) and CronRule are being built concurrently.
// They are reached through these minimal shapes so this file type-checks
// whether or not they exist yet, and reports "not built" at run time.
interface JobLike {
  cancel(): unknown;
}
interface RunnableRule {
  run(fn: Fn): JobLike;
}
interface RecurringApi {
  cron(expression: string): RunnableRule;
  every(n: number): { minutes(): RunnableRule };
}
interface CronRuleLike {
  next(after: number): number | undefined;
}
type CronRuleClass = new (expression: string, zone?: string) => CronRuleLike;

export const contender: Contender = {
  acceptsPast: true,

  oneShot({ workers }) {
    const scheduler = new Scheduler(workers === undefined ? {} : { workers });
    return {
      schedule: (at, fn) => scheduler.schedule(at, fn),
      cancel: (task) => (task as Task).cancel(),
      idle: () => scheduler.onIdle(),
      close: () => scheduler.close(),
    };
  },

  recurring() {
    const scheduler = new Scheduler();
    const api = scheduler as unknown as Partial<RecurringApi>;
    if (typeof api.cron !== 'function' || typeof api.every !== 'function') return undefined;
    const { cron, every } = api as RecurringApi;
    return {
      cron: (pattern, fn) => cron.call(scheduler, pattern).run(fn),
      interval: (minutes, fn) => every.call(scheduler, minutes).minutes().run(fn),
      stop: (job) => (job as JobLike).cancel(),
      close: () => scheduler.close(),
    };
  },

  async nextRun(pattern, zone): Promise<NextFn | undefined> {
    const module = await importCron();
    if (typeof module?.CronRule !== 'function') return undefined;
    const rule = new module.CronRule(pattern, zone);
    return (after) => rule.next(after);
  },
};

/** src/cron.ts, or undefined while it does not exist; a file that fails to load is a real error. */
async function importCron(): Promise<{ CronRule?: CronRuleClass } | undefined> {
  // A computed specifier: the type checker must not require the file to exist.
  const specifier = new URL('../../src/rules/cron.js', import.meta.url).href;
  try {
    return (await import(specifier)) as { CronRule?: CronRuleClass };
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && String(error).includes('cron')) return undefined;
    throw error;
  }
}
