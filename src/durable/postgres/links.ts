// A task's links on PostgreSQL (durable/links.ts): its flow, the
// tasks it depends on and those that depend on it, in one statement through
// the taskheap_deps edges and their indexes (the primary key for a
// dependent's edges, taskheap_deps_dep for a dependency's).
import { toLink, type LinkRow, type LinkStore, type TaskLinks } from '../links.js';
import type { StoredState } from '../store.js';
import type { Connection } from './connection.js';
import { quote } from './migrations.js';

/** The links statement of a store whose tables live in `schema`: the task's row, or none. */
function linksStatement(schema: string | undefined): string {
  const t = (name: string) => (schema === undefined ? name : `${quote(schema)}.${name}`);
  const T = t('taskheap_tasks');
  const D = t('taskheap_deps');
  const link = `json_build_object('id', l.id::float8, 'name', l.name, 'state', l.state, 'on_failure', d.on_failure, 'counted', d.counted)`;
  return `SELECT s.state, s.flow_id::float8 AS flow_id,
      (SELECT COALESCE(json_agg(x.j ORDER BY x.ord), '[]') FROM (SELECT ${link} AS j, d.ord FROM ${D} AS d JOIN ${T} AS l ON l.id = d.dep_id
        WHERE d.task_id = s.id ORDER BY d.ord LIMIT $2) AS x) AS dependencies,
      (SELECT count(*)::int FROM ${D} WHERE task_id = s.id) AS dependency_count,
      (SELECT COALESCE(json_agg(x.j ORDER BY x.id), '[]') FROM (SELECT ${link} AS j, d.task_id AS id FROM ${D} AS d JOIN ${T} AS l ON l.id = d.task_id
        WHERE d.dep_id = s.id ORDER BY d.task_id LIMIT $2) AS x) AS dependents,
      (SELECT count(*)::int FROM ${D} WHERE dep_id = s.id) AS dependent_count
    FROM ${T} AS s WHERE s.id = $1`;
}

interface LinksRow {
  state: StoredState;
  flow_id: number | null;
  dependencies: LinkRow[];
  dependency_count: number;
  dependents: LinkRow[];
  dependent_count: number;
}

/** The link reads of a PostgreSQL store. */
export function postgresLinks(db: Connection, schema: string | undefined): LinkStore {
  const sql = linksStatement(schema);
  return {
    async getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined> {
      const row = (await db.query<LinksRow>(sql, [id, limit])).rows[0];
      if (row === undefined) return undefined;
      return {
        id,
        state: row.state,
        flowId: row.flow_id === null ? null : Number(row.flow_id),
        dependencies: row.dependencies.map(toLink),
        dependencyCount: Number(row.dependency_count),
        dependents: row.dependents.map(toLink),
        dependentCount: Number(row.dependent_count),
      };
    },
  };
}
