// A CommonJS consumer: `require()` of every entry point (Node >= 20.19 loads the
// ESM build synchronously), then one task after a short real delay.
const { Scheduler } = require('taskheap');
const { ManualClock } = require('taskheap/testing');
const { sqliteStore } = require('taskheap/sqlite');
const { postgresStore } = require('taskheap/postgres');

if (typeof ManualClock !== 'function' || typeof sqliteStore !== 'function' || typeof postgresStore !== 'function') {
  throw new Error('an entry point is missing its exports');
}
const scheduler = new Scheduler();
const started = Date.now();
const task = scheduler.after(20, () => 'fired');
task.result.then(async (value) => {
  console.log(`cjs: ${value} after >= 20 ms: ${Date.now() - started >= 20}`);
  await scheduler.close();
});
