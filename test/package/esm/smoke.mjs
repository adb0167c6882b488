// An ESM consumer: `import` of every entry point, one task on a ManualClock,
// what loads on first use (luxon for an ISO time, an in-memory flow, the
// durable runner for a store that brings none of its own), and a SQLite task.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Scheduler } from 'taskheap';
import { ManualClock } from 'taskheap/testing';
import * as sqlite from 'taskheap/sqlite';
import * as postgres from 'taskheap/postgres';

if (typeof sqlite.sqliteStore !== 'function' || typeof postgres.postgresStore !== 'function') throw new Error('store entry points are missing their factories');
const clock = new ManualClock(Date.UTC(2026, 0, 1));
const scheduler = new Scheduler({ clock, timezone: 'UTC' });
const task = scheduler.after(60_000, () => 'fired');
const daily = scheduler.every().day().at('10:30').timezone('Europe/Paris').run(() => {});
const iso = scheduler.schedule('2026-01-01T01:00:00+01:00', () => {});
const ran = [];
await scheduler.flows.add({ tasks: { a: { handler: () => ran.push('a') }, b: { handler: () => ran.push('b'), after: ['a'] } } });
await clock.advance(60_000);
if (ran.join() !== 'a,b') throw new Error(`in-memory flow: ${ran.join()}`);
if (daily.nextRunAt?.toISOString() !== '2026-01-01T09:30:00.000Z') throw new Error(`daily job: ${daily.nextRunAt?.toISOString()}`);
if (iso.state !== 'succeeded') throw new Error(`ISO time: ${iso.state}`);
console.log(`esm: ${await task.result} at ${new Date(clock.now()).toISOString()}`);
await scheduler.close();

// A store wrapped as a user's own would be: it brings no runner, so the scheduler loads the package's
// (at construction). It runs a task where the runtime has node:sqlite (Node 20 would need better-sqlite3).
const dir = mkdtempSync(join(tmpdir(), 'taskheap-smoke-'));
const real = sqlite.sqliteStore(join(dir, 'own.db'));
const own = new Proxy(real, { get: (t, k) => (k === 'runner' ? undefined : typeof t[k] === 'function' ? t[k].bind(t) : t[k]) });
const stored = new Scheduler({ store: own });
stored.define('double', (_ctx, n) => n * 2);
const hasSqlite = await import('node:sqlite').then(() => true, () => false);
if (hasSqlite) {
  await stored.start();
  const added = await stored.schedule(Date.now(), 'double', { payload: 21 });
  const done = await stored.waitFor(added.id, { timeout: 30_000 });
  console.log(`esm: a store of its own ran ${done.result}`);
} else console.log('esm: a store of its own made (no node:sqlite to run it)');
await stored.close();
rmSync(dir, { recursive: true, force: true });
