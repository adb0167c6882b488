// Flows behind `scheduler.flows`: with a store, the durable flows
// of durable/flows.ts, which every process sharing the store sees (the
// graph's checks and the births in durable/flow-graph.ts); without one, the
// in-memory flows of function tasks (flows/memory-graph.ts), one graph per
// scheduler, checked at the call (flows/memory-check.ts) and run by a graph
// whose code loads with the first flow: an import of taskheap that never
// adds one does not load it. One API for both. Without a store, `scheduler.cancelTask()`,
// `retryTask()` and `waitFor()` reach an in-memory flow's tasks through the
// functions at the end. See docs/flows.md.
import { ClosedError } from './core/errors.js';
import type { TaskLoop } from './core/loop.js';
import type { Task } from './core/task.js';
import type { FlowSpec } from './durable/flow-graph.js';
import type { StoredFlow, FlowStatus } from './durable/flows.js';
import type { DurableWorker } from './durable/worker.js';
import { MAX_LINKS } from './durable/links.js';
import { describe } from './core/validate.js';
import type { StoredTask, TaskLinks } from './durable/store.js';
import { checkMemoryFlow } from './flows/memory-check.js';
import type { MemoryFlowGraph } from './flows/memory-graph.js';
import { TaskNotFoundError } from './durable/errors.js';
import { notRetryable } from './durable/errors.js';
import { assertId } from './scheduler-options.js';

/** The in-memory flows of each scheduler without a store (made with its first flow). */
const graphs = new WeakMap<TaskLoop, MemoryFlowGraph>();
/** The in-memory flows' code, imported with the first flow of any scheduler. */
let graphCode: Promise<typeof import('./flows/memory-graph.js')> | undefined;

/**
 * Flows: tasks that wait for other tasks (`scheduler.flows`). With a store a
 * flow is stored whole in one transaction, or not at all; without one it is
 * a flow of functions in memory, checked whole before any of it exists. A
 * task of it runs once every task it depends on is done, and each
 * dependency's failure rule says what a failure does. See docs/flows.md.
 */
export class Flows {
  readonly #loop: TaskLoop;
  readonly #worker: DurableWorker | undefined;

  /** @internal */
  constructor(loop: TaskLoop, worker: DurableWorker | undefined) {
    this.#loop = loop;
    this.#worker = worker;
  }

  /**
   * Checks the whole flow (handlers, options, names in `after`, no cycle)
   * and adds it; a bad task rejects it all at the call and nothing is added.
   * With a store, handlers are names given to `define()` and the flow is
   * stored in one transaction (the caller's with `client`, PostgreSQL);
   * without one, handlers are functions `(ctx, payload)` and the flow lives
   * in this scheduler. Resolves with the flow's id and its tasks by name.
   * @example
   * const flow = await scheduler.flows.add({
   *   tasks: {
   *     render: { handler: 'render', payload: { report: 7 } },
   *     mail: { handler: 'mail', after: ['render'] },
   *   },
   * });
   * const mailed = await scheduler.waitFor(flow.tasks.mail.id);
   */
  add(spec: FlowSpec): Promise<StoredFlow> {
    if (this.#loop.closed) throw new ClosedError();
    if (this.#worker !== undefined) return this.#worker.client.flow(spec);
    const checked = checkMemoryFlow(spec, this.#loop);
    const graph = graphs.get(this.#loop);
    if (graph !== undefined) return Promise.resolve(graph.add(checked));
    // This scheduler's first flow: no task yet to depend on by id. Flows added before the code
    // has loaded are added in the order of their calls (one promise).
    const unknown = checked.flow.external[0];
    if (unknown !== undefined) throw new TaskNotFoundError(unknown);
    const loop = this.#loop;
    graphCode ??= import('./flows/memory-graph.js');
    return graphCode.then(({ MemoryFlowGraph }) => {
      let made = graphs.get(loop);
      if (made === undefined) graphs.set(loop, (made = new MemoryFlowGraph(loop)));
      return made.add(checked);
    });
  }

  /**
   * A flow by id (`flow.id`, its first task's id): its tasks, their counts
   * by state, and for each task what it still waits for; undefined if there
   * is no task of that flow (in memory: a finished flow is kept until 1,000
   * more have finished).
   * @example
   * const { counts, done, tasks } = (await scheduler.flows.get(flow.id))!;
   */
  get(id: number): Promise<FlowStatus | undefined> {
    assertId(id);
    if (this.#worker === undefined) return Promise.resolve(graphs.get(this.#loop)?.get(id));
    return this.#worker.client.getFlow(id);
  }

  /**
   * A task's place in the flows: the flow it was added with (`flowId`, for
   * `get()`), the tasks it depends on and the tasks that depend on it, each
   * with its state now, the rule of the edge and whether the dependent
   * counted it done; `limit` of each at most, with their counts in all.
   * Undefined if there is no such task. Any stored task has links: one added
   * on its own has none, or the dependents that name it in their `after`.
   * Without a store, `id` is a flow task's (from `add()`), and a finished
   * flow's tasks are kept as `get()` keeps them.
   * @param limit dependencies and dependents listed at most, 1 to 1,000. @default 100
   * @example
   * const links = await scheduler.flows.links(task.id);
   * for (const dep of links?.dependencies ?? []) console.log(dep.id, dep.name, dep.state, dep.onFailure);
   */
  links(id: number, limit = 100): Promise<TaskLinks | undefined> {
    assertId(id);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LINKS)
      throw new RangeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LINKS}, got ${describe(limit)}`);
    if (this.#worker === undefined) return Promise.resolve(graphs.get(this.#loop)?.links(id, limit));
    return this.#worker.client.getTaskLinks(id, limit);
  }

  /**
   * @internal the dashboard's task detail without a store: an in-memory
   * flow's task by id (its links: `links()`), or undefined if there is none
   * (never added, or a finished flow forgotten).
   */
  memoryTask(id: number): StoredTask | undefined {
    return graphs.get(this.#loop)?.getTask(id);
  }

  /**
   * @internal the dashboard: in-memory task `id` (a `Task`'s id) while it
   * waits or runs, with the id of the task it runs (`runsTask()`), if any;
   * undefined once it has finished (nothing keeps it) or for no such task.
   */
  memoryHeapTask(id: number): { task: Task; runs: number | undefined } | undefined {
    let found: Task | undefined;
    const match = (task: Task) => {
      if (task.id === id) found = task;
    };
    this.#loop.forEachWaiting(match);
    if (found === undefined) this.#loop.forEachRunning(match);
    return found === undefined ? undefined : { task: found, runs: this.runsTask(found) };
  }

  /**
   * @internal the dashboard's waiting tasks: the id of the task a task of
   * the loop runs (the stored task it was claimed for, with a store; the
   * in-memory flow's task, without one), or undefined for a task of its own.
   */
  runsTask(task: Task): number | undefined {
    return this.#worker === undefined ? graphs.get(this.#loop)?.flowTaskOf(task) : this.#worker.claimedId(task);
  }
}

/**
 * `scheduler.cancelTask(id)` without a store: cancels an in-memory flow's
 * task (`blocked`, `waiting` or `running`; a running one sees its
 * `ctx.signal` abort); the tasks that depend on it follow their rule. False
 * if it was already final or there is none.
 * @internal
 */
export function cancelFlowTask(loop: TaskLoop, id: number): Promise<boolean> {
  return Promise.resolve(graphs.get(loop)?.cancel(id) ?? false);
}

/**
 * `scheduler.retryTask(id)` without a store: runs a failed, timed-out or
 * cancelled task of an in-memory flow again, with the failed tasks above it
 * that stopped it, and revives what their failure stopped.
 * @internal
 */
export function retryFlowTask(loop: TaskLoop, id: number): Promise<StoredTask> {
  const graph = graphs.get(loop);
  const task = graph?.retry(id);
  return task === undefined ? Promise.reject(notRetryable(id, graph?.getTask(id))) : Promise.resolve(task);
}

/**
 * `scheduler.send(id, ...)` without a store: to a task of an in-memory flow
 * (kept for it while it is blocked); false if it is final or there is none.
 * @internal
 */
export function sendFlowTask(loop: TaskLoop, id: number, topic: string, message: unknown): Promise<boolean> {
  return Promise.resolve(graphs.get(loop)?.send(id, topic, message) ?? false);
}

/**
 * `scheduler.waitFor(id)` without a store: an in-memory flow's task once it
 * is final (at once if it is); `TaskNotFoundError` for an unknown id.
 * @internal
 */
export function waitForFlowTask(loop: TaskLoop, id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
  const graph = graphs.get(loop);
  return graph === undefined ? Promise.reject(new TaskNotFoundError(id)) : graph.waitFor(id, signal, timeout);
}
