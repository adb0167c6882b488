// The store conformance suite (test/durable/conformance/) on SQLite, once per
// driver: node:sqlite (Node >= 22.13) and better-sqlite3. A driver that does
// not load in this Node (node:sqlite on Node 20; better-sqlite3 without its
// native build for this Node's ABI) is skipped, saying why.
// SQLite-only behaviour (one owner per file, a second process, SIGKILL of the
// owner, the drivers themselves) is in sqlite.test.ts and sqlite-delivery.test.ts.
import { SQLITE_CAPABILITIES } from '../../../src/durable/sqlite/store.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, SQLITE_DRIVERS, type SqliteDriver } from '../../../src/durable/sqlite/driver.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { unavailable } from '../sqlite-drivers.js';
import { storeConformance, type Backend } from './index.js';
import { STORE_CAPS } from './backend.js';

function sqliteBackend(driver: SqliteDriver, reason: string | undefined): Backend {
  return {
    name: `sqlite (${driver})`,
    ...(reason === undefined ? {} : { unavailable: reason }),
    caps: {
      ...STORE_CAPS,
      // What the store says it can do (clockDriven, multiProcess, notify, transactionsWithClient), as the scheduler reads it.
      ...SQLITE_CAPABILITIES,
    },
    async fresh() {
      const path = join(mkdtempSync(join(tmpdir(), 'taskheap-store-')), 'store.db');
      return {
        // sqliteStore() takes no `poll` or `prefetch`: they are set on the store, as the Store interface has them.
        store: ({ poll, prefetch, ...options } = {}) =>
          Object.assign(
            sqliteStore(path, { driver, ...options }),
            poll === undefined ? {} : { poll },
            prefetch === undefined ? {} : { prefetch },
          ),
        // One process per file: it dies, its lock goes with it, and the next store's
        // start-up (recover()) takes back what it had running.
        ownerDies: (store) => store.close(),
        async writeNewerSchema(version) {
          const db = await openDatabase(path, driver);
          db.exec(`CREATE TABLE taskheap_meta (version INTEGER NOT NULL); INSERT INTO taskheap_meta VALUES (${version})`);
          db.close();
        },
        async tables() {
          const db = await openDatabase(path, driver);
          const rows = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).all() as { name: string }[];
          db.close();
          return rows.map((row) => row.name);
        },
        async refuseLongPayloads() {
          const store = sqliteStore(path, { driver });
          await store.migrate();
          await store.close();
          const db = await openDatabase(path, driver);
          db.exec(`CREATE TRIGGER short_payload BEFORE INSERT ON taskheap_tasks WHEN length(NEW.payload) >= 20
            BEGIN SELECT RAISE(ABORT, 'short_payload: the payload is too long'); END`);
          db.close();
        },
        // No peek: the store holds its file in EXCLUSIVE locking mode, so nothing else reads it while it is open.
      };
    },
  };
}

for (const driver of SQLITE_DRIVERS) {
  const reason = await unavailable(driver);
  if (reason !== undefined) console.warn(`test/durable/conformance/store-sqlite.test.ts: skipping driver ${driver}: ${reason}`);
  storeConformance(sqliteBackend(driver, reason));
}
