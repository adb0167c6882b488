// Flows on PostgreSQL (docs/flows.md): adding a whole flow in one
// transaction (the caller's with `client`), reading a flow and a task's
// dependencies. What happens when a dependency ends (or is retried) is the
// trigger of migrations.ts (version 6), fired by whatever statement ends it;
// a retry with the failed tasks above it is settle.ts's requeue.
import { birth, countedAtBirth, toDependency, type DependencyRow } from '../flow-graph.js';
import type { DependencyInfo, NewFlow, OnFailure, StoredEdge, StoredFlowGraph, StoredState, StoredTask } from '../store.js';
import { TaskNotFoundError } from '../errors.js';
import { toTask, type TaskRow } from '../rows.js';
import { applyLimits, upsertLimits, type LimitStatements } from './limits.js';
import type { Connection } from './connection.js';
import { WAKE } from './listener.js';
import { tables, taskColumns, ts } from './tables.js';

/** The flow statements of a store whose tables live in `schema` (undefined: the search_path). */
export function flowStatements(schema: string | undefined) {
  const { T, D, L } = tables(schema);
  return {
    /**
     * The stored tasks a flow depends on, as the statement sees them: their
     * states decide the births. Locked FOR KEY SHARE only, until the commit:
     * no delete (retention, deleteTasks) takes them from under the flow's
     * edges, while a worker running one of them writes it as before (its
     * updates change no key, so they never wait for this lock). An outcome that
     * slips between this read and the commit is applied to the new edges at
     * the commit, by the deferred trigger of their \`external\` mark
     * (migrations.ts, versions 7 and 13), which also marks the task as having
     * dependents.
     */
    readExternal: `SELECT id::float8 AS id, state FROM ${T} WHERE id = ANY($1::bigint[]) FOR KEY SHARE`,
    /** $2 ids of the tasks' sequence, in order: known before the insert, the edges can name them. */
    flowIds: `SELECT nextval(pg_get_serial_sequence($1, 'id'))::float8 AS id FROM generate_series(1, $2::int) ORDER BY 1`,
    /** Every task and edge of a flow in one statement; one wake for the earliest task born waiting. */
    insertFlow: `WITH saved AS (
        INSERT INTO ${T} AS t (id, name, payload, run_at, max_attempts, options, serial, priority, queue, rate_key,
          state, pending_deps, has_dependents, failed_dep, last_error, flow_id)
        OVERRIDING SYSTEM VALUE
        SELECT u.id, u.name, u.payload, ${ts('u.at')}, u.max_attempts, u.options, u.serial, u.priority, u.queue, u.rate_key,
          u.state, u.pending, u.has_dependents, u.failed_dep, u.error, $16
        FROM unnest($1::bigint[], $2::text[], $3::text[], $4::float8[], $5::int[], $6::text[], $7::text[], $8::int[], $9::text[], $10::text[],
          $11::text[], $12::int[], $13::boolean[], $14::bigint[], $15::text[])
          AS u(id, name, payload, at, max_attempts, options, serial, priority, queue, rate_key, state, pending, has_dependents, failed_dep, error)
        RETURNING ${taskColumns('t')}),
      edges AS (INSERT INTO ${D} (task_id, dep_id, ord, on_failure, counted, external)
        SELECT e.*, NOT (e.dep_id = ANY($1::bigint[])) FROM unnest($17::bigint[], $18::bigint[], $19::int[], $20::text[], $21::boolean[])
          AS e(task_id, dep_id, ord, on_failure, counted)),
      ${upsertLimits(L, 'limits', 'saved')},
      wake AS (SELECT pg_notify('${WAKE}', $22 || MIN(run_at)::bigint::text) FROM saved WHERE state = 'waiting' HAVING count(*) > 0)
      SELECT saved.* FROM saved LEFT JOIN wake ON true ORDER BY saved.id`,
    flowTasks: `SELECT ${taskColumns('t')} FROM ${T} AS t WHERE t.flow_id = $1 ORDER BY t.id`,
    flowEdges: `SELECT d.task_id::float8 AS task, d.dep_id::float8 AS dep, d.on_failure, d.counted, f.state AS dep_state FROM ${D} AS d
      LEFT JOIN ${T} AS f ON f.id = d.dep_id WHERE d.task_id IN (SELECT id FROM ${T} WHERE flow_id = $1) ORDER BY d.task_id, d.ord`,
    dependencies: `SELECT t.id::float8 AS id, t.name, t.state, t.result, t.last_error, d.on_failure FROM ${D} AS d
      JOIN ${T} AS t ON t.id = d.dep_id WHERE d.task_id = $1 ORDER BY d.ord`,
  };
}

/** The statements of flows. */
type FlowStatements = ReturnType<typeof flowStatements>;

/** The statements an add of a flow runs: its own, and the limit changes made first for a caller's transaction. */
type FlowSql = FlowStatements & Pick<LimitStatements, 'setLimits'>;

type Query = (text: string, values: unknown[]) => Promise<{ rows: unknown[] }>;

/**
 * Adds a flow in one transaction, or in the caller's through `via` (the
 * NOTIFY then goes out at its commit). `schema`: the tables' (its ids are
 * drawn from their sequence first).
 */
export async function addFlow(
  db: Connection,
  sql: FlowSql,
  schema: string | undefined,
  prefix: string,
  flow: NewFlow,
  via: unknown,
): Promise<StoredTask[]> {
  if (via !== undefined) {
    // The limits it changes first, on the store's own connection (see upsertLimits).
    await applyLimits((text, values) => db.query(text, values), sql.setLimits, flow.tasks);
    return writeFlow(sql, tables(schema).T, prefix, (text, values) => (via as { query: Query }).query(text, values), flow);
  }
  return db.transaction((client) => writeFlow(sql, tables(schema).T, prefix, (text, values) => client.query(text, values), flow));
}

/** The flow's tasks and edges, written through `query`. */
async function writeFlow(sql: FlowSql, table: string, prefix: string, query: Query, flow: NewFlow): Promise<StoredTask[]> {
  const external = new Map<number, StoredState>();
  if (flow.external.length > 0) {
    const { rows } = await query(sql.readExternal, [flow.external]);
    for (const row of rows as { id: number; state: StoredState }[]) external.set(Number(row.id), row.state);
    const missing = flow.external.find((id) => !external.has(id));
    if (missing !== undefined) throw new TaskNotFoundError(missing);
  }
  const ids = ((await query(sql.flowIds, [table, flow.tasks.length])).rows as { id: number }[]).map((row) => Number(row.id));
  const births = birth(flow, external, ids);
  const depId = (dep: { index: number } | { id: number }) => ('index' in dep ? ids[dep.index]! : dep.id);
  const tasks = flow.tasks;
  const { rows } = await query(sql.insertFlow, [
    ids,
    tasks.map((task) => task.name),
    tasks.map((task) => task.payload),
    tasks.map((task) => task.runAt),
    tasks.map((task) => task.maxAttempts),
    tasks.map((task) => task.options),
    tasks.map((task) => task.serial ?? null),
    tasks.map((task) => task.priority ?? 0),
    tasks.map((task) => task.queue ?? 'default'),
    tasks.map((task) => task.rateGroup ?? null),
    births.map((b) => b.state),
    births.map((b) => b.pending),
    births.map((b) => b.hasDependents),
    births.map((b) => (b.sunk === undefined ? null : depId(b.sunk.dep))),
    births.map((b) => b.sunk?.error ?? null),
    ids[0],
    flow.edges.map((edge) => ids[edge.task]),
    flow.edges.map((edge) => depId(edge.dep)),
    flow.edges.map((edge) => edge.ord),
    flow.edges.map((edge) => edge.onFailure),
    flow.edges.map((edge) => countedAtBirth(edge, births, external)),
    prefix,
  ]);
  return (rows as TaskRow[]).map(toTask);
}

/** Flow `id`'s tasks and edges, or undefined. */
export async function getFlow(db: Connection, sql: FlowStatements, id: number): Promise<StoredFlowGraph | undefined> {
  const tasks = (await db.query<TaskRow>(sql.flowTasks, [id])).rows.map(toTask);
  if (tasks.length === 0) return undefined;
  const edges = (
    await db.query<{ task: number; dep: number; on_failure: OnFailure; counted: boolean; dep_state: StoredState | null }>(sql.flowEdges, [
      id,
    ])
  ).rows;
  return {
    tasks,
    edges: edges.map(
      (e): StoredEdge => ({
        task: Number(e.task),
        dep: Number(e.dep),
        onFailure: e.on_failure,
        counted: e.counted,
        depState: e.dep_state,
      }),
    ),
  };
}

/** Task `id`'s dependencies, in the order given. */
export async function getDependencies(db: Connection, sql: FlowStatements, id: number): Promise<DependencyInfo[]> {
  const { rows } = await db.query<DependencyRow>(sql.dependencies, [id]);
  return rows.map(toDependency);
}
