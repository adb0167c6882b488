// The dashboard's reads beside a task's detail and a stored job's row: a
// task's dependencies and dependents with the status of its flow (docs/flows.md:
// counts per state, what is blocked on what; a stored task's, or without a
// store an in-memory flow's task's), and a recurring job's recent
// runs, newest first, paged (docs/operations-console.md). Each answer is bounded, whatever the
// size of the flow or the job's history.
import { FINAL_STATES, type StoredState, type StoredTask, type TaskLink, type TaskLinks } from '../durable/store.js';
import type { DurableClient } from '../durable/client.js';
import type { Scheduler } from '../scheduler.js';
import { parseCursor } from './console.js';

/** Dependencies and dependents listed at most in a task's detail. */
const LINKS_SHOWN = 100;
/** Blocked tasks of a flow listed with what they wait for, at most. */
const BLOCKED_SHOWN = 50;
/** The ids a blocked task waits for, listed at most. */
const WAITS_SHOWN = 10;

/** A blocked task of a flow and what it waits for. */
interface BlockedView {
  id: number;
  name: string;
  /** The unfinished dependencies it waits for (at most WAITS_SHOWN). */
  waitingFor: number[];
  /** How many it waits for in all. */
  waitingCount: number;
}

/** A flow's status as the task detail shows it. */
interface FlowView {
  id: number;
  /** Its tasks in all. */
  total: number;
  counts: Record<StoredState, number>;
  done: boolean;
  /** Its blocked tasks (at most BLOCKED_SHOWN) with what each waits for. */
  blocked: BlockedView[];
  /** Blocked tasks in all. */
  blockedCount: number;
}

/** What `api/links` answers. */
export interface LinksView {
  dependencies: TaskLink[];
  dependencyCount: number;
  dependents: TaskLink[];
  dependentCount: number;
  flow: FlowView | null;
}

/**
 * Task `id`'s links and its flow's status (a stored task, or without a store
 * an in-memory flow's task); undefined if there is no such task, null if the
 * store has no flows.
 * @internal
 */
export async function linksView(
  scheduler: Scheduler,
  client: DurableClient | undefined,
  id: number,
): Promise<LinksView | undefined | null> {
  let links: TaskLinks | undefined;
  try {
    links = await (client?.getTaskLinks(id, LINKS_SHOWN) ?? scheduler.flows.links(id, LINKS_SHOWN));
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_FLOW') return null;
    throw error;
  }
  if (links === undefined) return undefined;
  const status = links.flowId === null ? undefined : await (client?.getFlow(links.flowId) ?? scheduler.flows.get(links.flowId));
  let flow: FlowView | null = null;
  if (status !== undefined) {
    const blocked = status.tasks.filter((task) => task.task.state === 'blocked');
    flow = {
      id: status.id,
      total: status.tasks.length,
      counts: { ...status.counts },
      done: status.done,
      blocked: blocked.slice(0, BLOCKED_SHOWN).map((task) => ({
        id: task.task.id,
        name: task.task.name,
        waitingFor: task.waitingFor.slice(0, WAITS_SHOWN),
        waitingCount: task.waitingFor.length,
      })),
      blockedCount: blocked.length,
    };
  }
  return {
    dependencies: [...links.dependencies],
    dependencyCount: links.dependencyCount,
    dependents: [...links.dependents],
    dependentCount: links.dependentCount,
    flow,
  };
}

/** One run of a recurring job as the page shows it. */
interface RunView {
  id: number;
  state: StoredState;
  /** When it was due, epoch ms. */
  runAt: number;
  /** When it last started, epoch ms, or null if it never has. */
  startedAt: number | null;
  /** From its last start to its outcome (finished runs), ms, or null. */
  duration: number | null;
  attempts: number;
  /** The first line of its last error, or null. */
  error: string | null;
}

function runView(task: StoredTask): RunView {
  const started = task.startedAt?.getTime() ?? null;
  return {
    id: task.id,
    state: task.state,
    runAt: task.runAt.getTime(),
    startedAt: started,
    duration: started !== null && FINAL_STATES.has(task.state) ? Math.max(0, task.updatedAt.getTime() - started) : null,
    attempts: task.attempts,
    error: task.lastError === null ? null : (task.lastError.split('\n')[0] ?? null),
  };
}

/**
 * A page of recurring job `key`'s runs (its stored occurrences), newest due
 * first; `after` is the `next` cursor of the previous page. Throws a
 * TypeError for a bad cursor.
 * @internal
 */
export async function jobRuns(client: DurableClient, key: string, after: string | null, limit: number) {
  const cursor = parseCursor(after);
  const tasks = await client.listTasks({ jobKey: key, order: 'desc', limit, ...(cursor === undefined ? {} : { after: cursor }) });
  const last = tasks.at(-1);
  return {
    key,
    runs: tasks.map(runView),
    next: tasks.length === limit && last !== undefined ? `${last.runAt.getTime()}:${last.id}` : null,
  };
}
