// Read-only views of the waiting tasks (state `waiting`), the heap's and the
// gate's held ones together: `waitingTasks()` and the per-name counts of `metrics()`.
// Introspection, off the hot path: a copy, a sort, or one pass over both.
import type { Gate } from './gate.js';
import { byDueTime } from './held-queue.js';
import type { Task } from './task.js';
import type { TaskQueue } from './task-queue.js';

/** How many tasks of one name wait, and how many of them are due. @internal */
export interface WaitingCounts {
  waiting: number;
  due: number;
}

/** Waiting tasks, earliest due first: all of them, or the `limit` earliest; with `keyPrefix`, those whose key starts with it. @internal */
export function listWaiting(queue: TaskQueue, gate: Gate | undefined, limit: number, keyPrefix?: string): Task[] {
  if (keyPrefix !== undefined) return listByKey(queue, gate, limit, keyPrefix);
  const tasks = limit >= queue.size ? queue.toSortedArray() : queue.earliest(limit);
  if (gate === undefined || gate.size === 0) return tasks;
  // Held tasks are all due, so they come before most of the heap's; merged by a sort (introspection, not the hot path).
  gate.forEach((task) => tasks.push(task));
  tasks.sort(byDueTime);
  if (tasks.length > limit) tasks.length = limit;
  return tasks;
}

/** The waiting tasks whose key starts with `prefix`, earliest due first, at most `limit`: one pass over every waiting task. */
function listByKey(queue: TaskQueue, gate: Gate | undefined, limit: number, prefix: string): Task[] {
  const tasks: Task[] = [];
  const match = (task: Task): void => {
    if (task.key?.startsWith(prefix)) tasks.push(task);
  };
  queue.forEach(match);
  gate?.forEach(match);
  tasks.sort(byDueTime);
  if (tasks.length > limit) tasks.length = limit;
  return tasks;
}

/** Waiting counts per task name ('' for unnamed), and of them the due ones, in one pass; held tasks are all due. @internal */
export function countByName(queue: TaskQueue, gate: Gate | undefined, now: number): Map<string, WaitingCounts> {
  const counts = new Map<string, WaitingCounts>();
  const count = (task: Task, due: boolean): void => {
    const name = task._settings.name ?? '';
    let entry = counts.get(name);
    if (entry === undefined) counts.set(name, (entry = { waiting: 0, due: 0 }));
    entry.waiting++;
    if (due) entry.due++;
  };
  queue.forEach((task) => count(task, task._time <= now));
  gate?.forEach((task) => count(task, true));
  return counts;
}
