// The SQLite store has one owner: a second store of the same file, in this
// process or another, is refused and never touches the owner's running work;
// a dead owner's work is taken over, counted as a lease expiry, and bounded.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../../src/durable/sqlite/driver.js';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { sqliteStore, StoreInUseError, type SqliteStoreOptions } from '../../../src/sqlite.js';
import { MIGRATION_SQL as MIGRATIONS, VERSION_SQL as SQL } from '../../../src/durable/sqlite/migrations.js';
import { SCHEMA_VERSION } from '../../../src/durable/store.js';
import { compiled } from '../../compiled-fixture.js';

/** A task row as versions 1 to 3 of the SQLite schema hold it (the store's own insert has version 4's columns). */
const V1_INSERT = `INSERT INTO taskheap_tasks (name, key, payload, run_at, max_attempts, options, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
}

function open(path: string, options: SqliteStoreOptions = {}) {
  const errors: unknown[] = [];
  const runs: number[] = [];
  const scheduler = new Scheduler({ store: sqliteStore(path, options), onError: (error) => errors.push(error) });
  scheduler.define('hold', (ctx) => void runs.push(ctx.id));
  scheduler.define('work', (ctx) => void runs.push(ctx.id));
  return { scheduler, errors, runs };
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(20);
  }
}

describe('sqliteStore: one owner per file', () => {
  it('a second store of the same file in this process is refused, naming the file and the owner', async () => {
    const path = tempDb();
    const first = open(path);
    let release: (() => void) | undefined;
    first.scheduler.define('hold', () => new Promise<void>((resolve) => (release = resolve)));
    await first.scheduler.start();
    const task = await first.scheduler.schedule(Date.now(), 'hold');
    // Its handler has begun (the row says running from the claim on, a moment before the handler is called).
    await waitFor('the task to run', async () => release !== undefined && (await first.scheduler.getTask(task.id))!.state === 'running');
    const second = open(path);
    const refusal = await second.scheduler.start().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(StoreInUseError);
    expect(refusal).toMatchObject({ code: 'ERR_STORE_IN_USE', path, owner: { pid: process.pid } });
    expect(String(refusal)).toContain(path);
    expect(String(refusal)).toMatch(/this very process/);
    // The owner's running work was not touched, and it finishes once.
    expect((await first.scheduler.getTask(task.id))!.state).toBe('running');
    release!();
    await waitFor('the task to succeed', async () => (await first.scheduler.getTask(task.id))!.state === 'succeeded');
    await first.scheduler.close();
    // Once the owner has closed, the file can be opened again.
    const third = open(path);
    await third.scheduler.start();
    expect(await third.scheduler.getTask(task.id)).toMatchObject({ state: 'succeeded', attempts: 1 });
    await third.scheduler.close();
  });

  it('a second process is refused while the owner lives; once it is killed its work is taken over, counted as one lease expiry', async () => {
    const path = tempDb();
    const child = spawn(process.execPath, [compiled('test/fixtures/sqlite-owner.ts'), path], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      await waitFor('the owner to run its task', () => out.includes('running'), 20_000);
      const second = open(path);
      const refusal = await second.scheduler.start().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(StoreInUseError);
      expect(String(refusal)).toContain(path);
      expect(String(refusal)).toContain(`process ${child.pid}`);
      // Refused again while it lives, well past its lease: nothing was taken from it.
      await sleep(700);
      await expect(open(path).scheduler.start()).rejects.toBeInstanceOf(StoreInUseError);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    // The owner died: its lock went with it, and its running task comes back to run here.
    const heir = open(path);
    await heir.scheduler.start();
    const [task] = await heir.scheduler.listTasks({ name: 'hold' });
    await waitFor('the task to run here', async () => (await heir.scheduler.getTask(task!.id))!.state === 'succeeded');
    expect(heir.runs).toEqual([task!.id]);
    await heir.scheduler.close();
    // Read with whichever driver this Node has (node:sqlite from 22.13), as the store does.
    const db = await openDatabase(path);
    expect(db.prepare('SELECT attempts, expiries FROM taskheap_tasks').all()).toEqual([{ attempts: 2, expiries: 1 }]);
    db.close();
  }, 40_000);

  it('a task whose owner died more than maxLeaseExpiries times is failed at start-up, saying so', async () => {
    const path = tempDb();
    const first = open(path);
    await first.scheduler.start();
    const a = await first.scheduler.schedule(Date.now() + 60_000, 'work');
    const b = await first.scheduler.schedule(Date.now() + 60_000, 'work');
    await first.scheduler.close();
    // As a process that died mid-run leaves them: a once already, b never.
    const db = await openDatabase(path);
    db.prepare(
      `UPDATE taskheap_tasks SET state = 'running', locked_by = 'dead', locked_until = 0, attempts = 2, expiries = 1 WHERE id = ?`,
    ).run(a.id);
    db.prepare(
      `UPDATE taskheap_tasks SET state = 'running', locked_by = 'dead', locked_until = 0, attempts = 1, run_at = 0 WHERE id = ?`,
    ).run(b.id);
    db.close();
    const second = open(path);
    await second.scheduler.start();
    expect(await second.scheduler.getTask(a.id)).toMatchObject({ state: 'failed', attempts: 2 });
    expect((await second.scheduler.getTask(a.id))!.lastError).toMatch(/lease of this task expired 2 times.*maxLeaseExpiries is 1/);
    await waitFor('b to run again', async () => (await second.scheduler.getTask(b.id))!.state === 'succeeded');
    expect(second.runs).toEqual([b.id]);
    await second.scheduler.close();
  });

  it('a lease of its own that expired (a handler blocking the event loop) is never claimed again by the living owner', async () => {
    const path = tempDb();
    const { scheduler } = open(path);
    await scheduler.start();
    const task = await scheduler.schedule(Date.now() + 60_000, 'work');
    await scheduler.close();
    const store = sqliteStore(path, { lease: 100 });
    await store.migrate();
    try {
      const none = (): never => {
        throw new Error('no jobs here');
      };
      const t0 = Date.now() + 60_000;
      expect((await store.claim({ owner: 'me', now: t0, lease: 100, limit: 10, advance: none })).map((c) => c.id)).toEqual([task.id]);
      // Long past the lease, as after a blocked event loop: still ours, not run again.
      expect(await store.claim({ owner: 'me', now: t0 + 1_000, lease: 100, limit: 10, advance: none })).toEqual([]);
      expect(await store.getTask(task.id)).toMatchObject({ state: 'running', attempts: 1 });
    } finally {
      await store.close();
    }
  });

  it('upgrades a version 1 file in place: rows kept, lease expiries counted from 0', async () => {
    const path = tempDb();
    const db = await openDatabase(path);
    db.exec(SQL.createMeta);
    db.exec(MIGRATIONS[0]!);
    db.prepare(SQL.insertVersion).run(1);
    db.prepare(V1_INSERT).run('work', null, '{}', Date.now(), 1, '{}', Date.now(), Date.now());
    db.close();
    const { scheduler, runs } = open(path);
    await scheduler.start();
    await waitFor('the old task to run', () => runs.length === 1);
    await scheduler.close();
    const after = await openDatabase(path);
    expect(after.prepare('SELECT version FROM taskheap_meta').get()).toEqual({ version: SCHEMA_VERSION });
    expect(after.prepare('SELECT state, expiries FROM taskheap_tasks').all()).toEqual([{ state: 'succeeded', expiries: 0 }]);
    after.close();
  });

  it('errors from SQLite name the file', async () => {
    const path = join(tempDb(), 'no-such-dir', 'store.db');
    await expect(open(path).scheduler.start()).rejects.toThrow(path);
  });
});
