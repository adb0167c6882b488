// The dashboard's `api/limits` (docs/operations-console.md): the per-key limits in use with a
// store (rate, concurrency and serial keys, durable/limit-list.ts), the keys
// with the most waiting tasks first, bounded by the query's `limit`. Without
// a store the answer lists none (`keys: null`): in memory the loop keeps its
// keys in its own structures, and the panel is for stored tasks.
import type { LimitKey } from '../durable/store.js';
import type { DurableClient } from '../durable/client.js';

/** Keys listed when the query names no `limit`. */
const KEYS_SHOWN = 100;
/** The most keys one answer lists. */
const MAX_LIMIT_KEYS = 1_000;

/** What `api/limits` answers. */
export interface LimitsView {
  /** The keys, most waiting first; null without a store that lists them. */
  keys: LimitKey[] | null;
  /** How many were asked for at most. */
  limit: number;
}

/** The `limit` query value: an integer from 1 to 1,000, 100 if absent; a RangeError naming a bad one. */
function parseLimitsQuery(raw: string | null): number {
  if (raw === null) return KEYS_SHOWN;
  const limit = /^\d{1,7}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT_KEYS)
    throw new RangeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LIMIT_KEYS}, got ${JSON.stringify(raw)}`);
  return limit;
}

/** The limit keys in use, or none without a store; a bad `limit` is a RangeError. @internal */
export async function limitsView(client: DurableClient | undefined, raw: string | null): Promise<LimitsView> {
  const limit = parseLimitsQuery(raw);
  return { keys: client === undefined ? null : await client.getLimitKeys(limit), limit };
}
