// The claim of the SQLite store: due recurring jobs made into tasks, due and
// expired tasks taken by priority within the room of each open queue (serial
// keys held), and the time until a claim could next take something. Module
// functions over the store's prepared statements, run in its transactions.
import type { ClaimedTask, DueJob, JobAdvance, QueueRooms } from '../store.js';
import { toClaims, toDueJob, type ClaimRow, type DueJobRow, type JobRow, type TaskRow } from '../rows.js';
import type { Statement } from './driver.js';
import { SQL } from './sql.js';

/** The store's prepared statement for an SQL text (compiled once per open database). @internal */
export type Prepare = (sql: string) => Statement;

/** A whole `taskheap_jobs` row, numbers as SQLite returns them. @internal */
export type StoredJobRow = JobRow & DueJobRow & { state: JobRow['state']; next_run_at: number | null; remaining: number | null };

/** What SQLite returns for an id and due-time query. */
interface IdRow {
  id: number;
  run_at: number;
  /** Expired leases so far (expired running tasks only). */
  expiries?: number;
  /** The serial key (waiting tasks only). */
  serial?: string | null;
  /** The priority level the row was found at (waiting), or its column (expired). */
  priority?: number;
}

/** How the claim treats expired leases: failed with `text` once `max` have expired. @internal */
export interface Expiries {
  max: number;
  text: string;
}

/**
 * The claim, in the caller's transaction: due jobs materialised, then up to
 * `limit` due waiting tasks and expired running ones (not `owner`'s) taken
 * for `owner` until `now + lease`. `named`: the handler names as JSON, or
 * undefined for any.
 * @internal
 */
export function claimTasks(
  statement: Prepare,
  expiries: Expiries,
  owner: string,
  now: number,
  lease: number,
  limit: number,
  advance: (job: DueJob, now: number, running: boolean) => JobAdvance,
  named: string | undefined,
  rooms: QueueRooms | undefined,
): ClaimedTask[] {
  materialize(statement, now, advance);
  // Separate selects, each walking the due index, beat one OR that
  // makes SQLite sort every due row on each claim.
  const due = dueWaiting(statement, now, limit, named, rooms);
  const expired = (
    named === undefined ? statement(SQL.dueExpired).all(now, owner, limit) : statement(SQL.dueExpiredNamed).all(now, owner, named, limit)
  ) as IdRow[];
  const rows =
    expired.length === 0
      ? due
      : [...due, ...expired].sort((a, b) => b.priority! - a.priority! || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
  const take = statement(SQL.claimOne);
  const fail = statement(SQL.failExpired);
  const hold = statement(SQL.take);
  const claimed: TaskRow[] = [];
  for (const row of rows) {
    // Expired too often: a task that kills or stalls its process must not be retried forever.
    if (row.expiries !== undefined && row.expiries >= expiries.max) {
      fail.run(expiries.text, now, row.id);
      statement(SQL.letGo).run(row.id);
      continue;
    }
    // The claim read the key free (or this task's): take it, held until the task is final.
    if (row.serial !== undefined && row.serial !== null) hold.run(row.serial, row.id);
    claimed.push(take.get(owner, now + lease, now, row.id) as TaskRow);
  }
  return toClaims(claimed as unknown as ClaimRow[]);
}

/**
 * Up to `limit` due waiting tasks by priority (highest first), then due
 * time, then id, at most one per serial key and only where the key is
 * free or already theirs. The index leads with (state, priority): it is
 * walked one priority level at a time, each an exact range of due tasks,
 * so future tasks of a higher level are never read.
 */
function dueWaiting(statement: Prepare, now: number, limit: number, named: string | undefined, rooms: QueueRooms | undefined): IdRow[] {
  const rows: IdRow[] = [];
  const select = statement(named === undefined ? SQL.dueWaiting : SQL.dueWaitingNamed);
  const keys = new Set<string>();
  // Named queues: open ones only, each up to its room (see openQueues); the
  // levels of each queue are walked in its own part of the index.
  for (const [queue, room] of openQueues(statement, rooms, limit)) {
    let taken = 0;
    let level = (statement(SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    while (level !== null && taken < room) {
      const args = { queue, p: level, now, limit: room - taken };
      const found = select.all(named === undefined ? args : { ...args, names: named }) as IdRow[];
      for (const row of found) {
        // CLAIMABLE lets one task per key through (its holder, or its head);
        // the set only guards that rule: two tasks of a key never leave one claim.
        if (row.serial !== null && row.serial !== undefined) {
          if (keys.has(row.serial)) continue;
          keys.add(row.serial);
        }
        row.priority = level;
        rows.push(row);
        taken++;
      }
      level = (statement(SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
    }
  }
  // Claim order across queues: priority (highest first), then due time, then id.
  return rows.sort((a, b) => b.priority! - a.priority! || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
}

/**
 * The queues with waiting tasks that a claim may take from, with their
 * room (at most `limit`): not paused, under their global concurrency (one
 * process owns the file, so the running tasks are counted exactly, in the
 * claim's transaction), and under this process's `rooms`.
 */
function openQueues(statement: Prepare, rooms: QueueRooms | undefined, limit: number): Map<string, number> {
  const settings = new Map<string, { paused: number; global_concurrency: number | null }>();
  for (const row of statement(SQL.queueSettings).all() as { name: string; paused: number; global_concurrency: number | null }[]) {
    settings.set(row.name, row);
  }
  const open = new Map<string, number>();
  const after = statement(SQL.queueAfter);
  for (let q = (statement(SQL.firstQueue).get() as { q: string | null }).q; q !== null; q = (after.get(q) as { q: string | null }).q) {
    const setting = settings.get(q);
    let room = Math.min(limit, rooms?.get(q) ?? Infinity);
    if (setting?.paused) room = 0;
    else if (setting?.global_concurrency !== null && setting?.global_concurrency !== undefined && room > 0) {
      room = Math.min(room, setting.global_concurrency - (statement(SQL.queueRunning).get(q) as { n: number }).n);
    }
    if (room > 0) open.set(q, room);
  }
  return open;
}

/** Due recurring jobs: their occurrences inserted as tasks, each job advanced as `advance` plans. */
function materialize(statement: Prepare, now: number, advance: (job: DueJob, now: number, running: boolean) => JobAdvance): void {
  const due = statement(SQL.dueJobs).all(now) as StoredJobRow[];
  const isRunning = statement(SQL.jobRunning);
  // (job_key, scheduled_at) is unique: an occurrence is inserted once, whoever gets there first.
  const insert = statement(SQL.insertOccurrence);
  const update = statement(SQL.advanceJob);
  for (const job of due) {
    const plan = advance(toDueJob(job), now, isRunning.get(job.key, now) !== undefined);
    const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
    for (const at of plan.occurrences)
      insert.run(job.name, job.payload, at, at, maxAttempts, job.options, job.key, now, now, job.options, job.options, job.options);
    update.run(plan.nextRunAt, plan.remaining, plan.nextRunAt === null ? 'done' : 'scheduled', plan.occurrences.length, now, job.key);
  }
}

/**
 * The epoch ms at which something is next due (a waiting task, an expired
 * lease, a recurring job), or null. `named` as in claimTasks.
 * @internal
 */
export function nextDueAt(statement: Prepare, named: string | undefined, rooms: QueueRooms | undefined): number | null {
  let t = ((named === undefined ? statement(SQL.nextDue).get() : statement(SQL.nextDueNamed).get(named)) as { t: number | null }).t;
  // A waiting task that cannot take its serial key does not count: settling its key's holder claims again.
  const first = statement(named === undefined ? SQL.firstWaiting : SQL.firstWaitingNamed);
  // Nor does a task of a paused or full queue: a resume, or a slot freed, claims again.
  for (const queue of openQueues(statement, rooms, Infinity).keys()) {
    let level = (statement(SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    while (level !== null) {
      const row = first.get(named === undefined ? { queue, p: level } : { queue, p: level, names: named }) as
        | { run_at: number }
        | undefined;
      if (row !== undefined && (t === null || row.run_at < t)) t = row.run_at;
      level = (statement(SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
    }
  }
  return t;
}
