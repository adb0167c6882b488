// Issue 16 on PostgreSQL alone, against a real server: a let-go serial group
// announced through NOTIFY; two worker processes keep each key's order; a
// version 3 database upgrades keeping its rows. Claim order, serial groups, the
// lease bound and claimers racing on the same keys (every store's behaviour)
// are in the conformance suite (test/durable/conformance/claims.ts, serial.ts),
// run here by store-postgres.test.ts.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler, SchemaVersionError, type DurableTaskItem } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { advanceJob } from '../../../src/durable/advance-job.js';
import { statements } from '../../../src/durable/postgres/store.js';
import type { NewTask, Store } from '../../../src/durable/store.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';
import { workerProcesses } from '../worker-process.js';
import { SCHEMA_VERSION } from '../../../src/durable/store.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

const freshSchema = schemaNamer('f');

const opened = closedAfterEach<Store>((store) => store.close());

async function openStore(schema: string): Promise<Store> {
  const store = postgresStore({ connectionString: server.url, schema, timeout: 5_000 });
  opened.push(store);
  await store.migrate();
  return store;
}

function task(name: string, runAt: number, extra: Partial<NewTask> = {}): NewTask {
  return { name, key: null, payload: '{}', runAt, maxAttempts: 1, options: '{}', ...extra };
}

const claim = (store: Store, owner: string, limit = 10) =>
  store.claim({ owner, now: Date.now(), lease: 30_000, limit, advance: advanceJob });

describe('PostgreSQL serial groups: announcements', () => {
  it('a key let go of when its task is final announces the next task of the key to every process (NOTIFY taskheap_wake)', async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const now = Date.now();
    const a1 = await store.addTask(task('a1', now - 300, { serial: 'a' }));
    const a2 = await store.addTask(task('a2', now - 200, { serial: 'a' }));
    expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a1.id]);
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    const wakes: string[] = [];
    listener.on('notification', (message) => wakes.push(message.payload ?? ''));
    await listener.query('LISTEN taskheap_wake');
    await store.settle('me', [{ id: a1.id, kind: 'complete', state: 'failed', error: 'boom' }], Date.now());
    const deadline = Date.now() + 5_000;
    while (wakes.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    await listener.end();
    expect(wakes).toHaveLength(1);
    expect(wakes[0]!.startsWith(`${schema}:`)).toBe(true);
    expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a2.id]);
  });
});

describe('PostgreSQL serial groups across two worker processes', () => {
  // The fixture claims on the first line and exits 0 once nothing is waiting or running.
  const spawnWorker = workerProcesses();
  const worker = (schema: string) => spawnWorker('test/fixtures/pg-serial-worker.ts', [server.url, schema]);

  it('runs of one key never overlap across processes and follow due order; a let-go key is claimed without waiting for a poll', async () => {
    const schema = freshSchema();
    await openStore(schema);
    await admin.query(`CREATE TABLE "${schema}".runs (id serial PRIMARY KEY, chat text NOT NULL, n integer NOT NULL, attempt integer NOT NULL,
      pid integer NOT NULL, started_at timestamptz NOT NULL, finished_at timestamptz)`);
    const base = Date.now();
    const chats = 4;
    const steps = 8;
    const items: DurableTaskItem[] = [];
    for (let n = 0; n < steps; n++) {
      for (let c = 0; c < chats; c++) {
        const failFirst = (n * chats + c) % 5 === 0;
        items.push({
          when: base + n * 20 + c,
          name: 'step',
          payload: { chat: `chat:${c}`, n, failFirst },
          serial: `chat:${c}`,
          retry: { attempts: 2, delay: 10 },
        });
      }
    }
    // A producer: a scheduler that runs nothing, adding work through the public API. The work is
    // there before the workers start claiming (together, on "go"), so both take some at once.
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    await producer.scheduleMany(items);
    await producer.close();
    const workers = [worker(schema), worker(schema)];
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.next();
    // Their poll is an hour: they finish only if every let-go key and every retry woke a claim.
    const outputs = await Promise.race([
      Promise.all(workers.map((w) => w.done)),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the workers did not finish within 50 s (their poll is an hour: a wake-up was missed)')), 50_000),
      ),
    ]);
    for (const out of outputs) expect(out).toMatch(/done 0 errors/);
    const { rows } = await admin.query<{ chat: string; n: number; attempt: number; pid: number; start: number; end: number }>(
      `SELECT chat, n, attempt, pid, extract(epoch from started_at) * 1000 AS start, extract(epoch from finished_at) * 1000 AS end
       FROM "${schema}".runs ORDER BY started_at, id`,
    );
    expect(new Set(rows.map((row) => row.pid)).size).toBe(2);
    const movedKeys = Array.from(
      { length: chats },
      (_, c) => new Set(rows.filter((row) => row.chat === `chat:${c}`).map((row) => row.pid)).size,
    );
    // Keys moved between the processes (each holds at most two at a time): the order held across them.
    expect(movedKeys.some((n) => n === 2)).toBe(true);
    for (let c = 0; c < chats; c++) {
      const runs = rows.filter((row) => row.chat === `chat:${c}`);
      // Due order, a failed first attempt retried before the next step.
      const want: [number, number][] = [];
      for (let n = 0; n < steps; n++) {
        if ((n * chats + c) % 5 === 0) want.push([n, 1]);
        want.push([n, (n * chats + c) % 5 === 0 ? 2 : 1]);
      }
      expect(
        runs.map((row) => [row.n, row.attempt]),
        `chat:${c}`,
      ).toEqual(want);
      for (let i = 1; i < runs.length; i++) {
        // No overlap: each run starts after the previous one of its key ended.
        expect(Number(runs[i]!.start), `chat:${c} run ${i}`).toBeGreaterThanOrEqual(Number(runs[i - 1]!.end));
      }
    }
  }, 90_000);
});

describe('schema version 4 (PostgreSQL)', () => {
  it('upgrades a version 3 database in place: rows kept, serial null and priority 0; a newer one is refused', async () => {
    const schema = freshSchema();
    const sql = statements(schema);
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(sql.createMeta);
    for (const migration of sql.migrations.slice(0, 3)) await admin.query(migration);
    await admin.query(sql.insertVersion, [3]);
    await admin.query(`INSERT INTO "${schema}".taskheap_tasks (name, key, payload, run_at, state, result) VALUES
      ('work', 'done-one', '{"n":1}', now() - interval '1 hour', 'succeeded', '7'),
      ('work', NULL, '{"n":2}', now() - interval '1 minute', 'waiting', NULL)`);
    const store = await openStore(schema);
    const tasks = await store.listTasks({});
    expect(tasks.map((t) => [t.payload, t.state, t.serial, t.priority, t.result])).toEqual([
      [{ n: 1 }, 'succeeded', null, 0, 7],
      [{ n: 2 }, 'waiting', null, 0, undefined],
    ]);
    expect((await claim(store, 'me')).map((c) => c.payload)).toEqual(['{"n":2}']);
    expect((await admin.query(`SELECT version FROM "${schema}".taskheap_meta`)).rows).toEqual([{ version: SCHEMA_VERSION }]);
    await store.close();
    await admin.query(`UPDATE "${schema}".taskheap_meta SET version = ${SCHEMA_VERSION + 1}`);
    const newer = postgresStore({ connectionString: server.url, schema });
    opened.push(newer);
    await expect(newer.migrate()).rejects.toBeInstanceOf(SchemaVersionError);
  });
});
