// The schema a fresh database ends up with, for each store, against a
// committed snapshot (test/durable/__snapshots__/*-schema.txt): any change to
// the schema shows in review as a change of that file. When a change is
// intended, rewrite them with `npx vitest run test/durable/schema.test.ts -u`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { openDatabase } from '../../src/durable/sqlite/driver.js';
import { SCHEMA_VERSION } from '../../src/durable/store.js';
import { MIGRATIONS as PG_MIGRATIONS } from '../../src/durable/postgres/migrations.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/durable/sqlite/migrations.js';
import { dumpPostgres, dumpSqlite, UPDATE_COMMAND } from './schema-helpers.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

const CHANGED = `The schema differs from the reviewed snapshot. If the change is intended, update the snapshot with \`${UPDATE_COMMAND}\` and commit it`;

describe('the migrations', () => {
  it('are numbered 1 to the current schema version, in order, on both stores', () => {
    // The stores run entry v to go from version v to v + 1.
    const versions = Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1);
    expect(SQLITE_MIGRATIONS.map((migration) => migration.version)).toEqual(versions);
    expect(PG_MIGRATIONS.map((migration) => migration.version)).toEqual(versions);
  });
});

describe('the SQLite schema', () => {
  it('a fresh file migrated to the current version matches the snapshot', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'taskheap-schema-')), 'fresh.db');
    const store = sqliteStore(path);
    await store.migrate();
    await store.close();
    const db = await openDatabase(path);
    const dump = dumpSqlite(db);
    db.close();
    expect(dump).toContain(`-- version ${SCHEMA_VERSION}\n`);
    await expect(dump, CHANGED).toMatchFileSnapshot('./__snapshots__/sqlite-schema.txt');
  });
});

describe('the PostgreSQL schema', () => {
  let server: PgServer;
  let admin: pg.Pool;
  usePostgres((s, a) => {
    server = s;
    admin = a;
  });
  const freshSchema = schemaNamer('schema_snapshot_');
  const opened = closedAfterEach((store: { close(): Promise<void> }) => store.close());

  it('a fresh schema migrated to the current version matches the snapshot', async () => {
    const schema = freshSchema();
    const store = postgresStore({ connectionString: server.url, schema });
    opened.push(store);
    await store.migrate();
    const dump = await dumpPostgres(admin, schema);
    expect(dump).toContain(`version ${SCHEMA_VERSION}\n`);
    expect(dump).not.toContain(schema);
    await expect(dump, CHANGED).toMatchFileSnapshot('./__snapshots__/postgres-schema.txt');
  });

  it('a migration is not bound by `timeout`: it waits for another process migrating the same schema, however long', async () => {
    const schema = freshSchema();
    // Another process is migrating: it holds the schema's migration lock for ten times the timeout.
    const other = await admin.connect();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT pg_advisory_xact_lock(hashtext('taskheap:' || $1::text))`, [schema]);
      // The server cancels any statement after 100 ms, as on a pool the store creates with `timeout: 100`; the
      // connection itself may take longer (a loaded machine), which is not what this test is about.
      const { default: pgModule } = await import('pg');
      const pool = new pgModule.Pool({
        connectionString: server.url,
        statement_timeout: 100,
        idle_in_transaction_session_timeout: 100,
        connectionTimeoutMillis: 30_000,
      });
      const store = postgresStore({ pool, schema, timeout: 100, lease: 300 });
      opened.push(store);
      let migrated = false;
      const migrating = store.migrate().then(() => (migrated = true));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(migrated).toBe(false);
      await other.query('COMMIT');
      await migrating;
      expect(await store.listQueues()).toEqual([]);
      await store.close();
      await pool.end();
    } finally {
      other.release();
    }
  });

  it('the tables on the search_path (no schema option) are the same as in a named schema', async () => {
    // A database of their own: the search_path's first schema is `public`.
    const database = `schema_path_${process.pid}`;
    await admin.query(`CREATE DATABASE ${database}`);
    const url = server.url.replace(/\/[^/]*$/, `/${database}`);
    const store = postgresStore({ connectionString: url });
    opened.push(store);
    await store.migrate();
    const named = freshSchema();
    const other = postgresStore({ connectionString: server.url, schema: named });
    opened.push(other);
    await other.migrate();
    const { default: pgModule } = await import('pg');
    const pool = new pgModule.Pool({ connectionString: url, max: 1 });
    try {
      // Definitions name what the search_path does not show (foreign keys, a trigger's function): as in the named schema's dump.
      await pool.query('SET search_path TO pg_catalog');
      expect(await dumpPostgres(pool, 'public')).toBe(await dumpPostgres(admin, named));
    } finally {
      await pool.end();
    }
  });
});
