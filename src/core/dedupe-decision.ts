// What an add with a dedupe key does, given the task its key already names:
// the one decision behind the `key` and `dedupe` options (docs/dedupe.md).
// Two users: the in-memory dedupe keys (core/dedupe-keys.ts, `DedupeKeys`)
// and the stores (durable/dedupe.ts `decide`, which SQLite runs in its add
// transaction; PostgreSQL runs the same decision in SQL, held to it by the
// conformance and property tests). They differ in the one place
// docs/dedupe.md documents ("Beside the in-memory keys"): a store keeps one
// task per key (`onePerKey`), so where memory adds a task beside an
// unfinished one, a store returns the started task or replaces the waiting
// one.
import type { Dedupe } from './limit-options.js';

/** The key's task as an add meets it. */
export interface KeyedTask {
  /**
   * `waiting`: not started yet (a `'rerun'` task waiting for the run it
   * follows too); `started`: running (in memory also waiting for a retry: a
   * run has started); `finished`: in a final state.
   */
  state: 'waiting' | 'started' | 'finished';
  /** When the add that wrote it was made (a throttle's period runs from it), on the clock `now` is on. */
  createdAt: number;
}

/**
 * - `insert`: a new task (over a finished one, or in memory beside an unfinished one);
 * - `replace`: the waiting task gives way to the new one;
 * - `follow`: a new task that starts once the started one has ended (`'rerun'`);
 * - `existing`: nothing added, the key's task returned.
 */
export type KeyedAdd = 'insert' | 'replace' | 'follow' | 'existing';

/**
 * What an add in `mode` (with its throttle or debounce `period`, ms) does at
 * `now` when its key names `last` (undefined: no task). `onePerKey`: a
 * store's one task per key; false in memory, whose keys add beside a started
 * task, and beside a waiting one after a throttle's period.
 */
export function decideKeyedAdd(
  mode: Dedupe['mode'],
  period: number,
  last: KeyedTask | undefined,
  now: number,
  onePerKey: boolean,
): KeyedAdd {
  if (last === undefined) return 'insert';
  if (mode === 'throttle' && last.createdAt > now - period) return 'existing';
  if (last.state === 'finished') return 'insert';
  if (mode === 'keep') return 'existing';
  if (last.state === 'started') return mode === 'rerun' ? 'follow' : onePerKey ? 'existing' : 'insert';
  return mode === 'throttle' && !onePerKey ? 'insert' : 'replace';
}

/** When the added task is due: `when`, or for debounce `period` after it (in memory and in a store). */
export function dueAt(mode: Dedupe['mode'], period: number, when: number): number {
  return mode === 'debounce' ? when + period : when;
}
