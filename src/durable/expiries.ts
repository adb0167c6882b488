// Leases that run out too often: a task that kills or stalls its process must
// not be taken over for ever. After `maxLeaseExpiries` expiries of a task that
// had started, the claim that meets its next expiry records it failed with
// the text below, and that process (the one that decided) reports it once,
// with the error below, as the `failure` event and to `onError`.
import { TaskheapError } from '../core/errors.js';

/** How many times a task's lease may expire (its process died or stalled) before it is failed. */
export const DEFAULT_MAX_LEASE_EXPIRIES = 1;

/** Why a task that expired `times` times failed; the stored text and the error say the same. */
function expiredMessage(times: number): string {
  return `the lease of this task expired ${times} times (its process died, or blocked its event loop for longer than the lease); maxLeaseExpiries is ${times - 1}`;
}

/** The `last_error` of a task failed because its lease expired too often. */
export function leaseExpiredText(times: number): string {
  return `LeaseExpiredError: ${expiredMessage(times)}`;
}

/**
 * A stored task failed without running again: its lease ran out
 * `maxLeaseExpiries + 1` times while it ran (its process died, or blocked
 * its event loop for longer than the lease). The process whose claim
 * decided it emits `failure` and calls `onError` with this error, once.
 * @example
 * scheduler.on('failure', (task, error) => {
 *   if (error instanceof LeaseExpiredError) log.warn(`stored task ${error.id} kept killing its workers`);
 * });
 */
export class LeaseExpiredError extends TaskheapError {
  /** The stored task's id. */
  readonly id: number;
  /** How many times its lease expired. */
  readonly expiries: number;

  constructor(id: number, expiries: number) {
    super(`Task ${id}: ${expiredMessage(expiries)}`, 'ERR_LEASE_EXPIRED');
    this.id = id;
    this.expiries = expiries;
  }
}
