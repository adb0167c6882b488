/**
 * A million reminders in one process: one heap, one timer.
 *
 *   npx tsx examples/many-timers.ts            # 1,000,000 reminders
 *   npx tsx examples/many-timers.ts 100000     # or any N
 *
 * Schedules N one-shot reminders spread over the next hour, lets the first
 * few fire, then cancels the rest, printing the time each step takes and the
 * memory it costs. Memory figures are taken after a full GC (the script turns
 * `--expose-gc` on for itself; `Bun.gc()` on Bun), so they show what stays alive.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Scheduler } from '../src/index.js';
import type { Task } from '../src/index.js';

/** A full GC: V8's (Node, Deno), exposed by its flag; Bun (JavaScriptCore) has its own. */
function exposeGc(): () => void {
  const bun = (globalThis as { Bun?: { gc(force: boolean): void } }).Bun;
  if (bun !== undefined) return () => bun.gc(true);
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
const gc = exposeGc();

const n = Number(process.argv[2] ?? 1_000_000);
if (!Number.isInteger(n) || n < 1) {
  console.error(`usage: npx tsx examples/many-timers.ts [count]; got "${process.argv[2]}"`);
  process.exit(1);
}

const MB = 1024 * 1024;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');

function memory() {
  gc();
  const { heapUsed, rss } = process.memoryUsage();
  return { heapUsed, rss };
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const scheduler = new Scheduler({ workers: 100 });
let fired = 0;
const remind = () => {
  fired++;
};
const HOUR = 3_600_000;

const before = memory();
const tasks: Task[] = new Array(n);
let start = performance.now();
const now = Date.now();
for (let i = 0; i < n; i++) {
  // Spread evenly over the next hour: the first ones fall due within milliseconds.
  tasks[i] = scheduler.schedule(now + 50 + Math.floor((i / n) * HOUR), remind);
}
const scheduleMs = performance.now() - start;
const after = memory();
console.log(`scheduled ${fmt(n)} reminders in ${scheduleMs.toFixed(0)} ms (${fmt((n / scheduleMs) * 1000)} per second)`);
console.log(
  `  heap: ${fmt((after.heapUsed - before.heapUsed) / n)} bytes per reminder (${fmt((after.heapUsed - before.heapUsed) / MB)} MB, including the array of handles)`,
);
console.log(`  rss:  ${fmt((after.rss - before.rss) / n)} bytes per reminder (${fmt(after.rss / MB)} MB in all)`);
console.log(`  waiting: ${fmt(scheduler.size)}, one timer armed for the earliest`);

await sleep(250);
console.log(`after 250 ms: ${fmt(fired)} fired (the ones due first), ${fmt(scheduler.size)} waiting`);

start = performance.now();
let cancelled = 0;
for (const task of tasks) if (task.cancel()) cancelled++;
const cancelMs = performance.now() - start;
console.log(`cancelled ${fmt(cancelled)} reminders in ${cancelMs.toFixed(0)} ms; waiting now ${scheduler.size}`);

tasks.length = 0;
const end = memory();
console.log(
  `memory after cancel: heap ${fmt(end.heapUsed / MB)} MB (was ${fmt(before.heapUsed / MB)} MB before scheduling), rss ${fmt(end.rss / MB)} MB`,
);

await scheduler.close();
console.log(`done: ${fmt(fired)} fired, ${fmt(scheduler.stats().cancelled)} cancelled`);
