// Limits and queues on SQLite (docs/limits.md, docs/queues.md): concurrency
// keys and rate buckets in `taskheap_limits`, and named queues
// (`taskheap_queues`: pause, global concurrency, a rate bucket on the row),
// the same model as PostgreSQL's (postgres/limits.ts, postgres/claim.ts).
// One process owns the file and claims in one transaction, so the claim
// decides in JavaScript, task by task, and what it reads holds. This file
// owns that decision, the keyed candidates it decides on (found from the
// limit rows with room, never the tasks behind a full key, an empty bucket
// or a paused, full or rate-spent queue), each queue's room, when keyed
// work is due, and the rows' upkeep: made by the tasks that name them, let
// go of by those that end, the scheduler-wide bucket, a queue's settings,
// and their retention.
import type { Prepare } from './driver.js';
import type { ClaimLimits, QueueChange, QueueRooms } from '../store.js';
import type { TaskRow } from '../rows.js';

/** Statements of this file, run through the store's prepared-statement cache. */
const LIMITS_SQL = {
  /** Makes the limit row a task names, or sets its limit (the most recently added task's applies); its holders and starts stay. */
  upsert: `INSERT INTO taskheap_limits (kind, key, lim, interval_ms) VALUES (?, ?, ?, ?)
    ON CONFLICT (kind, key) DO UPDATE SET lim = excluded.lim, interval_ms = excluded.interval_ms`,
  /** Task @id lets go of the slot it holds under its key (read before the key changes). */
  letGo: `UPDATE taskheap_limits SET holders = (SELECT json_group_array(value) FROM json_each(holders) WHERE value <> @id)
    WHERE kind = 'concurrency' AND key = (SELECT serial FROM taskheap_tasks WHERE id = @id)
      AND EXISTS (SELECT 1 FROM json_each(holders) WHERE value = @id)`,
  /** The waiting occurrences of job ? let go of their slots (the job is cancelled). */
  letGoOccurrences: `UPDATE taskheap_limits SET holders = (SELECT json_group_array(value) FROM json_each(holders)
      WHERE value NOT IN (SELECT id FROM taskheap_tasks WHERE job_key = @job AND state = 'waiting'))
    WHERE kind = 'concurrency' AND key IN (SELECT serial FROM taskheap_tasks WHERE job_key = @job AND state = 'waiting')`,
  /** Holders gone or finished: after recovery, and as a safety net with retention. */
  prune: `UPDATE taskheap_limits SET holders = (SELECT json_group_array(value) FROM json_each(holders)
      WHERE value IN (SELECT id FROM taskheap_tasks WHERE state IN ('waiting', 'running')))
    WHERE kind = 'concurrency' AND json_array_length(holders) > 0`,
  /**
   * Retention for limit rows: those that limit nothing now (a concurrency
   * key no task holds or waits for; a bucket with no start in its window,
   * @now, and no task waiting or running under it). The rows a claim walks
   * are those of keys in use, not every key ever seen; a new task makes its
   * row again. (Each start is [ms, count]: the newest is the last.)
   */
  pruneIdle: `DELETE FROM taskheap_limits WHERE key <> '' AND json_array_length(holders) = 0
    AND NOT (kind = 'rate' AND COALESCE(starts ->> '$[#-1][0]', -1e308) > @now - interval_ms)
    AND NOT (kind = 'concurrency' AND EXISTS (SELECT 1 FROM taskheap_tasks AS t WHERE t.serial = taskheap_limits.key AND t.state = 'waiting'))
    AND NOT (kind = 'rate' AND EXISTS (SELECT 1 FROM taskheap_tasks AS t
      WHERE t.rate_key = taskheap_limits.key AND t.state IN ('waiting', 'running')))`,
  /** Concurrency groups with room, and every rate bucket but the scheduler-wide one. */
  withRoom: `SELECT kind, key, lim, interval_ms, holders, starts FROM taskheap_limits
    WHERE (kind = 'concurrency' AND json_array_length(holders) < lim) OR (kind = 'rate' AND key <> '')`,
  /** Tasks holding a slot that wait (for a retry). */
  waitingHolders: `SELECT t.id, t.run_at, t.priority, t.serial, t.rate_key, t.name, t.queue, t.fair_tag
    FROM taskheap_limits AS l, json_each(l.holders) AS h
    JOIN taskheap_tasks AS t ON t.id = h.value WHERE l.kind = 'concurrency' AND t.state = 'waiting'`,
  limitRow: `SELECT kind, key, lim, interval_ms, holders, starts FROM taskheap_limits WHERE kind = ? AND key = ?`,
  /** A key's first waiting tasks not holding a slot, in due order (due or not). */
  keyHeads: `SELECT id, run_at, priority, serial, rate_key, name, queue, fair_tag FROM taskheap_tasks
    WHERE serial = @key AND state = 'waiting' AND id NOT IN (SELECT value FROM json_each(@holders)) ORDER BY run_at, id LIMIT @n`,
  /** A bucket's first waiting tasks without a concurrency group. */
  bucketHeads: `SELECT id, run_at, priority, serial, rate_key, name, queue, fair_tag FROM taskheap_tasks
    WHERE rate_key = @key AND serial IS NULL AND state = 'waiting' AND run_at <= @now ORDER BY priority DESC, run_at, id LIMIT @n`,
  bucketFirst: `SELECT run_at, queue FROM taskheap_tasks WHERE rate_key = ? AND serial IS NULL AND state = 'waiting' ORDER BY run_at, id LIMIT 1`,
  hold: `UPDATE taskheap_limits SET holders = json_insert(holders, '$[#]', ?) WHERE kind = 'concurrency' AND key = ?`,
  spend: `UPDATE taskheap_limits SET starts = ? WHERE kind = 'rate' AND key = ?`,
  setRate: `INSERT INTO taskheap_limits (kind, key, lim, interval_ms) VALUES ('rate', '', ?, ?)
    ON CONFLICT (kind, key) DO UPDATE SET lim = excluded.lim, interval_ms = excluded.interval_ms`,
  /** Every queue row: its settings and its rate bucket's starts (few rows). */
  queueSettings: `SELECT name, paused, global_concurrency, rate_limit, rate_interval_ms, rate_starts FROM taskheap_queues`,
  /** Queue @name's rate bucket after a claim's starts (a JSON array of [ms, count]). */
  queueSpend: `UPDATE taskheap_queues SET rate_starts = @starts WHERE name = @name`,
  /** How many tasks of queue ? run. */
  queueRunning: `SELECT count(*) AS n FROM taskheap_tasks WHERE state = 'running' AND queue = ?`,
  /** A queue's settings: what is not set (@setGlobal, @setRate false; @paused null) stays; a new rate keeps the starts made. */
  setQueue: `INSERT INTO taskheap_queues (name, paused, global_concurrency, rate_limit, rate_interval_ms, updated_at)
    VALUES (@name, COALESCE(@paused, 0), @global, @rateLimit, @rateInterval, @now)
    ON CONFLICT (name) DO UPDATE SET paused = COALESCE(@paused, paused),
      global_concurrency = CASE WHEN @setGlobal THEN @global ELSE global_concurrency END,
      rate_limit = CASE WHEN @setRate THEN @rateLimit ELSE rate_limit END,
      rate_interval_ms = CASE WHEN @setRate THEN @rateInterval ELSE rate_interval_ms END, updated_at = @now`,
} as const;

/** A limit row as SQLite returns it: holders and starts as JSON. */
export interface LimitRow {
  kind: 'concurrency' | 'rate';
  key: string;
  lim: number;
  interval_ms: number | null;
  holders: string;
  starts: string;
}

/** A task a claim may start. */
export interface Candidate {
  id: number;
  run_at: number;
  priority: number;
  serial: string | null;
  rate_key: string | null;
  name?: string;
  /** Its named queue. */
  queue: string;
  /** An expired lease taken over: it keeps the queue slot its first claim took. */
  expired?: boolean;
  /** It holds its slot already (an expired lease, or waiting for a retry). */
  holds: boolean;
  /** Due and of a handler this process runs (a key's others count for its order all the same). */
  usable: boolean;
  /** The priority it is ordered by: its key's first task's (priority does not reorder a key). */
  effective: number;
  /** Its turn (fair.ts), or null: none (a task with a key keeps its key's order). One with a turn is claimed only into a free worker. */
  fair_tag: number | null;
  /** A task with a turn: the due time and id of its place in the claim's order (placeTurns). */
  place_at?: number;
  place_id?: number;
}

/**
 * Places the candidates with a turn (fair.ts) in the claim's due order: the
 * k-th by turn of a queue and priority takes the k-th due time and id among
 * them, so that they go in turn among themselves and in due order beside
 * the rest (as PostgreSQL's claim does, \`fair_places\`).
 */
function placeTurns(candidates: readonly Candidate[]): void {
  const buckets = new Map<string, Candidate[]>();
  for (const c of candidates) {
    if (c.fair_tag === null) continue;
    const id = `${c.queue}\u0000${c.effective}`;
    const bucket = buckets.get(id);
    if (bucket === undefined) buckets.set(id, [c]);
    else bucket.push(c);
  }
  for (const bucket of buckets.values()) {
    const places = bucket.map((c) => [c.run_at, c.id] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    bucket.sort((a, b) => a.fair_tag! - b.fair_tag! || a.id - b.id);
    bucket.forEach((c, k) => {
      c.place_at = places[k]![0];
      c.place_id = places[k]![1];
    });
  }
}

/** A rate bucket: a limit row's, or a queue's (its row's rate columns). */
type Bucket = Pick<LimitRow, 'lim' | 'interval_ms' | 'starts'>;

/** A bucket's starts within its window at `now`: [ms, count] pairs, oldest first. */
function recent(row: Bucket, now: number): [number, number][] {
  const starts = JSON.parse(row.starts) as [number, number][];
  return starts.filter(([at]) => at > now - row.interval_ms!);
}

/** Starts a bucket made within its window at `now`. */
export function spent(row: Bucket, now: number): number {
  let n = 0;
  for (const [, count] of recent(row, now)) n += count;
  return n;
}

/** Tokens a bucket has left at `now`. */
function tokens(row: Bucket, now: number): number {
  return row.lim - spent(row, now);
}

/** When a bucket has a token again (`now` if it has one). */
function refill(row: Bucket, now: number): number {
  if (tokens(row, now) > 0) return now;
  // Starts leave the window oldest first; the bucket is full, so the oldest frees a token.
  return recent(row, now)[0]![0] + row.interval_ms!;
}

/** Writes the limit rows a new task names (from its stored options). */
export function upsertLimits(
  prepare: Prepare,
  options: string,
  serial: string | null | undefined,
  rateGroup: string | null | undefined,
): void {
  if ((serial === null || serial === undefined) && (rateGroup === null || rateGroup === undefined)) return;
  const parsed = JSON.parse(options) as { concurrency?: { limit: number }; rate?: { limit: number; interval: number } };
  if (serial !== null && serial !== undefined) prepare(LIMITS_SQL.upsert).run('concurrency', serial, parsed.concurrency?.limit ?? 1, null);
  if (rateGroup !== null && rateGroup !== undefined && parsed.rate !== undefined) {
    prepare(LIMITS_SQL.upsert).run('rate', rateGroup, parsed.rate.limit, parsed.rate.interval);
  }
}

/** Task `id` lets go of the slot it holds under its key (its final state, a cancel, a replacement). */
export function letGo(prepare: Prepare, id: TaskRow['id']): void {
  prepare(LIMITS_SQL.letGo).run({ id });
}

/** The waiting occurrences of `job` let go of their slots (the job is cancelled). */
export function letGoOccurrences(prepare: Prepare, job: string): void {
  prepare(LIMITS_SQL.letGoOccurrences).run({ job });
}

/** Holders gone or finished let go of their slots (after recovery, and with retention). */
export function pruneHolders(prepare: Prepare): void {
  prepare(LIMITS_SQL.prune).run();
}

/** Retention of limit rows that limit nothing at `now` (see LIMITS_SQL.pruneIdle); how many went. */
export function pruneIdle(prepare: Prepare, now: number): number {
  return Number(prepare(LIMITS_SQL.pruneIdle).run({ now }).changes);
}

/** The scheduler-wide bucket: this process's rate. */
export function setRate(prepare: Prepare, rate: { limit: number; interval: number }): void {
  prepare(LIMITS_SQL.setRate).run(rate.limit, rate.interval);
}

/** A queue's settings changed (what `change` leaves out stays), at `now`. */
export function setQueue(prepare: Prepare, name: string, change: QueueChange, now: number): void {
  const paused = change.paused === undefined ? null : change.paused ? 1 : 0;
  prepare(LIMITS_SQL.setQueue).run({
    name,
    paused,
    setGlobal: change.globalConcurrency === undefined ? 0 : 1,
    global: change.globalConcurrency ?? null,
    setRate: change.rate === undefined ? 0 : 1,
    rateLimit: change.rate?.limit ?? null,
    rateInterval: change.rate?.interval ?? null,
    now,
  });
}

/**
 * Keyed candidates at `now`: each concurrency group's first waiting tasks (as
 * many as its room), tasks holding a slot that wait for a retry, and each
 * rate bucket's first due tasks (as many as its tokens).
 */
export function keyedCandidates(prepare: Prepare, now: number, limit: number, names: ReadonlySet<string> | undefined): Candidate[] {
  const found: Candidate[] = [];
  const usable = (row: { run_at: number; name?: string }) => row.run_at <= now && (names === undefined || names.has(row.name!));
  for (const row of prepare(LIMITS_SQL.withRoom).all() as LimitRow[]) {
    if (row.kind === 'concurrency') {
      const n = Math.min(limit, row.lim - (JSON.parse(row.holders) as number[]).length);
      const heads = prepare(LIMITS_SQL.keyHeads).all({ key: row.key, holders: row.holders, n }) as Candidate[];
      heads.forEach((head) => found.push({ ...head, holds: false, usable: usable(head), effective: heads[0]!.priority }));
    } else {
      const n = Math.min(limit, tokens(row, now));
      if (n <= 0) continue;
      for (const head of prepare(LIMITS_SQL.bucketHeads).all({ key: row.key, now, n }) as Candidate[]) {
        found.push({ ...head, holds: false, usable: usable(head), effective: head.priority });
      }
    }
  }
  for (const held of prepare(LIMITS_SQL.waitingHolders).all() as Candidate[]) {
    if (usable(held)) found.push({ ...held, holds: true, usable: true, effective: held.priority });
  }
  return found;
}

/**
 * Which candidates start, in order (effective priority, then due time and id, a
 * task with a turn in its place: placeTurns): a
 * slot for a key's task that holds none (a key's tasks in due order: one
 * refused stops the key's later ones), a token of its bucket, of the
 * scheduler-wide bucket if this process applies it, a free worker for any
 * limited task (a key, a queue with a rate, the scheduler-wide bucket, a fair share), room
 * in its queue (\`queues.room\`; a taken-over expired task keeps the slot its
 * first claim took) and a token of its queue's rate bucket (every start
 * takes one, a takeover's too). Takes the slots and tokens of those it returns.
 */
export function decide(
  prepare: Prepare,
  candidates: Candidate[],
  now: number,
  limit: number,
  limits: ClaimLimits | undefined,
  queues: QueueView = { room: () => Infinity, buckets: new Map(), paused: new Set() },
): Candidate[] {
  const room = queues.room;
  placeTurns(candidates);
  candidates.sort(
    (a, b) =>
      b.effective - a.effective || (a.place_at ?? a.run_at) - (b.place_at ?? b.run_at) || (a.place_id ?? a.id) - (b.place_id ?? b.id),
  );
  const rows = new Map<string, LimitRow | undefined>();
  const row = (kind: string, key: string) => {
    const id = `${kind}:${key}`;
    if (!rows.has(id)) rows.set(id, prepare(LIMITS_SQL.limitRow).get(kind, key) as LimitRow | undefined);
    return rows.get(id);
  };
  const slots = new Map<string, number>();
  const left = new Map<string, number>();
  const stopped = new Set<string>();
  const global = limits?.rate === undefined ? undefined : row('rate', '');
  let globalLeft = global === undefined ? Infinity : tokens(global, now);
  let free = limits?.free ?? Infinity;
  const used = new Map<string, number>();
  /** Tokens left in each queue's rate bucket (queues with a rate). */
  const queueLeft = new Map<string, number>();
  const chosen: Candidate[] = [];
  for (const task of candidates) {
    if (chosen.length >= limit) break;
    const keyed = task.serial !== null && !task.holds;
    if (keyed && stopped.has(task.serial!)) continue;
    const bucket = task.rate_key === null ? undefined : row('rate', task.rate_key);
    if (bucket !== undefined && !left.has(task.rate_key!)) left.set(task.rate_key!, tokens(bucket, now));
    if (keyed && !slots.has(task.serial!)) {
      const key = row('concurrency', task.serial!);
      slots.set(task.serial!, key === undefined ? 0 : key.lim - (JSON.parse(key.holders) as number[]).length);
    }
    const metered = queues.buckets.get(task.queue);
    if (metered !== undefined && !queueLeft.has(task.queue)) queueLeft.set(task.queue, tokens(metered, now));
    const limited =
      task.serial !== null || task.rate_key !== null || global !== undefined || metered !== undefined || task.fair_tag !== null;
    const ok =
      task.usable &&
      (!keyed || slots.get(task.serial!)! > 0) &&
      (bucket === undefined || left.get(task.rate_key!)! > 0) &&
      globalLeft > 0 &&
      (!limited || free > 0) &&
      (task.expired === true || (used.get(task.queue) ?? 0) < room(task.queue)) &&
      (metered === undefined || queueLeft.get(task.queue)! > 0);
    if (!ok) {
      if (keyed) stopped.add(task.serial!);
      continue;
    }
    chosen.push(task);
    if (keyed) slots.set(task.serial!, slots.get(task.serial!)! - 1);
    if (bucket !== undefined) left.set(task.rate_key!, left.get(task.rate_key!)! - 1);
    if (global !== undefined) globalLeft--;
    if (limited) free--;
    if (task.expired !== true) used.set(task.queue, (used.get(task.queue) ?? 0) + 1);
    if (metered !== undefined) queueLeft.set(task.queue, queueLeft.get(task.queue)! - 1);
  }
  // Take what the chosen ones use: slots, then each bucket's tokens at `now`.
  const spent = new Map<string, number>();
  for (const task of chosen) {
    if (task.serial !== null && !task.holds) prepare(LIMITS_SQL.hold).run(task.id, task.serial);
    if (task.rate_key !== null && row('rate', task.rate_key) !== undefined) spent.set(task.rate_key, (spent.get(task.rate_key) ?? 0) + 1);
    if (global !== undefined) spent.set('', (spent.get('') ?? 0) + 1);
  }
  for (const [key, n] of spent) prepare(LIMITS_SQL.spend).run(JSON.stringify([...recent(row('rate', key)!, now), [now, n]]), key);
  // And each queue's: one entry per claim, as a limit row's.
  const started = new Map<string, number>();
  for (const task of chosen) if (queues.buckets.has(task.queue)) started.set(task.queue, (started.get(task.queue) ?? 0) + 1);
  for (const [name, n] of started) {
    prepare(LIMITS_SQL.queueSpend).run({ name, starts: JSON.stringify([...recent(queues.buckets.get(name)!, now), [now, n]]) });
  }
  return chosen;
}

/** The earliest time keyed work may start (undefined: none waits), by the rows with room. */
export function keyedDue(
  prepare: Prepare,
  now: number,
  names: ReadonlySet<string> | undefined,
  room: (queue: string) => number,
): number | undefined {
  let t: number | undefined;
  // A keyed task of a paused or full queue waits with it: a resume, or a slot freed, claims again.
  const at = (time: number, queue: string) => {
    if (room(queue) > 0 && (t === undefined || time < t)) t = time;
  };
  for (const row of prepare(LIMITS_SQL.withRoom).all() as LimitRow[]) {
    if (row.kind === 'concurrency') {
      const [head] = prepare(LIMITS_SQL.keyHeads).all({ key: row.key, holders: row.holders, n: 1 }) as Candidate[];
      if (head !== undefined && (names === undefined || names.has(head.name!))) at(head.run_at, head.queue);
    } else {
      const first = prepare(LIMITS_SQL.bucketFirst).get(row.key) as { run_at: number; queue: string } | undefined;
      if (first !== undefined) at(Math.max(first.run_at, refill(row, now)), first.queue);
    }
  }
  for (const held of prepare(LIMITS_SQL.waitingHolders).all() as Candidate[]) {
    if (names === undefined || names.has(held.name!)) at(held.run_at, held.queue);
  }
  return t;
}

/** When the scheduler-wide bucket has a token again (undefined: no bucket stored). */
export function globalRefill(prepare: Prepare, now: number): number | undefined {
  const row = prepare(LIMITS_SQL.limitRow).get('rate', '') as LimitRow | undefined;
  return row === undefined ? undefined : refill(row, now);
}

/** A queue row as SQLite returns it. */
interface QueueRow {
  name: string;
  paused: number;
  global_concurrency: number | null;
  rate_limit: number | null;
  rate_interval_ms: number | null;
  rate_starts: string | null;
}

/** What a claim knows of the queues at its \`now\`. */
export interface QueueView {
  /** The room a queue has for this claim (memoized): see queueRooms. */
  room(queue: string): number;
  /** The rate bucket of each queue with a rate. */
  buckets: ReadonlyMap<string, Bucket>;
  /** Paused queues (their buckets do not say when work is due). */
  paused: ReadonlySet<string>;
}

/**
 * The room each queue has for a claim at \`now\`: 0 if paused, else the
 * least of this process's \`rooms\`, its global concurrency less its
 * running tasks (one process owns the file, so they are counted exactly, in
 * the claim's transaction) and the tokens its rate bucket has left.
 */
export function queueRooms(prepare: Prepare, rooms: QueueRooms | undefined, now: number): QueueView {
  const settings = new Map<string, QueueRow>();
  const buckets = new Map<string, Bucket>();
  const paused = new Set<string>();
  for (const row of prepare(LIMITS_SQL.queueSettings).all() as QueueRow[]) {
    settings.set(row.name, row);
    if (row.paused) paused.add(row.name);
    if (row.rate_limit !== null)
      buckets.set(row.name, { lim: row.rate_limit, interval_ms: row.rate_interval_ms, starts: row.rate_starts ?? '[]' });
  }
  const known = new Map<string, number>();
  const room = (queue: string) => {
    let room = known.get(queue);
    if (room !== undefined) return room;
    const setting = settings.get(queue);
    const bucket = buckets.get(queue);
    room = rooms?.get(queue) ?? Infinity;
    if (setting?.paused) room = 0;
    if (bucket !== undefined && room > 0) room = Math.min(room, tokens(bucket, now));
    if (setting?.global_concurrency !== null && setting?.global_concurrency !== undefined && room > 0) {
      room = Math.min(room, setting.global_concurrency - (prepare(LIMITS_SQL.queueRunning).get(queue) as { n: number }).n);
    }
    known.set(queue, room);
    return room;
  };
  return { room, buckets, paused };
}

/** When the earliest empty rate bucket of a queue that is not paused has a token again (undefined: none is empty). */
export function queueRefill(queues: QueueView, now: number): number | undefined {
  let t: number | undefined;
  for (const [name, bucket] of queues.buckets) {
    if (queues.paused.has(name) || tokens(bucket, now) > 0) continue;
    const at = refill(bucket, now);
    if (t === undefined || at < t) t = at;
  }
  return t;
}
