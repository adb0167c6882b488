// The per-key limits in use as the dashboard's Limits panel reads them
// (issue 24, durable/limit-list.ts, through the scheduler's client): on a real SQLite file and a real
// PostgreSQL server, tasks under a serial group, a concurrency group and a rate
// key, some of each running (their handler held until the test lets go),
// listed with their limits, what is in use and how many wait, the keys
// with the most waiting first and bounded by `limit`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { schedulerClients } from '../../src/durable/client.js';
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
const schema = schemaNamer('ll');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close());

const BACKENDS: [string, () => Store][] = [
  ['SQLite', () => sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-limit-list-')), 'store.db'))],
  ['PostgreSQL', () => postgresStore({ connectionString: server.url, schema: schema() })],
];

/** The limit groups of `scheduler`'s store, as the dashboard reads them. */
const limitGroups = (scheduler: Scheduler, limit: number) => schedulerClients.get(scheduler)!.getLimitGroups(limit);

/** Polls `check` until it holds (generous bound: the machine is loaded). */
async function until(check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

for (const [backend, store] of BACKENDS) {
  describe(`the limit groups in use, ${backend}`, () => {
    it('lists each key with its kind, limit, what is in use and what waits, most waiting first, bounded', async () => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const scheduler = new Scheduler({ store: store(), workers: 10, onError: () => {} });
      opened.push(scheduler);
      scheduler.define('hold', () => gate);
      expect(await limitGroups(scheduler, 10)).toEqual([]);
      const now = Date.now();
      for (let i = 0; i < 3; i++) await scheduler.schedule(now, 'hold', { serial: 'chat:1' });
      for (let i = 0; i < 5; i++) await scheduler.schedule(now, 'hold', { concurrency: { group: 'api', limit: 2 } });
      for (let i = 0; i < 4; i++) await scheduler.schedule(now, 'hold', { rate: { group: 'mail', limit: 2, interval: '1h' } });
      await scheduler.schedule(now + 3_600_000, 'hold', { serial: 'later' });
      // Before any start: nothing in use, everything waiting.
      expect(await limitGroups(scheduler, 10)).toEqual([
        { kind: 'concurrency', group: 'api', limit: 2, interval: null, inUse: 0, waiting: 5 },
        { kind: 'rate', group: 'mail', limit: 2, interval: 3_600_000, inUse: 0, waiting: 4 },
        { kind: 'serial', group: 'chat:1', limit: 1, interval: null, inUse: 0, waiting: 3 },
        { kind: 'serial', group: 'later', limit: 1, interval: null, inUse: 0, waiting: 1 },
      ]);
      await scheduler.start();
      await until(async () => (await scheduler.countTasks()).running === 5);
      const listed = await limitGroups(scheduler, 10);
      expect(listed).toEqual([
        { kind: 'concurrency', group: 'api', limit: 2, interval: null, inUse: 2, waiting: 3 },
        { kind: 'serial', group: 'chat:1', limit: 1, interval: null, inUse: 1, waiting: 2 },
        { kind: 'rate', group: 'mail', limit: 2, interval: 3_600_000, inUse: 2, waiting: 2 },
        { kind: 'serial', group: 'later', limit: 1, interval: null, inUse: 0, waiting: 1 },
      ]);
      expect(await limitGroups(scheduler, 1)).toEqual(listed!.slice(0, 1));
      release();
      // Once the concurrency and serial tasks have all run, their keys hold nothing and nothing waits for them.
      await until(async () => (await scheduler.countTasks()).succeeded === 10);
      const after = await limitGroups(scheduler, 10);
      expect(after!.find((row) => row.group === 'mail')).toMatchObject({ inUse: 2, waiting: 2 });
      expect(after!.find((row) => row.group === 'api') ?? { inUse: 0, waiting: 0 }).toMatchObject({ inUse: 0, waiting: 0 });
    });
  });
}

it('a scheduler without a store has no client (the dashboard lists no limit groups: test/dashboard/limits.test.ts)', async () => {
  const scheduler = new Scheduler();
  opened.push(scheduler);
  expect(schedulerClients.get(scheduler)).toBeUndefined();
});
