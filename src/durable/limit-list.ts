// The per-key limits in use (for the dashboard's Limits panel, docs/operations-console.md):
// each rate key, concurrency key and serial key a stored task names, with
// its limit, what it holds now and how many waiting tasks name it. The
// stores read them (their inspect.ts: sqlite/inspect.ts, postgres/inspect.ts) from
// their limit rows (taskheap_limits); the dashboard's `api/limits` shows them.
import type { Store } from './store.js';

/** One limit key as the listing shows it. */
export interface LimitKey {
  /** `rate` (a `rate: { key }` bucket), `concurrency` (a `concurrency: { key }`) or `serial` (a concurrency key with limit 1, as `serial` makes it). */
  readonly kind: 'rate' | 'concurrency' | 'serial';
  /** The key. */
  readonly key: string;
  /** Its limit: starts per interval for a rate key, tasks at once otherwise. */
  readonly limit: number;
  /** A rate key's window in ms; null for the others. */
  readonly interval: number | null;
  /** In use now: the starts within the window (rate), or the tasks holding a slot (concurrency, serial; a task waiting for its retry keeps its slot). */
  readonly inUse: number;
  /** Waiting tasks that name the key (a holder waiting for its retry among them). */
  readonly waiting: number;
}

/** What a store adds to list its limit keys. */
export interface LimitListStore {
  /** The `limit` keys with the most waiting tasks (then by kind and key); `now` is the time of rate windows where the store keeps the clock's. */
  listLimitKeys(limit: number, now: number): Promise<LimitKey[]>;
}

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
  return store.capabilities.limitList ? (store as Store & LimitListStore).listLimitKeys(limit, now) : null;
}
