// Flows with a store (docs/flows.md): `scheduler.flows.add()` checks a whole flow
// (handlers, options, the graph) before anything is written and hands it to
// the store in one transaction; `scheduler.flows.get()` reads it back as a
// status: counts per state and, for each blocked task, what it waits for.
import { describe, toEpoch } from '../core/validate.js';
import { assertFairShares, toNewTask } from './enqueue.js';
import { FlowError } from './errors.js';
import { assertFlowTaskKeys, toNewFlow, type FlowSpec, type FlowTask } from './flow-graph.js';
import type { Handlers } from './handlers.js';
import {
  FINAL_STATES,
  hasFlows,
  type FlowStore,
  type OnFailure,
  type Store,
  type StoredFlowGraph,
  type StoredState,
  type StoredTask,
} from './store.js';
import { assertStoredTime } from './validate.js';

/** A stored flow: its id (the id of its first task) and its tasks by the names the flow gave them. */
export interface StoredFlow {
  /** The flow's id: its first task's. */
  readonly id: number;
  /** The stored tasks, by name, as they were stored (a task is `blocked` until its dependencies are done). */
  readonly tasks: Readonly<Record<string, StoredTask>>;
}

/** One task of a flow as `getFlow()` shows it. */
export interface FlowTaskStatus {
  /** The stored task. */
  readonly task: StoredTask;
  /** Its dependencies: each id with its rule, its state now, and whether it counted it done. */
  readonly dependencies: readonly FlowDependencyStatus[];
  /**
   * Why it has not started, if it has not: the ids of the dependencies it still
   * waits for (a `blocked` task always has some, each `waiting`, `running` or
   * `blocked` itself), or none when it is `waiting` for a worker or its time.
   */
  readonly waitingFor: readonly number[];
}

/** One dependency of a flow's task, as `flows.get()` shows it. */
export interface FlowDependencyStatus {
  /** The dependency's id. */
  readonly id: number;
  /** The dependent's rule for it. */
  readonly onFailure: OnFailure;
  /** Its state now; 'gone' if retention deleted it. */
  readonly state: StoredState | 'gone';
  /** Whether the dependent counted it done (it succeeded, or failed under a rule that lets the dependent run). */
  readonly done: boolean;
}

/** What `scheduler.flows.get(id)` returns. */
export interface FlowStatus {
  /** The flow's id. */
  readonly id: number;
  /** Its tasks by state. */
  readonly counts: Readonly<Record<StoredState, number>>;
  /** Whether every task is in a final state. */
  readonly done: boolean;
  /** Its tasks in the order they were given. */
  readonly tasks: readonly FlowTaskStatus[];
}

/** Checks a flow at the call (nothing is written on error) and stores it. @internal */
export function addFlow(
  store: Store,
  handlers: Handlers,
  ready: () => Promise<void>,
  now: () => number,
  wake: (at: number) => void,
  spec: FlowSpec,
): Promise<StoredFlow> {
  const flowStore = requireFlows(store);
  const at = now();
  const flow = toNewFlow(spec, (_name, task: FlowTask) => {
    assertFlowTaskKeys(task);
    if (typeof task.handler !== 'string')
      throw new TypeError(
        `Expected \`handler\` to be a handler name given to define() (functions are for a scheduler without a store), got ${describe(task.handler)}`,
      );
    handlers.assertSchedulable(task.handler);
    const runAt = task.when === undefined ? at : toEpoch(task.when);
    assertStoredTime(runAt, 'when');
    const { handler: _h, when: _w, after: _a, ...options } = task;
    const row = toNewTask(task.handler, runAt, options, handlers.queueOf(task.handler));
    assertFairShares(store, row.fairGroup);
    return row;
  });
  const client = spec.client;
  if (
    client !== undefined &&
    (typeof client !== 'object' || client === null || typeof (client as { query?: unknown }).query !== 'function')
  )
    throw new TypeError(`Expected \`client\` to be a pg Client or PoolClient inside your transaction, got ${describe(client)}`);
  const names = Object.keys(spec.tasks);
  return ready()
    .then(() => flowStore.addFlow(flow, client, now()))
    .then((rows) => {
      const due = rows.filter((row) => row.state === 'waiting').map((row) => row.runAt.getTime());
      if (due.length > 0) wake(Math.min(...due));
      return { id: rows[0]!.id, tasks: Object.fromEntries(names.map((name, i) => [name, rows[i]!])) };
    });
}

/** Flow `id`'s status, or undefined if the store has no task of that flow. @internal */
export async function flowStatus(store: Store, id: number): Promise<FlowStatus | undefined> {
  const stored = await requireFlows(store).getFlow(id);
  return stored === undefined ? undefined : toFlowStatus(id, stored);
}

/** A flow's tasks and edges as its status (shared by the stores and in-memory flows). @internal */
export function toFlowStatus(id: number, stored: StoredFlowGraph): FlowStatus {
  const counts: Record<StoredState, number> = { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 };
  for (const task of stored.tasks) counts[task.state]++;
  // Each task's edges, found once (a filter per task would be quadratic: a fan-in of 10,000 took seconds).
  const edgesOf = new Map<number, FlowDependencyStatus[]>();
  for (const edge of stored.edges) {
    let list = edgesOf.get(edge.task);
    if (list === undefined) edgesOf.set(edge.task, (list = []));
    list.push({ id: edge.dep, onFailure: edge.onFailure, state: edge.depState ?? 'gone', done: edge.counted });
  }
  const tasks = stored.tasks.map((task): FlowTaskStatus => {
    const dependencies = edgesOf.get(task.id) ?? [];
    const waitingFor =
      task.state === 'blocked'
        ? dependencies.filter((dep) => !dep.done && !FINAL_STATES.has(dep.state as StoredState)).map((dep) => dep.id)
        : [];
    return { task, dependencies, waitingFor };
  });
  return { id, counts, done: stored.tasks.every((task) => FINAL_STATES.has(task.state)), tasks };
}

function requireFlows(store: Store): FlowStore {
  if (!hasFlows(store)) throw new FlowError('This store has no flows (sqliteStore() and postgresStore() have them)');
  return store;
}
