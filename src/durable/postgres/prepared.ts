// Named (prepared) statements for the hot path (issue 27): the settle is a
// long statement whose parse and plan cost PostgreSQL CPU on every batch;
// named, each connection parses it once and PostgreSQL may keep a generic
// plan. The claim is not named: under a generic plan one conformance test
// (a recurring job's serial key, store-postgres.test.ts) saw its second
// occurrence start after the third, so some part of the claim depends on
// the plan's row order; until that is found, it is planned per call. Not
// behind PgBouncer in transaction pooling (`pgbouncer: true`), where the
// next statement may reach a server connection that never saw the name.
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
