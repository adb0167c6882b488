// A task's links on SQLite (durable/links.ts): its flow, the tasks
// it depends on and those that depend on it, through the taskheap_deps
// edges and their indexes (the primary key for a dependent's edges,
// taskheap_deps_dep for a dependency's).
import { toLink, type LinkRow, type TaskLinks } from '../links.js';
import type { StoredState } from '../store.js';
import type { Prepare } from './claim.js';

const LINKS_SQL = {
  task: `SELECT state, flow_id FROM taskheap_tasks WHERE id = ?`,
  dependencies: `SELECT t.id, t.name, t.state, d.on_failure, d.counted FROM taskheap_deps AS d
    JOIN taskheap_tasks AS t ON t.id = d.dep_id WHERE d.task_id = ? ORDER BY d.ord LIMIT ?`,
  dependencyCount: `SELECT count(*) AS n FROM taskheap_deps WHERE task_id = ?`,
  dependents: `SELECT t.id, t.name, t.state, d.on_failure, d.counted FROM taskheap_deps AS d
    JOIN taskheap_tasks AS t ON t.id = d.task_id WHERE d.dep_id = ? ORDER BY d.task_id LIMIT ?`,
  dependentCount: `SELECT count(*) AS n FROM taskheap_deps WHERE dep_id = ?`,
} as const;

/** Task `id`'s links (at most `limit` of each kind), or undefined if there is no such task. */
export function getTaskLinks(prepare: Prepare, id: number, limit: number): TaskLinks | undefined {
  const task = prepare(LINKS_SQL.task).get(id) as { state: StoredState; flow_id: number | null } | undefined;
  if (task === undefined) return undefined;
  const count = (sql: string) => Number((prepare(sql).get(id) as { n: number }).n);
  return {
    id,
    state: task.state,
    flowId: task.flow_id === null ? null : Number(task.flow_id),
    dependencies: (prepare(LINKS_SQL.dependencies).all(id, limit) as LinkRow[]).map(toLink),
    dependencyCount: count(LINKS_SQL.dependencyCount),
    dependents: (prepare(LINKS_SQL.dependents).all(id, limit) as LinkRow[]).map(toLink),
    dependentCount: count(LINKS_SQL.dependentCount),
  };
}
