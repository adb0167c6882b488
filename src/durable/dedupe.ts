// Deduplication of keyed durable tasks (the `dedupe` option): its
// validation at the call, and the decision one add takes against the row
// stored with its key. SQLite runs `decide` in its transaction; PostgreSQL
// runs the same rules in SQL (`addKeyed` in postgres/sql.ts), under the
// key's row lock. Keep the two in step.
import { toDuration } from '../core/duration.js';
import { describe } from '../core/validate.js';
import type { NewTask, StoredState } from './store.js';

/** The modes, as a task carries them. */
type DedupeKind = NonNullable<NewTask['dedupe']>['mode'];

/** The longest throttle or debounce period: ten years (a due time must stay storable). */
const MAX_DEDUPE_PERIOD = 10 * 365.25 * 24 * 3_600_000;

const SHAPES = `'replace', 'keep', { throttle: duration } or { debounce: duration }`;

/**
 * The `dedupe` option checked at the call (`key` is the task's key, already
 * checked): undefined for the default ('replace').
 */
export function toDedupe(dedupe: unknown, key: string | null): { mode: DedupeKind; period: number } | undefined {
  if (dedupe === undefined) return undefined;
  let spec: { mode: DedupeKind; period: number };
  if (dedupe === 'replace' || dedupe === 'keep') spec = { mode: dedupe, period: 0 };
  else if (typeof dedupe === 'string') throw new RangeError(`Expected \`dedupe\` to be ${SHAPES}, got ${describe(dedupe)}`);
  else if (typeof dedupe !== 'object' || dedupe === null || Array.isArray(dedupe)) {
    throw new TypeError(`Expected \`dedupe\` to be ${SHAPES}, got ${describe(dedupe)}`);
  } else {
    const names = Object.keys(dedupe);
    const mode = names[0];
    if (names.length !== 1 || (mode !== 'throttle' && mode !== 'debounce')) {
      throw new TypeError(
        `Expected \`dedupe\` to be ${SHAPES} (one of them), got an object with ${names.length === 0 ? 'no key' : `keys ${names.map((name) => `\`${name}\``).join(', ')}`}`,
      );
    }
    const period = toDuration((dedupe as Record<string, unknown>)[mode], `dedupe.${mode}`, 1);
    if (period > MAX_DEDUPE_PERIOD) {
      throw new RangeError(
        `Expected \`dedupe.${mode}\` to be at most ${MAX_DEDUPE_PERIOD} ms (ten years), got ${describe((dedupe as Record<string, unknown>)[mode])}`,
      );
    }
    spec = { mode, period };
  }
  if (key === null) {
    const given = spec.mode === 'replace' || spec.mode === 'keep' ? `'${spec.mode}'` : `{ ${spec.mode}: ${spec.period} }`;
    throw new TypeError(`Expected a \`key\` with \`dedupe: ${given}\`: deduplication is by key, and this task has none`);
  }
  return spec;
}

/**
 * What one add does to the row stored with its key:
 * - `insert`: no row, a new one;
 * - `renew`: a finished row, overwritten as a new task (reported 'inserted');
 * - `replace`: the waiting row, overwritten (reported 'replaced');
 * - `detach`: a finished row that other tasks depend on, left as it ended
 *   (a final task stays final: its dependents counted its outcome) but for
 *   its key, which a new row takes (reported 'inserted');
 * - `existing`: nothing written, the row returned.
 */
export type DedupeAction = 'insert' | 'renew' | 'detach' | 'replace' | 'existing';

/** The row an add meets: its state, when it was created (epoch ms, on the clock `now` is on), whether tasks depend on it. */
export interface KeyedRow {
  state: StoredState;
  createdAt: number;
  hasDependents: boolean;
}

export function decide(mode: DedupeKind, period: number, row: KeyedRow | undefined, now: number): DedupeAction {
  if (row === undefined) return 'insert';
  if (mode === 'throttle' && row.createdAt > now - period) return 'existing';
  if (row.state === 'running') return 'existing';
  if (row.state === 'waiting') return mode === 'keep' ? 'existing' : 'replace';
  return row.hasDependents ? 'detach' : 'renew';
}

/** When the task is due: `when`, or for debounce `period` after it (as in memory). */
export function dueAt(mode: DedupeKind, period: number, runAt: number): number {
  return mode === 'debounce' ? runAt + period : runAt;
}
