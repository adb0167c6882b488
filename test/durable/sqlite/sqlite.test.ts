// What is SQLite's alone: the crash of the owning process (SIGKILL mid-run)
// and a restart, the two drivers themselves, and which one is chosen. The
// store's behaviour shared with every store (tasks, jobs, claims, serial
// keys, batching) is the conformance suite: store-sqlite.test.ts runs it on
// each driver. One owner per file and its lease bound: sqlite-delivery.test.ts.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { openDatabase, SQLITE_DRIVERS, type SqliteDriver } from '../../../src/durable/sqlite/driver.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { unavailable } from '../sqlite-drivers.js';
import { ManualClock } from '../../../src/testing.js';
import { START } from '../../helpers.js';
import { compiled } from '../../compiled-fixture.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
}

// The crash test runs once per driver that loads in this Node (describe.each
// below): on Node 20 only better-sqlite3, on 22 and 24 node:sqlite and, with
// its native build, better-sqlite3. A driver that does not load is skipped, saying why.
const DRIVERS = await Promise.all(SQLITE_DRIVERS.map(async (driver) => ({ driver, reason: await unavailable(driver) })));
const AVAILABLE = DRIVERS.filter((d) => d.reason === undefined);
for (const { driver, reason } of DRIVERS) {
  if (reason === undefined) continue;
  console.warn(`test/durable/sqlite/sqlite.test.ts: skipping driver ${driver}: ${reason}`);
  describe.skip(`sqliteStore on ${driver} (skipped: ${reason.split('\n')[0]})`, () => {
    it('every SQLite store test', () => {});
  });
}

/** The driver of the describe.each block running now (set in its beforeAll). */
let driver: SqliteDriver = AVAILABLE[0]?.driver ?? 'better-sqlite3';

describe('durable tasks need a store', () => {
  it('a start() that failed (the directory did not exist yet) can be called again, and then runs work', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'taskheap-start-')), 'later');
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'store.db')) });
    const ran: string[] = [];
    scheduler.define('note', (_ctx, text: string) => void ran.push(text));
    await expect(scheduler.start()).rejects.toThrow();
    mkdirSync(dir);
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'note', { payload: 'after all' });
    await scheduler.waitFor(task.id);
    expect(ran).toEqual(['after all']);
    await scheduler.close();
  });

  it('named handlers need a store', () => {
    const scheduler = new Scheduler();
    expect(() => scheduler.define('x', () => {})).toThrow(/store/);
    expect(() => scheduler.schedule(Date.now(), 'x')).toThrow(/store/);
  });
});

describe.each(AVAILABLE)('sqliteStore on $driver: crash and restart', ({ driver: current }) => {
  beforeAll(() => void (driver = current));
  function worker(args: string[]) {
    const child = spawn(process.execPath, [compiled('test/fixtures/sqlite-worker.ts'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TASKHEAP_SQLITE_DRIVER: driver },
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    return { child, exited, output: () => out };
  }

  it('loses nothing when the process is killed with SIGKILL mid-run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-crash-'));
    const db = join(dir, 'store.db');
    const log = join(dir, 'log');
    const N = 200;
    const first = worker([db, log, 'seed', String(N)]);
    // Kill it once some, but not all, tasks have finished (its start-up alone may take seconds under load).
    const deadline = Date.now() + 40_000;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      if (
        existsSync(log) &&
        readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l !== '' && l !== '-1').length >= 20
      )
        break;
    }
    first.child.kill('SIGKILL');
    await first.exited;
    const before = new Set(
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '' && l !== '-1'),
    );
    expect(before.size).toBeGreaterThan(0);
    expect(before.size).toBeLessThan(N);
    const second = worker([db, log]);
    expect(await second.exited).toBe(0);
    const done = new Set(
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '' && l !== '-1'),
    );
    expect(done.size).toBe(N);
    const check = await openDatabase(db, driver);
    const states = check.prepare(`SELECT state, COUNT(*) AS n FROM taskheap_tasks WHERE job_key IS NULL GROUP BY state`).all();
    check.close();
    expect(states.map((row) => ({ ...(row as object) }))).toEqual([{ state: 'succeeded', n: N }]);
  }, 60_000);
});

const loads = (driver: SqliteDriver) => DRIVERS.find((d) => d.driver === driver)!.reason === undefined;

describe.each(AVAILABLE)('the $driver driver', ({ driver }) => {
  it('commits a transaction, rolls it back when it throws, and nests as a savepoint', async () => {
    const db = await openDatabase(tempDb(), driver);
    db.exec('CREATE TABLE t (v INTEGER)');
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const values = () => (db.prepare('SELECT v FROM t ORDER BY v').all() as { v: number }[]).map((row) => row.v);
    expect(db.transaction((v: number) => insert.run(v).changes)(1)).toBe(1);
    expect(() =>
      db.transaction(() => {
        insert.run(2);
        throw new Error('boom');
      })(),
    ).toThrow('boom');
    db.transaction(() => {
      insert.run(3);
      try {
        db.transaction(() => {
          insert.run(4);
          throw new Error('inner');
        })();
      } catch {
        // the inner part is undone, the outer goes on
      }
      insert.run(5);
    })();
    expect(values()).toEqual([1, 3, 5]);
    expect(() => db.transaction(async () => insert.run(6))()).toThrow(/synchronous/);
    expect(values()).toEqual([1, 3, 5]);
    db.close();
  });

  it('binds named parameters from an object that has more keys than the SQL names', async () => {
    const db = await openDatabase(':memory:', driver);
    db.exec('CREATE TABLE t (a TEXT, b INTEGER)');
    db.prepare('INSERT INTO t (a, b) VALUES (@a, @b)').run({ a: 'x', b: 1, unrelated: 'ignored' });
    expect({ ...(db.prepare('SELECT * FROM t WHERE a = @a').get({ a: 'x', b: 9 }) as object) }).toEqual({ a: 'x', b: 1 });
    db.close();
  });
});

describe('choosing the SQLite driver', () => {
  it.skipIf(!loads('node:sqlite'))('defaults to node:sqlite where this Node has it', async () => {
    const db = await openDatabase(':memory:');
    expect(db.driver).toBe('node:sqlite');
    db.close();
  });

  it.skipIf(loads('node:sqlite') || !loads('better-sqlite3'))('falls back to better-sqlite3 where node:sqlite is missing', async () => {
    const db = await openDatabase(':memory:');
    expect(db.driver).toBe('better-sqlite3');
    db.close();
  });

  it.skipIf(!loads('node:sqlite') || !loads('better-sqlite3'))("the two drivers read each other's files", async () => {
    const path = tempDb();
    const first = new Scheduler({ clock: new ManualClock(START), store: sqliteStore(path, { driver: 'better-sqlite3' }) });
    first.define('remind', () => {});
    await first.start();
    const task = await first.schedule(START + 60_000, 'remind', { payload: { text: 'hi' }, key: 'k' });
    await first.close();
    const second = new Scheduler({ clock: new ManualClock(START), store: sqliteStore(path, { driver: 'node:sqlite' }) });
    second.define('remind', () => {});
    await second.start();
    expect(await second.getTask(task.id)).toMatchObject({ key: 'k', payload: { text: 'hi' }, state: 'waiting' });
    await second.close();
  });

  it('rejects an unknown driver at the call', () => {
    expect(() => sqliteStore('x.db', { driver: 'sqlite3' as never })).toThrow(/`driver`.*"sqlite3"/);
  });

  it.skipIf(loads('node:sqlite'))('driver node:sqlite says which Node it needs where it is missing', async () => {
    await expect(openDatabase(':memory:', 'node:sqlite')).rejects.toThrow(/Node >= 22\.13/);
  });

  it.skipIf(!loads('node:sqlite'))(
    'loading node:sqlite prints no ExperimentalWarning, and other warnings still show',
    async () => {
      const script = `import { openDatabase } from './src/durable/sqlite/driver.ts';
      (await openDatabase(':memory:')).close();
      process.emitWarning('still here', 'ExperimentalWarning');`;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code).toBe(0);
      expect(err).toContain('still here');
      expect(err).not.toMatch(/SQLite is an experimental/);
    },
    30_000,
  );
});
