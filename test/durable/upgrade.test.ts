// Upgrades from every earlier schema version keep every row, on both stores:
// a database is built at version N with that version's migrations (as the
// release of then left it), filled with representative rows (schema-
// helpers.ts: tasks in each state, keyed, leased, with results and errors,
// job occurrences, jobs in each state, a held serial group; each with the
// columns version N has), and migrated by the store. Then every row is still
// there with every value it had, the columns added since hold their
// defaults, the store reads the rows back, and the schema is exactly a
// fresh database's (which schema.test.ts compares with the snapshot).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { quote } from '../../src/durable/postgres/tables.js';
import { openDatabase, type Database } from '../../src/durable/sqlite/driver.js';
import { SCHEMA_VERSION, type Store, type StoredTask } from '../../src/durable/store.js';
import { dumpPostgres, dumpSqlite, postgresAt, ROWS, sqliteAt, TIME_COLUMNS, type Row } from './schema-helpers.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

/** Every version a database may be found at: 1 to the current one (which migrates nothing). */
const VERSIONS = Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1);

/**
 * What a column added after version 1 holds in an upgraded row: its
 * default. A new column must be listed here, or the tests fail, asking what
 * its old rows should hold.
 */
const ADDED: Record<string, unknown> = {
  expiries: 0,
  result: null,
  errors: null,
  serial: null,
  priority: 0,
  queue: 'default',
  rate_key: null,
  started_at: null,
  // Version 6: no task of an earlier version was claimed beyond the free workers.
  prefetched: false,
  // Version 6: a queue's rate (none on the queues of earlier versions).
  rate_limit: null,
  rate_interval_ms: null,
  rate_starts: null,
  rate_counts: null,
  // Version 6: ctx.progress() and ctx.log() (none on the tasks of earlier versions).
  progress: null,
  logs: null,
  // Version 6 (issue 28, flows): no task of an earlier version is in a flow or depends on anything.
  flow_id: null,
  pending_deps: 0,
  has_dependents: false,
  failed_dep: null,
  // Version 9 (SQLite) and 10 (PostgreSQL), fair shares: no task of an earlier version names one, or has a turn.
  fair_group: null,
  fair_weight: 1,
  fair_tag: null,
  steps: null,
  waiting_on: null,
  // Version 14 (PostgreSQL): no waiter marked a task of an earlier version.
  awaited: false,
};

/** From version 6 the serial groups are rows of taskheap_limits (taskheap_serial_keys is a read-only view of them). */
const LIMITS_FROM = 6;

const TABLES = { tasks: 'taskheap_tasks', jobs: 'taskheap_jobs', serialKeys: 'taskheap_serial_keys', queues: 'taskheap_queues' } as const;
type Tables = Record<keyof typeof TABLES, Record<string, unknown>[]>;

/** `row` with only the columns the table has at this version. */
function only(row: Row, columns: readonly string[]): Row {
  const kept: Row = {};
  for (const column of Object.keys(row)) if (columns.includes(column)) kept[column] = row[column]!;
  return kept;
}

/** Inserts `row` into `table` of an open SQLite file; its rowid. */
function insertSqlite(db: Database, table: string, row: Row): number {
  const names = Object.keys(row);
  const { lastInsertRowid } = db
    .prepare(`INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`)
    .run(...Object.values(row));
  return Number(lastInsertRowid);
}

/** A column's value as PostgreSQL takes it: a time column's epoch ms as a timestamptz. */
const pgValue = (column: string, v: string | number | null) =>
  TIME_COLUMNS.has(column) && v !== null ? new Date(Number(v)).toISOString() : v;

/** Inserts `row` into `table` of PostgreSQL schema `schema`; the row as stored. */
async function insertPostgres(admin: pg.Pool, schema: string, table: string, row: Row): Promise<Record<string, unknown>> {
  const names = Object.keys(row);
  const { rows } = await admin.query(
    `INSERT INTO ${quote(schema)}.${table} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING *`,
    names.map((name) => pgValue(name, row[name]!)),
  );
  return rows[0] as Record<string, unknown>;
}

/** Every row after the upgrade is the row before, plus the added columns at their defaults. */
function expectKept(before: Tables, after: Tables, version: number): void {
  for (const table of Object.keys(TABLES) as (keyof Tables)[]) {
    expect(after[table], `${table}: every row kept`).toHaveLength(before[table].length);
    after[table].forEach((row, i) => {
      const old = before[table][i]!;
      const added = Object.keys(row).filter((column) => !(column in old));
      for (const column of added)
        expect(column in ADDED, `${table}.${column} was added after version ${version}: list its default in ADDED`).toBe(true);
      // SQLite keeps a boolean as 0 or 1.
      const stored = (column: string) =>
        typeof ADDED[column] === 'boolean' && typeof row[column] === 'number' ? Number(ADDED[column]) : ADDED[column];
      expect(row, `${table} row ${i}`).toEqual({ ...old, ...Object.fromEntries(added.map((column) => [column, stored(column)])) });
    });
  }
}

/** What the store reads back for each fixture task (`ids[i]` is `inserted[i]`'s), as far as its version held it. */
function expectTasksRead(tasks: StoredTask[], inserted: Row[], ids: number[]): void {
  expect(tasks).toHaveLength(inserted.length);
  inserted.forEach((row, i) => {
    const task = tasks.find((t) => t.id === ids[i]);
    expect(task, `task ${i}`).toBeDefined();
    expect(task!, `task ${i}`).toMatchObject({
      name: row.name,
      key: row.key,
      payload: JSON.parse(String(row.payload)),
      state: row.state,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      runAt: new Date(Number(row.run_at)),
      lastError: row.last_error ?? null,
      jobKey: row.job_key ?? null,
      result: row.result === undefined || row.result === null ? undefined : JSON.parse(String(row.result)),
      serial: row.serial ?? null,
      priority: row.priority ?? 0,
      queue: row.queue ?? 'default',
    });
    expect(task!.errors, `task ${i} errors`).toHaveLength(
      row.errors === undefined || row.errors === null ? 0 : (JSON.parse(String(row.errors)) as unknown[]).length,
    );
  });
}

/** The queues the store lists: each fixture queue's settings, as far as its version held them. */
async function expectQueuesRead(store: Store, version: number): Promise<void> {
  if (version < 5) return;
  const listed = await store.listQueues();
  for (const row of ROWS.queues) {
    const rate = version >= LIMITS_FROM && row.rate_limit !== undefined ? { limit: row.rate_limit, interval: row.rate_interval_ms } : null;
    expect(
      listed.find((queue) => queue.name === row.name),
      `queue ${String(row.name)}`,
    ).toMatchObject({ paused: Boolean(row.paused), globalConcurrency: row.global_concurrency, rate });
  }
}

/** The jobs the store reads back. */
async function expectJobsRead(store: Store, inserted: Row[]): Promise<void> {
  for (const row of inserted) {
    expect(await store.getJob(String(row.key)), `job ${String(row.key)}`).toMatchObject({
      name: row.name,
      state: row.state,
      runs: row.runs,
      nextRunAt: row.next_run_at === null ? null : new Date(Number(row.next_run_at)),
    });
  }
}

describe('upgrades of a SQLite file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-upgrade-'));
  let files = 0;
  const opened = closedAfterEach((store: Store) => store.close());

  async function fresh(): Promise<string> {
    const path = join(dir, `fresh-${++files}.db`);
    const store = sqliteStore(path);
    await store.migrate();
    await store.close();
    const db = await openDatabase(path);
    try {
      return dumpSqlite(db);
    } finally {
      db.close();
    }
  }

  function columns(db: Database, table: string): string[] {
    return (db.prepare('SELECT name FROM pragma_table_info(?) ORDER BY cid').all(table) as { name: string }[]).map((c) => c.name);
  }

  function read(db: Database): Tables {
    const rows = (table: string, order: string) =>
      db.prepare(`SELECT * FROM ${table} ORDER BY ${order}`).all() as Record<string, unknown>[];
    return {
      tasks: rows(TABLES.tasks, 'id'),
      jobs: rows(TABLES.jobs, 'key'),
      serialKeys: columns(db, TABLES.serialKeys).length === 0 ? [] : rows(TABLES.serialKeys, 'key'),
      queues: columns(db, TABLES.queues).length === 0 ? [] : rows(TABLES.queues, 'name'),
    };
  }

  for (const version of VERSIONS) {
    it(`from version ${version}: every row kept with its data, the schema a fresh file's`, async () => {
      const path = join(dir, `v${version}-${++files}.db`);
      const db = await openDatabase(path);
      sqliteAt(db, version);
      const inserted: Tables & { tasks: Row[]; jobs: Row[] } = { tasks: [], jobs: [], serialKeys: [], queues: [] };
      const ids: number[] = [];
      db.transaction(() => {
        for (const [table, rows] of [
          [TABLES.tasks, ROWS.tasks],
          [TABLES.jobs, ROWS.jobs],
        ] as const) {
          const have = columns(db, table);
          for (const fixture of rows) {
            const row = only(fixture, have);
            if (version === SCHEMA_VERSION) expect(Object.keys(row), 'every fixture column exists').toEqual(Object.keys(fixture));
            const rowid = insertSqlite(db, table, row);
            if (table === TABLES.tasks) {
              ids.push(rowid);
              inserted.tasks.push(row);
            } else inserted.jobs.push(row);
          }
        }
        if (columns(db, TABLES.serialKeys).length > 0) {
          for (const key of ROWS.serialKeys) {
            if (version >= LIMITS_FROM) {
              db.prepare(`INSERT INTO taskheap_limits (kind, key, lim, holders) VALUES ('concurrency', ?, 1, json_array(?))`).run(
                key.key,
                ids[Number(key.held_by)],
              );
            } else db.prepare(`INSERT INTO ${TABLES.serialKeys} (key, held_by) VALUES (?, ?)`).run(key.key, ids[Number(key.held_by)]);
          }
        }
        const queueColumns = columns(db, TABLES.queues);
        for (const fixture of queueColumns.length === 0 ? [] : ROWS.queues) {
          const row = only(fixture, queueColumns);
          db.prepare(
            `INSERT INTO ${TABLES.queues} (${Object.keys(row).join(', ')}) VALUES (${Object.keys(row)
              .map(() => '?')
              .join(', ')})`,
          ).run(...Object.values(row));
        }
      })();
      const before = read(db);
      db.close();
      expect(before.tasks).toHaveLength(ROWS.tasks.length);

      const store = sqliteStore(path);
      opened.push(store);
      await store.migrate();
      expectTasksRead(await store.listTasks({ limit: 100 }), inserted.tasks, ids);
      await expectJobsRead(store, inserted.jobs);
      await expectQueuesRead(store, version);
      await store.close();

      const after = await openDatabase(path);
      try {
        expectKept(before, read(after), version);
        expect(dumpSqlite(after), 'the upgraded schema is a fresh one').toBe(await fresh());
      } finally {
        after.close();
      }
    });
  }
});

describe('upgrades of a PostgreSQL schema', () => {
  let server: PgServer;
  let admin: pg.Pool;
  usePostgres((s, a) => {
    server = s;
    admin = a;
  });
  const freshSchema = schemaNamer('upgrade_');
  const opened = closedAfterEach((store: Store) => store.close());

  async function columns(schema: string, table: string): Promise<string[]> {
    const { rows } = await admin.query(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2
      ORDER BY ordinal_position`,
      [schema, table],
    );
    return rows.map((row: { column_name: string }) => row.column_name);
  }

  /** Every row as JSON (times as ISO text, in the admin session's zone), in a stable order. */
  async function read(schema: string): Promise<Tables> {
    const rows = async (table: string, order: string) => {
      if ((await columns(schema, table)).length === 0) return [];
      return (await admin.query(`SELECT to_jsonb(t) AS row FROM ${quote(schema)}.${table} AS t ORDER BY ${order}`)).rows.map(
        (row: { row: Record<string, unknown> }) => row.row,
      );
    };
    return {
      tasks: await rows(TABLES.tasks, 'id'),
      jobs: await rows(TABLES.jobs, 'key'),
      serialKeys: await rows(TABLES.serialKeys, 'key'),
      queues: await rows(TABLES.queues, 'name'),
    };
  }

  for (const version of VERSIONS) {
    it(`from version ${version}: every row kept with its data, the schema a fresh one's`, async () => {
      const schema = freshSchema();
      await postgresAt(admin, schema, version);
      const inserted: { tasks: Row[]; jobs: Row[] } = { tasks: [], jobs: [] };
      const ids: number[] = [];
      for (const [table, rows] of [
        [TABLES.tasks, ROWS.tasks],
        [TABLES.jobs, ROWS.jobs],
      ] as const) {
        const have = await columns(schema, table);
        for (const fixture of rows) {
          const row = only(fixture, have);
          if (version === SCHEMA_VERSION) expect(Object.keys(row), 'every fixture column exists').toEqual(Object.keys(fixture));
          const added = await insertPostgres(admin, schema, table, row);
          if (table === TABLES.tasks) {
            ids.push(Number(added.id));
            inserted.tasks.push(row);
          } else inserted.jobs.push(row);
        }
      }
      if ((await columns(schema, TABLES.serialKeys)).length > 0) {
        for (const key of ROWS.serialKeys) {
          if (version >= LIMITS_FROM) {
            await admin.query(
              `INSERT INTO ${quote(schema)}.taskheap_limits (kind, key, lim, holders) VALUES ('concurrency', $1, 1, ARRAY[$2::bigint])`,
              [key.key, ids[Number(key.held_by)]],
            );
          } else
            await admin.query(`INSERT INTO ${quote(schema)}.${TABLES.serialKeys} (key, held_by) VALUES ($1, $2)`, [
              key.key,
              ids[Number(key.held_by)],
            ]);
        }
      }
      const queueColumns = await columns(schema, TABLES.queues);
      for (const fixture of queueColumns.length === 0 ? [] : ROWS.queues) {
        const row = only(fixture, queueColumns);
        const names = Object.keys(row);
        await admin.query(
          `INSERT INTO ${quote(schema)}.${TABLES.queues} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`,
          names.map((name) => (name === 'paused' ? Boolean(row[name]) : pgValue(name, row[name]!))),
        );
      }
      const before = await read(schema);
      expect(before.tasks).toHaveLength(ROWS.tasks.length);

      const store = postgresStore({ connectionString: server.url, schema });
      opened.push(store);
      await store.migrate();
      expectTasksRead(await store.listTasks({ limit: 100 }), inserted.tasks, ids);
      await expectJobsRead(store, inserted.jobs);
      await expectQueuesRead(store, version);
      await store.close();

      expectKept(before, await read(schema), version);
      const reference = freshSchema();
      const other = postgresStore({ connectionString: server.url, schema: reference });
      opened.push(other);
      await other.migrate();
      expect(await dumpPostgres(admin, schema), 'the upgraded schema is a fresh one').toBe(await dumpPostgres(admin, reference));
    });
  }
});

// Version 8 renames a limit's `key` to `group` in the stored options of tasks
// and jobs (the option's name); the column that holds it keeps its value.
describe('version 8: the stored options name a limit group `group`', () => {
  const OPTIONS = '{"rate":{"key":"chat:1","limit":1,"interval":1000},"concurrency":{"key":"tenant:1","limit":2}}';
  const MIGRATED = { rate: { group: 'chat:1', limit: 1, interval: 1_000 }, concurrency: { group: 'tenant:1', limit: 2 } };
  const task = { ...ROWS.tasks[0]!, key: 'limited', serial: 'tenant:1', rate_key: 'chat:1', options: OPTIONS };
  const job = { ...ROWS.jobs[0]!, options: OPTIONS };
  const opened = closedAfterEach((store: Store) => store.close());

  it('on SQLite', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-upgrade8-')), 'store.db');
    const db = await openDatabase(path);
    sqliteAt(db, 7);
    const id = insertSqlite(db, TABLES.tasks, task);
    insertSqlite(db, TABLES.jobs, job);
    insertSqlite(db, TABLES.tasks, { ...ROWS.tasks[1]!, key: 'plain' });
    db.close();
    const store = sqliteStore(path);
    opened.push(store);
    await store.migrate();
    expect(await store.getTask(id)).toMatchObject({ rate: MIGRATED.rate, concurrency: MIGRATED.concurrency });
    await store.close();
    const after = await openDatabase(path);
    try {
      const options = (table: string) =>
        (after.prepare(`SELECT options FROM ${table} ORDER BY rowid`).all() as { options: string }[]).map((row) => JSON.parse(row.options));
      expect(options(TABLES.jobs)).toEqual([MIGRATED]);
      expect(options(TABLES.tasks)).toEqual([MIGRATED, JSON.parse(String(ROWS.tasks[1]!.options))]);
      expect(after.prepare('SELECT serial, rate_key FROM taskheap_tasks WHERE id = ?').get(id)).toEqual({
        serial: 'tenant:1',
        rate_key: 'chat:1',
      });
    } finally {
      after.close();
    }
  });

  describe('on PostgreSQL', () => {
    let server: PgServer;
    let admin: pg.Pool;
    usePostgres((s, a) => {
      server = s;
      admin = a;
    });

    it('every row, through the store', async () => {
      const schema = schemaNamer('upgrade8_')();
      await postgresAt(admin, schema, 7);
      const id = Number((await insertPostgres(admin, schema, TABLES.tasks, task)).id);
      await insertPostgres(admin, schema, TABLES.jobs, job);
      await insertPostgres(admin, schema, TABLES.tasks, { ...ROWS.tasks[1]!, key: 'plain' });
      const store = postgresStore({ connectionString: server.url, schema });
      opened.push(store);
      await store.migrate();
      expect(await store.getTask(id)).toMatchObject({ rate: MIGRATED.rate, concurrency: MIGRATED.concurrency });
      const options = async (table: string) =>
        (await admin.query(`SELECT options FROM ${quote(schema)}.${table} ORDER BY ${table === TABLES.jobs ? 'key' : 'id'}`)).rows.map(
          (row: { options: string }) => JSON.parse(row.options),
        );
      expect(await options(TABLES.jobs)).toEqual([MIGRATED]);
      expect(await options(TABLES.tasks)).toEqual([MIGRATED, JSON.parse(String(ROWS.tasks[1]!.options))]);
      // A process of schema 7 still running during a deploy writes its job's limits under `key`: its runs keep them.
      await admin.query(`UPDATE ${quote(schema)}.${TABLES.jobs} SET options = $1, state = 'scheduled'`, [OPTIONS]);
      const run = await store.triggerJob(String(ROWS.jobs[0]!.key), Date.now());
      const { rows } = await admin.query(`SELECT serial, rate_key FROM ${quote(schema)}.${TABLES.tasks} WHERE id = $1`, [run!.id]);
      expect(rows).toEqual([{ serial: 'tenant:1', rate_key: 'chat:1' }]);
    });
  });
});
