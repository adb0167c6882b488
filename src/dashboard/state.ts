// The JSON the dashboard draws: the scheduler's stats, its jobs, its waiting
// tasks and the stored ones, as plain views.
import type { SchedulerStats } from '../core/loop-types.js';
import { toDuration } from '../core/duration.js';
import type { DurableClient } from '../durable/client.js';
import type { StoredJob, StoredState, StoredTask, TaskFilter } from '../durable/store.js';
import { storedPage, type ConsoleFilter } from './console.js';
import type { Job } from '../jobs/job.js';
import { CalendarRule } from '../rules/calendar.js';
import { CronRule } from '../rules/cron.js';
import { IntervalRule, type Rule } from '../rules/rule.js';
import type { Scheduler } from '../scheduler.js';

/** A job as the page shows it. */
export interface JobView {
  /** The job's `id`. */
  id: number;
  /** Its `name` option, or null. */
  name: string | null;
  /** Its rule in words (`every 10 min`, a cron expression...). */
  rule: string;
  /** Its `state`. */
  state: string;
  /** Whether a run is in progress. */
  running: boolean;
  /** Its next occurrence, epoch ms, or null. */
  nextRunAt: number | null;
  /** When its last run started, epoch ms, or null. */
  lastRunAt: number | null;
  /** Runs so far. */
  runs: number;
  /** Runs that failed. */
  failures: number;
  /** Its last error as `Name: message`, or null. */
  lastError: string | null;
}

/** A waiting in-memory task as the page shows it. */
export interface TaskView {
  /** The task's `id`. */
  id: number;
  /** Its `name` option, or null. */
  name: string | null;
  /** Its `state` (`waiting`), the word of a stored task's. */
  state: string;
  /** When it is due, epoch ms. */
  runAt: number;
  /** Runs started so far. */
  attempts: number;
  /**
   * The id of the task it runs (its detail is `#task-<id>`): the stored task
   * it was claimed for (with a store), or the in-memory flow's task (without
   * one, `scheduler.flows`); null for a task of its own.
   */
  runsTask: number | null;
}

/** A durable named queue as the page shows it (JSON has no Infinity: no limit is null). */
export interface QueueView {
  /** The queue's name. */
  name: string;
  /** Whether it is paused (stored: for every process). */
  paused: boolean;
  /** Its concurrency in the dashboard's process, or null for none. */
  concurrency: number | null;
  /** Its concurrency across processes (stored), or null for none. */
  globalConcurrency: number | null;
  /** Its rate across processes (interval in ms), or null for none. */
  rate: {
    /** Starts at most per window. */
    limit: number;
    /** The window, ms. */
    interval: number;
  } | null;
  /** Its stored tasks by state. */
  counts: Record<StoredState, number>;
}

/** A stored recurring job as the page shows it: the stored job, its rule in words, its zone and next runs. */
export type StoredJobView = Omit<StoredJob, 'rule' | 'nextRunAt' | 'lastRunAt' | 'createdAt' | 'updatedAt'> & {
  /** Its rule in words, or null if the store did not say. */
  rule: string | null;
  /** The rule's IANA zone (cron and calendar rules), or null. */
  timezone: string | null;
  /** Its next occurrence, epoch ms, or null. */
  nextRunAt: number | null;
  /** When its latest started occurrence was due, epoch ms, or null. */
  lastRunAt: number | null;
  /** The three occurrences from its next one on (none while paused or over), epoch ms. */
  nextRuns: number[];
};

/** A stored job for the page. */
function storedJobView(job: StoredJob): StoredJobView {
  const { rule, nextRunAt, lastRunAt, createdAt: _created, updatedAt: _updated, ...rest } = job;
  const nextRuns: number[] = [];
  if (rule !== undefined && nextRunAt !== null && job.state === 'scheduled') {
    for (let at: number | undefined = nextRunAt.getTime(); at !== undefined && nextRuns.length < 3; at = rule.next(at)) nextRuns.push(at);
  }
  return {
    ...rest,
    rule: rule === undefined ? null : describeRule(rule),
    timezone: rule instanceof CronRule || rule instanceof CalendarRule ? rule.zone : null,
    nextRunAt: nextRunAt?.getTime() ?? null,
    lastRunAt: lastRunAt?.getTime() ?? null,
    nextRuns,
  };
}

/** Everything the page draws, as JSON. */
export interface DashboardState {
  /** The scheduler's clock, epoch ms. */
  now: number;
  /** Whether the page offers actions (pause, resume, trigger, cancel). */
  actions: boolean;
  /** The scheduler's `stats()`, with an unlimited pool as the string `'Infinity'` (JSON has no Infinity). */
  stats: Omit<SchedulerStats, 'workers'> & {
    /** The pool size. */
    workers: number | 'Infinity';
  };
  /** The in-memory jobs. */
  jobs: JobView[];
  /** The earliest waiting one-off tasks. */
  tasks: TaskView[];
  /** More waiting tasks than shown. */
  moreTasks: number;
  /** Stored tasks (the page asked for: its filter and cursor), or null without a store. */
  stored: StoredTask[] | null;
  /** Stored tasks under the filter (its state aside) counted by state, by the store; null without a store, and in the page's first state. */
  storedCounts: Record<StoredState, number> | null;
  /** The cursor of the next page of stored tasks (`<runAt>:<id>`), or null on the last page. */
  storedNext: string | null;
  /** Stored recurring jobs, or null without a store. */
  storedJobs: StoredJobView[] | null;
  /** Durable named queues with their stored state, or null without a store, and in the page's first state. */
  queues: QueueView[] | null;
  /** Why the store could not be read, or null. */
  storedError: string | null;
}

function describeError(error: unknown): string | null {
  if (error === undefined || error === null) return null;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

const WEEKDAYS = ['', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const pad = (n: number) => String(n).padStart(2, '0');

function describeInterval(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms % size === 0) return `${ms / size} ${unit}`;
  }
  return `${ms} ms`;
}

/** A job's rule in words: `*\/15 * * * *`, `every 10 min`, `every 2 weeks on Mon, Thu at 08:30 (Europe/Paris)`. */
function describeRule(rule: Rule | undefined): string {
  if (rule instanceof CronRule) return rule.expression;
  if (rule instanceof IntervalRule) return `every ${describeInterval(rule.interval)}`;
  if (rule instanceof CalendarRule) {
    const period = rule.every === 1 ? rule.unit : `${rule.every} ${rule.unit}s`;
    const days = rule.weekdays === undefined ? '' : ` on ${rule.weekdays.map((d) => WEEKDAYS[d]).join(', ')}`;
    const at = `${pad(rule.hour)}:${pad(rule.minute)}${rule.second === 0 ? '' : `:${pad(rule.second)}`}`;
    return `every ${period}${days} at ${at} (${rule.zone})`;
  }
  return 'once';
}

function jobView(job: Job): JobView {
  return {
    id: job.id,
    name: job.name ?? null,
    rule: describeRule(job.rule),
    state: job.state,
    running: job.running,
    nextRunAt: job.nextRunAt?.getTime() ?? null,
    lastRunAt: job.lastRunAt?.getTime() ?? null,
    runs: job.runs,
    failures: job.failures,
    lastError: describeError(job.lastError),
  };
}

/**
 * A snapshot of the scheduler: its jobs, its first `limit` waiting one-off
 * tasks and, with a store (its `client`), the first `limit` stored tasks and stored jobs;
 * with `counts`, the stored tasks counted by state and the queues (a scan of
 * every stored task: the page's first state leaves them out, so its rows
 * come at once and the counts with its first refresh).
 * @internal
 */
export async function snapshot(
  scheduler: Scheduler,
  client: DurableClient | undefined,
  limit: number,
  actions: boolean,
  filter: ConsoleFilter = {},
  after?: TaskFilter['after'],
  counts = true,
): Promise<DashboardState> {
  const stats = scheduler.stats();
  const flows = scheduler.flows;
  // A job's next occurrence shows in the job's row: the task list is one-off
  // tasks. Each planned job has one entry in the heap, so `limit + jobs`
  // earliest tasks hold the `limit` earliest one-off ones.
  const jobs = scheduler.jobs();
  const planned = jobs.filter((job) => job.nextRunAt !== undefined).length;
  const oneOff = scheduler
    .waitingTasks(limit + planned)
    .filter((task) => task.job === undefined)
    .slice(0, limit);
  let stored: StoredTask[] | null = null;
  let storedCounts: Record<StoredState, number> | null = null;
  let storedNext: string | null = null;
  let storedJobs: StoredJobView[] | null = null;
  let queues: QueueView[] | null = null;
  let storedError: string | null = null;
  if (client !== undefined)
    try {
      // The queues' counts scan every stored task: without `counts` (the page's first state) they are left for the next request.
      const queueRead = counts ? client.queues() : undefined;
      const [page, storedJobList, queueList] = await Promise.all([
        storedPage(client, filter, after, limit, queueRead),
        // A refused filter throws at once: inside a promise, so the queues' read is not left unobserved.
        Promise.resolve().then(() => client.listJobs({ limit })),
        queueRead,
      ]);
      [stored, storedCounts, storedNext, storedJobs] = [page.tasks, page.counts, page.next, storedJobList.map(storedJobView)];
      const limitOf = (n: number) => (n === Infinity ? null : n);
      queues =
        queueList?.map((q) => ({
          name: q.name,
          paused: q.paused,
          concurrency: limitOf(q.concurrency),
          globalConcurrency: limitOf(q.globalConcurrency),
          rate: q.rate === undefined ? null : { limit: q.rate.limit, interval: toDuration(q.rate.interval, 'rate.interval') },
          counts: q.counts,
        })) ?? null;
    } catch (error) {
      storedError = describeError(error);
    }
  return {
    now: scheduler.clock.now(),
    actions,
    stats: { ...stats, workers: stats.workers === Infinity ? 'Infinity' : stats.workers },
    jobs: jobs.map(jobView),
    tasks: oneOff.map((task) => ({
      id: task.id,
      name: task.name ?? null,
      // The stored name for the same place in a task's life: one vocabulary on the page.
      state: task.state,
      runAt: task.runAt.getTime(),
      attempts: task.attempts,
      runsTask: flows.runsTask(task) ?? null,
    })),
    moreTasks: Math.max(0, stats.waiting - planned - oneOff.length),
    stored,
    storedCounts,
    storedNext,
    storedJobs,
    queues,
    storedError,
  };
}
