// An ESM consumer: `import` of every entry point, then one task on a ManualClock.
import { Scheduler } from 'taskheap';
import { ManualClock } from 'taskheap/testing';
import * as sqlite from 'taskheap/sqlite';
import * as postgres from 'taskheap/postgres';

if (typeof sqlite.sqliteStore !== 'function' || typeof postgres.postgresStore !== 'function') throw new Error('store entry points are missing their factories');
const clock = new ManualClock(Date.UTC(2026, 0, 1));
const scheduler = new Scheduler({ clock, timezone: 'UTC' });
const task = scheduler.after(60_000, () => 'fired');
await clock.advance(60_000);
console.log(`esm: ${await task.result} at ${new Date(clock.now()).toISOString()}`);
await scheduler.close();
