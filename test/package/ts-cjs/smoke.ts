// TypeScript in a CommonJS package (`module: nodenext`): tsc compiles the
// imports to require() calls, which load taskheap's ESM build on Node >= 20.19.
import { Scheduler } from 'taskheap';
import { ManualClock } from 'taskheap/testing';
import { sqliteStore } from 'taskheap/sqlite';
import { postgresStore } from 'taskheap/postgres';

async function main(): Promise<void> {
  const factories: Function[] = [sqliteStore, postgresStore];
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const scheduler = new Scheduler({ clock, timezone: 'UTC' });
  const task = scheduler.after(1_000, () => 'fired');
  await clock.advance(1_000);
  const value: string = await task.result;
  console.log(`${process.argv[2]}: ${value} (${typeof require}) with ${factories.length} store factories`);
  await scheduler.close();
}
void main();
