// The limit groups in use (for the dashboard's Limits panel, docs/operations-console.md):
// each rate, concurrency and serial group a stored task names, with
// its limit, what it holds now and how many waiting tasks name it. The
// stores read them (their inspect.ts: sqlite/inspect.ts, postgres/inspect.ts) from
// their limit rows (taskheap_limits); the dashboard's `api/limits` shows them.
// `LimitGroup` and `LimitListStore` are in store.ts.
import { listsLimits, type LimitGroup, type Store } from './store.js';

/** A limit row as a store's statement reads it, with its counts. */
export interface LimitGroupRow {
  kind: 'concurrency' | 'rate';
  key: string;
  lim: number | string;
  interval_ms: number | string | null;
  in_use: number | string;
  waiting: number | string;
}

/** A row as a LimitGroup. */
export function toLimitGroup(row: LimitGroupRow): LimitGroup {
  const limit = Number(row.lim);
  return {
    kind: row.kind === 'rate' ? 'rate' : limit === 1 ? 'serial' : 'concurrency',
    group: row.key,
    limit,
    interval: row.kind === 'rate' && row.interval_ms !== null ? Number(row.interval_ms) : null,
    inUse: Number(row.in_use),
    waiting: Number(row.waiting),
  };
}

/** The store's limit groups, or null for a store that does not list them. */
export function limitGroups(store: Store, limit: number, now: number): Promise<LimitGroup[]> | null {
  return listsLimits(store) ? store.listLimitGroups(limit, now) : null;
}
