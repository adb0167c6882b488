// The per-key limits in use (for the dashboard's Limits panel, docs/operations-console.md):
// each rate key, concurrency key and serial key a stored task names, with
// its limit, what it holds now and how many waiting tasks name it. The
// stores read them (their inspect.ts: sqlite/inspect.ts, postgres/inspect.ts) from
// their limit rows (taskheap_limits); the dashboard's `api/limits` shows them.
// `LimitKey` and `LimitListStore` are in store.ts.
import { listsLimits, type LimitKey, type Store } from './store.js';

/** A limit row as a store's statement reads it, with its counts. */
export interface LimitKeyRow {
  kind: 'concurrency' | 'rate';
  key: string;
  lim: number | string;
  interval_ms: number | string | null;
  in_use: number | string;
  waiting: number | string;
}

/** A row as a LimitKey. */
export function toLimitKey(row: LimitKeyRow): LimitKey {
  const limit = Number(row.lim);
  return {
    kind: row.kind === 'rate' ? 'rate' : limit === 1 ? 'serial' : 'concurrency',
    key: row.key,
    limit,
    interval: row.kind === 'rate' && row.interval_ms !== null ? Number(row.interval_ms) : null,
    inUse: Number(row.in_use),
    waiting: Number(row.waiting),
  };
}

/** The store's limit keys, or null for a store that does not list them. */
export function limitKeys(store: Store, limit: number, now: number): Promise<LimitKey[]> | null {
  return listsLimits(store) ? store.listLimitKeys(limit, now) : null;
}
