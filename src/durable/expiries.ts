// Leases that run out too often: a task that kills or stalls its process must
// not be taken over for ever. After `maxLeaseExpiries` expiries of a task that
// had started, the claim that meets its next expiry records it failed with
// the text below, and that process (the one that decided) reports it once,
// with `LeaseExpiredError` (errors.ts), as the `failure` event and to `onError`.
/** How many times a task's lease may expire (its process died or stalled) before it is failed. */
export const DEFAULT_MAX_LEASE_EXPIRIES = 1;

/** Why a task that expired `times` times failed; the stored text and the error (`LeaseExpiredError`, errors.ts) say the same. @internal */
export function expiredMessage(times: number): string {
  return `the lease of this task expired ${times} times (its process died, or blocked its event loop for longer than the lease); maxLeaseExpiries is ${times - 1}`;
}

/** The `last_error` of a task failed because its lease expired too often. */
export function leaseExpiredText(times: number): string {
  return `LeaseExpiredError: ${expiredMessage(times)}`;
}
