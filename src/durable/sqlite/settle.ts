// Outcomes on SQLite, each in the caller's transaction: the handing back
// of a dead owner's running work at start-up, lease renewals, a batch of
// outcomes (a final state, a retry, a suspension, a release), a cancel, and a retry asked
// for by a caller (requeue: with the failed tasks of its flow above it). A
// final state or a cancel lets go of the task's slot (limits.ts).
import type { Outcome } from '../store.js';
import type { ClaimRow, TaskRow } from '../rows.js';
import type { Expiries } from './claim.js';
import type { Prepare } from './driver.js';
import { letGo, pruneHolders } from './limits.js';

/** How many attempts' errors a task keeps (the latest). */
const MAX_ERRORS = 10;

/**
 * The task's \`errors\` with one more entry \`{ attempt, at, error }\` (@error,
 * at @at), the oldest dropped beyond MAX_ERRORS: json_each numbers the
 * entries, the last MAX_ERRORS are kept in order.
 */
const APPEND_ERROR = `(SELECT json_group_array(json(value)) FROM (SELECT key, value FROM (SELECT key, value
    FROM json_each(json_insert(COALESCE(errors, '[]'), '$[#]', json_object('attempt', attempts, 'at', @at, 'error', @error)))
    ORDER BY key DESC LIMIT ${MAX_ERRORS}) ORDER BY key))`;

/** The statements of outcomes. */
const SETTLE_SQL = {
  /**
   * At start-up, whatever is still running was held by a previous owner that
   * died: back to waiting, and if it had started, one lease expiry counted,
   * past the limit failed with `error`. A task it had claimed but not started
   * (prefetched) goes back unrun: neither an attempt nor an expiry.
   */
  recover: `UPDATE taskheap_tasks SET locked_by = NULL, locked_until = NULL, updated_at = @now,
    expiries = expiries + (NOT prefetched), attempts = attempts - prefetched,
    state = CASE WHEN NOT prefetched AND expiries >= @limit THEN 'failed' ELSE 'waiting' END,
    last_error = CASE WHEN NOT prefetched AND expiries >= @limit THEN @error ELSE last_error END
    WHERE state = 'running' RETURNING *, 0 AS started, expiries AS failed_after`,
  renew: `UPDATE taskheap_tasks SET locked_until = ? WHERE id = ? AND locked_by = ? AND state = 'running'`,
  /** A prefetched task started: from now on a lease that runs out counts against it. */
  renewMark: `UPDATE taskheap_tasks SET prefetched = 0 WHERE id = ? AND locked_by = ? AND state = 'running' AND prefetched = 1`,
  /** A final state; a failure's error joins \`errors\`, a success's return value is \`result\`. */
  complete: `UPDATE taskheap_tasks SET state = @state, last_error = @error, result = @result,
    errors = CASE WHEN @state IN ('failed', 'timed-out') THEN ${APPEND_ERROR} ELSE errors END,
    locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND locked_by = @owner`,
  /**
   * A final state nothing keeps (retention 0, nobody waiting): the row goes,
   * unless a key (dedupe reads a key's last task), a flow or steps still need
   * it. Its messages go with it (a trigger).
   */
  discard: `DELETE FROM taskheap_tasks WHERE id = ? AND key IS NULL AND flow_id IS NULL AND NOT has_dependents AND steps IS NULL`,
  retry: `UPDATE taskheap_tasks SET state = 'waiting', run_at = @runAt, last_error = @error, errors = ${APPEND_ERROR},
    locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND locked_by = @owner`,
  /** A finished task back to waiting, due @runAt, with all its attempts again; its past errors stay. */
  requeue: `UPDATE taskheap_tasks SET state = CASE WHEN @waits > 0 THEN 'blocked' ELSE 'waiting' END, pending_deps = @waits, run_at = @runAt,
    attempts = 0, expiries = 0, result = NULL, failed_dep = NULL, locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND state IN ('failed', 'timed-out', 'cancelled') RETURNING *`,
  /** retry(@id): it, and the failed tasks it depends on by the 'fail' rule, and theirs (the path to it runs again). */
  up: `WITH RECURSIVE up(id) AS (
      SELECT id FROM taskheap_tasks WHERE id = ? AND state IN ('failed', 'timed-out', 'cancelled')
      UNION
      SELECT d.dep_id FROM up JOIN taskheap_deps AS d ON d.task_id = up.id JOIN taskheap_tasks AS f ON f.id = d.dep_id
      WHERE d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled'))
    SELECT id FROM up`,
  /** The dependencies task ? waits for once requeued with those of the JSON array ?: not final, or requeued with it. */
  waits: `SELECT count(*) AS n FROM taskheap_deps AS d JOIN taskheap_tasks AS f ON f.id = d.dep_id
    WHERE d.task_id = @task AND (f.state NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled') OR d.dep_id IN (SELECT value FROM json_each(@all)))`,
  uncount: `UPDATE taskheap_deps SET counted = 0 WHERE task_id = @task AND counted
    AND (dep_id IN (SELECT value FROM json_each(@all)) OR (SELECT state FROM taskheap_tasks WHERE id = dep_id) NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled'))`,
  /**
   * Suspended by a step: waiting until @runAt (at once if a message on the topic it waits on came
   * while it ran), the attempt given back, its step record kept; its serial place stays.
   */
  suspend: `UPDATE taskheap_tasks SET state = 'waiting', attempts = attempts - 1, steps = @steps, waiting_on = @waitingOn,
    run_at = CASE WHEN EXISTS (SELECT 1 FROM taskheap_messages WHERE task_id = @id AND topic = @waitingOn AND taken_by IS NULL)
      THEN MIN(@now, @runAt) ELSE @runAt END,
    locked_by = NULL, locked_until = NULL, updated_at = @at
    WHERE id = @id AND locked_by = @owner AND state = 'running'`,
  release: `UPDATE taskheap_tasks SET state = 'waiting', attempts = attempts - 1, locked_by = NULL, locked_until = NULL, updated_at = ?
    WHERE id = ? AND locked_by = ? AND state = 'running'`,
  cancel: `UPDATE taskheap_tasks SET state = 'cancelled', locked_by = NULL, locked_until = NULL, updated_at = ?
    WHERE id = ? AND state IN ('blocked', 'waiting', 'running')`,
} as const;

/**
 * At start-up, in the caller's transaction: this store owns the file (it
 * holds the lock), so anything still marked running was running in an
 * owner that died: back to waiting at once, one lease expiry counted,
 * failed past the limit. Those failed let go of their serial groups; the
 * others still hold theirs (they are first in line). Returns the failed
 * ones (this process reports them).
 */
export function recover(prepare: Prepare, now: number, expiries: Expiries): ClaimRow[] {
  const back = prepare(SETTLE_SQL.recover).all({ now, limit: expiries.max, error: expiries.text }) as (ClaimRow & { state: string })[];
  pruneHolders(prepare);
  return back.filter((row) => row.state === 'failed');
}

/**
 * Renews the leases of `ids` that `owner` holds until `until`, after
 * marking `started` as started, in the caller's transaction; returns the
 * ids it no longer holds.
 */
export function renew(prepare: Prepare, owner: string, ids: readonly number[], until: number, started: readonly number[]): number[] {
  const stmt = prepare(SETTLE_SQL.renew);
  const mark = prepare(SETTLE_SQL.renewMark);
  for (const id of started) mark.run(id, owner);
  return ids.filter((id) => stmt.run(until, id, owner).changes === 0);
}

/**
 * A batch of outcomes of tasks `owner` holds, in the caller's transaction.
 * `now`: the scheduler's clock (a retry's due time); `at`: this machine's
 * (updated_at).
 */
export function settle(prepare: Prepare, owner: string, outcomes: readonly Outcome[], now: number, at: number): void {
  for (const outcome of outcomes) {
    if (outcome.kind === 'complete') {
      const { changes } = prepare(SETTLE_SQL.complete).run({
        state: outcome.state,
        error: outcome.error,
        result: outcome.result ?? null,
        at,
        id: outcome.id,
        owner,
      });
      // Final: its serial group goes to the next task (a retried or released one keeps it: strict order).
      if (Number(changes) > 0) letGo(prepare, outcome.id);
      if (Number(changes) > 0 && outcome.discard === true) prepare(SETTLE_SQL.discard).run(outcome.id);
    } else if (outcome.kind === 'retry') {
      prepare(SETTLE_SQL.retry).run({ runAt: now + outcome.delay, error: outcome.error, at, id: outcome.id, owner });
    } else if (outcome.kind === 'suspend') {
      const { steps, waitingOn } = outcome;
      prepare(SETTLE_SQL.suspend).run({ runAt: now + outcome.delay, now, steps, waitingOn, at, id: outcome.id, owner });
    } else prepare(SETTLE_SQL.release).run(at, outcome.id, owner);
  }
}

/** Cancels task `id` unless it is over, in the caller's transaction; whether it did. */
export function cancel(prepare: Prepare, id: number, at: number): boolean {
  const { changes } = prepare(SETTLE_SQL.cancel).run(at, id);
  if (Number(changes) > 0) letGo(prepare, id);
  return Number(changes) > 0;
}

/**
 * retry(id), in the caller's transaction: the task and the failed tasks it
 * depends on by the 'fail' rule (and theirs) back to waiting, or blocked
 * on what they wait for; the triggers (migrations.ts, version 6) revive what
 * they sank. Returns the row of `id`, or undefined if it was not failed,
 * timed-out or cancelled.
 */
export function requeue(prepare: Prepare, id: number, runAt: number, at: number): TaskRow | undefined {
  const up = (prepare(SETTLE_SQL.up).all(id) as { id: number }[]).map((row) => Number(row.id));
  if (up.length === 0) return undefined;
  const all = JSON.stringify(up);
  let row: TaskRow | undefined;
  for (const t of up) {
    // What it waits for is counted just before it is requeued, not for all of them first: SQLite fires
    // the triggers of each requeue at once, and one that revives a task this one counted as done (its
    // 'ignore' or 'continue' dependency, sunk by a task requeued before it) makes that task wait again.
    const waits = Number((prepare(SETTLE_SQL.waits).get({ task: t, all }) as { n: number }).n);
    const requeued = prepare(SETTLE_SQL.requeue).get({ waits, runAt, at, id: t }) as TaskRow | undefined;
    if (requeued !== undefined) prepare(SETTLE_SQL.uncount).run({ task: t, all });
    if (t === id) row = requeued;
  }
  return row;
}
