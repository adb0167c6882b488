// The PostgreSQL claim and next-due. Which statement a claim or a next-due
// question sends: the plain one while no limit is in play, else the full
// one; and the due recurring jobs materialised first (jobs.ts), in one
// transaction with the claim, when a claim finds some. Below, the
// statements: the full claim, next-due, the plain claim and the plain
// next-due, with the SQL pieces only they use (the pieces of limit rows and
// queue rows they share with the outcomes are limits.ts's).
//
// How a claim stays exact across processes: it picks candidates from its
// snapshot, then locks the queue rows (by name) and limit rows (in (kind,
// key) order) they name, so two claims cannot deadlock on them, and reads
// them at their latest version (a row lock re-reads a row a concurrent claim
// changed), grants each row at most the room it has left, and updates each
// row once, with what the tasks it really claimed took. A claim only ever
// claims a limited task it may start now, and only into a free worker ($8):
// nothing is hoarded.
//
// How a claim stays cheap with blocked work: keyed tasks (a concurrency or
// rate group) are not in the plain waiting index; they are found from the
// limit rows that have room, a few of each (the key's first tasks in due
// order, or a bucket's room's worth), so tasks behind a full key or an empty
// bucket are never read.
//
// Lock order, one for every statement, so that claims and settles cannot
// deadlock: tasks first (a claim with SKIP LOCKED: a task another statement
// holds is not waited for; a key's task skipped stops the key's later ones
// as an unready one does), then queue rows in name order (lockQueues), then
// limit rows in (kind, key) order; a settle locks the tasks it holds, then
// the queue rows (freeSlots), then the limit rows (letGo, after `after`).
import type { ClaimedTask, DueJob, JobAdvance, NextDueParams, QueueRooms, WarmParams } from '../store.js';
import { toClaims, type ClaimRow } from '../rows.js';
import type { Connection, WarmQuery } from './connection.js';
import { materialize, type JobStatements } from './jobs.js';
import { lockQueues, queueTokens, spent } from './limits.js';
import { FairTurns, untaggedDue, type FairStatements } from './fair.js';
import { millis, ms, plainWaiting, tables, untaggedShared, waitingPairs } from './tables.js';
import { DONE, DONE_IDS, WAKE } from './listener.js';

/** How a due recurring job advances (the scheduler's rule): its next occurrence, or its end. @internal */
export type Advance = (job: DueJob, now: number, running: boolean) => JobAdvance;

/** A claim's first row says whether a recurring job is due (then nothing was claimed); its id is null if nothing was. */
type FlaggedRow = Omit<ClaimRow, 'id'> & { id: ClaimRow['id'] | null; jobs_due: boolean; limited?: boolean };

/**
 * Claims sent straight to the full statement after the plain one found a
 * limit in play: a process whose tasks use limits would otherwise send two
 * statements per claim. Counted in claims, not time: no clock to inject.
 * The plain claim then asks again, and it costs one cheap statement.
 */
const FULL_AFTER_LIMITED = 32;

/** What a claim asks for (the full claim's parameters, see claimSql). @internal */
export interface ClaimAsk {
  readonly owner: string;
  readonly lease: number;
  readonly limit: number;
  readonly names: readonly string[] | undefined;
  readonly rooms: QueueRooms | undefined;
  /** This process applies the scheduler-wide bucket. */
  readonly rated: boolean;
  /** Free workers: the most limited tasks claimed, and how many start at once. */
  readonly free: number;
  /** ms this process still waits, since it reached the server again, before it takes over leases. */
  readonly takeoverWait: number;
  /** Tell the other processes when the leases this claim takes run out (this process held none before). */
  readonly announceLease: boolean;
}

/** @internal */
export class Claims {
  readonly #db: Connection;
  readonly #sql: ClaimStatements & JobStatements;
  /** Gives due shared tasks their turns before a full claim. */
  readonly #fair: FairTurns;
  readonly #settings: ClaimSettings;
  /** Claims left to send straight to the full statement (see FULL_AFTER_LIMITED). */
  #fullOnly = 0;

  constructor(db: Connection, sql: ClaimStatements & JobStatements & FairStatements, settings: ClaimSettings) {
    this.#db = db;
    this.#sql = sql;
    this.#fair = new FairTurns(db, sql);
    this.#settings = settings;
  }

  /** Claims what `ask` asks for; due recurring jobs are materialized first (their occurrences may be claimed too). */
  async claim(ask: ClaimAsk, advance: Advance): Promise<ClaimedTask[]> {
    // The common case, no recurring job due: one statement claims, and says whether a job is due.
    // Both claims are named statements, planned once per connection (prepared.ts). Due times and
    // leases are the server's: this process's clock is not used.
    const plain = limitsItself(ask.rooms, ask.rated) ? undefined : await this.#plain(ask);
    // The plain claim takes no expired lease over, so it fails no task: nothing to announce but its leases.
    if (plain !== undefined && !plain.limited && !plain.jobsDue) return plain.claims;
    const params = fullClaimParams(ask, this.#settings);
    await this.#fair.tag();
    if (plain === undefined || !plain.jobsDue) {
      const { rows } = await this.#db.query<FlaggedRow>(this.#sql.claimUnlessJobsDue, params, true);
      if (rows[0]?.jobs_due !== true) return this.#announced(claimsOf(rows));
    }
    const claims = await this.#db.transaction(async (client) => {
      await materialize(client, this.#sql, advance);
      const { rows } = await client.query<ClaimRow>(this.#sql.claim, params);
      return toClaims(rows);
    });
    return this.#announced(claims);
  }

  /**
   * Announces on DONE, as a settle does, the tasks the claim failed for
   * their lease expiries (rare), so that waitFor() in every process hears
   * of them; after the claim's commit, and without waiting: an announcement
   * lost here is made up for by the waiters' safety sweep, and must not
   * cost the claim its tasks.
   */
  #announced(claims: ClaimedTask[]): ClaimedTask[] {
    let ids = '';
    let count = 0;
    for (const claim of claims) {
      if (claim.failedAfterExpiries === undefined) continue;
      ids += ids === '' ? claim.id : `,${claim.id}`;
      if (++count === DONE_IDS) {
        this.#announce(ids);
        ids = '';
        count = 0;
      }
    }
    if (ids !== '') this.#announce(ids);
    return claims;
  }

  #announce(ids: string): void {
    this.#db.query(this.#sql.announceDone, [this.#settings.prefix + ids]).catch(() => {});
  }

  /** The plain claim, unless a recent one found a limit in play. */
  async #plain(ask: ClaimAsk): Promise<{ claims: ClaimedTask[]; limited: boolean; jobsDue: boolean } | undefined> {
    if (this.#fullOnly > 0) {
      this.#fullOnly--;
      return undefined;
    }
    const { rows } = await this.#db.query<FlaggedRow>(this.#sql.claimPlain, plainClaimParams(ask, this.#settings), true);
    const limited = rows[0]?.limited === true;
    if (limited) this.#fullOnly = FULL_AFTER_LIMITED;
    return { claims: claimsOf(rows), limited, jobsDue: rows[0]?.jobs_due === true };
  }

  /**
   * ms until the next claim may find work (0: now), by the server's clock,
   * or undefined: nothing is due. `lease`: a takeover waits for the server
   * to have been up, and this process to have reached it, for that long.
   */
  async nextDue({ names, rooms, rated = false }: NextDueParams, lease: number): Promise<number | undefined> {
    // As the claim: the plain question while nothing is limited (and this process limits nothing itself).
    if (!limitsItself(rooms, rated) && this.#fullOnly === 0) {
      const { rows } = await this.#db.query<{ t: number | string | null; limited: boolean }>(this.#sql.nextDuePlain, [names ?? null], true);
      if (rows[0]?.limited !== true) return untilDue(rows[0]?.t);
      this.#fullOnly = FULL_AFTER_LIMITED;
    }
    const { rows } = await this.#db.query<{ t: number | string | null; untagged: boolean }>(
      this.#sql.nextDue,
      nextDueParams({ names, rooms, rated }, lease, this.#db.takeoverWait(lease)),
      true,
    );
    if (rows[0]?.untagged === true) this.#fair.untagged();
    return untilDue(rows[0]?.t);
  }

  /** Marks the server this store reaches as a claim would (see markServer), before any claim; best effort, as the warm-ups are. */
  async markServer(): Promise<void> {
    await this.#db.query(this.#sql.markServer, []).catch(() => {});
  }

  /**
   * Readies a fresh connection (Connection.warm) for the claims this process
   * will send, each of nothing: the plain claim, unless the process has
   * limits of its own (then every claim is the full one); the full claim if
   * so, or if the plain one says a limit is in play now; a next-due
   * question of the same kind. The full statements are the dearest to plan
   * (the claim about 40 ms on a cold connection, next-due 25, three
   * connections a start: most of a start's server CPU), and a process
   * without limits never sends them. One that meets its first limit later
   * pays those plans on each connection's first full claim, once.
   */
  async ready(query: WarmQuery, { owner, lease, names, ownLimits }: WarmParams): Promise<void> {
    const ask = simpleAsk(owner, lease, 0, names);
    let full = ownLimits;
    if (!full) {
      const rows = await query(this.#sql.claimPlain, plainClaimParams(ask, this.#settings));
      full = rows[0]?.limited === true;
    }
    if (full) {
      await query(this.#sql.claimUnlessJobsDue, fullClaimParams(ask, this.#settings));
      await query(this.#sql.nextDue, nextDueParams({ names }, lease, 0));
    } else await query(this.#sql.nextDuePlain, [names ?? null]);
  }
}

/** The store's settings a claim's parameters hold beside its ask. */
export interface ClaimSettings {
  /** What every notification of this store's schema starts with. */
  readonly prefix: string;
  /** A task whose lease ran out more than this many times fails (the full claim), with `expiredText` as its error. */
  readonly maxExpiries: number;
  readonly expiredText: string;
}

/**
 * An ask for `limit` tasks into as many free workers, of any handler or of
 * `names`, with nothing else: no queue rooms, no scheduler-wide bucket, no
 * takeover wait, no announcement (the warm-up's claims of nothing, and the
 * tests' and benches' EXPLAINs).
 */
export function simpleAsk(owner: string, lease: number, limit: number, names?: readonly string[]): ClaimAsk {
  return { owner, lease, limit, names, rooms: undefined, rated: false, free: limit, takeoverWait: 0, announceLease: false };
}

/**
 * The plain claim's parameters (plainClaimSql's $1..$6), in their one order:
 * the store's, the warm-up's, the tests' and the benches' claims build them here.
 */
export function plainClaimParams(ask: ClaimAsk, settings: ClaimSettings): unknown[] {
  return [ask.limit, ask.owner, ask.lease, ask.names ?? null, ask.free, announcing(ask, settings)];
}

/** The full claim's parameters (claimSql's $1..$12), in their one order, as plainClaimParams. */
export function fullClaimParams(ask: ClaimAsk, settings: ClaimSettings): unknown[] {
  return [
    ask.limit,
    ask.owner,
    ask.lease,
    settings.maxExpiries,
    settings.expiredText,
    ask.names ?? null,
    ask.rated,
    ask.free,
    ...roomArrays(ask.rooms),
    ask.takeoverWait,
    announcing(ask, settings),
  ];
}

/** The full next-due question's parameters ($1..$6), in their one order: `takeoverWait` as ClaimAsk's. */
export function nextDueParams(
  { names, rooms, rated = false }: Pick<NextDueParams, 'names' | 'rooms' | 'rated'>,
  lease: number,
  takeoverWait: number,
): unknown[] {
  return [names ?? null, rated, ...roomArrays(rooms), lease, takeoverWait];
}

/** The claim's announcement parameter: the payload's prefix if it is to announce its leases, else null. */
function announcing(ask: ClaimAsk, settings: ClaimSettings): string | null {
  return ask.announceLease ? settings.prefix : null;
}

/** Whether a process limits its own work (rooms for queues, the scheduler-wide bucket): its claims and next-due questions are the full ones. */
function limitsItself(rooms: QueueRooms | undefined, rated: boolean): boolean {
  return rated || (rooms !== undefined && rooms.size > 0);
}

/** A next-due answer in ms, 0 for overdue; undefined: nothing is due. */
function untilDue(t: number | string | null | undefined): number | undefined {
  return t === null || t === undefined ? undefined : Math.max(0, Number(t));
}

function claimsOf(rows: FlaggedRow[]): ClaimedTask[] {
  return toClaims(rows.filter((row): row is ClaimRow & FlaggedRow => row.id !== null));
}

/** The claim's parameters $9 and $10: the queues this process limits, and the room it has for each. */
function roomArrays(rooms: QueueRooms | undefined): [string[] | null, number[] | null] {
  if (rooms === undefined || rooms.size === 0) return [null, null];
  return [[...rooms.keys()], [...rooms.values()]];
}

/** The statements of the claim and of next-due for tables in `schema` (undefined: the search_path). */
export function claimStatements(schema: string | undefined) {
  const { T, J, M, L, Q, F } = tables(schema);
  return {
    /** The common case, no recurring job due: claims in one statement and says whether a job is due. */
    claimUnlessJobsDue: claimSql(T, J, L, Q, M, F, true),
    claim: claimSql(T, J, L, Q, M, F, false),
    /** The claim when no limit is in play anywhere; says so (`limited`), claiming nothing, when one is. */
    claimPlain: plainClaimSql(T, J, L, Q, M, F),
    nextDue: nextDueSql(T, J, L, Q, M, F),
    /** Next-due when no limit is in play anywhere; says so (`limited`), answering nothing, when one is. */
    nextDuePlain: plainNextDueSql(T, J, L, Q, F),
    /**
     * The server mark alone (markServer), which start() commits before it
     * readies connections: their claims of nothing then find it set and
     * lock nothing. Left to them, each would lock the meta row until its
     * warm-up rolled back, and the others, and other processes' claims,
     * would wait in turn.
     */
    markServer: markServerSql(M),
    /** Announces on DONE ($1: the prefix and the ids) the tasks a claim failed for their lease expiries. */
    announceDone: `SELECT pg_notify('${DONE}', $1)`,
  };
}

/** The statements of the claim and next-due. */
type ClaimStatements = ReturnType<typeof claimStatements>;

/**
 * SQL: since when this server has been up as the one the stores reach, from
 * the meta row a start() or a claim marks (markServerSql): the time of the
 * first of them on it since it started, or was promoted; now, until then. Not
 * pg_postmaster_start_time() alone: a standby promoted to primary started
 * before its promotion, and measured right after one, its start time,
 * pg_conf_load_time(), pg_last_xact_replay_timestamp() and the control
 * file's checkpoint time all predate the promotion (the row it replicated
 * names the old primary's start, which the new one's never equals).
 */
const serverUp = (M: string) => `COALESCE((SELECT server_seen FROM ${M} WHERE server_started = pg_postmaster_start_time()), now())`;

/** Marks the server the store reaches (serverUp): the meta row is written once per server start or promotion. */
const markServerSql = (M: string) => `UPDATE ${M} SET server_started = pg_postmaster_start_time(), server_seen = now()
      WHERE server_started IS DISTINCT FROM pg_postmaster_start_time()`;

/** A claim's CTE marking the server it runs on (markServerSql). */
const serverMarkCte = (M: string) => `server_mark AS (${markServerSql(M)} RETURNING 1)`;

/**
 * A claim's CTE announcing on WAKE, if it claimed anything and \`prefix\` (a
 * parameter: the payload's prefix, or null) is set, when the leases it wrote
 * (for \`lease\` ms) run out. A process that held nothing sets it: an idle
 * process knows the leases held when it last asked what is due, and from then
 * on those that holders renew, but not the first of a holder that held none.
 * Sent by the claim itself, the announcement commits with the leases: a
 * process killed as its claim commits (or whose claim the server finishes
 * after it died) is still heard, and its tasks taken over when the leases run
 * out, not at an idle process's safety check. Evaluated once, where the
 * claim's rows are read (\`announcedFirst\`).
 */
const leaseAnnouncedCte = (prefix: string, lease: string) =>
  `announced AS (SELECT pg_notify('${WAKE}', ${prefix}::text || (extract(epoch from clock_timestamp()) * 1000 + ${lease}::float8)::bigint::text)
      FROM (SELECT 1 FROM claimed LIMIT 1) AS c WHERE ${prefix}::text IS NOT NULL)`;

/** SQL: a filter that is always true, so that the claim's announcement (leaseAnnouncedCte) runs once before its first row. */
const announcedFirst = '(SELECT count(*) FROM announced) >= 0';

/** SQL: only tasks whose handler is among $6 (null: any). */
const NAMED = `AND ($6::text[] IS NULL OR name = ANY($6::text[]))`;

/**
 * SQL: the starts arrays of a bucket after a claim at \`at\` started \`n\`
 * of its tasks: the starts still in the window at \`at\`, and this one.
 */
const withStart = (starts: string, counts: string, interval: string, at: string, n: string) =>
  [
    `ARRAY(SELECT s FROM unnest(${starts}) AS s WHERE s > ${at} - ${millis(interval)}) || ${at}`,
    `ARRAY(SELECT c FROM unnest(${starts}, ${counts}) AS x(s, c) WHERE s > ${at} - ${millis(interval)}) || ${n}::int`,
  ] as const;

/** SQL: when a bucket that is empty at now() has a token again: its oldest start in the window leaves it. */
const refillOf = (starts: string, interval: string) =>
  `(SELECT min(s) FROM unnest(${starts}) AS s WHERE s > now() - ${millis(interval)}) + ${millis(interval)}`;

/** The most rows an int room stands for: no limit. */
const NO_LIMIT = 2147483647;

/**
 * SQL: the room queue \`name\` has for this process, from the snapshot: 0
 * if paused, else the least of its global room (global concurrency less
 * its running count), the tokens its rate bucket has left, and this
 * process's own room (\`rooms\`; a queue not named there has no limit here).
 */
const queueRoom = (Q: string, name: string) => `LEAST(COALESCE((SELECT n FROM rooms WHERE rooms.name = ${name}), ${NO_LIMIT}),
        COALESCE((SELECT CASE WHEN qr.paused THEN 0
            ELSE LEAST(COALESCE(qr.global_concurrency - qr.running, ${NO_LIMIT}), COALESCE(${queueTokens('qr')}, ${NO_LIMIT})) END
          FROM ${Q} AS qr WHERE qr.name = ${name}), ${NO_LIMIT}))`;

/**
 * Named queues: \`pairs\` lists the (queue, priority) pairs that have plain
 * waiting tasks (waitingPairs); \`open\` keeps those a claim may take from,
 * with the room their queue has (see queueRoom; rooms \`rooms\` names,
 * \`counts\` counts). The claim then reads the plain waiting tasks of open
 * queues only, so tasks of paused or full queues, or of queues whose rate
 * bucket is empty, cost nothing.
 */
const openQueues = (T: string, Q: string, rooms: string, counts: string) => `${waitingPairs(T)},
  rooms(name, n) AS (SELECT * FROM unnest(${rooms}::text[], ${counts}::int[])),
  open AS (SELECT o.name, o.p, o.room FROM (SELECT pairs.q AS name, pairs.p, ${queueRoom(Q, 'pairs.q')} AS room FROM pairs) AS o
    WHERE o.room > 0)`;

/**
 * How many (open queue, priority level) pairs a claim reads at most, each up
 * to the claim's limit ($1), and so how many rows the claim may lock. A
 * constant bound tells the planner that the walk stops early: without it
 * the estimate of queues times levels (a recursive CTE is guessed at 100
 * rows) made the plan cost a hundred million, and PostgreSQL compiled it
 * with JIT on every claim (1.8 s of compilation for 2 ms of work, measured
 * with EXPLAIN ANALYZE). Beyond this many pairs with due work, the claim
 * takes from the first ones in their walk's order (waitingPairs).
 */
const QUEUE_LEVELS = 64;

/**
 * SQL: keyed waiting tasks (columns id, run_at, priority, serial, rate_key,
 * name, queue, holds), from the limit rows with room in the snapshot: each
 * concurrency group's first waiting tasks in due order (as many as its room,
 * due or not: the ranks of the claim count them), the tasks holding a slot
 * that wait for a retry, and each rate bucket's first due tasks without a
 * concurrency group (as many as its room). Each key reads at most $1 and keeps
 * its room's worth by rank: a LIMIT of the room itself (a column) is
 * estimated at a tenth of the table, and that estimate made the plan cost
 * enough for PostgreSQL to compile the claim with JIT (0.5 s per claim).
 */
const keyed = (T: string, L: string) => `
      SELECT w.id, w.run_at, w.priority, w.serial, w.rate_key, w.name, w.queue, false AS holds
      FROM ${L} AS l CROSS JOIN LATERAL (SELECT t.id, t.run_at, t.priority, t.serial, t.rate_key, t.name, t.queue,
            row_number() OVER (ORDER BY t.run_at, t.id) AS n FROM ${T} AS t
          WHERE t.serial = l.key AND t.state = 'waiting' AND NOT (t.id = ANY (l.holders))
          ORDER BY t.run_at, t.id LIMIT $1) AS w
      WHERE l.kind = 'concurrency' AND cardinality(l.holders) < l.lim AND w.n <= l.lim - cardinality(l.holders)
      UNION ALL
      SELECT t.id, t.run_at, t.priority, t.serial, t.rate_key, t.name, t.queue, true
      FROM ${L} AS l JOIN ${T} AS t ON t.id = ANY (l.holders)
      WHERE l.kind = 'concurrency' AND cardinality(l.holders) > 0 AND t.state = 'waiting' AND t.run_at <= now()
      UNION ALL
      SELECT w.id, w.run_at, w.priority, w.serial, w.rate_key, w.name, w.queue, false
      FROM ${L} AS l CROSS JOIN LATERAL (SELECT t.id, t.run_at, t.priority, t.serial, t.rate_key, t.name, t.queue,
            row_number() OVER (ORDER BY t.priority DESC, t.run_at, t.id) AS n FROM ${T} AS t
          WHERE t.rate_key = l.key AND t.serial IS NULL AND t.state = 'waiting' AND t.run_at <= now()
          ORDER BY t.priority DESC, t.run_at, t.id LIMIT $1) AS w
      WHERE l.kind = 'rate' AND l.key <> '' AND ${spent('l')} < l.lim AND w.n <= l.lim - ${spent('l')}`;

/**
 * SQL: the shared tasks a claim may take (fair.ts). \`fair\`: each queue's
 * first by turn within a priority, as many as its room (up to $1, and to the
 * free workers $8: they are claimed only into those), locked as the plain
 * ones are; \`fair_places\`: the places they take in the claim's
 * due order, the k-th by turn of a queue and priority taking the k-th due
 * time and id among them, so that shared tasks go in turn among themselves
 * and in due order beside the rest.
 */
const fairTurns = (T: string, Q: string, F: string, gate: string) => `fair AS (SELECT w.*,
        row_number() OVER (PARTITION BY w.queue, w.priority ORDER BY w.fair_tag, w.id) AS turn
      FROM (SELECT f.queue, ${queueRoom(Q, 'f.queue')} AS room FROM ${F} AS f) AS f CROSS JOIN LATERAL (
        SELECT t.id, t.run_at, t.priority, t.queue, t.fair_tag FROM ${T} AS t
        WHERE t.queue = f.queue AND t.state = 'waiting' AND t.fair_tag IS NOT NULL ${gate} ${NAMED}
        ORDER BY t.priority DESC, t.fair_tag, t.id LIMIT GREATEST(LEAST($1, $8, f.room), 0) FOR NO KEY UPDATE OF t SKIP LOCKED) AS w
      WHERE f.room > 0),
    -- As arrays by queue and priority: a join of the rows themselves on their place, over CTEs the
    -- planner has no statistics for, ran as a nested loop of every pair (27 of a claim of 512's 44 ms).
    fair_places AS (SELECT queue, priority, array_agg(run_at ORDER BY run_at, id) AS ats, array_agg(id ORDER BY run_at, id) AS ids
      FROM fair GROUP BY queue, priority)`;

/**
 * Claims up to $1 tasks for owner $2 for $3 ms: waiting tasks that are due,
 * by priority (highest first), then due time, then id; and running ones
 * whose lease ran out (their process died or stalled). Every time is the
 * server's: process clocks may disagree, the database's is the one clock.
 * An expired task whose lease already expired $4 times is failed with error
 * $5 instead (and lets go of its slots), and returned with \`failed_after\`
 * set, for this process to report. Our own expired leases are left
 * alone: this process is alive (it is claiming) and renews them. None is
 * taken over before the server has been up for $3 ms: leases ran out while
 * it was down (a restart) because no owner could renew, and a living owner
 * gets that long to renew its leases and report what finished meanwhile.
 * `unlessJobsDue`: claims only if no recurring job is due, and returns that
 * flag (on a row of its own if nothing was claimed). $6 (text[], or null for
 * any): only tasks of these handler names. $7: this process applies the
 * scheduler-wide bucket (key ''). $8: free workers, the most limited tasks
 * (a key, a queue with a rate, the scheduler-wide bucket, a fair share) claimed: never
 * more than can start.
 * $9/$10: this process's rooms for queues (names, counts). $11: ms this
 * process still waits before it takes over leases. $12: the prefix of the
 * announcement of its leases (leaseAnnouncedCte), or null.
 *
 * Candidates: plain tasks of open queues (openQueues), keyed ones from the
 * limit rows with room (keyed) whose queue has room in the snapshot, and
 * expired ones. Then, in the one lock order (see the file's comment), the
 * queue rows with a global concurrency or a rate (name order) and the
 * limit rows ((kind, key) order) they name, read at their latest version;
 * the claim decides from those, and writes each row once with what it
 * really took.
 *
 * Limits: a task with a concurrency group needs a slot (it holds one already,
 * or it is among the key's first `room` waiting tasks); then a token of its
 * rate bucket (the first `room` of the bucket's candidates that passed); a
 * key's tasks start in due order, so a key's task refused stops the key's
 * later ones; then each queue's room (this process's own, and for waiting
 * tasks the global one: a taken-over expired task keeps the slot its first
 * claim took), each queue's rate bucket (every start takes a token, a
 * takeover's too, as with a key's bucket), the scheduler-wide bucket and
 * $8 cut the list in order (a task of a queue with a rate is limited: $8
 * applies to it).
 * Tasks of one key are ordered by the priority of the key's first (priority
 * does not reorder a key), so every cut keeps each key's tasks a prefix.
 */
function claimSql(T: string, J: string, L: string, Q: string, M: string, F: string, unlessJobsDue: boolean): string {
  // When every candidate is a plain task (no key, not a takeover), no task failed for its expiries,
  // no candidate's queue has a global concurrency or a rate, and this process has neither queue rooms
  // nor the scheduler-wide bucket, the bookkeeping (six window sorts) passes every candidate in its
  // order: the claim then takes them in that order at once (bench/pg-plans.ts: a claim of
  // 273 plain tasks 4.6 -> 3.2-3.6 ms in its generic plan, 4.9 -> 3.5-3.8 in a custom one).
  const plainOnly = `SELECT $9::text[] IS NULL AND NOT $7::boolean AND NOT EXISTS (SELECT 1 FROM failed) AND NOT EXISTS (SELECT 1 FROM qlocked)
      AND NOT EXISTS (SELECT 1 FROM cand WHERE serial IS NOT NULL OR rate_key IS NOT NULL OR expired OR fair_tag IS NOT NULL) AS yes`;
  const gate = unlessJobsDue ? 'AND NOT (SELECT jobs_due FROM flag)' : '';
  const keyStarts = withStart('l.starts', 'l.counts', 'l.interval_ms', 'g.at', 'g.n');
  const queueStarts = withStart('q.rate_starts', 'q.rate_counts', 'q.rate_interval_ms', 'g.at', 'g.started');
  return `WITH RECURSIVE
    ${unlessJobsDue ? `flag AS (SELECT EXISTS (SELECT 1 FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()) AS jobs_due),` : ''}
    ${serverMarkCte(M)},
    ${openQueues(T, Q, '$9', '$10')},
    expired AS (SELECT id, run_at, priority, serial, rate_key, queue, expiries, NOT prefetched AS started FROM ${T}
      WHERE state = 'running' AND locked_until <= now() AND locked_by <> $2 ${gate} ${NAMED}
        -- Lease time the server spent down is not held against a living owner: nothing is taken
        -- over until the server has been up for a lease, time for owners to renew and report.
        AND now() >= ${serverUp(M)} + ${millis('$3')}
        -- Nor while the claiming process waits out a lease since it reached the server again ($11 ms
        -- left): an outage it saw (PgBouncer down, the server up) may have kept every owner away.
        AND $11::float8 <= 0
      ORDER BY run_at, id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED),
    failed AS (UPDATE ${T} AS t SET state = 'failed', expiries = t.expiries + 1, last_error = $5, locked_by = NULL, locked_until = NULL,
        updated_at = now()
      FROM expired WHERE t.id = expired.id AND expired.started AND expired.expiries >= $4
      RETURNING t.id, t.serial, t.queue, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options, t.priority,
        t.expiries),

    plain AS (SELECT w.id, w.run_at, w.priority, w.queue FROM open CROSS JOIN LATERAL (
        SELECT t.id, t.run_at, t.priority, t.queue FROM ${T} AS t
        WHERE ${plainWaiting('t')} AND t.queue = open.name AND t.priority = open.p
          AND t.run_at <= now() ${gate} ${NAMED}
          -- A queue with shares gives its plain tasks turns too (fair.ts): those are in \`fair\`.
          AND NOT EXISTS (SELECT 1 FROM ${F} AS f WHERE f.queue = open.name)
        ORDER BY t.run_at, t.id LIMIT LEAST($1, open.room) FOR NO KEY UPDATE OF t SKIP LOCKED) AS w
      LIMIT $1 * ${QUEUE_LEVELS}),
    ${fairTurns(T, Q, F, gate)},
    keyed AS (SELECT k.* FROM (${keyed(T, L)}) AS k WHERE ${queueRoom(Q, 'k.queue')} > 0),
    keyed_locked AS (SELECT t.id FROM ${T} AS t
      WHERE t.id IN (SELECT id FROM keyed WHERE run_at <= now() ${NAMED}) AND t.state = 'waiting' ${gate}
      FOR NO KEY UPDATE SKIP LOCKED),
    cand AS (SELECT id, run_at, priority, serial, rate_key, queue, true AS holds, true AS usable, true AS expired, NULL::float8 AS fair_tag,
          run_at AS ord_at, id AS ord_id FROM expired
        WHERE expiries < $4 OR NOT started
      UNION ALL SELECT id, run_at, priority, NULL, NULL, queue, false, true, false, NULL, run_at, id FROM plain
      UNION ALL SELECT id, run_at, priority, serial, rate_key, queue, holds, id IN (SELECT id FROM keyed_locked), false, NULL, run_at, id FROM keyed
      UNION ALL SELECT f.id, f.run_at, f.priority, NULL, NULL, f.queue, false, true, false, f.fair_tag, p.ats[f.turn], p.ids[f.turn]
        FROM fair AS f JOIN fair_places AS p ON p.queue = f.queue AND p.priority = f.priority),
    qlocked AS (${lockQueues(Q, 'SELECT queue FROM failed UNION ALL SELECT queue FROM cand', true)}),
    locked AS (SELECT l.kind, l.key, l.lim, l.holders,
        CASE l.kind WHEN 'concurrency' THEN l.lim - cardinality(l.holders) ELSE l.lim - ${spent('l')} END AS room
      FROM ${L} AS l
      WHERE ((l.kind = 'concurrency' AND l.key IN (SELECT serial FROM cand UNION ALL SELECT serial FROM failed))
        OR (l.kind = 'rate' AND (l.key IN (SELECT rate_key FROM cand) OR (l.key = '' AND $7::boolean AND EXISTS (SELECT 1 FROM cand)))))
        AND (SELECT count(*) FROM qlocked) >= 0
      ORDER BY l.kind, l.key FOR NO KEY UPDATE),
    stamp AS (SELECT clock_timestamp() AS at FROM (SELECT count(*) FROM locked) AS every_lock_taken),
    slotted AS (SELECT c.*, c.holds OR c.id = ANY (k.holders) AS held, k.room AS slots,
        row_number() OVER (PARTITION BY c.serial, c.holds OR c.id = ANY (k.holders) ORDER BY c.run_at, c.id) AS cr,
        first_value(c.priority) OVER (PARTITION BY c.serial ORDER BY c.run_at, c.id) AS key_priority
      FROM cand AS c LEFT JOIN locked AS k ON k.kind = 'concurrency' AND k.key = c.serial),
    with_slot AS (SELECT * FROM slotted WHERE serial IS NULL OR held OR cr <= slots),
    tokened AS (SELECT s.*, b.room AS tokens,
        row_number() OVER (PARTITION BY s.rate_key, s.usable ORDER BY s.priority DESC, s.run_at, s.id) AS rr
      FROM with_slot AS s LEFT JOIN locked AS b ON b.kind = 'rate' AND b.key = s.rate_key),
    allowed AS (SELECT *, CASE WHEN serial IS NULL THEN priority ELSE key_priority END AS effective FROM (
        SELECT *, bool_and(ready) OVER (PARTITION BY serial, held ORDER BY run_at, id ROWS UNBOUNDED PRECEDING) AS in_order FROM (
          SELECT *, usable AND (rate_key IS NULL OR tokens IS NULL OR rr <= tokens) AS ready FROM tokened) AS r) AS x
      WHERE ready AND (serial IS NULL OR held OR in_order)),
    roomed AS (SELECT a.*, g.tokens AS queue_tokens FROM (SELECT a.*,
          row_number() OVER (PARTITION BY a.queue ORDER BY a.effective DESC, a.ord_at, a.ord_id) AS qn,
          row_number() OVER (PARTITION BY a.queue, a.expired ORDER BY a.effective DESC, a.ord_at, a.ord_id) AS gn
        FROM allowed AS a) AS a LEFT JOIN qlocked AS g ON g.name = a.queue
      WHERE a.qn <= COALESCE((SELECT n FROM rooms WHERE rooms.name = a.queue), ${NO_LIMIT})
        AND (a.expired OR g.name IS NULL OR (NOT g.paused AND (g.room IS NULL OR a.gn <= g.room)))),
    metered AS (SELECT *, queue_tokens IS NOT NULL AS rated FROM (SELECT r.*,
          row_number() OVER (PARTITION BY r.queue ORDER BY r.effective DESC, r.ord_at, r.ord_id) AS tn FROM roomed AS r) AS r
      WHERE queue_tokens IS NULL OR tn <= queue_tokens),
    due AS (SELECT id, serial, rate_key, held, queue, expired, limited, effective, run_at, fair_tag, ord_at, ord_id FROM (
        SELECT *, row_number() OVER (PARTITION BY limited ORDER BY effective DESC, ord_at, ord_id) AS lr
        FROM (SELECT *, serial IS NOT NULL OR rate_key IS NOT NULL OR rated OR expired OR fair_tag IS NOT NULL OR $7::boolean AS limited
          FROM metered) AS m) AS x
      WHERE NOT limited OR lr <= $8
      ORDER BY effective DESC, ord_at, ord_id
      LIMIT CASE WHEN $7::boolean THEN LEAST($1, COALESCE((SELECT room FROM locked WHERE kind = 'rate' AND key = ''), $1)) ELSE $1 END),
    -- What starts at once: limited tasks and takeovers (claimed only into free workers), then plain
    -- ones into the free workers left, in claim order; the rest is prefetched and marked started
    -- later, when it does (renew). A lease that runs out counts against a task only if it started.
    -- Computed on the rows of due itself, not joined back to it: a join the planner, misled by a table
    -- not analyzed yet, ran as a nested loop that recomputed this window once per row
    -- (133 of a claim's 172 ms at 273 rows).
    -- Only plain tasks, no limit in play (plainOnly): the bookkeeping above is skipped (a one-time
    -- filter: its sorts never run), and the candidates taken in its order.
    plain_only AS (${plainOnly}),
    starting AS (SELECT *, limited OR row_number() OVER (ORDER BY limited DESC, effective DESC, ord_at, ord_id) <= $8 AS now FROM due
        WHERE NOT (SELECT yes FROM plain_only)
      UNION ALL
      (SELECT id, NULL, NULL, false, queue, false, false, priority, run_at, NULL, run_at, id,
          row_number() OVER (ORDER BY priority DESC, run_at, id) <= $8
        FROM cand WHERE (SELECT yes FROM plain_only) ORDER BY priority DESC, run_at, id LIMIT $1)),
    claimed AS (UPDATE ${T} AS t SET state = 'running', locked_by = $2, locked_until = clock_timestamp() + ${millis('$3')},
        -- A takeover of a task that never started is neither an attempt nor an expiry.
        attempts = t.attempts + (t.state = 'waiting' OR NOT t.prefetched)::int,
        expiries = t.expiries + (t.state = 'running' AND NOT t.prefetched)::int,
        started_at = (SELECT at FROM stamp), prefetched = NOT due.now, fair_tag = NULL, updated_at = now()
      -- Read back as arrays, as the settle reads its batch: the planner then sees a few rows of unknown
      -- number and finds each by the primary key. Guessing a few hundred from starting's plan, it
      -- joined them to a small table (the bench's 20,000 rows) by scanning all of it (+2.5 ms a claim).
      FROM (SELECT array_agg(id) AS ids, array_agg(held) AS held, array_agg(expired) AS expired, array_agg(now) AS now,
            array_agg(fair_tag) AS tags FROM starting) AS a
        CROSS JOIN LATERAL unnest(a.ids, a.held, a.expired, a.now, a.tags) AS due(id, held, expired, now, tag)
      WHERE t.id = due.id AND (t.state = 'waiting' OR (t.state = 'running' AND t.locked_until <= now()))
      RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options, t.priority,
        t.serial, t.rate_key, due.held, t.queue, due.expired, due.now AS started, due.tag AS fair_tag, t.steps),
    -- A statement updates a row once (a second UPDATE of it in the same statement is lost): each
    -- queue row and concurrency row gets one UPDATE, with the slots the claim took and those
    -- that the tasks it failed for good gave back, and a queue row the tokens its starts took.
    slots_granted AS (UPDATE ${Q} AS q
      SET running = CASE WHEN q.global_concurrency IS NULL THEN q.running ELSE GREATEST(q.running + g.n - g.gone, 0) END, granted = g.n,
        rate_starts = CASE WHEN q.rate_limit IS NULL OR g.started = 0 THEN q.rate_starts ELSE ${queueStarts[0]} END,
        rate_counts = CASE WHEN q.rate_limit IS NULL OR g.started = 0 THEN q.rate_counts ELSE ${queueStarts[1]} END,
        updated_at = now()
      FROM (SELECT queue, count(*) FILTER (WHERE slot)::int AS n, count(*) FILTER (WHERE start)::int AS started,
            count(*) FILTER (WHERE NOT start)::int AS gone, (SELECT at FROM stamp) AS at FROM (
          SELECT queue, NOT expired AS slot, true AS start FROM claimed UNION ALL SELECT queue, false, false FROM failed) AS x GROUP BY queue) AS g
      WHERE q.name = g.queue AND q.name IN (SELECT name FROM qlocked)),
    slots_taken AS (UPDATE ${L} AS l
      SET holders = ARRAY(SELECT h FROM unnest(l.holders) AS h WHERE h <> ALL (g.gone)) || g.ids, updated_at = now()
      FROM (SELECT serial, COALESCE(array_agg(id) FILTER (WHERE took), '{}') AS ids, COALESCE(array_agg(id) FILTER (WHERE NOT took), '{}') AS gone
          FROM (SELECT serial, id, true AS took FROM claimed WHERE serial IS NOT NULL AND NOT held
            UNION ALL SELECT serial, id, false FROM failed WHERE serial IS NOT NULL) AS x GROUP BY serial) AS g
      WHERE l.kind = 'concurrency' AND l.key = g.serial),
    tokens_taken AS (UPDATE ${L} AS l
      SET starts = ${keyStarts[0]}, counts = ${keyStarts[1]}, updated_at = now()
      FROM (SELECT key, n, (SELECT at FROM stamp) AS at FROM (
          SELECT rate_key AS key, count(*) AS n FROM claimed WHERE rate_key IS NOT NULL GROUP BY rate_key
          UNION ALL SELECT '', count(*) FROM claimed WHERE $7::boolean HAVING count(*) > 0) AS y) AS g
      WHERE l.kind = 'rate' AND l.key = g.key),
    -- A queue's virtual time: the latest turn started (fair.ts); its row is locked last.
    virtual_moved AS (UPDATE ${F} AS f SET virtual = GREATEST(f.virtual, g.latest)
      FROM (SELECT queue, max(fair_tag) AS latest FROM claimed WHERE fair_tag IS NOT NULL GROUP BY queue) AS g WHERE f.queue = g.queue),
    ${leaseAnnouncedCte('$12', '$3')}
    -- The tasks claimed, and those failed for their expiries (failed_after set): the process reports those.
    ${unlessJobsDue ? 'SELECT flag.jobs_due, c.* FROM flag LEFT JOIN (' : ''}
      SELECT id, name, payload, attempts, max_attempts, run_at, options, priority, started, NULL::int AS failed_after, steps FROM claimed
      WHERE ${announcedFirst}
      UNION ALL SELECT id, name, payload, attempts, max_attempts, run_at, options, priority, false, expiries, NULL FROM failed
    ${unlessJobsDue ? ') AS c ON true' : ''}`;
}

/**
 * ms until something is due, by the server's clock (negative: overdue);
 * tasks only of the names $1 (null: any); $2: this process applies the
 * scheduler-wide bucket; $3/$4: this process's rooms for queues, as in the
 * claim. A task that cannot start does not count: a full key's tasks (the
 * release of a slot wakes the processes, see settle), a rate bucket's
 * tasks until the bucket has room again, a paused or full queue's plain
 * tasks (a resume, or a slot given back, wakes the processes). A queue
 * whose rate bucket is empty counts when the bucket has a token again
 * (\`refills\`), whatever its tasks: no index finds a queue's keyed tasks,
 * and waking once when a bucket that emptied refills costs one statement.
 * A lease that ran out counts when the claim may take it over: its buckets
 * have a token, the server has been up for a lease ($5 ms), and this
 * process has reached it for a lease since it last lost it ($6 ms left).
 */
function nextDueSql(T: string, J: string, L: string, Q: string, M: string, F: string): string {
  const named = `($1::text[] IS NULL OR t.name = ANY($1::text[]))`;
  // When bucket \`l\` has room again: its oldest start in the window leaves it.
  const refill = (l: string) => `CASE WHEN ${spent(l)} < ${l}.lim THEN now() ELSE ${refillOf(`${l}.starts`, `${l}.interval_ms`)} END`;
  return `WITH RECURSIVE ${openQueues(T, Q, '$3', '$4')},
      firsts AS (SELECT w.run_at, open.name AS queue FROM open CROSS JOIN LATERAL (SELECT t.run_at FROM ${T} AS t
          WHERE ${plainWaiting('t')} AND t.queue = open.name AND t.priority = open.p AND ${named}
          ORDER BY t.run_at, t.id LIMIT 1) AS w
        LIMIT ${QUEUE_LEVELS}),
      heads AS (SELECT h.at AS run_at FROM (SELECT w.run_at AS at, w.queue FROM ${L} AS l CROSS JOIN LATERAL (
            SELECT t.run_at, t.name, t.queue FROM ${T} AS t
            WHERE t.serial = l.key AND t.state = 'waiting' AND NOT (t.id = ANY (l.holders)) ORDER BY t.run_at, t.id LIMIT 1) AS w
          WHERE l.kind = 'concurrency' AND cardinality(l.holders) < l.lim AND ($1::text[] IS NULL OR w.name = ANY($1::text[]))
          UNION ALL SELECT t.run_at, t.queue FROM ${L} AS l JOIN ${T} AS t ON t.id = ANY (l.holders)
          WHERE l.kind = 'concurrency' AND cardinality(l.holders) > 0 AND t.state = 'waiting' AND ${named}
          UNION ALL SELECT GREATEST(w.run_at, ${refill('l')}), w.queue FROM ${L} AS l CROSS JOIN LATERAL (SELECT t.run_at, t.queue FROM ${T} AS t
            WHERE t.rate_key = l.key AND t.serial IS NULL AND t.state = 'waiting' AND ${named}
            ORDER BY t.run_at, t.id LIMIT 1) AS w
          WHERE l.kind = 'rate' AND l.key <> '') AS h
        -- A keyed task of a paused or full queue waits with it: a resume, or a slot given back, wakes the processes.
        WHERE ${queueRoom(Q, 'h.queue')} > 0),
      -- Shared tasks: the first due without a turn (the next claim gives it one), or any with one, in a queue with room.
      fair_firsts AS ((SELECT t.run_at FROM ${T} AS t WHERE ${untaggedShared('t')} AND ${named} ORDER BY t.run_at, t.id LIMIT 1)
        UNION ALL SELECT w.run_at FROM ${F} AS f CROSS JOIN LATERAL (SELECT t.run_at FROM ${T} AS t
            WHERE t.queue = f.queue AND t.state = 'waiting' AND t.fair_tag IS NOT NULL AND ${named} LIMIT 1) AS w
          WHERE ${queueRoom(Q, 'f.queue')} > 0),
      refills AS (SELECT ${refillOf('q.rate_starts', 'q.rate_interval_ms')} AS at FROM ${Q} AS q
        WHERE q.rate_limit IS NOT NULL AND NOT q.paused AND ${queueTokens('q')} <= 0),
      soonest AS (SELECT LEAST((SELECT MIN(run_at) FROM firsts), (SELECT MIN(run_at) FROM heads), (SELECT MIN(run_at) FROM fair_firsts),
        (SELECT MIN(at) FROM refills)) AS at),
      refilled AS (SELECT ${refill('l')} AS at FROM ${L} AS l WHERE $2::boolean AND l.kind = 'rate' AND l.key = ''),
      -- A lease that ran out is due when its task may start again: once its buckets (its key's,
      -- its queue's, the scheduler-wide one) have a token, or a process would claim in a loop.
      leases AS (SELECT MIN(locked_until) AS at FROM ${T} AS t WHERE t.state = 'running' AND t.locked_until > now() AND ${named}
        UNION ALL SELECT MIN(GREATEST(t.locked_until, ${serverUp(M)} + ${millis('$5')}, now() + ${millis('$6')},
            COALESCE((SELECT ${refill('l')} FROM ${L} AS l WHERE l.kind = 'rate' AND l.key = t.rate_key), '-infinity'),
            COALESCE((SELECT ${refillOf('q.rate_starts', 'q.rate_interval_ms')} FROM ${Q} AS q
              WHERE q.name = t.queue AND q.rate_limit IS NOT NULL AND ${queueTokens('q')} <= 0), '-infinity'),
            COALESCE((SELECT at FROM refilled), '-infinity')))
          FROM ${T} AS t WHERE t.state = 'running' AND t.locked_until <= now() AND ${named})
      SELECT (extract(epoch from LEAST(
        GREATEST((SELECT at FROM soonest), (SELECT at FROM refilled)),
        (SELECT MIN(at) FROM leases),
        (SELECT MIN(next_run_at) FROM ${J} WHERE state = 'scheduled')) - now()) * 1000)::float8 AS t,
        -- A due task without a turn: a shared one, or a plain one of a queue with shares (the next claim gives it one).
        ${untaggedDue(T)} OR EXISTS (SELECT 1 FROM firsts WHERE run_at <= now() AND queue IN (SELECT queue FROM ${F})) AS untagged`;
}

// The plain claim: the full claim above for the common case where no
// limit of any kind is in play, as a statement of its own (bench/NOTES.md).
//
// Why a second statement: the full claim plans and runs everything a claim
// may meet (takeovers of expired leases, keyed tasks and their limit rows,
// queues with a global concurrency or a rate, the scheduler-wide bucket),
// and pays for it when there is none of it: about 3.5 ms to plan each of
// the five custom plans every connection makes, and about 0.7 ms a claim in
// CTEs that find nothing. This one asks first, cheaply, whether any of that
// exists anywhere (`limited`: any limit row, any queue with a global
// concurrency or a rate, any lease that ran out and is not this process's
// own); if it does, it claims nothing and says so, and the store sends the
// full claim. If not, the full claim's candidates are plain waiting tasks
// only and its bookkeeping would pass them all in their order, which is
// what this claims: the same tasks, in the same order, with the same
// columns set. The check is broader than the full claim's own (a limit row
// with no task behind it, a lease the full claim would not take over yet),
// never narrower, so it may send a claim the long way but never claims what
// the full claim would not.
/**
 * Claims up to $1 plain waiting tasks that are due, by priority (highest
 * first), then due time, then id, for owner $2 for $3 ms; $4 (text[], or
 * null for any): only tasks of these handler names; $5: free workers (the
 * first $5 start at once, the rest are prefetched, as in the full claim);
 * $6: the prefix of the announcement of its leases (leaseAnnouncedCte), or
 * null. Claims nothing if a recurring job is due (`jobs_due`) or a limit is in
 * play (`limited`): the first row carries both flags (with a null id if
 * nothing was claimed). Used only by a process without queue rooms or the
 * scheduler-wide bucket (the full claim's $9 and $7). (Its SQL comment's
 * claim-sql.ts is this file's full claim: the text stays as it is, it names
 * the prepared statement.)
 */
function plainClaimSql(T: string, J: string, L: string, Q: string, M: string, F: string): string {
  return `WITH RECURSIVE
    flag AS (SELECT EXISTS (SELECT 1 FROM ${J} WHERE state = 'scheduled' AND next_run_at <= now()) AS jobs_due),
    ${limitedCte(T, L, Q, F, '$2')},
    ${serverMarkCte(M)},
    ${waitingPairs(T)},
    ${openPairs(Q)},
    plain AS (SELECT w.id, w.run_at, w.priority FROM open CROSS JOIN LATERAL (
        SELECT t.id, t.run_at, t.priority FROM ${T} AS t
        WHERE ${plainWaiting('t')} AND t.queue = open.name AND t.priority = open.p
          AND t.run_at <= now() AND ($4::text[] IS NULL OR t.name = ANY($4::text[]))
          AND NOT (SELECT jobs_due FROM flag) AND NOT (SELECT yes FROM limited)
        ORDER BY t.run_at, t.id LIMIT $1 FOR NO KEY UPDATE OF t SKIP LOCKED) AS w
      LIMIT $1 * ${QUEUE_LEVELS}),
    starting AS (SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) <= $5 AS now FROM plain
      ORDER BY priority DESC, run_at, id LIMIT $1),
    -- Read back as arrays (see claimed in claim-sql.ts): a few rows of unknown number, found by the primary key.
    claimed AS (UPDATE ${T} AS t SET state = 'running', locked_by = $2, locked_until = clock_timestamp() + ${millis('$3')},
        attempts = t.attempts + 1, started_at = (SELECT clock_timestamp()), prefetched = NOT due.now, updated_at = now()
      FROM (SELECT array_agg(id) AS ids, array_agg(now) AS now FROM starting) AS a
        CROSS JOIN LATERAL unnest(a.ids, a.now) AS due(id, now)
      WHERE t.id = due.id AND t.state = 'waiting'
      RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, ${ms('t.run_at')} AS run_at, t.options, t.priority,
        due.now AS started, t.steps),
    ${leaseAnnouncedCte('$6', '$3')}
    SELECT flag.jobs_due, limited.yes AS limited, c.* FROM flag CROSS JOIN limited LEFT JOIN (
      SELECT id, name, payload, attempts, max_attempts, run_at, options, priority, started, NULL::int AS failed_after, steps FROM claimed
      WHERE ${announcedFirst}
    ) AS c ON true`;
}

/** SQL: a CTE `open(name, p)`: the (queue, priority) pairs of `pairs` whose queue is not paused (the plain statements'). */
const openPairs = (Q: string) =>
  `open AS (SELECT pairs.q AS name, pairs.p FROM pairs WHERE NOT COALESCE((SELECT paused FROM ${Q} WHERE name = pairs.q), false))`;

/**
 * SQL: a CTE `limited(yes)`: whether anything the plain statements leave
 * out is in play anywhere: a limit row, a queue with a global concurrency
 * or a rate, a lease that ran out (but owner `owner`'s, if given: the
 * plain claim's own are its to take back), a queue with shares or a due
 * shared task without a turn. Broader than what the full statements act on,
 * never narrower.
 */
function limitedCte(T: string, L: string, Q: string, F: string, owner?: string): string {
  const othersLease = owner === undefined ? '' : ` AND locked_by <> ${owner}`;
  return `limited AS (SELECT EXISTS (SELECT 1 FROM ${L})
      OR EXISTS (SELECT 1 FROM ${Q} WHERE global_concurrency IS NOT NULL OR rate_limit IS NOT NULL)
      OR EXISTS (SELECT 1 FROM ${T} WHERE state = 'running' AND locked_until <= now()${othersLease})
      OR EXISTS (SELECT 1 FROM ${F}) OR ${untaggedDue(T)} AS yes)`;
}

// The plain next-due: the full one above for the plain claim's case, as a
// statement of its own. The full one plans every part a limit may need
// (keyed tasks' heads, buckets' refills, fair turns, takeovers of expired
// leases): about 15 ms a custom plan, and 25 on a cold connection, each
// connection planning it five times; a process start readies three. With
// nothing limited those parts find nothing, and the answer is this one's.
/**
 * ms until something is due (negative: overdue), by the server's clock,
 * while no limit is in play (`limited`, as the plain claim's, any expired
 * lease counting): the first plain waiting task of a queue not paused, a
 * shared task (its turn is given when it is due), a lease running out, a
 * recurring job; tasks only of the names $1 (null: any). With a limit in
 * play it answers nothing and says so: the full next-due follows.
 */
function plainNextDueSql(T: string, J: string, L: string, Q: string, F: string): string {
  const named = `($1::text[] IS NULL OR t.name = ANY($1::text[]))`;
  return `WITH RECURSIVE ${limitedCte(T, L, Q, F)},
    ${waitingPairs(T)},
    ${openPairs(Q)},
    firsts AS (SELECT w.run_at FROM open CROSS JOIN LATERAL (SELECT t.run_at FROM ${T} AS t
        WHERE ${plainWaiting('t')} AND t.queue = open.name AND t.priority = open.p AND ${named}
        ORDER BY t.run_at, t.id LIMIT 1) AS w
      LIMIT ${QUEUE_LEVELS})
    SELECT CASE WHEN NOT limited.yes THEN (extract(epoch from LEAST(
        (SELECT MIN(run_at) FROM firsts),
        (SELECT t.run_at FROM ${T} AS t WHERE ${untaggedShared('t')} AND ${named} ORDER BY t.run_at, t.id LIMIT 1),
        (SELECT MIN(t.locked_until) FROM ${T} AS t WHERE t.state = 'running' AND ${named}),
        (SELECT MIN(next_run_at) FROM ${J} WHERE state = 'scheduled')) - now()) * 1000)::float8 END AS t,
      limited.yes AS limited
    FROM limited`;
}
