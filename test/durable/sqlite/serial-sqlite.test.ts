// Issue 16 on SQLite alone: a version 3 file upgrades to version 4 keeping
// its rows. The claim order, serial groups and the rate/serial/priority options
// every store shares are in the conformance suite (test/durable/conformance/
// claims.ts and serial.ts), run on SQLite by store-sqlite.test.ts.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { ManualClock } from '../../../src/testing.js';
import { openDatabase } from '../../../src/durable/sqlite/driver.js';
import { MIGRATION_SQL as MIGRATIONS, VERSION_SQL as SQL } from '../../../src/durable/sqlite/migrations.js';
import { START } from '../../helpers.js';
import { until } from '../handler-gates.js';
import { SCHEMA_VERSION } from '../../../src/durable/store.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-serial-')), 'store.db');
}

describe('schema version 4 (SQLite)', () => {
  it('upgrades a version 3 file in place: rows kept, serial null and priority 0, and they run', async () => {
    const path = tempDb();
    const db = await openDatabase(path);
    db.exec(SQL.createMeta);
    for (const migration of MIGRATIONS.slice(0, 3)) db.exec(migration);
    db.prepare(SQL.insertVersion).run(3);
    const insert =
      db.prepare(`INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, created_at, updated_at, result)
      VALUES (?, ?, ?, ?, 1, '{}', ?, ?, ?)`);
    insert.run('work', 'old-1', '{"n":1}', START, START, START, null);
    insert.run('work', null, '{"n":2}', START + 1, START, START, null);
    db.prepare(`UPDATE taskheap_tasks SET state = 'succeeded', result = '7' WHERE key = 'old-1'`).run();
    db.prepare(
      `INSERT INTO taskheap_tasks (name, payload, run_at, options, created_at, updated_at) VALUES ('work', '{"n":3}', ?, '{}', ?, ?)`,
    ).run(START + 2, START, START);
    db.close();
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, store: sqliteStore(path) });
    const ran: number[] = [];
    scheduler.define('work', (_ctx, payload: { n: number }) => {
      ran.push(payload.n);
    });
    await scheduler.start();
    const rows = await scheduler.listTasks();
    expect(rows.map((t) => [t.payload, t.state, t.serial, t.priority])).toEqual([
      [{ n: 1 }, 'succeeded', null, 0],
      [{ n: 2 }, 'waiting', null, 0],
      [{ n: 3 }, 'waiting', null, 0],
    ]);
    expect(rows[0]!.result).toBe(7);
    await clock.advance(2);
    await until(() => ran.length === 2, 'the old waiting rows run');
    expect(ran).toEqual([2, 3]);
    await scheduler.close();
    const after = await openDatabase(path);
    expect(after.prepare('SELECT version FROM taskheap_meta').get()).toEqual({ version: SCHEMA_VERSION });
    expect(after.prepare(`SELECT count(*) AS n FROM taskheap_serial_keys`).get()).toEqual({ n: 0 });
    after.close();
  });
});
