// Leases: every third of the lease, renews the leases of the claims this
// process holds, running (Holdings) and finished but unconfirmed (the
// completer's), and stops whatever the store says is no longer ours. The
// same call hands back claims whose answer never reached this process.
// With nothing held and no claim answer possibly lost, it sends nothing: an
// idle worker keeps the database quiet.
import type { Completer } from './completer.js';
import type { Holdings } from './holdings.js';
import type { RunnerContext } from './runner-context.js';

/** What the renewals need to know of the claimer. */
export interface ClaimState {
  /** True while a claim round is on its way (its answer may be waiting unread). */
  readonly claiming: boolean;
  /** When (clock ms) a claim round last failed; -Infinity if none did. */
  readonly lastFailure: number;
}

/** @internal */
export class Leases {
  readonly #ctx: RunnerContext;
  readonly #holdings: Holdings;
  readonly #completer: Completer;
  readonly #claims: ClaimState;
  #timer: unknown = undefined;
  /** The renewal on its way, so a slow one is not overtaken and close() can wait for it. */
  #renewal: Promise<void> | undefined = undefined;
  /** The last failed claim (its clock time) whose tasks, had its answer been lost, a renewal has surely handed back. */
  #handedBack = -Infinity;

  constructor(ctx: RunnerContext, holdings: Holdings, completer: Completer, claims: ClaimState) {
    this.#ctx = ctx;
    this.#holdings = holdings;
    this.#completer = completer;
    this.#claims = claims;
  }

  start(): void {
    this.#timer = this.#ctx.loop.clock.setTimer(this.#renew, this.#ctx.lease / 3, this.#ctx.loop.unref);
  }

  /** No more renewals (close() is over); resolves once the one on its way is back. */
  stop(): Promise<void> {
    if (this.#timer !== undefined) this.#ctx.loop.clock.clearTimer(this.#timer);
    return this.#renewal ?? Promise.resolve();
  }

  /** Renews the leases of running tasks and of finished ones whose outcome is not confirmed yet. */
  #renew = (): void => {
    const { store, loop, owner, lease } = this.#ctx;
    if (this.#ctx.finished) return;
    this.#timer = loop.clock.setTimer(this.#renew, lease / 3, loop.unref);
    // A renewal still on its way (a slow database) is not overtaken by another.
    if (this.#renewal !== undefined) return;
    // Sent with no ids too while a failed claim's answer may have been lost: a
    // shared store also hands back claims whose answer never arrived. Never
    // while a claim is on its way: its answer may be waiting unread behind a
    // blocked event loop, and the task would then run here and again
    // elsewhere. A claim whose answer was lost has failed here already.
    const now = loop.clock.now();
    const failed = this.#claims.lastFailure;
    const ids = [...this.#holdings.ids(), ...this.#completer.ids()];
    if (ids.length === 0 && failed <= this.#handedBack) return;
    const started = [...this.#holdings.starts];
    const handBack = !this.#claims.claiming;
    this.#renewal = store
      .renew({ owner, ids, now, lease, handBack, started })
      .then((lost) => {
        // The store hands back a lost claim's tasks once they are 3 × its timeout old, and a claim
        // commits at most a timeout after it failed here (lease >= 3 × timeout): a hand-back sent
        // two leases after the failure has surely passed them.
        if (handBack && now >= failed + 2 * lease) this.#handedBack = Math.max(this.#handedBack, failed);
        for (const id of started) this.#holdings.starts.delete(id);
        // Another process owns these now (our lease expired) or they were
        // cancelled: stop them here, and stop writing their outcomes.
        for (const id of lost) {
          this.#holdings.cancel(id);
          this.#completer.forget(id);
          this.#holdings.serials.delete(id);
        }
      })
      .catch((error: unknown) => this.#ctx.report(error))
      .finally(() => {
        this.#renewal = undefined;
      });
  };
}
