// The command line's commands: each checks its argument and options, then,
// once connected, calls the durable client (or the store), and
// returns what to print as JSON and as text, with the exit code.
import { parseDuration } from '../core/duration.js';
import { assertJobFilter, assertKey, assertTaskFilter } from '../durable/validate.js';
import type { JobFilter, StoredJob, StoredState, StoredTask, TaskCountFilter, TaskFilter } from '../index.js';
import type { Invocation } from './args.js';
import { CliError, EXIT } from './errors.js';
import type { Connection } from './connect.js';
import { record, table } from './format.js';

/** What a command prints (`json` with --json, else `text`) and its exit code. */
interface Outcome {
  json: unknown;
  text: string;
  code: number;
}

const TASK_STATES: readonly StoredState[] = ['blocked', 'waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled'];
const JOB_STATES: readonly StoredJob['state'][] = ['scheduled', 'paused', 'done', 'cancelled'];
const TASK_COLUMNS = ['id', 'name', 'state', 'runAt', 'attempts', 'queue', 'key', 'jobKey', 'lastError'];
const JOB_COLUMNS = ['key', 'name', 'state', 'nextRunAt', 'lastRunAt', 'runs'];
/** Rows one retention statement deletes at most, as the worker's sweep does. */
const PRUNE_BATCH = 500;

function ok(json: unknown, text: string): Outcome {
  return { json, text, code: EXIT.ok };
}

function usage(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

function id(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1)
    throw usage(`Expected a task id (an integer >= 1), got ${JSON.stringify(text)}`);
  return value;
}

function limit(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < 1 || value > 10_000)
    throw usage(`Expected --limit to be an integer from 1 to 10000, got ${JSON.stringify(text)}`);
  return value;
}

function time(option: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = /^-?\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(value))
    throw usage(`Expected --${option} to be an ISO time (2026-01-31T09:00:00Z) or epoch milliseconds, got ${JSON.stringify(text)}`);
  return value;
}

function oneOf<T extends string>(option: string, text: string | undefined, allowed: readonly T[]): T | undefined {
  if (text === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(text))
    throw usage(`Expected --${option} to be one of ${allowed.join(', ')}, got ${JSON.stringify(text)}`);
  return text as T;
}

/** The options as the store's checks name them (`keyPrefix`), for their messages. */
const OPTION_OF: Readonly<Record<string, string>> = {
  state: '--state',
  name: '--name',
  queue: '--queue',
  keyPrefix: '--key-prefix',
  jobKey: '--job-key',
  from: '--from',
  to: '--to',
  limit: '--limit',
  after: '--after',
  'after.runAt': '--after',
};

/**
 * Runs one of the store's checks (assertTaskFilter...) on what the options
 * make, before connecting: a value it refuses is a usage error, its message
 * naming the option (`--key-prefix`, not `keyPrefix`).
 */
function checked(check: () => void): void {
  try {
    check();
  } catch (error) {
    if (!(error instanceof TypeError || error instanceof RangeError)) throw error;
    throw usage(error.message.replace(/`([\w.]+)`/g, (quoted, field: string) => OPTION_OF[field] ?? quoted));
  }
}

/** A job's key as an argument (`job <key>`, `pause <key>`...). */
function jobKey(text: string): string {
  checked(() => assertKey(text, 'the job key'));
  return text;
}

/** A page cursor of `tasks`: the last task's due time (epoch ms) and id. */
function cursorOf(task: StoredTask): string {
  return `${task.runAt.getTime()}:${task.id}`;
}

function parseCursor(text: string | undefined): TaskFilter['after'] {
  if (text === undefined) return undefined;
  const match = /^(-?\d+):(\d+)$/.exec(text);
  if (match === null)
    throw usage(`Expected --after to be a cursor <runAt ms>:<id> as printed after a full page, got ${JSON.stringify(text)}`);
  return { runAt: Number(match[1]), id: Number(match[2]) };
}

function age(option: string, text: string | undefined, fallback: string): number | null {
  const value = text ?? fallback;
  if (value === 'off') return null;
  try {
    return parseDuration(value);
  } catch {
    throw usage(`Expected --${option} to be an age such as "1d" or "12h", or "off", got ${JSON.stringify(value)}`);
  }
}

/** The filters that select tasks (all but state and paging), from the options of `tasks` and `stats`. */
function selection(options: Invocation['options']): TaskCountFilter {
  const filter: TaskCountFilter = {};
  if (options.name !== undefined) filter.name = options.name;
  if (options.queue !== undefined) filter.queue = options.queue;
  if (options['key-prefix'] !== undefined) filter.keyPrefix = options['key-prefix'];
  if (options['job-key'] !== undefined) filter.jobKey = options['job-key'];
  const from = time('from', options.from);
  if (from !== undefined) filter.from = from;
  const to = time('to', options.to);
  if (to !== undefined) filter.to = to;
  return filter;
}

/** The `tasks` filter the options make, checked as listTasks() would. */
function taskFilter(options: Invocation['options']): TaskFilter & { limit: number } {
  const state = oneOf('state', options.state, TASK_STATES);
  const after = parseCursor(options.after);
  const filter = {
    ...selection(options),
    ...(state === undefined ? {} : { state }),
    ...(after === undefined ? {} : { after }),
    limit: limit(options.limit) ?? 100,
  };
  checked(() => assertTaskFilter(filter));
  return filter;
}

/** The `jobs` filter the options make, checked as listJobs() would. */
function jobFilter(options: Invocation['options']): JobFilter & { limit: number } {
  const state = oneOf('state', options.state, JOB_STATES);
  const filter = {
    ...(state === undefined ? {} : { state }),
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(options['key-prefix'] === undefined ? {} : { keyPrefix: options['key-prefix'] }),
    ...(options.after === undefined ? {} : { after: options.after }),
    limit: limit(options.limit) ?? 100,
  };
  checked(() => assertJobFilter(filter));
  return filter;
}

function taskRow(task: StoredTask): Record<string, unknown> {
  return { ...task, runAt: task.runAt };
}

/** What a command does once connected. */
type Action = (connection: Connection) => Promise<Outcome>;

/**
 * A command: checks its argument and every option it takes, throwing a usage
 * error that names the bad one, before anything connects (a typo must not
 * wait on a database, nor hide behind one that is down or not migrated);
 * returns what to run once connected.
 */
type Command = (argument: string, options: Invocation['options']) => Action;

/** What `code` reads from a TaskheapError, if it is one. */
function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

export const commands: Record<string, Command> = {
  migrate() {
    // connect() already migrated.
    return async () => ok({ migrated: true }, 'The schema is up to date.');
  },

  tasks(_argument, options) {
    const filter = taskFilter(options);
    return async ({ client }) => {
      const tasks = await client.listTasks(filter);
      const next = tasks.length === filter.limit ? cursorOf(tasks.at(-1)!) : null;
      const text = table(tasks.map(taskRow), TASK_COLUMNS) + (next === null ? '' : `\nnext page: --after ${next}`);
      return ok({ tasks, next }, text);
    };
  },

  task(argument) {
    const taskId = id(argument);
    return async ({ client }) => {
      const task = await client.getTask(taskId);
      if (task === undefined) throw new CliError(`No stored task with id ${taskId}`, EXIT.notFound);
      return ok(task, record(task as unknown as Record<string, unknown>));
    };
  },

  jobs(_argument, options) {
    const filter = jobFilter(options);
    return async ({ client }) => {
      const jobs = await client.listJobs(filter);
      const next = jobs.length === filter.limit ? jobs.at(-1)!.key : null;
      const text = table(jobs as unknown as Record<string, unknown>[], JOB_COLUMNS) + (next === null ? '' : `\nnext page: --after ${next}`);
      return ok({ jobs, next }, text);
    };
  },

  job(argument) {
    const key = jobKey(argument);
    return async ({ client }) => {
      const job = await client.getJob(key);
      if (job === undefined) throw new CliError(`No stored job with key ${JSON.stringify(key)}`, EXIT.notFound);
      return ok(job, record(job as unknown as Record<string, unknown>));
    };
  },

  retry(argument) {
    const taskId = id(argument);
    return async ({ client }) => {
      try {
        const task = await client.retry(taskId);
        return ok(task, `Task ${task.id} is ${task.state} again, due now.`);
      } catch (error) {
        if (codeOf(error) === 'ERR_TASK_NOT_FOUND') throw new CliError((error as Error).message, EXIT.notFound);
        throw error;
      }
    };
  },

  cancel(argument) {
    const taskId = id(argument);
    return async ({ client }) => {
      if (await client.cancel(taskId)) return ok({ cancelled: true, id: taskId }, `Task ${taskId} is cancelled.`);
      const task = await client.getTask(taskId);
      if (task === undefined) throw new CliError(`No stored task with id ${taskId}`, EXIT.notFound);
      throw new CliError(`Task ${taskId} is ${task.state}: only a waiting or running task can be cancelled`);
    };
  },

  pause(argument) {
    const key = jobKey(argument);
    return (connection) => jobState(connection, key, 'pause');
  },

  resume(argument) {
    const key = jobKey(argument);
    return (connection) => jobState(connection, key, 'resume');
  },

  trigger(argument) {
    const key = jobKey(argument);
    return async ({ client }) => {
      try {
        const task = await client.triggerJob(key);
        return ok(task, `Job ${JSON.stringify(key)} triggered: task ${task.id}, due now.`);
      } catch (error) {
        if (codeOf(error) === 'ERR_JOB_NOT_FOUND') throw new CliError((error as Error).message, EXIT.notFound);
        throw error;
      }
    };
  },

  prune(_argument, options) {
    const succeeded = age('succeeded', options.succeeded, '1d');
    const failed = age('failed', options.failed, '7d');
    return async ({ store }) => {
      let deleted = 0;
      for (;;) {
        const batch = await store.prune(succeeded, failed, PRUNE_BATCH);
        deleted += batch;
        if (batch < PRUNE_BATCH) break;
      }
      return ok({ deleted }, `Deleted ${deleted} row(s).`);
    };
  },

  stats(_argument, options) {
    const filter = selection(options);
    checked(() => assertTaskFilter(filter, true));
    return async ({ client }) => {
      // Counted by the store, under the same filters as `tasks`.
      const counts = await client.countTasks(filter);
      const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
      return ok({ ...counts, total }, table([{ ...counts, total }], [...TASK_STATES, 'total']));
    };
  },

  queues() {
    return async ({ client }) => {
      const queues = await client.queues();
      const rows = queues.map((queue) => ({
        name: queue.name,
        paused: queue.paused,
        globalConcurrency: queue.globalConcurrency,
        ...queue.counts,
      }));
      const columns = ['name', 'paused', 'globalConcurrency', ...new Set(queues.flatMap((queue) => Object.keys(queue.counts)))];
      return ok(queues, table(rows, columns));
    };
  },
};

async function jobState({ client }: Connection, key: string, action: 'pause' | 'resume'): Promise<Outcome> {
  const changed =
    action === 'pause' ? await client.setJobState(key, 'scheduled', 'paused') : await client.setJobState(key, 'paused', 'scheduled');
  if (changed)
    return ok(
      { [action === 'pause' ? 'paused' : 'resumed']: true, key },
      `Job ${JSON.stringify(key)} is ${action === 'pause' ? 'paused' : 'scheduled'}.`,
    );
  const job = await client.getJob(key);
  if (job === undefined) throw new CliError(`No stored job with key ${JSON.stringify(key)}`, EXIT.notFound);
  throw new CliError(
    `Job ${JSON.stringify(key)} is ${job.state}: only a ${action === 'pause' ? 'scheduled' : 'paused'} job can be ${action}d`,
  );
}
