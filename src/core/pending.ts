// Read-only views of the pending tasks, the heap's and the flow's held ones
// together: `pendingTasks()` and the per-name counts of `metrics()`.
// Introspection, off the hot path: a copy, a sort, or one pass over both.
import type { Flow } from './flow.js';
import { byDueTime } from './held-queue.js';
import type { Task } from './task.js';
import type { TaskQueue } from './task-queue.js';

/** Pending tasks, earliest due first: all of them, or the `limit` earliest. @internal */
export function listPending(queue: TaskQueue, flow: Flow | undefined, limit: number): Task[] {
  const tasks = limit >= queue.size ? queue.toSortedArray() : queue.earliest(limit);
  if (flow === undefined || flow.size === 0) return tasks;
  // Held tasks are all due, so they come before most of the heap's; merged by a sort (introspection, not the hot path).
  flow.forEach((task) => tasks.push(task));
  tasks.sort(byDueTime);
  if (tasks.length > limit) tasks.length = limit;
  return tasks;
}

/** Pending and due-and-waiting counts per task name ('' for unnamed), in one pass; held tasks are all due. @internal */
export function countByName(queue: TaskQueue, flow: Flow | undefined, now: number): Map<string, { pending: number; waiting: number }> {
  const counts = new Map<string, { pending: number; waiting: number }>();
  const count = (task: Task, due: boolean): void => {
    const name = task._settings.name ?? '';
    let entry = counts.get(name);
    if (entry === undefined) counts.set(name, (entry = { pending: 0, waiting: 0 }));
    entry.pending++;
    if (due) entry.waiting++;
  };
  queue.forEach((task) => count(task, task._time <= now));
  flow?.forEach((task) => count(task, true));
  return counts;
}
