// Both SQL stores return rows of these shapes (snake_case columns, times as
// epoch ms). Drivers may hand numbers back as strings (pg's bigint), so every
// numeric column goes through Number().
import type { TaskLogLine } from '../core/journal.js';
import type { StoredOptions } from './options.js';
import { ruleFromJson } from './rule-json.js';
import type { Rule } from '../rules/rule.js';
import type { StepRecord } from '../core/steps.js';
import type {
  AttemptError,
  ClaimedTask,
  DueJob,
  EndedTasks,
  NewTask,
  StoredJob,
  StoredQueue,
  StoredState,
  StoredStep,
  StoredTask,
} from './store.js';

/** A `taskheap_tasks` row. */
export interface TaskRow {
  id: number | string;
  name: string;
  key: string | null;
  payload: string;
  state: StoredState;
  run_at: number | string;
  attempts: number | string;
  max_attempts: number | string;
  options: string;
  last_error: string | null;
  job_key: string | null;
  created_at: number | string;
  updated_at: number | string;
  /** Version 3: the return value and the attempts' errors, JSON. */
  result?: string | null;
  errors?: string | null;
  /** Version 4: the serial group and the priority. */
  serial?: string | null;
  priority?: number | string;
  /** Version 5: the named queue. */
  queue?: string;
  /** Version 6: the rate group, and when the task last started. */
  rate_key?: string | null;
  started_at?: number | string | null;
  /** Version 6 too: the latest ctx.progress() (JSON) and ctx.log() lines (a JSON array of { at, attempt, line }). */
  progress?: string | null;
  logs?: string | null;
  /** The claim's owner and lease end (epoch ms), while held. */
  locked_by?: string | null;
  locked_until?: number | string | null;
  /** Version 11: its step record (JSON, core/steps.ts). */
  steps?: string | null;
}

/** The `taskheap_jobs` columns a `StoredJob` shows. */
export interface JobRow {
  key: string;
  name: string;
  payload: string;
  state: StoredJob['state'];
  next_run_at: number | string | null;
  runs: number | string;
  created_at: number | string;
  updated_at: number | string;
  /** The rule as stored (rule-json.ts), where the statement reads it. */
  rule?: string;
}

/** Occurrences of one job in one state: what `jobStats` statements return. */
export interface JobStatsRow {
  job_key: string;
  state: StoredState;
  n: number | string;
  /** The latest due time among those not waiting, epoch ms. */
  last: number | string | null;
}

/** A `taskheap_jobs` row due for materialization. */
export interface DueJobRow {
  key: string;
  name: string;
  payload: string;
  rule: string;
  next_run_at: number | string;
  remaining: number | string | null;
  until: number | string | null;
  options: string;
}

/** The `taskheap_tasks` columns a claim returns. */
export interface ClaimRow {
  id: number | string;
  name: string;
  payload: string;
  attempts: number | string;
  max_attempts: number | string;
  run_at: number | string;
  options: string;
  priority: number | string;
  /** Whether the claim marked it started (false: prefetched); absent: started. */
  started?: boolean | number | null;
  /** Set on a task the claim failed for its lease expiries (see ClaimedTask): the expiries, counted. */
  failed_after?: number | string | null;
  /** Its step record, JSON (stores with steps; null: none yet). */
  steps?: string | null;
}

/** One queue and one state of its tasks (state null: it has none): what `listQueues` statements return. */
export interface QueueRow {
  name: string;
  paused: boolean | number;
  global_concurrency: number | string | null;
  rate_limit: number | string | null;
  rate_interval_ms: number | string | null;
  state: StoredState | null;
  n: number | string;
}

/** Queue rows (ordered by name) folded into one entry per queue. */
export function toQueues(rows: QueueRow[]): StoredQueue[] {
  const queues = new Map<string, StoredQueue>();
  for (const row of rows) {
    let queue = queues.get(row.name);
    if (queue === undefined) {
      queue = {
        name: row.name,
        paused: Boolean(row.paused),
        globalConcurrency: optional(row.global_concurrency),
        rate: row.rate_limit === null ? null : { limit: Number(row.rate_limit), interval: Number(row.rate_interval_ms) },
        counts: { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 },
      };
      queues.set(row.name, queue);
    }
    if (row.state !== null) queue.counts[row.state] = Number(row.n);
  }
  return [...queues.values()];
}

/** The rows of an endedTasks read: a task's columns, or none but the id asked about (gone). */
export function toEnded(rows: readonly (TaskRow & { asked: number | string })[]): EndedTasks {
  const ended: EndedTasks = { tasks: [], gone: [] };
  for (const row of rows) {
    if (row.id === null) ended.gone.push(Number(row.asked));
    else ended.tasks.push(toTask(row));
  }
  return ended;
}

function optional(value: number | string | null | undefined): number | null {
  return value === null || value === undefined ? null : Number(value);
}

export function toTask(row: TaskRow): StoredTask {
  const options = JSON.parse(row.options) as StoredOptions;
  return {
    id: Number(row.id),
    name: row.name,
    key: row.key,
    payload: JSON.parse(row.payload) as unknown,
    state: row.state,
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    runAt: new Date(Number(row.run_at)),
    lastError: row.last_error,
    jobKey: row.job_key,
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
    result: row.result === null || row.result === undefined ? undefined : (JSON.parse(row.result) as unknown),
    errors: row.errors === null || row.errors === undefined ? [] : toErrors(row.errors),
    // The serial column holds the concurrency group: `serial` is its limit-1 case.
    serial: options.concurrency === undefined ? (row.serial ?? null) : null,
    concurrency: options.concurrency ?? null,
    priority: Number(row.priority ?? 0),
    queue: row.queue ?? 'default',
    rate: options.rate ?? null,
    fair: options.fair ?? null,
    startedAt: row.started_at === null || row.started_at === undefined ? null : new Date(Number(row.started_at)),
    progress: row.progress === null || row.progress === undefined ? undefined : (JSON.parse(row.progress) as unknown),
    logs: row.logs === null || row.logs === undefined ? [] : toLogs(row.logs),
    steps: row.steps === null || row.steps === undefined ? [] : toSteps(row.steps),
    ...(typeof row.locked_by === 'string' && row.locked_until != null
      ? { lease: { owner: row.locked_by, until: new Date(Number(row.locked_until)) } }
      : {}),
  };
}

/** What a bulk insert reads back of each row: the rest is the task as given, or a column's default. */
export interface InsertedRow {
  id: number | string;
  run_at: number | string;
  created_at: number | string;
}

/** A task as a plain insert stored it: waiting, no attempt made, nothing else written yet. */
export function insertedTask(task: NewTask, row: InsertedRow): StoredTask {
  return toTask({
    id: row.id,
    name: task.name,
    key: task.key,
    payload: task.payload,
    state: 'waiting',
    run_at: row.run_at,
    attempts: 0,
    max_attempts: task.maxAttempts,
    options: task.options,
    last_error: null,
    job_key: null,
    created_at: row.created_at,
    updated_at: row.created_at,
    serial: task.serial ?? null,
    priority: task.priority ?? 0,
    queue: task.queue ?? 'default',
    rate_key: task.rateGroup ?? null,
  });
}

function toLogs(json: string): TaskLogLine[] {
  return (JSON.parse(json) as { at: number; attempt: number; line: string }[]).map((entry) => ({
    at: new Date(Number(entry.at)),
    attempt: Number(entry.attempt),
    line: entry.line,
  }));
}

/** Log lines as the stores keep them: JSON, times as epoch ms. */
export function logsJson(lines: readonly TaskLogLine[]): string {
  return JSON.stringify(lines.map((entry) => ({ at: entry.at.getTime(), attempt: entry.attempt, line: entry.line })));
}

/** Zero tasks in every state, for counts. */
function noCounts(): Record<StoredState, number> {
  return { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 };
}

/** `{ state, n }` rows (GROUP BY state) as counts of every state. */
export function toCounts(rows: readonly { state: StoredState; n: number | string }[]): Record<StoredState, number> {
  const counts = noCounts();
  for (const row of rows) counts[row.state] = Number(row.n);
  return counts;
}

export function toJob(row: JobRow, stats: readonly JobStatsRow[] = []): StoredJob {
  const next = optional(row.next_run_at);
  const counts: Record<StoredState, number> = { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 };
  let last: number | null = null;
  for (const stat of stats) {
    if (stat.job_key !== row.key) continue;
    counts[stat.state] = Number(stat.n);
    const at = optional(stat.last);
    if (at !== null && (last === null || at > last)) last = at;
  }
  return {
    key: row.key,
    name: row.name,
    payload: JSON.parse(row.payload) as unknown,
    state: row.state,
    nextRunAt: next === null ? null : new Date(next),
    runs: Number(row.runs),
    lastRunAt: last === null ? null : new Date(last),
    counts,
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
    ...storedRule(row.rule),
  };
}

/** The job's rule rebuilt, when the row has one this library reads (reading a job never fails on its rule). */
function storedRule(json: string | undefined): { rule?: Rule } {
  if (typeof json !== 'string') return {};
  try {
    return { rule: ruleFromJson(json) };
  } catch {
    return {};
  }
}

export function toDueJob(row: DueJobRow): DueJob {
  return {
    key: row.key,
    name: row.name,
    payload: row.payload,
    rule: row.rule,
    nextRunAt: Number(row.next_run_at),
    remaining: optional(row.remaining),
    until: optional(row.until),
    options: row.options,
  };
}

/** Claimed rows in claim order (priority, highest first; then due time, then id), as the runner expects. */
export function toClaims(rows: ClaimRow[]): ClaimedTask[] {
  return rows.map(toClaim).sort((a, b) => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id);
}

function toClaim(row: ClaimRow): ClaimedTask {
  const claim: ClaimedTask = {
    id: Number(row.id),
    name: row.name,
    payload: row.payload,
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    runAt: Number(row.run_at),
    options: row.options,
    priority: Number(row.priority),
    started: row.started === undefined || row.started === null ? true : Boolean(row.started),
  };
  if (row.failed_after !== undefined && row.failed_after !== null) claim.failedAfterExpiries = Number(row.failed_after);
  if (row.steps !== undefined && row.steps !== null) claim.steps = row.steps;
  return claim;
}

/** A task's step record (JSON of StepRecord[]) as `StoredTask.steps`. */
function toSteps(json: string): StoredStep[] {
  return (JSON.parse(json) as (StepRecord | null)[]).flatMap((record) => {
    if (record === null) return [];
    const { id, kind, startedAt, endedAt, until, result, failures = 0 } = record;
    const state = endedAt !== undefined ? 'done' : kind === 'step' ? 'failed' : kind === 'sleep' ? 'sleeping' : 'waiting';
    return [
      {
        name: id,
        kind,
        state,
        attempts: failures + (state === 'failed' ? 0 : 1),
        startedAt: new Date(startedAt),
        endedAt: endedAt === undefined ? null : new Date(endedAt),
        until: until === undefined ? null : new Date(until),
        resultSize: result === undefined ? 0 : JSON.stringify(result).length,
      } satisfies StoredStep,
    ];
  });
}

function toErrors(json: string): AttemptError[] {
  return (JSON.parse(json) as { attempt: number; at: number; error: string }[]).map((entry) => ({
    attempt: Number(entry.attempt),
    at: new Date(Number(entry.at)),
    error: entry.error,
  }));
}
