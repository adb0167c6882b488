// The reads behind the dashboard's task detail and job runs, through the
// public API on a real SQLite file and a real PostgreSQL server:
// `scheduler.flows.links(id)` (a task's flow, dependencies and dependents,
// bounded by `limit` with the counts in all) and `listTasks({ order: 'desc' })`
// (newest first, its cursor paging towards older tasks); bad values refused
// at the call.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/durable/store.js';
import { Scheduler } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

let server: PgServer;
usePostgres((started) => {
  server = started;
});
const schema = schemaNamer('lk');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close());

const BACKENDS: [string, () => Store][] = [
  ['SQLite', () => sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-links-')), 'store.db'))],
  ['PostgreSQL', () => postgresStore({ connectionString: server.url, schema: schema() })],
];

/** A producer (never started: nothing runs) on a fresh store. */
function producer(store: () => Store): Scheduler {
  const scheduler = new Scheduler({ store: store() });
  scheduler.define('step', () => {});
  opened.push(scheduler);
  return scheduler;
}

for (const [backend, store] of BACKENDS) {
  describe(`flows.links() and listTasks({ order: 'desc' }), ${backend}`, () => {
    it('links: a fan-in of 30 listed up to its limit with the counts in all, in the order of `after`', async () => {
      const scheduler = producer(store);
      const names = Array.from({ length: 30 }, (_, i) => `p${i}`);
      const flow = await scheduler.flows.add({
        tasks: {
          ...Object.fromEntries(names.map((name) => [name, { handler: 'step' }])),
          join: { handler: 'step', after: [...names].reverse() },
        },
      });
      const join = flow.tasks.join!;
      const all = await scheduler.flows.links(join.id);
      expect(all).toMatchObject({ id: join.id, state: 'blocked', flowId: flow.id, dependencyCount: 30, dependents: [], dependentCount: 0 });
      expect(all!.dependencies.map((dep) => dep.id)).toEqual(names.map((name) => flow.tasks[name]!.id).reverse());
      const some = await scheduler.flows.links(join.id, 5);
      expect(some!.dependencies).toHaveLength(5);
      expect(some!.dependencyCount).toBe(30);
      const leaf = await scheduler.flows.links(flow.tasks.p0!.id, 1);
      expect(leaf).toMatchObject({
        state: 'waiting',
        flowId: flow.id,
        dependencies: [],
        dependents: [{ id: join.id, name: 'step', state: 'blocked', onFailure: 'fail', done: false }],
        dependentCount: 1,
      });
      const alone = await scheduler.schedule(Date.now(), 'step');
      expect(await scheduler.flows.links(alone.id)).toEqual({
        id: alone.id,
        state: 'waiting',
        flowId: null,
        dependencies: [],
        dependencyCount: 0,
        dependents: [],
        dependentCount: 0,
      });
      expect(await scheduler.flows.links(999_999)).toBeUndefined();
      expect(() => scheduler.flows.links(0)).toThrow(TypeError);
      expect(() => scheduler.flows.links('1' as unknown as number)).toThrow(TypeError);
      expect(() => scheduler.flows.links(1, 0)).toThrow(/`limit` to be an integer from 1 to 1000, got 0/);
      expect(() => scheduler.flows.links(1, 1.5)).toThrow(RangeError);
    });

    it("listTasks({ order: 'desc' }): newest due first, then id; the cursor pages towards older ones", async () => {
      const scheduler = producer(store);
      const base = Date.now() + 3_600_000;
      // Two tasks share each due time: the id breaks the tie.
      const added = await scheduler.scheduleMany(
        Array.from({ length: 10 }, (_, i) => ({ when: base + Math.floor(i / 2) * 1_000, name: 'step', payload: { i } })),
      );
      const expected = added.map((task) => task.id).reverse();
      const pages: number[][] = [];
      let after: { runAt: Date; id: number } | undefined;
      for (;;) {
        const page = await scheduler.listTasks({ order: 'desc', limit: 3, ...(after === undefined ? {} : { after }) });
        pages.push(page.map((task) => task.id));
        if (page.length < 3) break;
        after = page.at(-1)!;
      }
      expect(pages).toEqual([expected.slice(0, 3), expected.slice(3, 6), expected.slice(6, 9), expected.slice(9)]);
      expect((await scheduler.listTasks({ order: 'asc' })).map((task) => task.id)).toEqual([...expected].reverse());
      expect((await scheduler.listTasks({ order: 'desc', from: base + 4_000 })).map((task) => task.id)).toEqual(expected.slice(0, 2));
      expect(() => scheduler.listTasks({ order: 'newest' as 'desc' })).toThrow(/`order` to be 'asc' or 'desc', got "newest"/);
    });
  });
}
