/**
 * `npx tsx bench/pg-advisory.ts [n=50000]`
 *
 * Issue 27's lever "claiming without a row update, through advisory locks
 * held by the claiming session (as Que does), measured against FOR UPDATE
 * SKIP LOCKED": PostgreSQL's CPU per 1,000 jobs for the same work done both
 * ways, on one connection, one claim of 250 then its settle at a time, on a
 * throwaway server (fsync off, as the peer bench's first rounds):
 *
 * - `skip locked`: taskheap's plain claim and settle, as named statements
 *   (the claim updates each row: running, the attempt counted, the lease).
 * - `bare skip locked`: the least a SKIP LOCKED claim and settle can be (no
 *   flags, levels, queues, notifications or limits): the row writes alone.
 * - `bare, deleted`: the same claim, and a settle that deletes the row
 *   (graphile-worker's shape: nothing kept once a job ends).
 * - `advisory`: a claim that only reads, taking `pg_try_advisory_lock(id)`
 *   on the rows it returns (held by the session until the settle), and a
 *   settle that writes the outcome and the attempt in one update, then lets
 *   go of the locks. No lease, no attempt written before the task runs.
 *
 * The advisory form is a measurement, not a design taskheap can ship: a
 * process that dies mid-task leaves no trace in the row (its locks go with
 * its session), so a task that kills its process every time would run
 * forever, which `maxLeaseExpiries` rules out; and session locks do not
 * survive PgBouncer's transaction pooling. Rounds alternate; medians printed.
 */
import pg from 'pg';
import { postgresStore } from '../src/postgres.js';
import { statements } from '../src/durable/postgres/store.js';
import { plainClaimParams, simpleAsk } from '../src/durable/postgres/claim.js';
import { plainWaiting } from '../src/durable/postgres/tables.js';
import { startPgServer } from '../test/durable/pg-server.js';
import { addNoopTasks } from './lib/noop-tasks.js';
import { serverCpuMs } from './peers/cpu.js';

const N = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 50_000);
const BATCH = 250;
const server = await startPgServer({
  database: 'advisory',
  settings: ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'],
});
const sql = statements(undefined);
const PLAIN = `${plainWaiting('taskheap_tasks')} AND queue = 'default' AND priority = 0 AND run_at <= now()`;
// The candidates bounded first, then locked in order until the batch is full: a lock function in the
// scan's own filter is evaluated on every row a plan reads (a sort under the limit reads them all).
const ADVISORY_CLAIM = `SELECT id, name, payload, attempts, max_attempts, (extract(epoch from run_at) * 1000)::float8 AS run_at, options, priority
  FROM (SELECT * FROM taskheap_tasks WHERE ${PLAIN} ORDER BY run_at, id LIMIT $1 * 2) AS c WHERE pg_try_advisory_lock(c.id) LIMIT $1`;
// The least a SKIP LOCKED claim and settle can be: what the plain claim and the settle cost beyond
// their two row writes (the flags, levels and queues, the notifications, the limits' CTEs).
const BARE_CLAIM = `UPDATE taskheap_tasks AS t SET state = 'running', locked_by = 'me', locked_until = now() + interval '30 s',
    attempts = t.attempts + 1, started_at = now(), updated_at = now()
  FROM (SELECT id FROM taskheap_tasks WHERE ${PLAIN} ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) AS c WHERE t.id = c.id
  RETURNING t.id, t.name, t.payload, t.attempts, t.max_attempts, (extract(epoch from t.run_at) * 1000)::float8 AS run_at, t.options, t.priority`;
const BARE_SETTLE = `UPDATE taskheap_tasks SET state = 'succeeded', locked_by = NULL, locked_until = NULL, updated_at = now()
  WHERE id = ANY($1::bigint[]) AND locked_by = 'me'`;
// graphile-worker's shape: the same claim, and a settle that deletes the row (nothing kept after it ends).
const DELETE_SETTLE = `DELETE FROM taskheap_tasks WHERE id = ANY($1::bigint[]) AND locked_by = 'me'`;
const ADVISORY_SETTLE = `WITH done AS (UPDATE taskheap_tasks SET state = 'succeeded', attempts = attempts + 1, updated_at = now()
    WHERE id = ANY($1::bigint[]) AND state = 'waiting' RETURNING id)
  SELECT count(pg_advisory_unlock(id)) FROM done`;

type Kind = 'skip locked' | 'bare skip locked' | 'bare, deleted' | 'advisory';

async function round(kind: Kind): Promise<{ cpu: number; seconds: number }> {
  const store = postgresStore({ connectionString: server.url });
  await store.migrate();
  await addNoopTasks(store, N);
  await store.close();
  const client = new pg.Client({ connectionString: server.url });
  client.on('error', () => {}); // the server stopped at the end
  await client.connect();
  const cpu0 = serverCpuMs(server.pids());
  const t0 = performance.now();
  for (let done = 0; done < N; ) {
    let ids: string[];
    if (kind === 'bare skip locked' || kind === 'bare, deleted') {
      ids = (await client.query({ name: 'bclaim', text: BARE_CLAIM, values: [BATCH] })).rows.map((r) => r.id as string);
      if (kind === 'bare skip locked') await client.query({ name: 'bsettle', text: BARE_SETTLE, values: [ids] });
      else await client.query({ name: 'dsettle', text: DELETE_SETTLE, values: [ids] });
    } else if (kind === 'advisory') {
      ids = (await client.query({ name: 'aclaim', text: ADVISORY_CLAIM, values: [BATCH] })).rows.map((r) => r.id as string);
      await client.query({ name: 'asettle', text: ADVISORY_SETTLE, values: [ids] });
    } else {
      const values = plainClaimParams(simpleAsk('me', 30_000, BATCH), { prefix: '', maxExpiries: 1, expiredText: 'expired' });
      const claimed = await client.query({ name: 'claim', text: sql.claimPlain, values });
      ids = claimed.rows.filter((r) => r.id !== null).map((r) => r.id as string);
      const n = ids.length;
      await client.query({
        name: 'settle',
        text: sql.settle,
        values: [
          ids,
          Array(n).fill('complete'),
          Array(n).fill('succeeded'),
          Array(n).fill(0),
          Array(n).fill(null),
          'me',
          '',
          Array(n).fill(null),
          [],
        ],
      });
    }
    if (ids.length === 0) throw new Error(`${kind}: claimed nothing with ${N - done} left`);
    done += ids.length;
  }
  const result = { cpu: ((serverCpuMs(server.pids()) - cpu0) * 1000) / N, seconds: (performance.now() - t0) / 1000 };
  // Every table, function and trigger of the schema, whatever its version has.
  await client.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
  await client.end();
  return result;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const KINDS: Kind[] = ['skip locked', 'bare skip locked', 'bare, deleted', 'advisory'];
const results = Object.fromEntries(KINDS.map((kind) => [kind, { cpu: [] as number[], rate: [] as number[] }]));
try {
  for (let r = 0; r < 3; r++) {
    for (const kind of KINDS) {
      const { cpu, seconds } = await round(kind);
      results[kind]!.cpu.push(cpu);
      results[kind]!.rate.push(N / seconds);
    }
  }
  console.log(`| ${N.toLocaleString('en')} jobs, claims of ${BATCH}, one connection | PostgreSQL CPU / 1k jobs | jobs/s |`);
  console.log('| --- | ---: | ---: |');
  for (const [kind, r] of Object.entries(results))
    console.log(`| ${kind} | ${median(r.cpu).toFixed(1)} ms | ${Math.round(median(r.rate)).toLocaleString('en')} |`);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await server.destroy();
}
