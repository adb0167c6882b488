// Retention: finished rows deleted after their age by a running worker, in
// batches, on real SQLite and PostgreSQL; waiting work and recent rows kept.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { openDatabase } from '../../src/durable/sqlite/driver.js';
import { START } from '../helpers.js';
import type { PgServer } from './pg-server.js';
import { usePostgres } from './use-postgres.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The rows each test seeds: [state, age in ms, how many]; the retention is 1 h succeeded, 1 day failed. */
const SEED: [string, number, number][] = [
  ['succeeded', 2 * HOUR, 2_000], // deleted
  ['succeeded', 10 * 60_000, 1_000], // kept: younger than 1 h
  ['failed', 2 * HOUR, 1_000], // kept: younger than 1 day
  ['failed', 2 * DAY, 500], // deleted
  ['timed-out', 2 * DAY, 150], // deleted
  ['cancelled', 2 * DAY, 150], // deleted
  ['waiting', 30 * DAY, 200], // kept: not finished (due far ahead)
];
const EXPECTED = { succeeded: 1_000, failed: 1_000, waiting: 200 };

async function until(what: string, condition: () => boolean | Promise<boolean>, timeout = 8_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(20);
  }
}

describe('retention on SQLite', () => {
  it('deletes finished rows past their age in batches (4,800 of 5,000 rows), keeps the rest, and finished jobs too', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-retention-')), 'store.db');
    const setup = new Scheduler({ store: sqliteStore(path) });
    await setup.migrate();
    await setup.close();
    const db = await openDatabase(path);
    const insert = db.prepare(
      `INSERT INTO taskheap_tasks (name, payload, state, run_at, created_at, updated_at) VALUES ('w', '{}', ?, ?, ?, ?)`,
    );
    const now = Date.now();
    db.transaction(() => {
      for (const [state, age, count] of SEED) {
        for (let i = 0; i < count; i++) insert.run(state, state === 'waiting' ? now + DAY : now - age, now - age, now - age);
      }
      const job = db.prepare(
        `INSERT INTO taskheap_jobs (key, name, payload, rule, state, options, created_at, updated_at) VALUES (?, 'w', '{}', '{}', ?, '{}', ?, ?)`,
      );
      job.run('old-done', 'done', now - 2 * DAY, now - 2 * DAY);
      job.run('new-cancelled', 'cancelled', now, now);
    })();
    db.close();

    const clock = new ManualClock(START);
    const worker = new Scheduler({ clock, store: sqliteStore(path), retention: { succeeded: '1h', failed: '1d' } });
    worker.define('w', () => {});
    await worker.start();
    await clock.advance(0);
    const count = async (state: string) => (await worker.listTasks({ state: state as never, limit: 10_000 })).length;
    await until(
      'the sweep to finish',
      async () => (await count('failed')) === EXPECTED.failed && (await count('succeeded')) === EXPECTED.succeeded,
    );
    expect(await count('waiting')).toBe(EXPECTED.waiting);
    expect(await count('timed-out')).toBe(0);
    expect(await count('cancelled')).toBe(0);
    await worker.close();
    const after = await openDatabase(path);
    expect(after.prepare('SELECT key FROM taskheap_jobs ORDER BY key').all()).toEqual([{ key: 'new-cancelled' }]);
    after.close();
  });

  it('runs again every minute, only in a started worker, and not at all with retention: false', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-retention-')), 'store.db');
    const clock = new ManualClock(START);
    const worker = new Scheduler({ clock, store: sqliteStore(path), retention: { succeeded: 1, failed: false } });
    const seen: number[] = [];
    worker.define('w', (ctx) => void seen.push(ctx.id));
    // A producer call (no start): nothing is swept. Due a second after the
    // first sweep (at start), so that sweep finds nothing finished.
    const first = await worker.schedule(START + 1_000, 'w');
    await worker.start();
    await clock.advance(0); // the first sweep
    await clock.advance(1_000);
    // The claim is asynchronous: keep the ManualClock moving until it has run.
    await until('the task ran', async () => {
      await clock.advance(0);
      return (await worker.getTask(first.id))?.state === 'succeeded';
    });
    await sleep(5); // older than 1 ms by the wall clock
    await clock.advance(58_000);
    expect((await worker.getTask(first.id))?.state).toBe('succeeded'); // the next sweep is a minute after the first
    await clock.advance(1_000);
    await until('the sweep a minute later', async () => (await worker.getTask(first.id)) === undefined);
    await worker.close();

    const keeper = new Scheduler({ clock, store: sqliteStore(path), retention: false });
    keeper.define('w', () => {});
    await keeper.start();
    const kept = await keeper.schedule(clock.now(), 'w');
    await until('the task ran', async () => {
      await clock.advance(0);
      return (await keeper.getTask(kept.id))?.state === 'succeeded';
    });
    await sleep(5);
    await clock.advance(5 * 60_000);
    expect((await keeper.getTask(kept.id))?.state).toBe('succeeded');
    await keeper.close();

    expect(() => new Scheduler({ retention: false })).toThrow(/store/);
    expect(() => new Scheduler({ store: sqliteStore(path), retention: { succeeded: -1 } })).toThrow(RangeError);
    expect(() => new Scheduler({ store: sqliteStore(path), retention: { done: '1d' } as never })).toThrow(/done/);
  });
});

describe('retention on PostgreSQL', () => {
  let server: PgServer;
  let admin: pg.Pool;

  usePostgres((started, pool) => {
    server = started;
    admin = pool;
  });

  it('two workers sweep 4,800 of 5,000 rows in batches by the server clock, without deleting anything twice or too early', async () => {
    const schema = `ret_${process.pid}`;
    const setup = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    await setup.migrate();
    await setup.close();
    for (const [state, age, count] of SEED) {
      await admin.query(
        `INSERT INTO "${schema}".taskheap_tasks (name, payload, state, run_at, updated_at)
        SELECT 'w', '{}', $1, now() + CASE WHEN $1 = 'waiting' THEN interval '1 day' ELSE interval '0' END, now() - $2::float8 * interval '1 ms'
        FROM generate_series(1, $3)`,
        [state, age, count],
      );
    }
    await admin.query(`INSERT INTO "${schema}".taskheap_jobs (key, name, payload, rule, state, options, updated_at)
      VALUES ('old-done', 'w', '{}', '{}', 'done', '{}', now() - interval '2 days'), ('new-cancelled', 'w', '{}', '{}', 'cancelled', '{}', now())`);
    // One statement deletes one batch of tasks at most (500), plus the old finished job.
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    expect(await store.prune(HOUR, DAY, 500)).toBe(501);
    await store.close();
    const workers = [0, 1].map(
      () => new Scheduler({ store: postgresStore({ connectionString: server.url, schema }), retention: { succeeded: '1h', failed: '1d' } }),
    );
    for (const worker of workers) {
      worker.define('w', () => {});
      await worker.start();
    }
    const counts = async () => {
      const { rows } = await admin.query<{ state: string; n: string }>(
        `SELECT state, count(*) AS n FROM "${schema}".taskheap_tasks GROUP BY state`,
      );
      return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
    };
    await until(
      'the sweep to finish',
      async () => JSON.stringify(Object.entries(await counts()).sort()) === JSON.stringify(Object.entries(EXPECTED).sort()),
    );
    const { rows } = await admin.query(`SELECT key FROM "${schema}".taskheap_jobs ORDER BY key`);
    expect(rows).toEqual([{ key: 'new-cancelled' }]);
    for (const worker of workers) await worker.close();
  }, 60_000);
});
