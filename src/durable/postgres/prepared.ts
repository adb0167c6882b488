// Named (prepared) statements for the hot path (issues 27 and 28): the
// settle, the claim (its common form, claimUnlessJobsDue) and the next-due
// query are long statements whose parse and plan cost PostgreSQL CPU on
// every call; named, each connection parses them once and PostgreSQL may
// keep a generic plan. Planned per call, the claim cost 25 to 60 ms of
// server CPU on a loaded machine for 1 ms of work, which a batch of
// independent tasks shares but every step of a chain of dependent tasks
// pays alone. (Issue 27 once saw a serial-key conformance test fail under a
// generic plan; the PostgreSQL conformance, queue, limit and flow suites pass
// with plan_cache_mode = force_generic_plan, a generic plan from the first
// call.) Not behind PgBouncer in transaction pooling (`pgbouncer: true`),
// where the next statement may reach a server connection that never saw the name.
import { createHash } from 'node:crypto';

const names = new Map<string, string>();

/** The name of the prepared statement of `text`: the same text, the same name, in every process. */
export function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `taskheap_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    names.set(text, name);
  }
  return name;
}
