// Named (prepared) statements for the hot path (bench/NOTES.md): the
// settle, the claim (its common form, claimUnlessJobsDue) and the next-due
// query are long statements whose parse and plan cost PostgreSQL CPU on
// every call; named, each connection parses them once and PostgreSQL keeps
// a generic plan after five custom ones when it costs no more. Planned per
// call, the claim's planning took 8-20 ms of a 20-35 ms claim of 273 rows
// on a loaded machine (bench/pg-plans.ts measures its generic plan as fast,
// with the same buffers), and 25 to 60 ms of server CPU for 1 ms of work in
// each step of a chain of dependent tasks, which pays for its own claim. An
// earlier note here blamed the generic plan for a conformance failure (a
// recurring job's second occurrence starting after its third): that was the
// job's advance running late on a loaded machine and misfire 'once' folding
// the missed occurrence into the next, which the test now rules out with
// misfire 'all'; the PostgreSQL conformance, queue, limit and flow suites
// pass with plan_cache_mode = force_generic_plan. Not behind PgBouncer in
// transaction pooling (`pgbouncer: true`), where the next statement may
// reach a server connection that never saw the name.
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
