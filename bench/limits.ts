/**
 * `npx tsx bench/limits.ts`
 *
 * Limits across processes (issue 22), on a throwaway PostgreSQL
 * (test/durable/pg-server.ts). Prints three markdown tables:
 *
 * 1. The bot's workload (30/s overall, 1/s per chat over 50 chats, 20/min
 *    per group: 300 chat messages and 40 group messages due at once, so the
 *    overall limit binds for 11 s) on 1 and 3 worker processes
 *    (test/fixtures/pg-limits-worker.ts, 8 workers each): the achieved rate
 *    over the first 10 s (starts against the 300 allowed), how late a
 *    window's tokens are used again (a start's time minus the start 30
 *    before it plus 1 s: the limiter's loss), and the
 *    lateness of the chat messages (their start, by the database's clock,
 *    minus their due time). `BENCH_LIMITS=bot` runs this table only.
 * 2. What a claim costs with 0 and 100,000 due tasks blocked: behind a held
 *    concurrency key, and behind an empty rate bucket (EXPLAIN ANALYZE
 *    execution time of the claim statement, and the round trip, medians).
 * 3. What the options cost when unused: a claim of 16 plain due tasks with
 *    no limit row, and with 1,000 idle limit rows (keys with room and no
 *    task).
 */
import { spawn } from 'node:child_process';
import pg from 'pg';
import { Scheduler, type DurableTaskItem } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { advanceJob } from '../src/durable/advance-job.js';
import { statements } from '../src/durable/postgres/store.js';
import { fullClaimParams, simpleAsk } from '../src/durable/postgres/claim.js';
import type { NewTask, Store } from '../src/durable/store.js';
import { startPgServer } from '../test/durable/pg-server.js';

const server = await startPgServer();
const admin = new pg.Pool({ connectionString: server.url, max: 2 });
let schemas = 0;

async function open(): Promise<{ schema: string; store: Store }> {
  const schema = `bench_${++schemas}`;
  const store = postgresStore({ connectionString: server.url, schema });
  await store.migrate();
  return { schema, store };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

// ------------------------------------------------------------- 1. the bot

/** Chat messages (over 50 chats at 1/s each: 50/s, so the overall 30/s binds). */
const CHAT_MESSAGES = 300;
/** ms over which the achieved rate is counted, from the first start. */
const RATE_SPAN = 10_000;

async function bot(processes: number): Promise<string> {
  const { schema, store } = await open();
  await store.close();
  await admin.query(`CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, task bigint NOT NULL, attempt integer NOT NULL, pid integer NOT NULL,
    started_at timestamptz NOT NULL, finished_at timestamptz)`);
  const children = Array.from({ length: processes }, () =>
    spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/pg-limits-worker.ts', server.url, schema, '30'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          let out = '';
          child.stdout!.on('data', (chunk: Buffer) => {
            out += chunk.toString();
            if (out.includes('ready\n')) resolve();
          });
        }),
    ),
  );
  const items: DurableTaskItem[] = [];
  const now = Date.now();
  for (let i = 0; i < CHAT_MESSAGES; i++)
    items.push({ when: now, name: 'send', rate: { group: `chat:${i % 50}`, limit: 1, interval: '1s' } });
  for (let i = 0; i < 40; i++) items.push({ when: now, name: 'send', rate: { group: `group:${i % 2}`, limit: 20, interval: '1m' } });
  const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
  await producer.scheduleMany(items);
  await producer.close();
  for (const child of children) child.stdin!.write('go\n');
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".taskheap_tasks WHERE state = 'succeeded'`);
    if (Number(rows[0]!.n) >= CHAT_MESSAGES + 40) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  for (const child of children) child.stdin!.write('stop\n');
  await Promise.all(children.map((child) => new Promise((resolve) => child.on('exit', resolve))));
  const { rows } = await admin.query<{ key: string; at: number; late: number }>(`SELECT t.rate_key AS key,
      (extract(epoch from r.started_at) * 1000)::float8 AS at, (extract(epoch from r.started_at - t.run_at) * 1000)::float8 AS late
    FROM "${schema}".runs AS r JOIN "${schema}".taskheap_tasks AS t ON t.id = r.task ORDER BY r.started_at`);
  const first = rows[0]!.at;
  const allowed = (RATE_SPAN / 1_000) * 30;
  const inSpan = rows.filter((row) => row.at < first + RATE_SPAN).length;
  // How late each token was used again: a start's time minus the earliest the window allowed it
  // (the start 30 before it, plus the interval). Zero is a perfect limiter; it is the rate's loss.
  const lag: number[] = [];
  for (let i = 30; i < rows.length && rows[i]!.at < first + RATE_SPAN; i++) lag.push(rows[i]!.at - (rows[i - 30]!.at + 1_000));
  const late = rows.filter((row) => row.key.startsWith('chat:')).map((row) => row.late);
  const rate = `${inSpan} / ${allowed} (${((inSpan / allowed) * 100).toFixed(1)}%)`;
  return `| ${processes} | ${rate} | ${median(lag).toFixed(0)} | ${quantile(lag, 0.95).toFixed(0)} | ${median(late).toFixed(0)} | ${quantile(late, 0.95).toFixed(0)} | ${Math.max(...late).toFixed(0)} |`;
}

// ------------------------------------------------------- 2. and 3. claims

const task = (runAt: number, extra: Partial<NewTask> = {}): NewTask => ({
  name: 'x',
  key: null,
  payload: '{}',
  runAt,
  maxAttempts: 1,
  options: '{}',
  ...extra,
});

/** Claim round trips (ms, median of 30) and the statement's EXPLAIN ANALYZE execution time (median of 5). */
async function claimCost(
  schema: string,
  store: Store,
  reset?: () => Promise<void>,
): Promise<{ trip: number; exec: number; planned: string }> {
  const trips: number[] = [];
  for (let i = 0; i < 30; i++) {
    await reset?.();
    const started = performance.now();
    await store.claim({
      owner: `bench-${i}`,
      now: Date.now(),
      lease: 30_000,
      limit: 16,
      advance: advanceJob,
      limits: { free: 16, rate: undefined },
    });
    trips.push(performance.now() - started);
  }
  const sql = statements(schema).claim;
  const client = await admin.connect();
  const execs: number[] = [];
  let planned = '';
  try {
    for (let i = 0; i < 5; i++) {
      await reset?.();
      await client.query('BEGIN');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN (ANALYZE, BUFFERS) ${sql}`,
        fullClaimParams(simpleAsk('explain', 30_000, 16), { prefix: '', maxExpiries: 1, expiredText: 'expired' }),
      );
      await client.query('ROLLBACK');
      const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
      execs.push(Number(/Execution Time: ([\d.]+)/.exec(plan)![1]));
      planned = plan;
    }
  } finally {
    client.release();
  }
  return { trip: median(trips), exec: median(execs), planned };
}

async function blocked(kind: 'none' | 'key' | 'bucket', n: number): Promise<string> {
  const { schema, store } = await open();
  const past = Date.now() - 60_000;
  if (kind === 'key') {
    await store.addTask(task(past - 1, { serial: 'busy', options: JSON.stringify({ serial: 'busy' }) }));
    await store.claim({ owner: 'holder', now: Date.now(), lease: 600_000, limit: 1, advance: advanceJob });
  }
  if (kind === 'bucket') {
    const options = JSON.stringify({ rate: { group: 'empty', limit: 1, interval: 3_600_000 } });
    await store.addTask(task(past - 1, { rateGroup: 'empty', options }));
    await store.claim({ owner: 'holder', now: Date.now(), lease: 600_000, limit: 1, advance: advanceJob });
  }
  if (n > 0) {
    const extra =
      kind === 'key' ? `'busy', NULL, '{"serial":"busy"}'` : `NULL, 'empty', '{"rate":{"key":"empty","limit":1,"interval":3600000}}'`;
    await admin.query(
      `INSERT INTO "${schema}".taskheap_tasks (name, payload, run_at, serial, rate_key, options)
      SELECT 'x', '{}', now() - interval '1 minute' + i * interval '1 microsecond', ${extra} FROM generate_series(1, $1) AS i`,
      [n],
    );
  }
  await admin.query(`ANALYZE "${schema}".taskheap_tasks`);
  const cost = await claimCost(schema, store);
  await store.close();
  return `| ${kind === 'none' ? 'nothing blocked' : kind === 'key' ? 'behind a held key' : 'behind an empty bucket'} | ${n.toLocaleString('en')} | ${cost.exec.toFixed(2)} | ${cost.trip.toFixed(2)} |`;
}

async function unused(idleKeys: number): Promise<string> {
  const { schema, store } = await open();
  if (idleKeys > 0) {
    await admin.query(
      `INSERT INTO "${schema}".taskheap_limits (kind, key, lim) SELECT 'concurrency', 'idle:' || i, 2 FROM generate_series(1, $1) AS i`,
      [idleKeys],
    );
  }
  const reset = async () => {
    await admin.query(`DELETE FROM "${schema}".taskheap_tasks`);
    await admin.query(
      `INSERT INTO "${schema}".taskheap_tasks (name, payload, run_at) SELECT 'x', '{}', now() - interval '1 second' FROM generate_series(1, 16)`,
    );
  };
  await reset();
  await admin.query(`ANALYZE "${schema}".taskheap_tasks`);
  const cost = await claimCost(schema, store, reset);
  await store.close();
  return `| ${idleKeys.toLocaleString('en')} idle limit rows | ${cost.exec.toFixed(2)} | ${cost.trip.toFixed(2)} |`;
}

try {
  console.log('\n### The bot on PostgreSQL (30/s overall, 1/s per chat, 20/min per group)\n');
  console.log(
    '| processes | starts in the first 10 s (allowed) | token reuse lag p50 ms | p95 ms | chat lateness p50 ms | p95 ms | max ms |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const n of [1, 3]) console.log(await bot(n));
  if (process.env.BENCH_LIMITS !== 'bot') await claims();
} finally {
  await admin.end();
  await server.destroy();
}

async function claims(): Promise<void> {
  console.log('\n### A claim with blocked work (16 asked for, nothing claimable)\n');
  console.log('| due tasks | blocked | EXPLAIN ANALYZE execution ms | round trip ms |');
  console.log('|---|---|---|---|');
  console.log(await blocked('none', 0));
  console.log(await blocked('key', 100_000));
  console.log(await blocked('bucket', 100_000));

  console.log('\n### The options unused: a claim of 16 plain due tasks\n');
  console.log('| limits table | EXPLAIN ANALYZE execution ms | round trip ms |');
  console.log('|---|---|---|');
  console.log(await unused(0));
  console.log(await unused(1_000));
}
