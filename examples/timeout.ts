/**
 * A per-task timeout that aborts a slow operation through `ctx.signal`.
 *
 *   npx tsx examples/timeout.ts
 *
 * `timeout: ms` aborts the run's `ctx.signal` with a `TimeoutError` when the
 * run outlives it; the task ends `timed-out`, `result` rejects, and its worker
 * slot is freed at once. Pass the signal on (to fetch, a database driver, a
 * child process...) so the work really stops. There is no network here:
 * `fakeFetch` is a timer that listens to the signal, as fetch does.
 * Finishes in well under a second.
 */
import { Scheduler, TimeoutError } from '../src/index.js';

const started = Date.now();
const elapsed = () => `${String(Date.now() - started).padStart(4)} ms`;

/** Answers after `latency` ms, unless `signal` aborts first (then rejects with its reason, like fetch). */
function fakeFetch(url: string, latency: number, { signal }: { signal: AbortSignal }): Promise<string> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(`200 OK from ${url}`);
    }, latency);
    const onAbort = () => {
      clearTimeout(timer);
      console.log(`${elapsed()}  ${url}: request aborted (${(signal.reason as Error).name})`);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

// One worker, so the fast call can only start once the slow one has let go of it.
// (onError is quiet here: the timeout is reported below, from `result`.)
const scheduler = new Scheduler({ workers: 1, onError: () => {} });

const slow = scheduler.after(0, (ctx) => fakeFetch('https://slow.example/report', 5_000, ctx), { name: 'slow', timeout: 300 });
const fast = scheduler.after(0, (ctx) => fakeFetch('https://fast.example/ping', 50, ctx), { name: 'fast', timeout: 300 });
scheduler.on('start', (task) => console.log(`${elapsed()}  ${task.name}: started`));

try {
  await slow.result;
} catch (error) {
  console.log(`${elapsed()}  slow: ${slow.state}; result rejected with ${(error as Error).name}: ${(error as Error).message}`);
  console.log(`         it is a TimeoutError: ${error instanceof TimeoutError}`);
}
const answer = await fast.result;
console.log(`${elapsed()}  fast: ${answer} (${fast.state})`);

await scheduler.close();
console.log(`${elapsed()}  stats: ${JSON.stringify({ succeeded: scheduler.stats().succeeded, timedOut: scheduler.stats().timedOut })}`);
