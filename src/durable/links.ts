// A task's place in the graph of flows (docs/flows.md; for the dashboard's task
// detail): the flow it belongs to, the tasks it depends on and the tasks that
// depend on it, each with its state and the rule between them. The stores
// read them (their inspect.ts: sqlite/inspect.ts, postgres/inspect.ts); `scheduler.flows.links(id)`
// is the public call. The records and `FlowStore.getTaskLinks` are in store.ts.
import { TaskheapError } from '../core/errors.js';
import { hasFlows, type OnFailure, type Store, type StoredState, type TaskLink, type TaskLinks } from './store.js';

/** The most dependencies and dependents `links()` lists. */
export const MAX_LINKS = 1_000;

/** Task `id`'s links, or undefined; a store without flows has none to read. @internal */
export function taskLinks(store: Store, id: number, limit: number): Promise<TaskLinks | undefined> {
  if (!hasFlows(store)) throw new TaskheapError('This store has no flows (sqliteStore() and postgresStore() have them)', 'ERR_FLOW');
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
