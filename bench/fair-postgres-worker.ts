// A worker process of bench/fair-postgres.ts:
//   node --import tsx bench/fair-postgres-worker.ts <url> <schema> <workers>
// Runs 'send' tasks (a no-op that notes its payload, the tenant, and when it
// started, by this machine's clock) with a scheduler on postgresStore.
// Prints "ready" once loaded, starts on a line on stdin, and on a second line
// closes and prints the starts it saw as one JSON line ([tenant, ms] pairs).
import { Scheduler } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';

const [url, schema, workers] = process.argv.slice(2) as [string, string, string];
const errors: unknown[] = [];
const scheduler = new Scheduler({
  store: postgresStore({ connectionString: url, schema }),
  workers: Number(workers),
  onError: (error) => errors.push(error),
});
const starts: [string, number][] = [];
scheduler.define('send', (_ctx, tenant: string) => void starts.push([tenant, performance.timeOrigin + performance.now()]));

process.stdout.write('ready\n');
const lines = process.stdin;
await new Promise((resolve) => lines.once('data', resolve));
await scheduler.start();
await new Promise((resolve) => lines.once('data', resolve));
lines.destroy();
await scheduler.close();
process.stdout.write(`${JSON.stringify({ starts, errors: errors.map(String) })}\n`);
