// scheduleMany() and the `client` option (issue 21): on PostgreSQL the batch
// is written through the caller's client, in the caller's transaction (gone
// on rollback, stored on commit), every item giving the same client; on
// SQLite it is refused with the error schedule({ client }) gives. A real
// SQLite file and a real PostgreSQL server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres(
  (started, pool) => {
    server = started;
    admin = pool;
  },
  { adminConnections: 3 },
);

const schema = schemaNamer('sm');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close());
const clients = closedAfterEach<pg.PoolClient>(async (client) => client.release());

/** A producer (no handlers, never started) on a schema of its own, migrated. */
async function producer(): Promise<Scheduler> {
  const scheduler = new Scheduler({ store: postgresStore({ connectionString: server.url, schema: schema() }), onError: () => {} });
  opened.push(scheduler);
  await scheduler.migrate();
  return scheduler;
}

async function connect(): Promise<pg.PoolClient> {
  const client = await admin.connect();
  clients.push(client);
  return client;
}

const later = () => Date.now() + 3_600_000;

describe('scheduleMany({ client }) on PostgreSQL', () => {
  it("writes the batch in the caller's transaction: unseen before the commit, gone on rollback, stored on commit", async () => {
    const scheduler = await producer();
    const client = await connect();

    await client.query('BEGIN');
    const rolled = await scheduler.scheduleMany([
      { when: later(), name: 'mail', payload: { n: 1 }, client },
      { when: later(), name: 'mail', payload: { n: 2 }, key: 'mail:2', client },
    ]);
    expect(rolled.map((task) => task.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    // Other connections (the store's own) do not see it yet.
    expect(await scheduler.listTasks({ name: 'mail' })).toEqual([]);
    await client.query('ROLLBACK');
    expect(await scheduler.listTasks({ name: 'mail' })).toEqual([]);
    expect(await scheduler.getTask(rolled[0]!.id)).toBeUndefined();

    await client.query('BEGIN');
    const kept = await scheduler.scheduleMany([
      { when: later(), name: 'mail', payload: { n: 3 }, client },
      { when: later(), name: 'mail', payload: { n: 4 }, key: 'mail:4', client },
    ]);
    await client.query('COMMIT');
    const stored = await scheduler.listTasks({ name: 'mail' });
    expect(stored.map((task) => task.id).sort()).toEqual(kept.map((task) => task.id).sort());
    expect(stored.map((task) => task.payload)).toEqual(expect.arrayContaining([{ n: 3 }, { n: 4 }]));
  });

  it('refuses items that give different clients, or some none, at the call, naming the item; nothing is written', async () => {
    const scheduler = await producer();
    const a = await connect();
    const b = await connect();
    const same = /^scheduleMany\(\) item 1: Expected every item to give the same `client`/;
    expect(() =>
      scheduler.scheduleMany([
        { when: later(), name: 'mail', client: a },
        { when: later(), name: 'mail', client: b },
      ]),
    ).toThrow(same);
    expect(() =>
      scheduler.scheduleMany([
        { when: later(), name: 'mail', client: a },
        { when: later(), name: 'mail' },
      ]),
    ).toThrow(same);
    expect(() =>
      scheduler.scheduleMany([
        { when: later(), name: 'mail' },
        { when: later(), name: 'mail', client: a },
      ]),
    ).toThrow(same);
    expect(() => scheduler.scheduleMany([{ when: later(), name: 'mail', client: {} as never }])).toThrow(
      /item 0: Expected `client` to be a pg Client/,
    );
    expect(await scheduler.listTasks()).toEqual([]);
  });

  it('without a client it still writes the batch in a transaction of its own', async () => {
    const scheduler = await producer();
    const rows = await scheduler.scheduleMany([
      { when: later(), name: 'mail' },
      { when: later(), name: 'mail' },
    ]);
    expect((await scheduler.listTasks({ name: 'mail' })).map((task) => task.id)).toEqual(rows.map((task) => task.id));
  });
});

describe('scheduleMany({ client }) on SQLite', () => {
  it('rejects with the TypeError schedule({ client }) rejects with; nothing is written', async () => {
    const scheduler = new Scheduler({
      store: sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-many-')), 'store.db')),
      onError: () => {},
    });
    opened.push(scheduler);
    const client = await connect();
    const single: unknown = await scheduler.schedule(Date.now(), 'mail', { client }).then(
      () => 'stored',
      (error: unknown) => error,
    );
    const many: unknown = await scheduler.scheduleMany([{ when: Date.now(), name: 'mail', client }]).then(
      () => 'stored',
      (error: unknown) => error,
    );
    expect(single).toBeInstanceOf(TypeError);
    expect(many).toBeInstanceOf(TypeError);
    expect((many as Error).message).toBe((single as Error).message);
    expect((many as Error).message).toMatch(/needs postgresStore\(\)/);
    expect(await scheduler.listTasks()).toEqual([]);
  });
});
