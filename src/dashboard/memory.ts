// The dashboard's task detail in memory: an in-memory flow's task
// (a scheduler without a store; `#task-<id>`, the ids of `scheduler.flows`)
// as the stored detail shows one, with its dependencies and dependents, and
// an in-memory `Task` (`#memory-task-<id>`, the Waiting tasks table's rows)
// while it waits or runs, with the task it runs (an in-memory flow's, or a
// claimed stored one's). The scheduler hands them over by internal calls of
// `scheduler.flows`; a payload or result handed over as given (not through
// JSON) is shown as JSON when it is JSON and not too large, and said so
// otherwise, so no value can break the page's answer.
import type { TaskLogLine } from '../core/journal.js';
import { Run, type TaskState } from '../core/task.js';
import { describe } from '../core/validate.js';
import type { StoredTask } from '../durable/store.js';
import type { Scheduler } from '../scheduler.js';

/** The most characters of a value's JSON the detail shows. */
const JSON_SHOWN = 64 * 1024;

/** `value` when it is JSON of at most JSON_SHOWN characters; otherwise a string saying what it is. */
function jsonSafe(value: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    return `(not shown, not JSON: ${error instanceof Error ? error.message : describe(error)})`;
  }
  if (text === undefined) return undefined;
  return text.length <= JSON_SHOWN ? value : `(not shown: its JSON is ${text.length} characters, over ${JSON_SHOWN})`;
}

/** An in-memory flow's task as `api/task` answers it (a scheduler without a store); undefined if there is none. */
export function memoryFlowTask(scheduler: Scheduler, id: number): StoredTask | undefined {
  const task = scheduler.flows.memoryTask(id);
  if (task === undefined) return task;
  const shown: StoredTask = { ...task, payload: jsonSafe(task.payload), result: jsonSafe(task.result) };
  if ('progress' in task) shown.progress = jsonSafe(task.progress);
  return shown;
}

/** An in-memory task (a `Task`) as `api/memory-task` answers it. */
export interface MemoryTaskView {
  id: number;
  name: string | null;
  /** `waiting` (due later, due and waiting for a worker, or waiting for a retry) or `running`. */
  state: TaskState;
  /** The id of the task it runs (`#task-<id>`): a stored task it was claimed for, an in-memory flow's task; or null. */
  runsTask: number | null;
  /** Its dedupe key, or null. */
  key: string | null;
  queue: string;
  priority: number;
  /** Its serial group, or null. */
  serial: string | null;
  /** Runs started so far. */
  attempts: number;
  /** Its retry policy's attempts (1 without one). */
  maxAttempts: number;
  /** When it is (or was last) due, epoch ms. */
  runAt: number;
  /** When its last run started, epoch ms, or null. */
  startedAt: number | null;
  /** Its timeout, ms, or null for none. */
  timeout: number | null;
  progress: unknown;
  logs: TaskLogLine[];
}

/** In-memory task `id` while it waits or runs; undefined once it has finished (nothing keeps it) or for no such task. */
export function memoryTaskView(scheduler: Scheduler, id: number): MemoryTaskView | undefined {
  const found = scheduler.flows.memoryHeapTask(id);
  if (found === undefined) return undefined;
  const { task } = found;
  const settings = task._settings;
  const run = task._run;
  return {
    id: task.id,
    name: task.name ?? null,
    state: task.state,
    runsTask: found.runs ?? null,
    key: settings.limits?.dedupe?.key ?? null,
    queue: settings.limits?.queue ?? 'default',
    priority: settings.limits?.priority ?? 0,
    serial: settings.limits?.serial ?? null,
    attempts: task.attempts,
    maxAttempts: settings.retry?.attempts ?? 1,
    runAt: task.runAt.getTime(),
    startedAt: run instanceof Run ? run.startedAtMs : null,
    timeout: settings.timeout === Infinity ? null : settings.timeout,
    progress: jsonSafe(task.progress),
    logs: task.logs,
  };
}
