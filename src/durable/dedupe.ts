// Deduplication of keyed durable tasks (the `dedupe` option, validated with
// the other option groups in core/options.ts): the decision one add takes
// against the row stored with its key. The decision is the in-memory keys'
// too (core/dedupe-decision.ts), with one task per key; here it becomes what
// is done to the row. SQLite runs `decide` in its transaction; PostgreSQL
// runs the same rules in SQL (`addKeyed` in postgres/add.ts), under the
// key's row lock: the conformance and property tests hold both to the same
// cases.
import { decideKeyedAdd } from '../core/dedupe-decision.js';
import type { NewTask, StoredState } from './store.js';

/** The modes, as a task carries them. */
type DedupeKind = NonNullable<NewTask['dedupe']>['mode'];

/**
 * What one add does to the row stored with its key:
 * - `insert`: no row, a new one;
 * - `replace`: the waiting row, overwritten (reported 'replaced');
 * - `detach`: a finished row, left as it ended (a final task stays final:
 *   its result, errors and anyone waiting for it keep what it was) but for
 *   its key, which a new row takes (reported 'inserted');
 * - `follow`: the running row keeps running without its key, which a new
 *   row takes, blocked until the running one ends (`'rerun'`; reported
 *   'inserted'); written over later, it stays blocked;
 * - `existing`: nothing written, the row returned.
 */
export type DedupeAction = 'insert' | 'detach' | 'replace' | 'follow' | 'existing';

/** The row an add meets: its state and when it was created (epoch ms, on the clock `now` is on). */
export interface KeyedRow {
  state: StoredState;
  createdAt: number;
}

/** The decision of core/dedupe-decision.ts with one task per key, as what is done to the row. */
export function decide(mode: DedupeKind, period: number, row: KeyedRow | undefined, now: number): DedupeAction {
  if (row === undefined) return 'insert';
  // Blocked: a 'rerun' row following a running one (flow tasks take no key).
  const state = row.state === 'waiting' || row.state === 'blocked' ? 'waiting' : row.state === 'running' ? 'started' : 'finished';
  const action = decideKeyedAdd(mode, period, { state, createdAt: row.createdAt }, now, true);
  // Inserted over a finished row, which stays as it ended: the key moves to the new one.
  return action === 'insert' ? 'detach' : action;
}

/** When the task is due: `when`, or for debounce `period` after it (as in memory). */
export { dueAt } from '../core/dedupe-decision.js';
