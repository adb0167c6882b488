// SQLite and deep 'fail' chains (issue 28): one failure sinks a whole chain
// of dependents in one go (two trigger levels, however deep: migrations.ts
// FLOWS), so a chain deeper than SQLite's 1,000 trigger levels is stored,
// sunk by a failure of its head, and revived by a retry of it; the time is
// near-linear (the recursion it replaced took 5 s for 300 levels and could
// not go past 1,000).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type FlowTask } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';

/** A chain of `n` tasks, each after the one before by `rule` (the first one's handler: `head`). */
function chain(n: number, head: string, rule: 'fail' | 'continue' = 'fail'): Record<string, FlowTask> {
  const tasks: Record<string, FlowTask> = {};
  for (let i = 0; i < n; i++)
    tasks[`t${i}`] = { handler: i === 0 ? head : 'step', after: i === 0 ? [] : [{ task: `t${i - 1}`, onFailure: rule }] };
  return tasks;
}

describe('SQLite: the depth of a sinking', () => {
  it('a failure sinks a chain 1,500 deep at once (past the 1,000 trigger levels); a retry of it revives the chain at once', async () => {
    const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-depth-')), 'store.db'));
    const scheduler = new Scheduler({ store, onError: () => {} });
    let fail = true;
    scheduler.define('head', () => {
      if (fail) throw new Error('boom');
    });
    let steps = 0;
    scheduler.define('step', () => void steps++);
    const flow = await scheduler.flows.add({ tasks: chain(1_500, 'head') });
    const head = flow.tasks.t0!.id;
    const last = flow.tasks.t1499!.id;
    await scheduler.start();
    expect(await scheduler.waitFor(last)).toMatchObject({ state: 'failed', lastError: `DependencyError: dependency ${head} failed` });
    expect(await scheduler.countTasks()).toMatchObject({ failed: 1_500 });
    expect(steps).toBe(0);
    // Every sunk task names the head, the root of its sinking: a retry of it revives them all.
    expect((await scheduler.getTask(flow.tasks.t750!.id))?.lastError).toMatch(`DependencyError: dependency ${head} failed`);
    fail = false;
    await scheduler.retryTask(head);
    expect(await scheduler.waitFor(flow.tasks.t2!.id)).toMatchObject({ state: 'succeeded' });
    // Revived in one go: nothing is left failed, the rest of the chain runs on (not waited for here).
    expect((await scheduler.countTasks()).failed ?? 0).toBe(0);
    expect(steps).toBeGreaterThanOrEqual(2);
    await scheduler.close({ abort: true });
  }, 60_000);

  it("a cancel sinks the chain as cancelled; a 'continue' rule stops the sinking there, and what follows runs", async () => {
    const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-depth-')), 'store.db'));
    const scheduler = new Scheduler({ store, onError: () => {} });
    scheduler.define('step', () => 'ok');
    const tasks: Record<string, FlowTask> = { ...chain(400, 'step'), t0: { handler: 'step', when: Date.now() + 3_600_000 } };
    tasks.t200 = { handler: 'step', after: [{ task: 't199', onFailure: 'continue' }] };
    const flow = await scheduler.flows.add({ tasks });
    await scheduler.start();
    await scheduler.cancelTask(flow.tasks.t0!.id);
    await scheduler.waitFor(flow.tasks.t399!.id);
    expect(await scheduler.countTasks()).toMatchObject({ cancelled: 200, succeeded: 200 });
    expect((await scheduler.getTask(flow.tasks.t199!.id))?.state).toBe('cancelled');
    await scheduler.close();
  }, 60_000);
});
