// The SQLite claim, in the store's one transaction (after jobs.ts has
// turned due recurring jobs into occurrences): the candidates (expired
// leases of another owner taken over, the due plain tasks of open queues
// walked queue by queue and level by level, the keyed tasks limits.ts finds
// from the limit rows with room) are decided by limits.ts and claimed, a
// task that expired too often failed instead; and `nextDue`, when the next
// claim may find work (tasks that cannot start do not count).
import type { Prepare } from './driver.js';
import type { FairShares } from './fair.js';
import { decide, globalRefill, keyedCandidates, keyedDue, letGo, queueRefill, queueRooms, type Candidate } from './limits.js';
import type { ClaimParams, NextDueParams } from '../store.js';
import type { ClaimRow } from '../rows.js';

/** Plain waiting tasks: no concurrency group and no rate group (keyed ones are found from their limit rows, limits.ts). */
const PLAIN = `t.state = 'waiting' AND t.serial IS NULL AND t.rate_key IS NULL`;

/** The statements of the claim and of next-due. */
const CLAIM_SQL = {
  /**
   * Named queues: the first queue with plain waiting tasks, then the next
   * after ? (one probe each of the queue-leading plain index), and one
   * queue's priority levels: the claim walks open queues only, level by level.
   */
  firstQueue: `SELECT MIN(queue) AS q FROM taskheap_tasks AS t WHERE ${PLAIN}`,
  queueAfter: `SELECT MIN(queue) AS q FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue > ?`,
  queueTopLevel: `SELECT MAX(priority) AS p FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue = ?`,
  queueLevelBelow: `SELECT MAX(priority) AS p FROM taskheap_tasks AS t WHERE ${PLAIN} AND queue = ? AND priority < ?`,
  /** Due plain waiting tasks of queue @queue and priority @p, in due order. */
  dueWaiting: `SELECT t.id, t.run_at, t.queue, t.fair_group, t.fair_weight FROM taskheap_tasks AS t
    WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now ORDER BY t.run_at, t.id LIMIT @limit`,
  /** Only tasks whose handler is among the names of a JSON array: the ones this process has defined. */
  dueWaitingNamed: `SELECT t.id, t.run_at, t.queue, t.fair_group, t.fair_weight FROM taskheap_tasks AS t
    WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT @limit`,
  /** Whether a due plain waiting task of queue ? names a fair share (the fair index). */
  queueDueFair: `SELECT 1 FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.fair_group IS NOT NULL AND t.queue = ? AND t.run_at <= ? LIMIT 1`,
  /** Whether a due plain waiting task of queue ? and priority ? names a fair share (the fair index). */
  dueFair: `SELECT 1 FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.fair_group IS NOT NULL AND t.queue = ? AND t.priority = ? AND t.run_at <= ? LIMIT 1`,
  /** With fair shares in play, the groups of queue @queue and priority @p after @after, one by one (one probe each of the fair index). */
  groupAfter: `SELECT MIN(t.fair_group) AS g FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.fair_group > @after AND t.queue = @queue AND t.priority = @p`,
  /** The first @limit due plain waiting tasks of group @group, and of those without a share; @names as dueWaitingNamed's, or null. */
  dueOfGroup: `SELECT t.id, t.run_at, t.queue, t.fair_group, t.fair_weight FROM taskheap_tasks AS t
    WHERE ${PLAIN} AND t.fair_group = @group AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
      AND (@names IS NULL OR t.name IN (SELECT value FROM json_each(@names))) ORDER BY t.run_at, t.id LIMIT @limit`,
  dueUnshared: `SELECT t.id, t.run_at, t.queue, t.fair_group, t.fair_weight FROM taskheap_tasks AS t
    WHERE ${PLAIN} AND t.fair_group IS NULL AND t.queue = @queue AND t.priority = @p AND t.run_at <= @now
      AND (@names IS NULL OR t.name IN (SELECT value FROM json_each(@names))) ORDER BY t.run_at, t.id LIMIT @limit`,
  /** The first plain waiting task of queue @queue and priority @p (`nextDue`; keyed ones: limits.ts). */
  firstWaiting: `SELECT t.run_at FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    ORDER BY t.run_at, t.id LIMIT 1`,
  firstWaitingNamed: `SELECT t.run_at FROM taskheap_tasks AS t WHERE ${PLAIN} AND t.queue = @queue AND t.priority = @p
    AND t.name IN (SELECT value FROM json_each(@names)) ORDER BY t.run_at, t.id LIMIT 1`,
  /**
   * Expired leases of another owner. One store owns the file (it holds the
   * lock), and recover() hands back a dead owner's work at start-up, so this
   * finds nothing in normal use; our own expired leases (a handler blocking
   * the event loop) are never taken from ourselves: this process is alive.
   */
  dueExpired: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue, fair_group, fair_weight FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    ORDER BY run_at, id LIMIT ?`,
  dueExpiredNamed: `SELECT id, run_at, expiries, NOT prefetched AS started, priority, serial, rate_key, queue, fair_group, fair_weight
    FROM taskheap_tasks
    WHERE state = 'running' AND locked_until <= ? AND locked_by <> ?
    AND name IN (SELECT value FROM json_each(?)) ORDER BY run_at, id LIMIT ?`,
  /**
   * A claim; `prefetched` for a task claimed beyond the free workers (until
   * it starts: renewMark). An expired lease taken over counts one expiry if
   * its task had started; one that never started is neither an attempt nor
   * an expiry.
   */
  claimOne: `UPDATE taskheap_tasks SET expiries = expiries + (state = 'running' AND NOT prefetched),
    attempts = attempts + (state = 'waiting' OR NOT prefetched), state = 'running', locked_by = ?, locked_until = ?,
    started_at = ?, prefetched = ?, updated_at = ? WHERE id = ? RETURNING *`,
  /** An expired task past the limit of expiries: failed instead of claimed. */
  failExpired: `UPDATE taskheap_tasks SET state = 'failed', expiries = expiries + 1, last_error = ?, locked_by = NULL, locked_until = NULL,
    updated_at = ? WHERE id = ? RETURNING *, 0 AS started, expiries AS failed_after`,
  /** The earliest expiring lease or scheduled job; waiting tasks are looked up level by level (firstWaiting). */
  nextDue: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running'
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
  nextDueNamed: `SELECT MIN(t) AS t FROM (
    SELECT MIN(locked_until) AS t FROM taskheap_tasks WHERE state = 'running' AND name IN (SELECT value FROM json_each(?))
    UNION ALL SELECT MIN(next_run_at) FROM taskheap_jobs WHERE state = 'scheduled')`,
} as const;

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
  fair_group: string | null;
  fair_weight: number;
}

/** Claims the tasks that may start now (see limits.ts for the decision, fair.ts for fair shares); the rows claimed. @internal */
export function claimDue(prepare: Prepare, ask: ClaimParams, expiries: Expiries, fair: FairShares): ClaimRow[] {
  const { owner, now, lease, limit, names } = ask;
  const named = names === undefined ? undefined : JSON.stringify(names);
  const queues = queueRooms(prepare, ask.rooms, now);
  const room = queues.room;
  // Separate selects, each walking the due index, beat one OR that
  // makes SQLite sort every due row on each claim.
  const due = plainDue(prepare, now, limit, named, room);
  const expired = (
    named === undefined
      ? prepare(CLAIM_SQL.dueExpired).all(now, owner, limit)
      : prepare(CLAIM_SQL.dueExpiredNamed).all(now, owner, named, limit)
  ) as ExpiredRow[];
  const fail = prepare(CLAIM_SQL.failExpired);
  const candidates: Candidate[] = [];
  // Returned with the claims (failed_after set): this process reports them.
  const failed: ClaimRow[] = [];
  for (const row of expired) {
    // Expired too often: a task that kills or stalls its process must not be retried forever.
    if (row.started && row.expiries >= expiries.max) {
      failed.push(fail.get(expiries.text, now, row.id) as ClaimRow);
      letGo(prepare, row.id);
      continue;
    }
    candidates.push({ ...row, expired: true, holds: true, usable: true, effective: row.priority });
  }
  for (const row of due) candidates.push({ ...row, serial: null, rate_key: null, holds: false, usable: true, effective: row.priority });
  // Keyed tasks of a paused or full queue wait with it.
  for (const keyed of keyedCandidates(prepare, now, limit, names === undefined ? undefined : new Set(names))) {
    if (room(keyed.queue) > 0) candidates.push(keyed);
  }
  const take = prepare(CLAIM_SQL.claimOne);
  // What starts at once (into a free worker): the first `free` in claim order, and every limited
  // task or takeover (claimed only into free workers); the rest is prefetched, marked when it starts.
  const free = ask.limits?.free ?? Infinity;
  fair.rank(candidates);
  const chosen = decide(prepare, candidates, now, limit, ask.limits, queues);
  fair.started(chosen);
  const claimed: ClaimRow[] = chosen.map((row, i) => {
    const starts = i < free || row.expired === true || row.serial !== null || row.rate_key !== null || row.fair === true;
    return { ...(take.get(owner, now + lease, now, starts ? 0 : 1, now, row.id) as ClaimRow), started: starts };
  });
  return failed.length === 0 ? claimed : claimed.concat(failed);
}

/**
 * When the next claim may find work (epoch ms, or undefined): an expiring
 * lease, a scheduled job, the first plain task of an open queue, keyed work
 * that may start (limits.ts), the refill of a queue's empty rate bucket
 * (and of the scheduler-wide one, `rated`).
 * @internal
 */
export function nextDueAt(prepare: Prepare, { now, names, rooms, rated }: NextDueParams): number | undefined {
  const named = names === undefined ? undefined : JSON.stringify(names);
  let t = ((named === undefined ? prepare(CLAIM_SQL.nextDue).get() : prepare(CLAIM_SQL.nextDueNamed).get(named)) as { t: number | null }).t;
  // A keyed task that cannot start does not count: settling its key's holder claims again, a bucket refills.
  const queues = queueRooms(prepare, rooms, now);
  const room = queues.room;
  let waiting = keyedDue(prepare, now, names === undefined ? undefined : new Set(names), room);
  // A queue whose rate bucket is empty is closed until it refills: look again then, whatever waits in it.
  const queueRefilled = queueRefill(queues, now);
  if (queueRefilled !== undefined && (waiting === undefined || queueRefilled < waiting)) waiting = queueRefilled;
  const first = prepare(named === undefined ? CLAIM_SQL.firstWaiting : CLAIM_SQL.firstWaitingNamed);
  // Nor does a task of a paused or full queue: a resume, or a slot freed, claims again.
  for (const queue of plainQueues(prepare)) {
    if (room(queue) <= 0) continue;
    let level = (prepare(CLAIM_SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    while (level !== null) {
      const row = first.get(named === undefined ? { queue, p: level } : { queue, p: level, names: named }) as
        | { run_at: number }
        | undefined;
      if (row !== undefined && (waiting === undefined || row.run_at < waiting)) waiting = row.run_at;
      level = (prepare(CLAIM_SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
    }
  }
  const refilled = rated && waiting !== undefined ? globalRefill(prepare, now) : undefined;
  if (refilled !== undefined) waiting = Math.max(waiting!, refilled);
  if (waiting !== undefined && (t === null || waiting < t)) t = waiting;
  return t === null ? undefined : t;
}

/** The queues with plain waiting tasks (one probe each of the queue-leading index), in name order. */
function* plainQueues(prepare: Prepare): Generator<string> {
  const after = prepare(CLAIM_SQL.queueAfter);
  for (let q = (prepare(CLAIM_SQL.firstQueue).get() as { q: string | null }).q; q !== null; q = (after.get(q) as { q: string | null }).q)
    yield q;
}

/**
 * Up to \`limit\` due plain waiting tasks (no key: keyed ones come from their
 * limit rows) of open queues, each up to its room, by priority (highest
 * first), then due time, then id. Each queue's levels are walked in its own
 * part of the index, each an exact range of due tasks, so future tasks of a
 * higher level, and the tasks of paused or full queues, are never read.
 * Where a level's due tasks name fair shares, up to its room of each group's
 * (fair.ts ranks them, decide() cuts): a flood in one group hides no other.
 */
function plainDue(prepare: Prepare, now: number, limit: number, named: string | undefined, room: (queue: string) => number): PlainRow[] {
  const rows: PlainRow[] = [];
  const statement = prepare(named === undefined ? CLAIM_SQL.dueWaiting : CLAIM_SQL.dueWaitingNamed);
  const fairQueue = prepare(CLAIM_SQL.queueDueFair);
  const fairLevel = prepare(CLAIM_SQL.dueFair);
  for (const queue of plainQueues(prepare)) {
    const open = Math.min(limit, room(queue));
    // With a fair share due in the queue, every level is read, each group's first tasks where one is due
    // there: every group with due work lines up at this claim, as memory's lanes fill (fair.ts).
    const fair = fairQueue.get(queue, now) !== undefined;
    let taken = 0;
    let level = (prepare(CLAIM_SQL.queueTopLevel).get(queue) as { p: number | null }).p;
    while (level !== null && (taken < open || fair)) {
      const args = { queue, p: level, now, limit: open };
      const left = Math.max(0, open - taken);
      const found = (
        fair && fairLevel.get(queue, level, now) !== undefined
          ? byGroup(prepare, { ...args, names: named ?? null })
          : left === 0
            ? []
            : statement.all(named === undefined ? { ...args, limit: left } : { ...args, limit: left, names: named })
      ) as Omit<PlainRow, 'priority'>[];
      for (const row of found) rows.push({ ...row, priority: level });
      taken += found.length;
      level = (prepare(CLAIM_SQL.queueLevelBelow).get(queue, level) as { p: number | null }).p;
    }
  }
  // Without fair shares, the first `limit` by priority and due time are all a claim can take.
  if (rows.some((row) => row.fair_group !== null)) return rows;
  return rows.sort((a, b) => b.priority - a.priority || a.run_at - b.run_at || a.id - b.id).slice(0, limit);
}

/** Up to `args.limit` due plain waiting tasks of each group of a queue's level (those without a share: one group), in due order. */
function byGroup(prepare: Prepare, args: { queue: string; p: number; now: number; limit: number; names: string | null }): unknown[] {
  const rows = prepare(CLAIM_SQL.dueUnshared).all(args);
  const after = prepare(CLAIM_SQL.groupAfter);
  const due = prepare(CLAIM_SQL.dueOfGroup);
  const next = (previous: string) => (after.get({ after: previous, queue: args.queue, p: args.p }) as { g: string | null }).g;
  for (let g = next(''); g !== null; g = next(g)) rows.push(...due.all({ ...args, group: g }));
  return rows;
}

/** A due plain waiting task as the claim reads it. */
interface PlainRow {
  id: number;
  run_at: number;
  queue: string;
  priority: number;
  fair_group: string | null;
  fair_weight: number;
}
