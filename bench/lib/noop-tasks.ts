// The waiting no-op tasks the PostgreSQL profiles start from (pg-profile,
// pg-plans, pg-advisory), added as a bulk enqueue adds them: 1,000 per
// statement, keyless, each with its index as payload.
import type { NewTask } from '../../src/durable/store.js';

/** Adds `n` no-op tasks to `store`, task `i` due at `runAt(i)` (now by default). */
export async function addNoopTasks(
  store: { addTasks(tasks: readonly NewTask[]): Promise<unknown> },
  n: number,
  runAt: (i: number) => number = () => Date.now(),
): Promise<void> {
  const tasks = Array.from({ length: n }, (_, i) => ({
    name: 'noop',
    key: null,
    payload: JSON.stringify({ i }),
    runAt: runAt(i),
    maxAttempts: 1,
    options: '{}',
  }));
  for (let i = 0; i < n; i += 1_000) await store.addTasks(tasks.slice(i, i + 1_000));
}
