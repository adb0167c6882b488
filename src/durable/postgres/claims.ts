// Which claim statement a claim sends: the plain claim (plain-claim-sql.ts)
// while no limit is in play, else the full one (claim-sql.ts); and the due
// recurring jobs materialized first, in one transaction with the claim, when
// a claim finds some (materialize.ts).
import type { ClaimedTask, DueJob, JobAdvance, QueueRooms } from '../store.js';
import { toClaims, type ClaimRow } from '../rows.js';
import type { Connection } from './connection.js';
import { materialize } from './materialize.js';
import { roomArrays } from './params.js';
import type { Statements } from './sql.js';

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
}

/** @internal */
export class Claims {
  readonly #db: Connection;
  readonly #sql: Statements;
  /** The full claim's $4 and $5: a task whose lease ran out more than this many times fails, with this error. */
  readonly #maxExpiries: number;
  readonly #expiredText: string;
  /** Claims left to send straight to the full statement (see FULL_AFTER_LIMITED). */
  #fullOnly = 0;

  constructor(db: Connection, sql: Statements, maxExpiries: number, expiredText: string) {
    this.#db = db;
    this.#sql = sql;
    this.#maxExpiries = maxExpiries;
    this.#expiredText = expiredText;
  }

  /** Claims what `ask` asks for; due recurring jobs are materialized first (their occurrences may be claimed too). */
  async claim(ask: ClaimAsk, advance: Advance): Promise<ClaimedTask[]> {
    // The common case, no recurring job due: one statement claims, and says whether a job is due.
    // Both claims are named statements, planned once per connection (prepared.ts). Due times and
    // leases are the server's: this process's clock is not used.
    const plain = ask.rated || (ask.rooms !== undefined && ask.rooms.size > 0) ? undefined : await this.#plain(ask);
    if (plain !== undefined && !plain.limited && !plain.jobsDue) return plain.claims;
    const params = this.#fullParams(ask);
    if (plain === undefined || !plain.jobsDue) {
      const { rows } = await this.#db.query<FlaggedRow>(this.#sql.claimUnlessJobsDue, params, true);
      if (rows[0]?.jobs_due !== true) return claimsOf(rows);
    }
    return this.#db.transaction(async (client) => {
      await materialize(client, this.#sql, advance);
      const { rows } = await client.query<ClaimRow>(this.#sql.claim, params);
      return toClaims(rows);
    });
  }

  /** The plain claim, unless a recent one found a limit in play. */
  async #plain(ask: ClaimAsk): Promise<{ claims: ClaimedTask[]; limited: boolean; jobsDue: boolean } | undefined> {
    if (this.#fullOnly > 0) {
      this.#fullOnly--;
      return undefined;
    }
    const { rows } = await this.#db.query<FlaggedRow>(
      this.#sql.claimPlain,
      [ask.limit, ask.owner, ask.lease, ask.names ?? null, ask.free],
      true,
    );
    const limited = rows[0]?.limited === true;
    if (limited) this.#fullOnly = FULL_AFTER_LIMITED;
    return { claims: claimsOf(rows), limited, jobsDue: rows[0]?.jobs_due === true };
  }

  /** The statements to ready on a fresh connection (Connection.warm): each claim, of nothing. */
  warmups(owner: string, lease: number, names: readonly string[] | undefined) {
    const full = { owner, lease, limit: 0, names, rooms: undefined, rated: false, free: 0, takeoverWait: 0 };
    return [
      { text: this.#sql.claimPlain, values: [0, owner, lease, names ?? null, 0] },
      { text: this.#sql.claimUnlessJobsDue, values: this.#fullParams(full) },
    ];
  }

  #fullParams(ask: ClaimAsk): unknown[] {
    return [
      ask.limit,
      ask.owner,
      ask.lease,
      this.#maxExpiries,
      this.#expiredText,
      ask.names ?? null,
      ask.rated,
      ask.free,
      ...roomArrays(ask.rooms),
      ask.takeoverWait,
    ];
  }
}

function claimsOf(rows: FlaggedRow[]): ClaimedTask[] {
  return toClaims(rows.filter((row): row is ClaimRow & FlaggedRow => row.id !== null));
}
