/**
 * Retrying a flaky call with exponential backoff.
 *
 *   npx tsx examples/retry-backoff.ts
 *
 * `retry: { attempts, delay, backoff, maxDelay }` re-queues a failed run into
 * the heap at its backoff time: it holds no worker slot while it waits, and
 * `ctx.attempt` counts from 1. Two tasks: one that succeeds on its 4th
 * attempt, one that never does and fails for good after 4 attempts (onError
 * is called once, after the last attempt; `retry` events report each wait).
 * Finishes in about 1.5 s.
 */
import { Scheduler } from '../src/index.js';
import type { TaskContext } from '../src/index.js';

const started = Date.now();
const elapsed = () => `${String(Date.now() - started).padStart(5)} ms`;

const scheduler = new Scheduler({
  workers: 2,
  onError: (error, { name, attempt }) =>
    console.log(`${elapsed()}  ${name}: gave up after ${attempt} attempts (${(error as Error).message})`),
});
scheduler.on('retry', (task, error, delay) => {
  console.log(
    `${elapsed()}  ${task.name}: attempt ${task.attempts} failed (${(error as Error).message}); retrying in ${Math.round(delay)} ms`,
  );
});

/** Fails until its `failures` are used up, like a service that is warming up. */
function flakyService(name: string, failures: number) {
  let calls = 0;
  return async (ctx: TaskContext) => {
    calls++;
    console.log(`${elapsed()}  ${name}: attempt ${ctx.attempt} (due at +${ctx.scheduledAt.getTime() - started} ms)`);
    await new Promise((resolve) => setTimeout(resolve, 20)); // the call itself
    if (calls <= failures) throw new Error(`503 Service Unavailable`);
    return `200 OK after ${calls} calls`;
  };
}

// Waits of 200, 400, then 800 capped to 600 ms: about 1.2 s before the 4th attempt.
const retry = { attempts: 4, delay: 200, backoff: 'exponential', maxDelay: 600 } as const;

const warmingUp = scheduler.after(0, flakyService('warming-up', 3), { name: 'warming-up', retry });
const down = scheduler.after(0, flakyService('down', Infinity), { name: 'down', retry });

const [ok, failed] = await Promise.allSettled([warmingUp.result, down.result]);
console.log(`${elapsed()}  warming-up: ${warmingUp.state} with "${ok.status === 'fulfilled' ? ok.value : ''}"`);
console.log(`${elapsed()}  down: ${down.state} (${failed.status === 'rejected' ? (failed.reason as Error).message : ''})`);

await scheduler.close();
