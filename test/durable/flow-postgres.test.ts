// Issue 16 on PostgreSQL, against a real server: the claim orders due tasks
// by priority, then due time, then id; a serial key lets one task run at a
// time across every process, in due order, held through retries and let go
// of on a final state, a cancel or a lease that expired for good; several
// claimers racing on the same keys never overlap; two worker processes keep
// each key's order; a version 3 database upgrades keeping its rows.
import { spawn } from 'node:child_process';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, SchemaVersionError, type DurableTaskItem } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { advanceJob } from '../../src/durable/advance-job.js';
import { statements } from '../../src/durable/postgres/sql.js';
import type { NewTask, Store } from '../../src/durable/store.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

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

const claim = (store: Store, owner: string, limit = 10) => store.claim(owner, Date.now(), 30_000, limit, advanceJob);

describe('PostgreSQL claim order and serial keys (store level)', () => {
  it('claims by priority (highest first), then due time, then id; future tasks of a higher priority wait', async () => {
    const store = await openStore(freshSchema());
    const now = Date.now();
    for (const [name, at, priority] of [
      ['low-early', now - 3_000, -1], ['zero-late', now - 1_000, 0], ['zero-early', now - 2_000, 0],
      ['high-late', now - 500, 7], ['high-early', now - 600, 7], ['high-future', now + 10_000, 9], ['mid', now - 100, 3],
    ] as const) {
      await store.addTask(task(name, at, { priority }));
    }
    expect((await claim(store, 'me', 3)).map((c) => c.name)).toEqual(['high-early', 'high-late', 'mid']);
    expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['zero-early', 'zero-late', 'low-early']);
    expect(await claim(store, 'me')).toEqual([]);
    // The future task, not the held leases (30 s), is what comes due next.
    const next = await store.nextDue(Date.now());
    expect(next).toBeGreaterThan(5_000);
    expect(next).toBeLessThanOrEqual(10_000);
  });

  it('one task per serial key, the head first; held through a retry; let go of when final, with a wake', async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const now = Date.now();
    const a1 = await store.addTask(task('a1', now - 300, { serial: 'a' }));
    const b1 = await store.addTask(task('b1', now - 250, { serial: 'b' }));
    const a2 = await store.addTask(task('a2', now - 200, { serial: 'a', priority: 5 }));
    await store.addTask(task('free', now - 100));
    expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['a1', 'b1', 'free']);
    expect(await claim(store, 'me')).toEqual([]);
    // Tasks behind a held key do not make work due (30 s: the leases).
    expect(await store.nextDue(Date.now())).toBeGreaterThan(25_000);
    await store.settle('me', [{ id: a1.id, kind: 'retry', delay: 0, error: 'boom' }, { id: b1.id, kind: 'complete', state: 'succeeded', error: null }], Date.now());
    expect((await admin.query(`SELECT key, held_by FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([{ key: 'a', held_by: String(a1.id) }]);
    expect((await claim(store, 'me')).map((c) => [c.name, c.attempts])).toEqual([['a1', 2]]);
    // Let go of when final: the next task of the key is announced to every process.
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    const wakes: string[] = [];
    listener.on('notification', (message) => wakes.push(message.payload ?? ''));
    await listener.query('LISTEN taskheap_wake');
    await store.settle('me', [{ id: a1.id, kind: 'complete', state: 'failed', error: 'boom again' }], Date.now());
    const deadline = Date.now() + 5_000;
    while (wakes.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    await listener.end();
    expect(wakes).toHaveLength(1);
    expect(wakes[0]!.startsWith(`${schema}:`)).toBe(true);
    expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a2.id]);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([{ n: 1 }]);
  });

  it('a handed-back task keeps its key; a cancel lets go of it; a replaced task starts over', async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const now = Date.now();
    const a1 = await store.addTask(task('a1', now - 300, { serial: 'a', key: 'first' }));
    const a2 = await store.addTask(task('a2', now - 200, { serial: 'a' }));
    expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a1.id]);
    await store.settle('me', [{ id: a1.id, kind: 'release' }], Date.now());
    expect((await claim(store, 'other')).map((c) => c.id)).toEqual([a1.id]);
    await store.settle('other', [{ id: a1.id, kind: 'retry', delay: 60_000, error: 'later' }], Date.now());
    await store.addTask(task('a1-again', Date.now() + 10_000, { serial: 'a', key: 'first' }));
    expect((await claim(store, 'me')).map((c) => c.id)).toEqual([a2.id]);
    expect(await store.cancel(a2.id)).toBe(true);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([{ n: 0 }]);
    await admin.query(`UPDATE "${schema}".taskheap_tasks SET run_at = now() WHERE key = 'first'`);
    expect((await claim(store, 'me')).map((c) => c.name)).toEqual(['a1-again']);
  });

  it('a task whose lease expired for good is failed by the next claim and lets go of its key', async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const now = Date.now();
    const a1 = await store.addTask(task('a1', now - 300, { serial: 'a' }));
    const a2 = await store.addTask(task('a2', now - 200, { serial: 'a' }));
    const expire = () => admin.query(`UPDATE "${schema}".taskheap_tasks SET locked_until = now() - interval '1 second' WHERE id = $1`, [a1.id]);
    expect((await claim(store, 'dead')).map((c) => c.id)).toEqual([a1.id]);
    await expire();
    // The first expiry (maxLeaseExpiries 1): taken over, the key still a1's.
    expect((await claim(store, 'me')).map((c) => [c.id, c.attempts])).toEqual([[a1.id, 2]]);
    await expire();
    // The second: failed, and the key let go of; a2 comes with the next claim.
    const after = await claim(store, 'other');
    const next = after.length > 0 ? after : await claim(store, 'other');
    expect(next.map((c) => c.id)).toEqual([a2.id]);
    expect((await store.getTask(a1.id))?.state).toBe('failed');
  });

  it('a recurring job gives its occurrences its serial key and priority; cancelling the job lets go of a key an occurrence held', async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const options = JSON.stringify({ serial: 'job-key', priority: 3, rate: { key: 'r', limit: 1, interval: 1_000 } });
    await store.addJob({ key: 'job', name: 'tick', payload: '{}', rule: JSON.stringify({ type: 'interval', start: Date.now() - 10_000, interval: 3_600_000 }),
      nextRunAt: Date.now() - 1_000, remaining: null, until: null, options });
    const [occurrence] = await claim(store, 'me');
    expect(occurrence).toMatchObject({ name: 'tick', priority: 3 });
    expect(await store.getTask(occurrence!.id)).toMatchObject({ serial: 'job-key', priority: 3, rate: { key: 'r', limit: 1, interval: 1_000 } });
    await store.settle('me', [{ id: occurrence!.id, kind: 'retry', delay: 60_000, error: 'later' }], Date.now());
    expect(await store.cancelJob('job')).toBe(true);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([{ n: 0 }]);
  });
});

describe('PostgreSQL serial keys under concurrency', () => {
  it('claimers racing on the same keys: never two runs of a key at once, each key in due order, retries held', async () => {
    const schema = freshSchema();
    const claimers = await Promise.all(Array.from({ length: 6 }, () => openStore(schema)));
    const keys = 12;
    const perKey = 8;
    const base = Date.now() - 60_000;
    const expected = new Map<string, number[]>();
    const failFirst = new Set<number>();
    const items: NewTask[] = [];
    // Interleaved due times; within a key they increase with n, and insertion order is shuffled against due order.
    for (let n = perKey - 1; n >= 0; n--) {
      for (let k = 0; k < keys; k++) items.push(task('step', base + n * 100 + k, { serial: `chat:${k}`, payload: JSON.stringify({ k, n }), maxAttempts: 2 }));
    }
    for (let i = 0; i < 40; i++) items.push(task('loose', base + i * 7));
    const stored = await claimers[0]!.addTasks(items);
    for (const row of stored) {
      if (row.serial === null) continue;
      const list = expected.get(row.serial) ?? [];
      list.push(row.id);
      expected.set(row.serial, list);
      if (row.id % 3 === 0) failFirst.add(row.id);
    }
    for (const list of expected.values()) list.sort((a, b) => a - b);
    // Ids were given in insertion order (reverse due order within a key), so sort expected by due time instead.
    const due = new Map(stored.map((row) => [row.id, row.runAt.getTime()]));
    for (const list of expected.values()) list.sort((a, b) => due.get(a)! - due.get(b)!);

    const serialOf = new Map(stored.map((row) => [row.id, row.serial]));
    const running = new Map<string, number>();
    const starts = new Map<string, number[]>();
    const violations: string[] = [];
    let finished = 0;
    const total = stored.length;
    const deadline = Date.now() + 40_000;
    await Promise.all(claimers.map(async (store, i) => {
      const owner = `claimer-${i}`;
      while (finished < total && Date.now() < deadline) {
        const claimed = await store.claim(owner, Date.now(), 30_000, 3, advanceJob);
        if (claimed.length === 0) {
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
        const seen = new Set<string>();
        for (const c of claimed) {
          const key = serialOf.get(c.id);
          if (key === null || key === undefined) continue;
          if (seen.has(key)) violations.push(`${owner} claimed two tasks of ${key} at once`);
          seen.add(key);
          if (running.has(key)) violations.push(`${key}: ${c.id} started while ${running.get(key)} runs`);
          running.set(key, c.id);
          starts.set(key, [...(starts.get(key) ?? []), c.id]);
        }
        // "Run": yield so that the other claimers get to race meanwhile.
        await new Promise((resolve) => setTimeout(resolve, 1));
        const outcomes = claimed.map((c) => {
          const key = serialOf.get(c.id);
          if (key !== null && key !== undefined) running.delete(key);
          return failFirst.has(c.id) && c.attempts === 1
            ? { id: c.id, kind: 'retry' as const, delay: 0, error: 'first attempt fails' }
            : { id: c.id, kind: 'complete' as const, state: 'succeeded' as const, error: null };
        });
        await store.settle(owner, outcomes, Date.now());
        finished += outcomes.filter((o) => o.kind === 'complete').length;
      }
    }));
    expect(finished).toBe(total);
    expect(violations).toEqual([]);
    for (const [key, ids] of expected) {
      // A retried task runs again before anything else of its key.
      const want = ids.flatMap((id) => (failFirst.has(id) ? [id, id] : [id]));
      expect(starts.get(key), key).toEqual(want);
    }
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".taskheap_serial_keys`)).rows).toEqual([{ n: 0 }]);
  }, 60_000);
});

describe('PostgreSQL serial keys across two worker processes', () => {
  const children: { kill: (signal: NodeJS.Signals) => void; exited: Promise<number | null> }[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill('SIGTERM');
      await child.exited;
    }
  });

  function worker(schema: string): { ready: Promise<void>; go: () => void; done: Promise<string> } {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/pg-serial-worker.ts', server.url, schema], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    children.push({ kill: (signal) => child.kill(signal), exited });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready\n')) resolve();
      });
      void exited.then(() => reject(new Error(`worker exited early: ${out}`)));
    });
    const done = exited.then((code) => {
      if (code !== 0) throw new Error(`worker exited with ${code}: ${out}`);
      return out;
    });
    // Killed by afterEach after a failure: not an unhandled rejection.
    done.catch(() => {});
    return { ready, go: () => child.stdin.write('go\n'), done };
  }

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
        items.push({ when: base + n * 20 + c, name: 'step', payload: { chat: `chat:${c}`, n, failFirst }, serial: `chat:${c}`, retry: { attempts: 2, delay: 10 } });
      }
    }
    // A producer: a scheduler that runs nothing, adding work through the public API. The work is
    // there before the workers start claiming (together, on "go"), so both take some at once.
    const producer = new Scheduler({ store: postgresStore({ connectionString: server.url, schema }) });
    await producer.scheduleMany(items);
    await producer.close();
    const workers = [worker(schema), worker(schema)];
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.go();
    const outputs = await Promise.race([
      Promise.all(workers.map((w) => w.done)),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the workers did not finish within 50 s')), 50_000)),
    ]);
    for (const out of outputs) expect(out).toMatch(/done 0 errors/);
    const { rows } = await admin.query<{ chat: string; n: number; attempt: number; pid: number; start: number; end: number }>(
      `SELECT chat, n, attempt, pid, extract(epoch from started_at) * 1000 AS start, extract(epoch from finished_at) * 1000 AS end
       FROM "${schema}".runs ORDER BY started_at, id`);
    expect(new Set(rows.map((row) => row.pid)).size).toBe(2);
    const movedKeys = Array.from({ length: chats }, (_, c) => new Set(rows.filter((row) => row.chat === `chat:${c}`).map((row) => row.pid)).size);
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
      expect(runs.map((row) => [row.n, row.attempt]), `chat:${c}`).toEqual(want);
      for (let i = 1; i < runs.length; i++) {
        // No overlap: each run starts after the previous one of its key ended.
        expect(Number(runs[i]!.start), `chat:${c} run ${i}`).toBeGreaterThanOrEqual(Number(runs[i - 1]!.end));
        // Far below the 5 s poll: the key's release woke a claim (the retry waits 10 ms).
        expect(Number(runs[i]!.start) - Number(runs[i - 1]!.end), `chat:${c} gap ${i}`).toBeLessThan(2_500);
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
      [{ n: 1 }, 'succeeded', null, 0, 7], [{ n: 2 }, 'waiting', null, 0, undefined],
    ]);
    expect((await claim(store, 'me')).map((c) => c.payload)).toEqual(['{"n":2}']);
    expect((await admin.query(`SELECT version FROM "${schema}".taskheap_meta`)).rows).toEqual([{ version: 4 }]);
    await store.close();
    await admin.query(`UPDATE "${schema}".taskheap_meta SET version = 5`);
    const newer = postgresStore({ connectionString: server.url, schema });
    opened.push(newer);
    await expect(newer.migrate()).rejects.toBeInstanceOf(SchemaVersionError);
  });
});
