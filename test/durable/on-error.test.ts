// onError and the `failure` event of a durable task that fails for good
// tell its real attempt (issue 21): the stored attempt count, as in memory,
// not the one run this process made of it. A real SQLite file (on a
// ManualClock) and a real PostgreSQL server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type ErrorInfo } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { START } from '../helpers.js';
import type { PgServer } from './pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from './use-postgres.js';

let server: PgServer;

usePostgres((started) => {
  server = started;
});

const schema = schemaNamer('oe');
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close({ abort: true }));

/** A scheduler whose onError and `failure` events are recorded as [name, attempt]. */
function recording(options: ConstructorParameters<typeof Scheduler>[0]) {
  const reported: [string | undefined, number][] = [];
  const failures: [string | undefined, number][] = [];
  const scheduler = new Scheduler({ ...options, onError: (_error: unknown, info: ErrorInfo) => reported.push([info.name, info.attempt]) });
  scheduler.on('failure', (task) => failures.push([task.name, task.attempts]));
  scheduler.define('fail', (ctx) => {
    throw new Error(`boom ${ctx.attempt}`);
  });
  opened.push(scheduler);
  return { scheduler, reported, failures };
}

describe('the attempt onError is told, durable and in memory', () => {
  it('on SQLite: a task failing for good on attempt 3 reports attempt 3, as the same task in memory does', async () => {
    const clock = new ManualClock(START);
    const { scheduler, reported, failures } = recording({
      clock,
      store: sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-onerror-')), 'store.db')),
    });
    await scheduler.start();
    const retry = { attempts: 3, delay: 1_000, backoff: 'fixed' } as const;
    const three = await scheduler.schedule(START, 'fail', { retry });
    const one = await scheduler.schedule(START, 'fail');
    const memory = scheduler.schedule(
      START,
      () => {
        throw new Error('boom');
      },
      { name: 'memory', retry },
    );
    const done = Promise.all([scheduler.waitFor(three.id), scheduler.waitFor(one.id), memory.result.catch(() => {})]);
    for (let i = 0; i < 4; i++) await clock.advance(1_000);
    const [first, second] = await done;
    expect(first).toMatchObject({ state: 'failed', attempts: 3 });
    expect(second).toMatchObject({ state: 'failed', attempts: 1 });
    expect(reported.sort()).toEqual([
      ['fail', 1],
      ['fail', 3],
      ['memory', 3],
    ]);
    expect(failures.sort()).toEqual([
      ['fail', 1],
      ['fail', 3],
      ['memory', 3],
    ]);
  });

  it('on PostgreSQL: a task failing for good on attempt 3 reports attempt 3', async () => {
    const { scheduler, reported, failures } = recording({ store: postgresStore({ connectionString: server.url, schema: schema() }) });
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'fail', { retry: { attempts: 3, delay: 1, backoff: 'fixed' } });
    const done = await scheduler.waitFor(task.id, { timeout: '20s' });
    expect(done).toMatchObject({ state: 'failed', attempts: 3 });
    expect(done.lastError).toMatch(/boom 3/);
    expect(reported).toEqual([['fail', 3]]);
    expect(failures).toEqual([['fail', 3]]);
  }, 30_000);
});
