// A task's place in the graph of flows (docs/flows.md; for the dashboard's task
// detail): the flow it belongs to, the tasks it depends on and the tasks that
// depend on it, each with its state and the rule between them. The stores
// read them (their inspect.ts: sqlite/inspect.ts, postgres/inspect.ts); `scheduler.flows.links(id)`
// is the public call.
import { TaskheapError } from '../core/errors.js';
import type { OnFailure } from './options.js';
import type { Store, StoredState } from './store.js';

/** One edge seen from one of its ends: the task at the other end, its state, and the rule of the edge. */
export interface TaskLink {
  /** The task at the other end. */
  readonly id: number;
  /** Its handler. */
  readonly name: string;
  /** Its state now. */
  readonly state: StoredState;
  /** The dependent's rule for this dependency. */
  readonly onFailure: OnFailure;
  /** Whether the dependent counted the dependency done (it succeeded, or ended under a rule that lets the dependent run). */
  readonly done: boolean;
}

/** What `scheduler.flows.links(id)` returns: a task's flow, dependencies and dependents. */
export interface TaskLinks {
  /** The task's id. */
  readonly id: number;
  /** Its state now. */
  readonly state: StoredState;
  /** The flow it was added with (`flows.get(flowId)`), or null for a task added on its own. */
  readonly flowId: number | null;
  /** What it waits for, in the order of its `after` (at most `limit`). */
  readonly dependencies: readonly TaskLink[];
  /** How many dependencies it has in all. */
  readonly dependencyCount: number;
  /** What waits for it, by id (at most `limit`). */
  readonly dependents: readonly TaskLink[];
  /** How many dependents it has in all. */
  readonly dependentCount: number;
}

/** What a store adds to read a task's links. */
export interface LinkStore {
  /** Task `id`'s links, at most `limit` of each kind, or undefined if there is no such task. */
  getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined>;
}

/** The most dependencies and dependents `links()` lists. */
export const MAX_LINKS = 1_000;

/** Whether a store reads links: one with flows does (its capabilities). */
function hasLinks(store: Store): store is Store & LinkStore {
  return store.capabilities.flows;
}

/** Task `id`'s links, or undefined; a store without flows has none to read. @internal */
export function taskLinks(store: Store, id: number, limit: number): Promise<TaskLinks | undefined> {
  if (!hasLinks(store)) throw new TaskheapError('This store has no flows (sqliteStore() and postgresStore() have them)', 'ERR_FLOW');
  return store.getTaskLinks(id, limit);
}

/** A link as a store's statement reads it. */
export interface LinkRow {
  id: number | string;
  name: string;
  state: StoredState;
  on_failure: OnFailure;
  counted: number | boolean;
}

/** A row as a TaskLink. */
export function toLink(row: LinkRow): TaskLink {
  return {
    id: Number(row.id),
    name: row.name,
    state: row.state,
    onFailure: row.on_failure,
    done: row.counted === true || Number(row.counted) === 1,
  };
}
