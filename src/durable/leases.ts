// Leases: every third of the lease, renews the leases of the claims this
// process holds, running (Holdings) and finished but unconfirmed (the
// completer's), and stops whatever the store says is no longer ours. The
// same call hands back claims whose answer never reached this process.
import type { Completer } from './completer.js';
import type { Holdings } from './holdings.js';
import type { RunnerContext } from './runner-context.js';

/** @internal */
export class Leases {
  readonly #ctx: RunnerContext;
  readonly #holdings: Holdings;
  readonly #completer: Completer;
  /** True while a claim round is on its way (the claimer's). */
  readonly #claiming: () => boolean;
  #timer: unknown = undefined;
  /** The renewal on its way, so a slow one is not overtaken and close() can wait for it. */
  #renewal: Promise<void> | undefined = undefined;

  constructor(ctx: RunnerContext, holdings: Holdings, completer: Completer, claiming: () => boolean) {
    this.#ctx = ctx;
    this.#holdings = holdings;
    this.#completer = completer;
    this.#claiming = claiming;
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
    // Sent with no ids too: a shared store also hands back claims whose answer
    // never arrived. Never while a claim is on its way: its answer may be
    // waiting unread behind a blocked event loop, and the task would then run
    // here and again elsewhere. A claim whose answer was lost has failed here
    // already, so the next renewal hands it back.
    const ids = [...this.#holdings.ids(), ...this.#completer.ids()];
    const started = [...this.#holdings.starts];
    this.#renewal = store
      .renew({ owner, ids, now: loop.clock.now(), lease, handBack: !this.#claiming(), started })
      .then((lost) => {
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
