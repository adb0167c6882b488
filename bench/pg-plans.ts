/**
 * `npx tsx bench/pg-plans.ts [n=20000] [--plans] [--timing] [--delayed] [--plain]`
 *
 * The claim's custom plan beside its generic one (issue 27: the claim is a
 * named statement, so after five custom plans PostgreSQL may keep the
 * generic one): on a throwaway server with `n` waiting no-op tasks, six
 * rounds of EXPLAIN (ANALYZE, BUFFERS) of one claim of 273 rows under each
 * plan_cache_mode, each in a transaction rolled back. Prints planning and
 * execution time and buffers; `--plans` prints the last round's plans,
 * `--timing` with each node's time (which the timing itself inflates);
 * `--delayed`: tasks due 2 ms apart from now on, as the peer bench's
 * delayed jobs, so each claim finds a few more due.
 */
import pg from 'pg';
import { postgresStore } from '../src/postgres.js';
import { statements } from '../src/durable/postgres/store.js';
import { startPgServer } from '../test/durable/pg-server.js';
import { addNoopTasks } from './lib/noop-tasks.js';

const N = Number(process.argv[2] ?? 20000);
const DELAYED = process.argv.includes('--delayed');
const server = await startPgServer({ database: 'plans' });
const store = postgresStore({ connectionString: server.url });
await store.migrate();
// --delayed: as the peer bench's delayed jobs, due 2 ms apart from now on (a claim finds a few due).
await addNoopTasks(store, N, (i) => (DELAYED ? Date.now() + 2 * i : Date.now()));
const c = new pg.Client({ connectionString: server.url });
await c.connect();
// --plain: the plain claim (src/durable/postgres/claim.ts, plainClaimSql) instead of the full one.
const PLAIN = process.argv.includes('--plain');
const sql = PLAIN ? statements(undefined).claimPlain : statements(undefined).claimUnlessJobsDue;
const types = PLAIN ? 'int, text, float8, text[], int' : 'int, text, float8, int, text, text[], boolean, int, text[], int[], float8';
await c.query(`PREPARE claim(${types}) AS ${sql}`);
const params = PLAIN ? [273, 'me', 30000, null, 16, null] : [273, 'me', 30000, 3, 'lease expired', null, false, 16, null, null, 0, null];
const lit = params.map((p) => (p === null ? 'NULL' : typeof p === 'string' ? `'${p}'` : String(p))).join(', ');
for (let round = 0; round < 6; round++) {
  for (const mode of ['force_custom_plan', 'force_generic_plan']) {
    await c.query('BEGIN');
    await c.query(`SET LOCAL plan_cache_mode = ${mode}`);
    const t0 = performance.now();
    const r = await c.query(
      `EXPLAIN (ANALYZE, BUFFERS, TIMING ${process.argv.includes('--timing') ? 'ON' : 'OFF'}, SUMMARY ON) EXECUTE claim(${lit})`,
    );
    const ms = performance.now() - t0;
    const lines = r.rows.map((x) => x['QUERY PLAN'] as string);
    const summary = lines.filter((l) => /Planning Time|Execution Time/.test(l)).join(' ');
    const buffers = lines.find((l) => /Buffers/.test(l));
    console.log(round, mode, ms.toFixed(1), summary, buffers?.trim());
    if (round === 5 && process.argv.includes('--plans')) console.log(lines.join('\n'));
    await c.query('ROLLBACK');
  }
}
await c.end();
await store.close?.();
await server.stop();
