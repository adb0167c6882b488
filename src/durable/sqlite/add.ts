// The SQLite store's adds, each in the caller's transaction: a task (its
// key's row, if any, deciding between insert, replace and keeping the
// existing one, see dedupe.ts; the limit rows it names made, limits.ts)
// and a recurring job (re-registering the same schedule keeps its place).
import { enqueued, type EnqueuedTask, type NewJob, type NewTask, type StoredJob } from '../store.js';
import { sameSchedule } from '../rule-json.js';
import { toJob, toTask, type TaskRow } from '../rows.js';
import { decide, dueAt } from '../dedupe.js';
import type { Prepare, StoredJobRow } from './claim.js';
import { SQL } from './sql.js';
import { LIMITS_SQL, upsertLimits } from './limits.js';

/** The default `dedupe`: a keyed task replaces a waiting one. */
const REPLACE = { mode: 'replace', period: 0 } as const;

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
    rateKey: task.rateKey ?? null,
    queue: task.queue ?? 'default',
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
  if (task.key !== null) {
    const existing = statement(SQL.taskByKey).get(task.key) as (TaskRow & { has_dependents: number }) | undefined;
    const action = decide(
      mode,
      period,
      existing === undefined
        ? undefined
        : { state: existing.state, createdAt: Number(existing.created_at), hasDependents: Boolean(existing.has_dependents) },
      now,
    );
    if (action === 'existing') return enqueued(toTask(existing!), 'existing');
    if (action === 'detach') statement(SQL.detachKey).run(existing!.id);
    else if (action !== 'insert') {
      const id = existing!.id;
      // Replaced, it starts over: a serial key it held (waiting for a retry) is let go of.
      statement(LIMITS_SQL.letGo).run({ id });
      statement(SQL.replaceTask).run({ ...row, id });
      upsertLimits(statement, task.options, task.serial, task.rateKey);
      // A throttle's period starts at the add that wrote the task.
      if (mode === 'throttle') statement(SQL.setCreated).run(now, id);
      return enqueued(toTask(statement(SQL.taskById).get(id) as TaskRow), action === 'replace' ? 'replaced' : 'inserted');
    }
  }
  const { lastInsertRowid } = statement(SQL.insertTask).run({ ...row, key: task.key, now });
  upsertLimits(statement, task.options, task.serial, task.rateKey);
  return enqueued(toTask(statement(SQL.taskById).get(lastInsertRowid) as TaskRow), 'inserted');
}

/** A recurring job written (inserted, or updated in place), in the caller's transaction. @internal */
export function upsertJob(statement: Prepare, job: NewJob, now: number): StoredJob {
  const existing = statement(SQL.jobByKey).get(job.key) as StoredJobRow | undefined;
  // Re-registering the same schedule (every start does) keeps the job's
  // place in it: its rule's start point, next occurrence and count left.
  // It keeps its state too: a pause survives the re-registration of every
  // deploy, and so do the end of a finished job (done) and a cancel.
  const keep = existing !== undefined && sameSchedule(existing.rule, job.rule);
  const row = keep ? { ...job, rule: existing.rule, nextRunAt: existing.next_run_at, remaining: existing.remaining } : job;
  statement(SQL.upsertJob).run({ ...row, state: keep ? existing.state : row.nextRunAt === null ? 'done' : 'scheduled', now });
  return toJob(statement(SQL.jobByKey).get(job.key) as StoredJobRow);
}
