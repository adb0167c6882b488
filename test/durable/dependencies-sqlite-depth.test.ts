// SQLite and deep 'fail' chains (issue 28): its triggers sink one level per
// trigger level and SQLite stops at 1,000, so a flow in which one failure
// could sink more than 990 tasks one after another is refused at the add
// (FlowError, nothing stored), also when the chain runs on from a stored
// task of an earlier flow; a 'continue' rule breaks a chain; a chain at the
// limit is stored.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FlowError, Scheduler, type FlowTask } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';

/** A chain of `n` tasks, each after the one before by `rule` (the first after `first`, if given). */
function chain(n: number, first?: number, rule: 'fail' | 'continue' = 'fail'): Record<string, FlowTask> {
  const tasks: Record<string, FlowTask> = {};
  for (let i = 0; i < n; i++) {
    const dep = i === 0 ? first : `t${i - 1}`;
    tasks[`t${i}`] = {
      handler: i === 0 && first === undefined ? 'boom' : 'step',
      after: dep === undefined ? [] : [{ task: dep, onFailure: rule }],
    };
  }
  return tasks;
}

describe('SQLite: the depth of a sinking', () => {
  it('a chain one failure could sink 990 deep is stored; 991 deep is refused at the add, nothing stored', async () => {
    const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-depth-')), 'store.db'));
    const scheduler = new Scheduler({ store, onError: () => {} });
    scheduler.define('boom', () => {
      throw new Error('boom');
    });
    scheduler.define('step', () => 'ok');
    const error = await scheduler.flows.add({ tasks: chain(992) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FlowError);
    expect((error as FlowError).code).toBe('ERR_FLOW');
    expect((error as Error).message).toMatch(/could sink 991 tasks one after another down to the task number 992 .*at most 990/);
    expect(await scheduler.listTasks({})).toEqual([]);
    // Split across two flows: the second runs on from the first's last (blocked) task.
    const first = await scheduler.flows.add({ tasks: { ...chain(600), t0: { handler: 'boom', when: Date.now() + 3_600_000 } } });
    const tail = first.tasks.t599!.id;
    await expect(scheduler.flows.add({ tasks: chain(392, tail) })).rejects.toThrow(/could sink 991 tasks/);
    expect(await scheduler.countTasks()).toMatchObject({ blocked: 599 });
    // A 'continue' rule ends a sinking: the same chain is stored.
    const broken = await scheduler.flows.add({ tasks: chain(392, tail, 'continue') });
    expect(broken.tasks.t391!.state).toBe('blocked');
    // At the limit: 991 tasks, 990 of them sunk one after another by a failure of the first, are stored.
    // (Not run here: SQLite takes seconds per hundred levels of such a sinking; docs/flows.md.)
    const deep = await scheduler.flows.add({ tasks: chain(991) });
    expect(deep.tasks.t990!.state).toBe('blocked');
    await scheduler.close();
  });
});
