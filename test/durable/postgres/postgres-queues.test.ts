// Durable named queues across real processes on PostgreSQL (issue 22): three
// worker processes (test/fixtures/pg-queue-worker.ts) and this one as the
// fourth. A queue's global concurrency holds across the three, from the start
// and end times the runs record by the database's clock, with one worker
// SIGKILLed holding the queue's slots (they come back once its lease runs
// out); a queue's rate holds across the three in every window, by the
// database's clock (the starts the claims recorded); a queue paused from the
// fourth process is claimed by nobody once the pause committed, while the
// other queues go on, and its tasks all run after the resume. Bounds only:
// nothing depends on how fast the machine is.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';
import { compiled } from '../../compiled-fixture.js';

interface Worker {
  pid: number;
  ready: Promise<void>;
  exited: Promise<unknown>;
  output: () => string;
  kill: (signal: NodeJS.Signals) => void;
}

async function waitFor(what: string, condition: () => Promise<boolean>, timeout = 60_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The most runs overlapping at any instant, from [start, end] intervals (ends before starts at the same instant). */
function mostAtOnce(runs: { start: number; end: number }[]): number {
  const events = runs
    .flatMap(
      (run) =>
        [
          [run.start, 1],
          [run.end, -1],
        ] as const,
    )
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, delta] of events) most = Math.max(most, (now += delta));
  return most;
}

describe('postgresStore: named queues across processes', () => {
  let server: PgServer;
  let admin: pg.Pool;
  usePostgres((s, a) => {
    server = s;
    admin = a;
  });
  const freshSchema = schemaNamer('queues_');
  const workers = closedAfterEach(async (w: Worker) => {
    w.kill('SIGKILL');
    await w.exited;
  });
  const schedulers = closedAfterEach((s: Scheduler) => s.close({ abort: true }));

  function worker(schema: string, lease: number): Worker {
    const child = spawn(process.execPath, [compiled('test/fixtures/pg-queue-worker.ts'), server.url, schema, String(lease)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ready\n')) markReady();
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    const w: Worker = { pid: child.pid!, ready, exited, output: () => out, kill: (signal) => child.kill(signal) };
    workers.push(w);
    return w;
  }

  async function setUp(tasks: { queue: string; count: number; ms: number }[]): Promise<string> {
    const schema = freshSchema();
    await admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.runs (id serial PRIMARY KEY, task bigint NOT NULL, n integer NOT NULL,
      queue text NOT NULL, pid integer NOT NULL, claimed_at timestamptz NOT NULL, stamp timestamptz NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(), finished_at timestamptz)`);
    const seeder = postgresStore({ connectionString: server.url, schema });
    await seeder.migrate();
    let n = 0;
    for (const { queue, count, ms } of tasks) {
      await admin.query(
        `INSERT INTO ${schema}.taskheap_tasks (name, payload, run_at, queue, options)
        SELECT 'job', json_build_object('n', n, 'queue', $2::text, 'ms', $3::int)::text, now(), $2, json_build_object('queue', $2::text)::text
        FROM generate_series($1::int, $1::int + $4::int - 1) AS n`,
        [n, queue, ms, count],
      );
      n += count;
    }
    await seeder.close();
    return schema;
  }

  async function started(ws: Worker[]): Promise<void> {
    await Promise.race([
      Promise.all(ws.map((w) => w.ready)),
      sleep(60_000).then(() => {
        throw new Error(`workers did not start:\n${ws.map((w) => w.output()).join('\n')}`);
      }),
    ]);
  }

  it("a global concurrency holds across three processes, and a SIGKILLed worker's slots come back after its lease", async () => {
    const lease = 2_000;
    const schema = await setUp([
      // Runs of g last a second: the victim is caught in one (below), stopped, then killed.
      { queue: 'g', count: 15, ms: 1_000 },
      { queue: 'default', count: 40, ms: 20 },
    ]);
    const ws = [worker(schema, lease), worker(schema, lease), worker(schema, lease)];
    await started(ws);
    // Kill a worker while it runs tasks of 'g' (it holds their slots): whichever is running one first. Not a
    // worker chosen before: the first two to claim may hold all three slots, batch after batch, until g is
    // done (a CI dry run waited a minute for the first worker to get one).
    // Stopped first (SIGSTOP), it can finish nothing more: killed only if its run of g is still unfinished
    // then (on a loaded machine the run may end between the look and the signal: then it goes on, and
    // the look is made again), after a moment for a write it had already sent to land.
    let running: Worker | undefined;
    await waitFor('a worker stopped in a run of g', async () => {
      const unfinished = `SELECT pid FROM ${schema}.runs WHERE queue = 'g' AND finished_at IS NULL`;
      const { rows } = await admin.query<{ pid: number }>(unfinished);
      const candidate = ws.find((w) => rows.some((row) => row.pid === w.pid));
      if (candidate === undefined) return false;
      candidate.kill('SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const { rows: still } = await admin.query(`${unfinished} AND pid = $1`, [candidate.pid]);
      if (still.length > 0) running = candidate;
      else candidate.kill('SIGCONT');
      return running !== undefined;
    });
    const victim = running!;
    victim.kill('SIGKILL');
    await victim.exited;
    const {
      rows: [killed],
    } = await admin.query(`SELECT clock_timestamp() AS at`);
    await waitFor(
      'every task to succeed',
      async () => {
        const {
          rows: [row],
        } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.taskheap_tasks WHERE state = 'succeeded'`);
        return row.n === 55;
      },
      120_000,
    );
    const { rows } = await admin.query<{
      task: string;
      queue: string;
      pid: number;
      start: number;
      end: number | null;
    }>(`SELECT task, queue, pid,
      extract(epoch from started_at) * 1000 AS start, extract(epoch from finished_at) * 1000 AS "end" FROM ${schema}.runs`);
    const killedAt = (killed.at as Date).getTime();
    // A run of the victim that never finished ended when it was killed.
    const runs = rows.map((row) => ({ ...row, start: Number(row.start), end: row.end === null ? killedAt : Number(row.end) }));
    const g = runs.filter((run) => run.queue === 'g');
    expect(mostAtOnce(g)).toBeLessThanOrEqual(3);
    // The limit was reached (three at once), and each process kept to its own 2.
    expect(mostAtOnce(g)).toBe(3);
    for (const pid of new Set(g.map((run) => run.pid))) expect(mostAtOnce(g.filter((run) => run.pid === pid))).toBeLessThanOrEqual(2);
    // The victim's unfinished runs ran again elsewhere, after its lease: its slots were not lost.
    const lost = rows.filter((row) => row.pid === victim.pid && row.queue === 'g' && row.end === null);
    expect(lost.length).toBeGreaterThanOrEqual(1);
    for (const run of lost) expect(rows.some((row) => row.task === run.task && row.pid !== victim.pid && row.end !== null)).toBe(true);
    expect(new Set(g.map((run) => run.pid)).size).toBe(3);
    const {
      rows: [queue],
    } = await admin.query(`SELECT running, global_concurrency FROM ${schema}.taskheap_queues WHERE name = 'g'`);
    expect(queue).toEqual({ running: 0, global_concurrency: 3 });
  }, 180_000);

  it("a queue's rate holds across three processes in every window, by the database's clock; other queues are not held back", async () => {
    // 30 sms of 600 ms at 6 a second (the workers' `queues` option): a process has 4 workers, so no one
    // process can take a window's tokens alone while its workers are busy; 20 default tasks beside them.
    const schema = await setUp([
      { queue: 'sms', count: 30, ms: 600 },
      { queue: 'default', count: 20, ms: 20 },
    ]);
    const ws = [worker(schema, 5_000), worker(schema, 5_000), worker(schema, 5_000)];
    await started(ws);
    await waitFor(
      'every task to succeed',
      async () => {
        const {
          rows: [row],
        } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.taskheap_tasks WHERE state = 'succeeded'`);
        return row.n === 50;
      },
      60_000,
    );
    const { rows } = await admin.query<{ queue: string; pid: number; at: number }>(
      `SELECT queue, pid, (extract(epoch from stamp) * 1000)::float8 AS at FROM ${schema}.runs ORDER BY stamp`,
    );
    const sms = rows.filter((row) => row.queue === 'sms');
    expect(sms).toHaveLength(30);
    // The most starts in any window of a second (each window closing at a start; one opening a second
    // before a start does not hold it), from the times the claims recorded under the queue row's lock.
    let most = 0;
    for (let i = 0, j = 0; i < sms.length; i++) {
      while (sms[j]!.at <= sms[i]!.at - 1_000) j++;
      most = Math.max(most, i - j + 1);
    }
    expect(most).toBeLessThanOrEqual(6);
    expect(most, 'the limit is reached, not merely respected').toBe(6);
    expect(new Set(sms.map((row) => row.pid)).size, 'the processes shared the tokens').toBeGreaterThanOrEqual(2);
    const {
      rows: [queue],
    } = await admin.query(`SELECT rate_limit, rate_interval_ms FROM ${schema}.taskheap_queues WHERE name = 'sms'`);
    expect(queue).toEqual({ rate_limit: 6, rate_interval_ms: 1_000 });
    // The default queue ran beside it: its tasks did not wait for the sms windows.
    const firstSms = sms[0]!.at;
    expect(rows.filter((row) => row.queue === 'default' && row.at < firstSms + 1_000).length).toBeGreaterThan(0);
  }, 120_000);

  it('a queue paused from a fourth process: nothing of it is claimed after the pause commits, others go on; resume runs the rest', async () => {
    const schema = await setUp([
      { queue: 'emails', count: 150, ms: 30 },
      { queue: 'default', count: 150, ms: 30 },
    ]);
    const ws = [worker(schema, 5_000), worker(schema, 5_000), worker(schema, 5_000)];
    const fourth = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }), onError: () => {} });
    schedulers.push(fourth);
    await started(ws);
    await waitFor('some emails to run', async () => {
      const {
        rows: [row],
      } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.runs WHERE queue = 'emails'`);
      return row.n >= 10;
    });
    await fourth.queue('emails').pause();
    // The pause has committed: a claim that begins after this sees it.
    const {
      rows: [paused],
    } = await admin.query(`SELECT clock_timestamp() AS at`);
    await waitFor(
      'the default queue to finish',
      async () => {
        const {
          rows: [row],
        } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.taskheap_tasks WHERE queue = 'default' AND state = 'succeeded'`);
        return row.n === 150;
      },
      120_000,
    );
    // What was claimed before the pause has finished; the rest waits, nothing lost.
    await waitFor('the emails claimed before the pause to finish', async () => (await fourth.queue('emails').counts()).running === 0);
    const before = await fourth.queue('emails').counts();
    expect(before.waiting).toBeGreaterThan(0);
    expect(before.waiting + before.succeeded!).toBe(150);
    await sleep(500);
    expect(await fourth.queue('emails').counts()).toEqual(before);
    const {
      rows: [late],
    } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.runs WHERE queue = 'emails' AND claimed_at > $1`, [paused.at]);
    expect(late.n).toBe(0);
    expect((await fourth.queues()).find((q) => q.name === 'emails')).toMatchObject({ paused: true, counts: { waiting: before.waiting } });

    await fourth.queue('emails').resume();
    await waitFor('every email to run after the resume', async () => (await fourth.queue('emails').counts()).succeeded === 150, 120_000);
    const {
      rows: [after],
    } = await admin.query(
      `SELECT count(DISTINCT n)::int AS n, count(*) FILTER (WHERE claimed_at > $1)::int AS resumed
      FROM ${schema}.runs WHERE queue = 'emails'`,
      [paused.at],
    );
    expect(after).toEqual({ n: 150, resumed: before.waiting });
  }, 180_000);
});
