// The dashboard's `api/limits` (docs/operations-console.md): the limit groups in use with a
// store (rate, concurrency and serial groups, durable/limit-list.ts), the groups
// with the most waiting tasks first, bounded by the query's `limit`. Without
// a store the answer lists none (`groups: null`): in memory the loop keeps its
// groups in its own structures, and the panel is for stored tasks.
import type { LimitGroup } from '../durable/store.js';
import type { DurableClient } from '../durable/client.js';

/** Groups listed when the query names no `limit`. */
const GROUPS_SHOWN = 100;
/** The most groups one answer lists. */
const MAX_LIMIT_GROUPS = 1_000;

/** What `api/limits` answers. */
export interface LimitsView {
  /** The groups, most waiting first; null without a store that lists them. */
  groups: LimitGroup[] | null;
  /** How many were asked for at most. */
  limit: number;
}

/** The `limit` query value: an integer from 1 to 1,000, 100 if absent; a RangeError naming a bad one. */
function parseLimitsQuery(raw: string | null): number {
  if (raw === null) return GROUPS_SHOWN;
  const limit = /^\d{1,7}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT_GROUPS)
    throw new RangeError(`Expected \`limit\` to be an integer from 1 to ${MAX_LIMIT_GROUPS}, got ${JSON.stringify(raw)}`);
  return limit;
}

/** The limit groups in use, or none without a store; a bad `limit` is a RangeError. @internal */
export async function limitsView(client: DurableClient | undefined, raw: string | null): Promise<LimitsView> {
  const limit = parseLimitsQuery(raw);
  return { groups: client === undefined ? null : await client.getLimitGroups(limit), limit };
}
