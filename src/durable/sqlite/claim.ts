// The SQLite claim, in the store's one transaction: due recurring jobs
// become their occurrences first (`materialize`), then the candidates
// (expired leases taken over, plain tasks of open queues, keyed tasks from
// the limit rows with room) are decided by limits.ts and claimed; and
// `nextDue`, when the next claim may find work (tasks that cannot start do
// not count).
import type { Statement } from './driver.js';
import { SQL } from './sql.js';
import {
  decide,
  globalRefill,
  keyedCandidates,
  keyedDue,
  LIMITS_SQL,
  plainDue,
  plainQueues,
  queueRefill,
  queueRooms,
  upsertLimits,
  type Candidate,
} from './limits.js';
import type { StoredOptions } from '../options.js';
import type { ClaimLimits, DueJob, JobAdvance, QueueRooms } from '../store.js';
import { toDueJob, type ClaimRow, type DueJobRow, type JobRow } from '../rows.js';

/** The store's prepared statement for an SQL text (compiled once per open database). @internal */
export type Prepare = (sql: string) => Statement;

/** A whole `taskheap_jobs` row, numbers as SQLite returns them. @internal */
export type StoredJobRow = JobRow & DueJobRow & { state: JobRow['state']; next_run_at: number | null; remaining: number | null };

/** How the claim treats expired leases: failed with `text` once `max` have expired. @internal */
export interface Expiries {
  max: number;
  text: string;
}

/** What SQLite returns for an expired lease. */
interface ExpiredRow {
  id: number;
  run_at: number;
  expiries: number;
  /** Its claim had started it (a prefetched task that never started has not). */
  started: number;
  priority: number;
  serial: string | null;
  rate_key: string | null;
  queue: string;
}

/** Inserts the occurrences of the due recurring jobs (`advance` plans them) and moves the jobs on. @internal */
export function materialize(prepare: Prepare, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
  const due = prepare(SQL.dueJobs).all(now) as DueJobRow[];
  const isRunning = prepare(SQL.jobRunning);
  // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
  const insert = prepare(SQL.insertOccurrence);
  const update = prepare(SQL.advanceJob);
  for (const job of due) {
    const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
    const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
    const o = job.options;
    for (const at of plan.occurrences) insert.run(job.name, job.payload, at, at, maxAttempts, o, job.key, now, now, o, o, o, o, o);
    if (plan.occurrences.length > 0) {
      const options = JSON.parse(job.options) as StoredOptions;
      upsertLimits(prepare, job.options, options.serial ?? options.concurrency?.key, options.rate?.key);
    }
    update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
  }
}

/** What one claim is asked for. */
interface ClaimAsk {
  owner: string;
  now: number;
  lease: number;
  limit: number;
  names: readonly string[] | undefined;
  rooms: QueueRooms | undefined;
  limits: ClaimLimits | undefined;
  expiries: Expiries;
}

/** Claims the tasks that may start now (see limits.ts for the decision); the rows claimed. @internal */
export function claimDue(prepare: Prepare, ask: ClaimAsk): ClaimRow[] {
  const { owner, now, lease, limit, names } = ask;
  const named = names === undefined ? undefined : JSON.stringify(names);
  const queues = queueRooms(prepare, ask.rooms, now);
  const room = queues.room;
  // Separate selects, each walking the due index, beat one OR that
  // makes SQLite sort every due row on each claim.
  const due = plainDue(prepare, now, limit, named, room);
  const expired = (
    named === undefined ? prepare(SQL.dueExpired).all(now, owner, limit) : prepare(SQL.dueExpiredNamed).all(now, owner, named, limit)
  ) as ExpiredRow[];
  const fail = prepare(SQL.failExpired);
  const candidates: Candidate[] = [];
  // Returned with the claims (failed_after set): this process reports them.
  const failed: ClaimRow[] = [];
  for (const row of expired) {
    // Expired too often: a task that kills or stalls its process must not be retried forever.
    if (row.started && row.expiries >= ask.expiries.max) {
      failed.push(fail.get(ask.expiries.text, now, row.id) as ClaimRow);
      prepare(LIMITS_SQL.letGo).run({ id: row.id });
      continue;
    }
    candidates.push({ ...row, expired: true, holds: true, usable: true, effective: row.priority });
  }
  for (const row of due) candidates.push({ ...row, serial: null, rate_key: null, holds: false, usable: true, effective: row.priority });
  // Keyed tasks of a paused or full queue wait with it.
  for (const keyed of keyedCandidates(prepare, now, limit, names === undefined ? undefined : new Set(names))) {
    if (room(keyed.queue) > 0) candidates.push(keyed);
  }
  const take = prepare(SQL.claimOne);
  // What starts at once (into a free worker): the first `free` in claim order, and every limited
  // task or takeover (claimed only into free workers); the rest is prefetched, marked when it starts.
  const free = ask.limits?.free ?? Infinity;
  const claimed: ClaimRow[] = decide(prepare, candidates, now, limit, ask.limits, queues).map((row, i) => {
    const starts = i < free || row.expired === true || row.serial !== null || row.rate_key !== null;
    return { ...(take.get(owner, now + lease, now, starts ? 0 : 1, now, row.id) as ClaimRow), started: starts };
  });
  return failed.length === 0 ? claimed : claimed.concat(failed);
}

/**
 * When the next claim may find work (epoch ms, or undefined): an expiring
 * lease, a scheduled job, the first plain task of an open queue, keyed work
 * that may start (limits.ts), the refill of a queue's empty rate bucket;
 * `rated`: this process applies the scheduler-wide bucket, which gates
 * every waiting task.
 * @internal
 */
export function nextDueAt(
  prepare: Prepare,
  now: number,
  names: readonly string[] | undefined,
  rooms: QueueRooms | undefined,
  rated: boolean,
): number | undefined {
  const named = names === undefined ? undefined : JSON.stringify(names);
  let t = ((named === undefined ? prepare(SQL.nextDue).get() : prepare(SQL.nextDueNamed).get(named)) as { t: number | null }).t;
  // A keyed task that cannot start does not count: settling its key's holder claims again, a bucket refills.
  const queues = queueRooms(prepare, rooms, now);
  const room = queues.room;
  let waiting = keyedDue(prepare, now, names === undefined ? undefined : new Set(names), room);
  // A queue whose rate bucket is empty is closed until it refills: look again then, whatever waits in it.
  const queueRefilled = queueRefill(queues, now);
  if (queueRefilled !== undefined && (waiting === undefined || queueRefilled < waiting)) waiting = queueRefilled;
  const first = prepare(named === undefined ? SQL.firstWaiting : SQL.firstWaitingNamed);
  // Nor does a task of a paused or full queue: a resume, or a slot freed, claims again.
  for (const queue of plainQueues(prepare)) {
    if (room(queue) <= 0) continue;
    let level = (prepare(SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    while (level !== null) {
      const row = first.get(named === undefined ? { queue, p: level } : { queue, p: level, names: named }) as
        | { run_at: number }
        | undefined;
      if (row !== undefined && (waiting === undefined || row.run_at < waiting)) waiting = row.run_at;
      level = (prepare(SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
    }
  }
  const refilled = rated && waiting !== undefined ? globalRefill(prepare, now) : undefined;
  if (refilled !== undefined) waiting = Math.max(waiting!, refilled);
  if (waiting !== undefined && (t === null || waiting < t)) t = waiting;
  return t === null ? undefined : t;
}
