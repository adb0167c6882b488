// A TypeScript consumer: every entry point's types, `When` kept precise.
import { Scheduler, type When } from 'taskheap';
import { ManualClock } from 'taskheap/testing';
import { sqliteStore } from 'taskheap/sqlite';
import { postgresStore } from 'taskheap/postgres';

const factories: Function[] = [sqliteStore, postgresStore];
const clock = new ManualClock(Date.UTC(2026, 0, 1));
const scheduler = new Scheduler({ clock, timezone: 'UTC' });
const at: When = new Date(Date.UTC(2026, 0, 1, 0, 1));
const task = scheduler.schedule(at, () => 42);
await clock.advance(60_000);
const value: number = await task.result;
console.log(`${process.argv[2]}: ${value} with ${factories.length} store factories`);
await scheduler.close();
