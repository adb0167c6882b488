// Producers: a scheduler with a store adds, reads and cancels work without
// start(), without handlers and without claiming anything; workers run it.
// Real SQLite files and a real PostgreSQL server; no mocks.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, UnknownHandlerError } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { START } from '../helpers.js';
import type { PgServer } from './pg-server.js';
import { usePostgres } from './use-postgres.js';
import { compiled } from '../compiled-fixture.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-producer-')), 'store.db');
}

/** Polls `condition` until it holds; fails with `what` after `timeout` ms. */
async function until(what: string, condition: () => boolean | Promise<boolean>, timeout = 15_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(20);
  }
}

describe('producers on SQLite', () => {
  it('schedule, getTask, listTasks and cancel work without start(); nothing is claimed or run', async () => {
    const path = tempDb();
    const clock = new ManualClock(START);
    const producer = new Scheduler({ clock, store: sqliteStore(path) });
    const a = await producer.schedule(START, 'remind', { payload: { to: 'ann' } });
    const b = await producer.after('1m', 'invoice', { key: 'invoice:7' });
    expect(a).toMatchObject({ name: 'remind', state: 'waiting', payload: { to: 'ann' } });
    expect((await producer.getTask(b.id))?.key).toBe('invoice:7');
    await clock.advance(120_000);
    // Due for two minutes, yet waiting: a producer never claims.
    expect((await producer.listTasks()).map((t) => t.state)).toEqual(['waiting', 'waiting']);
    expect(await producer.cancelTask(b.id)).toBe(true);
    expect((await producer.getTask(b.id))?.state).toBe('cancelled');
    await producer.close();

    // The worker (the next owner of the file) runs what the producer added.
    const worker = new Scheduler({ clock, store: sqliteStore(path) });
    const seen: unknown[] = [];
    worker.define('remind', (_ctx, payload) => void seen.push(payload));
    worker.define('invoice', () => {});
    await worker.start();
    await clock.advance(0);
    await until('the task ran', async () => (await worker.getTask(a.id))?.state === 'succeeded');
    expect(seen).toEqual([{ to: 'ann' }]);
    await worker.close();
  });

  it('migrate() opens and upgrades the schema without claiming; a producer with no calls never opens the file', async () => {
    const path = tempDb();
    const idle = new Scheduler({ store: sqliteStore(path) });
    await idle.close();
    // Nothing opened, so a second store takes the file at once.
    const producer = new Scheduler({ store: sqliteStore(path) });
    await producer.migrate();
    await producer.migrate(); // once is enough; again is harmless
    expect(await producer.listTasks()).toEqual([]);
    await producer.close();
    await expect(producer.migrate()).rejects.toThrow(/closed/);
  });

  it('`handlers` guards against typos; without it (and without define) any well-formed name is accepted', async () => {
    const listed = new Scheduler({ store: sqliteStore(tempDb()), handlers: ['remind'] });
    await listed.schedule(Date.now(), 'remind');
    await expect(async () => listed.schedule(Date.now(), 'remnid')).rejects.toBeInstanceOf(UnknownHandlerError);
    await expect(async () => listed.schedule(Date.now(), 'remnid')).rejects.toThrow(/"remnid".*handlers/);
    await expect(async () => listed.every('1m').run('remnid')).rejects.toBeInstanceOf(UnknownHandlerError);
    // Defined names count as known too.
    listed.define('invoice', () => {});
    await listed.schedule(Date.now(), 'invoice');
    expect((await listed.listTasks()).map((t) => t.name)).toEqual(['remind', 'invoice']);
    await listed.close();

    const open = new Scheduler({ store: sqliteStore(tempDb()) });
    expect((await open.schedule(Date.now(), 'anything-at-all')).name).toBe('anything-at-all');
    expect(() => open.schedule(Date.now(), '')).toThrow(TypeError);
    expect(() => open.schedule(Date.now(), 'x'.repeat(256))).toThrow(RangeError);
    await open.close();

    expect(() => new Scheduler({ handlers: ['a'] })).toThrow(/store/);
    expect(() => new Scheduler({ store: sqliteStore(tempDb()), handlers: 'a' as never })).toThrow(/array/);
    expect(() => new Scheduler({ store: sqliteStore(tempDb()), handlers: ['ok', ''] })).toThrow(/handlers/);
  });
});

describe('producers on PostgreSQL', () => {
  let server: PgServer;
  let admin: pg.Pool;
  let schemas = 0;
  const opened: Scheduler[] = [];
  const children: { kill: (signal: NodeJS.Signals) => void; exited: Promise<number | null> }[] = [];

  usePostgres((started, pool) => {
    server = started;
    admin = pool;
  });

  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill('SIGTERM');
      await child.exited;
    }
    for (const scheduler of opened.splice(0)) await scheduler.close({ abort: true }).catch(() => {});
  });

  function schema(): string {
    return `p${++schemas}_${process.pid}`;
  }

  function producer(name: string, options: { handlers?: string[] } = {}): Scheduler {
    const scheduler = new Scheduler({ store: postgresStore({ connectionString: server.url, schema: name }), ...options });
    opened.push(scheduler);
    return scheduler;
  }

  function worker(name: string): { ready: Promise<void>; output: () => string } {
    const child = spawn(process.execPath, [compiled('test/fixtures/pg-result-worker.ts'), server.url, name], {
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
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    children.push({ kill: (signal) => child.kill(signal), exited });
    return { ready, output: () => out };
  }

  /** Sessions of this server's taskheap listeners. */
  async function listeners(): Promise<number> {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'taskheap-listener' AND datname = current_database()`,
    );
    return Number(rows[0]!.n);
  }

  it('a producer adds and cancels work with no start(), no handlers, no claim and no listener; a worker process runs it', async () => {
    const name = schema();
    const web = producer(name);
    const before = await listeners();
    const tasks = [];
    for (let n = 0; n < 5; n++) tasks.push(await web.schedule(Date.now(), 'double', { payload: { n } }));
    const dropped = await web.after('1h', 'double', { payload: { n: 99 } });
    expect(await web.cancelTask(dropped.id)).toBe(true);
    await sleep(300);
    // Due, but nobody runs them yet: the producer does not claim.
    expect((await web.listTasks({ state: 'waiting' })).length).toBe(5);
    expect(await listeners()).toBe(before);

    const w = worker(name);
    await w.ready;
    await until('the worker ran every task', async () => (await web.listTasks({ state: 'succeeded' })).length === 5);
    expect((await web.getTask(dropped.id))?.state).toBe('cancelled');
    expect(await listeners()).toBe(before + 1); // the worker's, not the producer's
  }, 60_000);

  it('a producer with `handlers` refuses a typo at the call and stores nothing', async () => {
    const web = producer(schema(), { handlers: ['double', 'fail'] });
    await expect(async () => web.schedule(Date.now(), 'doubel')).rejects.toBeInstanceOf(UnknownHandlerError);
    await web.schedule(Date.now(), 'double', { payload: { n: 1 } });
    expect((await web.listTasks()).map((t) => t.name)).toEqual(['double']);
  });

  it("schedule({ client }) writes through the caller's transaction: rolled back, nothing; committed, stored and run", async () => {
    const name = schema();
    const web = producer(name);
    await web.migrate();
    const client = await admin.connect();
    try {
      await client.query('BEGIN');
      await web.schedule(Date.now(), 'double', { payload: { n: 1 }, client });
      await client.query('ROLLBACK');
      expect(await web.listTasks()).toEqual([]);

      await client.query('BEGIN');
      const task = await web.schedule(Date.now(), 'double', { payload: { n: 2 }, client, key: 'tx:2' });
      expect(await web.getTask(task.id)).toBeUndefined(); // not visible before the commit
      await client.query('COMMIT');
      expect((await web.getTask(task.id))?.key).toBe('tx:2');
      await worker(name).ready;
      const done = await web.waitFor(task.id, { timeout: '20s' });
      expect(done.result).toMatchObject({ n: 4 });
    } finally {
      client.release();
    }
    expect(() => web.schedule(Date.now(), 'double', { client: {} as never })).toThrow(/client/);
    const local = new Scheduler({ store: sqliteStore(tempDb()) });
    await expect(local.schedule(Date.now(), 'x', { client: { query: async () => ({ rows: [] }) } })).rejects.toThrow(/postgresStore/);
    await local.close();
  }, 60_000);

  it('migrate() creates the schema so a producer can fail early at boot', async () => {
    const name = schema();
    const web = producer(name);
    await web.migrate();
    const { rows } = await admin.query(`SELECT version FROM "${name}".taskheap_meta`);
    expect(rows).toHaveLength(1);
    const bad = new Scheduler({ store: postgresStore({ connectionString: 'postgres://nobody@127.0.0.1:1/none', timeout: 1_000 }) });
    await expect(bad.migrate()).rejects.toThrow();
    await bad.close();
  });
});
