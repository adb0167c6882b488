// Flows on SQLite (docs/flows.md): adding a whole flow in the caller's
// transaction, reading a flow and a task's dependencies, and which
// dependents an outcome made due (the store wakes its claimer with it).
// What happens when a dependency ends or is retried is the triggers of
// migrations.ts (version 6), fired by whatever statement ends it; a retry
// with the failed tasks above it is settle.ts's requeue.
import { birth, countedAtBirth, toDependency, type DependencyRow } from '../flow-graph.js';
import { TaskNotFoundError } from '../errors.js';
import type { DependencyInfo, NewFlow, OnFailure, StoredFlowGraph, StoredState, StoredTask } from '../store.js';
import { toTask, type TaskRow } from '../rows.js';
import type { Prepare } from './driver.js';
import { taskRow } from './add.js';
import { upsertLimits } from './limits.js';
import { getTask } from './inspect.js';

const FLOW_SQL = {
  /** Inserted blocked, without dependents: no trigger fires until the flow is whole. */
  insert: `INSERT INTO taskheap_tasks (name, payload, run_at, max_attempts, options, serial, priority, rate_key, queue, fair_group, fair_weight,
      created_at, updated_at, state)
    VALUES (@name, @payload, @runAt, @maxAttempts, @options, @serial, @priority, @rateGroup, @queue, @fairGroup, @fairWeight, @now, @at, 'blocked')`,
  /** Its birth (flow-graph.ts); has_dependents is still 0, so the triggers do not fire. */
  born: `UPDATE taskheap_tasks SET state = @state, pending_deps = @pending, failed_dep = @failedDep, last_error = @error, flow_id = @flow
    WHERE id = @id`,
  /** Not a change of state: no trigger fires. */
  hasDependents: `UPDATE taskheap_tasks SET has_dependents = 1 WHERE id = ?`,
  edge: `INSERT INTO taskheap_deps (task_id, dep_id, ord, on_failure, counted) VALUES (?, ?, ?, ?, ?)`,
  stateOf: `SELECT state FROM taskheap_tasks WHERE id = ?`,
  flowTasks: `SELECT * FROM taskheap_tasks WHERE flow_id = ? ORDER BY id`,
  flowEdges: `SELECT d.task_id AS task, d.dep_id AS dep, d.on_failure, d.counted, f.state AS dep_state FROM taskheap_deps AS d
    LEFT JOIN taskheap_tasks AS f ON f.id = d.dep_id WHERE d.task_id IN (SELECT id FROM taskheap_tasks WHERE flow_id = ?) ORDER BY d.task_id, d.ord`,
  dependencies: `SELECT t.id, t.name, t.state, t.result, t.last_error, d.on_failure FROM taskheap_deps AS d
    JOIN taskheap_tasks AS t ON t.id = d.dep_id WHERE d.task_id = ? ORDER BY d.ord`,
  /** Whether any of the tasks ? (a JSON array of ids) has dependents. */
  anyDependents: `SELECT EXISTS (SELECT 1 FROM taskheap_tasks WHERE id IN (SELECT value FROM json_each(?)) AND has_dependents) AS any`,
  any: `SELECT EXISTS (SELECT 1 FROM taskheap_deps) AS any`,
} as const;

/** Adds a flow, in the caller's transaction (see FlowStore.addFlow). `at`: this machine's clock (updated_at); `now`: the scheduler's. */
export function addFlow(prepare: Prepare, flow: NewFlow, at: number, now: number): StoredTask[] {
  const external = new Map<number, StoredState>();
  for (const id of flow.external) {
    const row = prepare(FLOW_SQL.stateOf).get(id) as { state: StoredState } | undefined;
    if (row === undefined) throw new TaskNotFoundError(id);
    external.set(id, row.state);
    prepare(FLOW_SQL.hasDependents).run(id);
  }
  const ids = flow.tasks.map((task) => {
    const row = { ...taskRow(task, task.runAt, at), now };
    const id = Number(prepare(FLOW_SQL.insert).run(row).lastInsertRowid);
    upsertLimits(prepare, task.options, task.serial, task.rateGroup);
    return id;
  });
  const births = birth(flow, external, ids);
  const depId = (dep: { index: number } | { id: number }) => ('index' in dep ? ids[dep.index]! : dep.id);
  births.forEach((b, i) => {
    prepare(FLOW_SQL.born).run({
      id: ids[i]!,
      state: b.state,
      pending: b.pending,
      failedDep: b.sunk === undefined ? null : depId(b.sunk.dep),
      error: b.sunk?.error ?? null,
      flow: ids[0]!,
    });
  });
  births.forEach((b, i) => b.hasDependents && prepare(FLOW_SQL.hasDependents).run(ids[i]!));
  for (const edge of flow.edges) {
    prepare(FLOW_SQL.edge).run(ids[edge.task]!, depId(edge.dep), edge.ord, edge.onFailure, countedAtBirth(edge, births, external) ? 1 : 0);
  }
  return ids.map((id) => getTask(prepare, id)!);
}

/** Flow `id`'s tasks and edges, or undefined. */
export function getFlow(prepare: Prepare, id: number): StoredFlowGraph | undefined {
  const tasks = (prepare(FLOW_SQL.flowTasks).all(id) as TaskRow[]).map(toTask);
  if (tasks.length === 0) return undefined;
  const rows = prepare(FLOW_SQL.flowEdges).all(id) as {
    task: number;
    dep: number;
    on_failure: OnFailure;
    counted: number;
    dep_state: StoredState | null;
  }[];
  const edges = rows.map((e) => ({
    task: Number(e.task),
    dep: Number(e.dep),
    onFailure: e.on_failure,
    counted: Number(e.counted) === 1,
    depState: e.dep_state,
  }));
  return { tasks, edges };
}

/** Task `id`'s dependencies, in the order given. */
export function getDependencies(prepare: Prepare, id: number): DependencyInfo[] {
  return (prepare(FLOW_SQL.dependencies).all(id) as DependencyRow[]).map(toDependency);
}

/**
 * Whether any of `ids` has dependents: its outcome may have made some due,
 * or sunk some (and their dependents, by the 'continue' rule, due in turn).
 */
export function hadDependents(prepare: Prepare, ids: readonly number[]): boolean {
  return Number((prepare(FLOW_SQL.anyDependents).get(JSON.stringify(ids)) as { any: number }).any) === 1;
}

/** Whether the file holds any dependency (a store without flows skips wokenBy). */
export function anyDependency(prepare: Prepare): boolean {
  return Number((prepare(FLOW_SQL.any).get() as { any: number }).any) === 1;
}
