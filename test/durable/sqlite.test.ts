import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type SkipInfo, SchemaVersionError, UnknownHandlerError } from '../../src/index.js';
import { openDatabase, SQLITE_DRIVERS, type SqliteDriver } from '../../src/durable/sqlite/driver.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { START } from '../helpers.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
}

/** Why `driver` cannot open a database in this Node, or undefined if it can. */
async function unavailable(driver: SqliteDriver): Promise<string | undefined> {
  try {
    (await openDatabase(':memory:', driver)).close();
    return undefined;
  } catch (error) {
    const cause = (error as Error).cause as Error | undefined;
    return `${(error as Error).message}${cause === undefined ? '' : `: ${cause.message.split('\n')[0]}`}`;
  }
}

// The store's tests run once per driver that loads in this Node (describe.each
// below): on Node 20 only better-sqlite3, on 22 and 24 node:sqlite and, with
// its native build, better-sqlite3. A driver that does not load is skipped, saying why.
const DRIVERS = await Promise.all(SQLITE_DRIVERS.map(async (driver) => ({ driver, reason: await unavailable(driver) })));
const AVAILABLE = DRIVERS.filter((d) => d.reason === undefined);
for (const { driver, reason } of DRIVERS) {
  if (reason === undefined) continue;
  console.warn(`test/durable/sqlite.test.ts: skipping driver ${driver}: ${reason}`);
  describe.skip(`sqliteStore on ${driver} (skipped: ${reason.split('\n')[0]})`, () => {
    it('every SQLite store test', () => {});
  });
}

/** The driver of the describe.each block running now (set in its beforeAll). */
let driver: SqliteDriver = AVAILABLE[0]?.driver ?? 'better-sqlite3';

async function open(path = tempDb(), clock = new ManualClock(START)) {
  const errors: unknown[] = [];
  const scheduler = new Scheduler({ clock, store: sqliteStore(path, { driver }), onError: (error) => errors.push(error) });
  return { path, clock, scheduler, errors };
}

describe.each(AVAILABLE)('sqliteStore on $driver: durable tasks', ({ driver: current }) => {
  beforeAll(() => void (driver = current));
  it('runs a named handler with its payload at its time and records the outcome', async () => {
    const { clock, scheduler } = await open();
    const seen: unknown[] = [];
    scheduler.define('remind', (ctx, payload: { text: string }) => {
      seen.push([payload.text, ctx.attempt, clock.now() - START]);
    });
    await scheduler.start();
    const task = await scheduler.schedule(START + 5_000, 'remind', { payload: { text: 'stretch' } });
    expect(task).toMatchObject({ name: 'remind', state: 'waiting', attempts: 0, payload: { text: 'stretch' }, key: null });
    expect(task.runAt).toEqual(new Date(START + 5_000));
    await clock.advance(4_999);
    expect(seen).toEqual([]);
    await clock.advance(1);
    await clock.advance(0);
    expect(seen).toEqual([['stretch', 1, 5_000]]);
    expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'succeeded', attempts: 1, lastError: null });
    await scheduler.close();
  });

  it('a key makes scheduling idempotent', async () => {
    const { clock, scheduler } = await open();
    const seen: number[] = [];
    scheduler.define('remind', (_ctx, payload: number) => void seen.push(payload));
    await scheduler.start();
    const first = await scheduler.schedule(START + 1_000, 'remind', { payload: 1, key: 'remind:42' });
    const second = await scheduler.schedule(START + 2_000, 'remind', { payload: 2, key: 'remind:42' });
    expect(second.id).toBe(first.id);
    expect(await scheduler.listTasks()).toHaveLength(1);
    await clock.advance(3_000);
    expect(seen).toEqual([2]);
    await scheduler.close();
  });

  it('retries failures with backoff through the store, then records the error', async () => {
    const { clock, scheduler, errors } = await open();
    const attempts: [number, number][] = [];
    scheduler.define('flaky', (ctx) => {
      attempts.push([ctx.attempt, clock.now() - START]);
      throw new Error(`attempt ${ctx.attempt} failed`);
    });
    await scheduler.start();
    const task = await scheduler.schedule(START, 'flaky', { retry: { attempts: 3, delay: 1_000, backoff: 'fixed' } });
    await clock.advance(10_000);
    expect(attempts).toEqual([[1, 0], [2, 1_000], [3, 2_000]]);
    const stored = await scheduler.getTask(task.id);
    expect(stored).toMatchObject({ state: 'failed', attempts: 3 });
    expect(stored!.lastError).toContain('attempt 3 failed');
    expect(errors.length).toBeGreaterThan(0);
    await scheduler.close();
  });

  it('times out a run and records timed-out', async () => {
    const { clock, scheduler } = await open();
    scheduler.define('slow', () => new Promise(() => {}));
    await scheduler.start();
    const task = await scheduler.schedule(START, 'slow', { timeout: 500 });
    await clock.advance(1_000);
    expect(await scheduler.getTask(task.id)).toMatchObject({ state: 'timed-out' });
    await scheduler.close();
  });

  it('cancel(id) stops a waiting task and aborts a running one', async () => {
    const { clock, scheduler } = await open();
    let aborted = false;
    scheduler.define('long', (ctx) => new Promise<void>((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        aborted = true;
        resolve();
      });
    }));
    scheduler.define('later', () => {});
    await scheduler.start();
    const waiting = await scheduler.schedule(START + 60_000, 'later');
    const running = await scheduler.schedule(START, 'long');
    await clock.advance(10);
    expect(await scheduler.cancel(waiting.id)).toBe(true);
    expect(await scheduler.cancel(running.id)).toBe(true);
    expect(aborted).toBe(true);
    expect(await scheduler.cancel(running.id)).toBe(false);
    await clock.advance(120_000);
    expect((await scheduler.getTask(waiting.id))!.state).toBe('cancelled');
    expect((await scheduler.getTask(running.id))!.state).toBe('cancelled');
    await scheduler.close();
  });

  it('runs recurring jobs from the store, once per occurrence, and re-registering by key does not duplicate', async () => {
    const { clock, scheduler } = await open();
    const seen: number[] = [];
    scheduler.define('tick', (ctx) => void seen.push((ctx.scheduledAt.getTime() - START) / 1_000));
    await scheduler.start();
    const job = await scheduler.every(10).seconds().run('tick', { key: 'ticker' });
    await scheduler.every(10).seconds().run('tick', { key: 'ticker' });
    expect(job).toMatchObject({ key: 'ticker', state: 'scheduled' });
    await clock.advance(35_000);
    expect(seen).toEqual([10, 20, 30]);
    expect(await scheduler.listTasks({ jobKey: 'ticker' })).toHaveLength(3);
    expect(await scheduler.cancelJob('ticker')).toBe(true);
    await clock.advance(30_000);
    expect(seen).toEqual([10, 20, 30]);
    await scheduler.close();
  });

  it('re-registering an interval job at a later start keeps its place, count and phase', async () => {
    const { clock, scheduler } = await open();
    const seen: number[] = [];
    scheduler.define('tick', (ctx) => void seen.push((ctx.scheduledAt.getTime() - START) / 1_000));
    await scheduler.start();
    await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' });
    await clock.advance(15_000);
    const again = await scheduler.every(10).seconds().times(3).run('tick', { key: 'k' }); // as a restart would
    expect(again.nextRunAt).toEqual(new Date(START + 20_000));
    await clock.advance(60_000);
    expect(seen).toEqual([10, 20, 30]);
    const changed = await scheduler.every(7).seconds().run('tick', { key: 'k' }); // a new rule starts afresh
    expect(changed.nextRunAt).toEqual(new Date(clock.now() + 7_000));
    await scheduler.close();
  });

  it('gives handlers the stored task id, the same on every delivery', async () => {
    const { clock, scheduler } = await open();
    const ids: number[] = [];
    scheduler.define('flaky', (ctx) => {
      ids.push(ctx.id);
      if (ctx.attempt === 1) throw new Error('again');
    });
    await scheduler.start();
    const task = await scheduler.schedule(START, 'flaky', { retry: { attempts: 2, delay: 10 } });
    await clock.advance(100);
    expect(ids).toEqual([task.id, task.id]);
    await scheduler.close();
  });

  it('overdue job occurrences at start-up follow the misfire policy', async () => {
    const path = tempDb();
    const clock = new ManualClock(START);
    const first = await open(path, clock);
    first.scheduler.define('tick', () => {});
    await first.scheduler.start();
    await first.scheduler.every(1).minute().run('tick', { key: 'once' });
    await first.scheduler.every(1).minute().run('tick', { key: 'skip', misfire: 'skip' });
    await first.scheduler.every(1).minute().run('tick', { key: 'all', misfire: 'all' });
    await first.scheduler.every(1).minute().run('tick', { key: 'capped', misfire: 'all', catchUp: 4 });
    expect(() => first.scheduler.every(1).minute().run('tick', { key: 'bad', misfire: 'all', catchUp: 0 })).toThrow(/`catchUp` to be an integer from 1/);
    await first.scheduler.close();
    clock.set(START + 10 * 60_000 + 30_000); // the process was down for ten minutes
    const second = await open(path, clock);
    const seen: Record<string, number> = {};
    const skips: SkipInfo[] = [];
    second.scheduler.on('skip', (info) => skips.push(info));
    second.scheduler.define('tick', () => {});
    await second.scheduler.start();
    await clock.advance(0);
    for (const key of ['once', 'skip', 'all', 'capped']) seen[key] = (await second.scheduler.listTasks({ jobKey: key })).length;
    expect(seen).toEqual({ once: 1, skip: 0, all: 10, capped: 4 });
    // What was dropped is reported, one event per job, by key (a stored job has no Job object):
    // misfire 'skip' from its first missed occurrence, the capped catch-up from the first beyond the cap.
    expect(skips.sort((a, b) => a.key!.localeCompare(b.key!))).toEqual([
      { job: undefined, name: 'tick', key: 'capped', scheduledAt: new Date(START + 5 * 60_000), reason: 'misfire' },
      { job: undefined, name: 'tick', key: 'skip', scheduledAt: new Date(START + 60_000), reason: 'misfire' },
    ]);
    await second.scheduler.close();
  });

  it('rejects bad input at the call: unknown handler, non-JSON payload, bad options', async () => {
    const { scheduler } = await open();
    scheduler.define('known', () => {});
    await scheduler.start();
    await expect(async () => scheduler.schedule(START, 'unknown')).rejects.toBeInstanceOf(UnknownHandlerError);
    expect(() => scheduler.schedule(START, 'known', { payload: { n: 1n } })).toThrow(/JSON/);
    expect(() => scheduler.schedule(START, 'known', { payload: () => {} })).toThrow(/JSON/);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(() => scheduler.schedule(START, 'known', { payload: circular })).toThrow(/JSON/);
    expect(() => scheduler.schedule(START, 'known', { colour: 1 } as never)).toThrow(/Unknown durable task option/);
    expect(() => scheduler.every().second().run('known', { overlap: 'queue' as never })).toThrow(/overlap/);
    expect(await scheduler.listTasks()).toEqual([]);
    expect(() => scheduler.define('', () => {})).toThrow(TypeError);
    await scheduler.close();
  });

  it('named handlers need a store', () => {
    const scheduler = new Scheduler();
    expect(() => scheduler.define('x', () => {})).toThrow(/store/);
    expect(() => scheduler.schedule(Date.now(), 'x')).toThrow(/store/);
  });

  it('refuses a schema from a newer version with a clear error', async () => {
    const path = tempDb();
    const db = await openDatabase(path, driver);
    db.exec('CREATE TABLE taskheap_meta (version INTEGER NOT NULL); INSERT INTO taskheap_meta VALUES (99)');
    db.close();
    const { scheduler } = await open(path);
    await expect(scheduler.start()).rejects.toBeInstanceOf(SchemaVersionError);
    await expect(scheduler.start()).rejects.toThrow(/version 99/);
  });
});

describe.each(AVAILABLE)('sqliteStore on $driver: crash and restart', ({ driver: current }) => {
  beforeAll(() => void (driver = current));
  function worker(args: string[]) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/sqlite-worker.ts', ...args], {
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
    // Kill it once some, but not all, tasks have finished.
    for (let i = 0; i < 400; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      if (existsSync(log) && readFileSync(log, 'utf8').split('\n').filter((l) => l !== '' && l !== '-1').length >= 20) break;
    }
    first.child.kill('SIGKILL');
    await first.exited;
    const before = new Set(readFileSync(log, 'utf8').split('\n').filter((l) => l !== '' && l !== '-1'));
    expect(before.size).toBeGreaterThan(0);
    expect(before.size).toBeLessThan(N);
    const second = worker([db, log]);
    expect(await second.exited).toBe(0);
    const done = new Set(readFileSync(log, 'utf8').split('\n').filter((l) => l !== '' && l !== '-1'));
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
    expect(() => db.transaction(() => {
      insert.run(2);
      throw new Error('boom');
    })()).toThrow('boom');
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

  it.skipIf(!loads('node:sqlite') || !loads('better-sqlite3'))('the two drivers read each other\'s files', async () => {
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

  it.skipIf(!loads('node:sqlite'))('loading node:sqlite prints no ExperimentalWarning, and other warnings still show', async () => {
    const script = `import { openDatabase } from './src/durable/sqlite/driver.ts';
      (await openDatabase(':memory:')).close();
      process.emitWarning('still here', 'ExperimentalWarning');`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(err).toContain('still here');
    expect(err).not.toMatch(/SQLite is an experimental/);
  }, 30_000);
});
