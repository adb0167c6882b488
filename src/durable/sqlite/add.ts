// Adding tasks on SQLite, each in the caller's transaction: a task's key
// (if any) finds the stored task it meets, and the dedupe decision
// (dedupe.ts) inserts, replaces, detaches (a finished task keeps its
// outcome, a new one takes its key) or keeps it; the limit
// rows a written task names are made (limits.ts). Many tasks are added in
// order, a key given twice meeting itself. (A recurring job's add is
// jobs.ts's, a flow's flows.ts's.)
import { enqueued, type EnqueuedTask, type NewTask, type StoredTask } from '../store.js';
import { toTask, type TaskRow } from '../rows.js';
import { decide, dueAt } from '../dedupe.js';
import type { Prepare } from './driver.js';
import { getTask } from './inspect.js';
import { letGo, upsertLimits } from './limits.js';

/** The default `dedupe`: a keyed task replaces a waiting one. */
const REPLACE = { mode: 'replace', period: 0 } as const;

/** The statements of an add. */
const ADD_SQL = {
  taskByKey: `SELECT * FROM taskheap_tasks WHERE key = ?`,
  /** A finished task gives its key to a new one and stays as it ended (dedupe.ts, 'detach'). */
  detachKey: `UPDATE taskheap_tasks SET key = NULL WHERE id = ?`,
  /** The running row, followed ('rerun'): it keeps running without its key; its end unblocks the follower. */
  followTask: `UPDATE taskheap_tasks SET key = NULL, has_dependents = 1 WHERE id = ?`,
  /** The follower waits for the run it follows by an edge that runs it however that one ends. */
  followEdge: `INSERT INTO taskheap_deps (task_id, dep_id, ord, on_failure) VALUES (?, ?, 0, 'ignore')`,
  /** A follower written over (blocked) stays blocked: it still follows the running task. */
  replaceTask: `UPDATE taskheap_tasks SET name = @name, payload = @payload, state = CASE state WHEN 'blocked' THEN 'blocked' ELSE 'waiting' END, run_at = @runAt, attempts = 0,
    max_attempts = @maxAttempts, options = @options, serial = @serial, priority = @priority, rate_key = @rateGroup, queue = @queue,
    fair_group = @fairGroup, fair_weight = @fairWeight,
    locked_by = NULL, locked_until = NULL, last_error = NULL, expiries = 0, result = NULL, errors = NULL, started_at = NULL,
    progress = NULL, logs = NULL, updated_at = @at WHERE id = @id`,
  /** A throttled add that wrote the task: its period starts now (the scheduler's clock). */
  setCreated: `UPDATE taskheap_tasks SET created_at = ? WHERE id = ?`,
  insertTask: `INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, serial, priority, rate_key, queue, fair_group,
      fair_weight, created_at, updated_at, state, pending_deps)
    VALUES (@name, @key, @payload, @runAt, @maxAttempts, @options, @serial, @priority, @rateGroup, @queue, @fairGroup, @fairWeight, @now, @at,
      @state, @pending)`,
} as const;

/** What every insert of a task writes (named parameters of insertTask, replaceTask and a flow's insert). @internal */
export function taskRow(task: NewTask, runAt: number, at: number) {
  return {
    name: task.name,
    payload: task.payload,
    runAt,
    maxAttempts: task.maxAttempts,
    options: task.options,
    serial: task.serial ?? null,
    priority: task.priority ?? 0,
    rateGroup: task.rateGroup ?? null,
    queue: task.queue ?? 'default',
    fairGroup: task.fairGroup ?? null,
    fairWeight: task.fairWeight ?? 1,
    at,
  };
}

/**
 * One add, in the caller's transaction: the key's row (if any) decides
 * what happens (see dedupe.ts). `at` is what `updated_at` gets (this
 * machine's clock, the one retention reads); `now` is the scheduler's
 * clock, the one due times are on: `created_at` and the dedupe periods.
 * @internal
 */
export function addOne(statement: Prepare, task: NewTask, at: number, now: number): EnqueuedTask {
  const { mode, period } = task.dedupe ?? REPLACE;
  const runAt = dueAt(mode, period, task.runAt);
  const row = taskRow(task, runAt, at);
  let followed: TaskRow['id'] | undefined;
  if (task.key !== null) {
    const existing = statement(ADD_SQL.taskByKey).get(task.key) as TaskRow | undefined;
    const action = decide(
      mode,
      period,
      existing === undefined ? undefined : { state: existing.state, createdAt: Number(existing.created_at) },
      now,
    );
    if (action === 'existing') return enqueued(toTask(existing!), 'existing');
    if (action === 'detach') statement(ADD_SQL.detachKey).run(existing!.id);
    else if (action === 'follow') statement(ADD_SQL.followTask).run((followed = existing!.id));
    else if (action === 'replace') {
      const id = existing!.id;
      // Replaced, it starts over: a serial group it held (waiting for a retry) is let go of.
      letGo(statement, id);
      statement(ADD_SQL.replaceTask).run({ ...row, id });
      upsertLimits(statement, task.options, task.serial, task.rateGroup);
      // A throttle's period starts at the add that wrote the task.
      if (mode === 'throttle') statement(ADD_SQL.setCreated).run(now, id);
      return enqueued(getTask(statement, id)!, 'replaced');
    }
  }
  const blocked = followed !== undefined;
  const { lastInsertRowid } = statement(ADD_SQL.insertTask).run({
    ...row,
    key: task.key,
    now,
    state: blocked ? 'blocked' : 'waiting',
    pending: blocked ? 1 : 0,
  });
  if (blocked) statement(ADD_SQL.followEdge).run(lastInsertRowid, followed);
  upsertLimits(statement, task.options, task.serial, task.rateGroup);
  return enqueued(getTask(statement, lastInsertRowid)!, 'inserted');
}

/**
 * Many adds in order, in the caller's transaction. A key given twice in one
 * call: the adds meet in order, and every item reports the row as it ends
 * up, with what its own add did.
 * @internal
 */
export function addTasks(statement: Prepare, tasks: readonly NewTask[], at: number, now: number): EnqueuedTask[] {
  const rows = tasks.map((task) => addOne(statement, task, at, now));
  const last = new Map<string, StoredTask>();
  for (const row of rows) if (row.key !== null) last.set(row.key, row);
  return rows.map((row) => (row.key === null || last.get(row.key) === row ? row : enqueued({ ...last.get(row.key)! }, row.enqueued)));
}
