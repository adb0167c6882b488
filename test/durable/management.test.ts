// Management of stored work: jobs listed, read, paused, resumed, triggered and
// cancelled by key; listTasks filters and cursor pagination. Every case runs
// on a real SQLite file and on a real PostgreSQL server.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type StoredTask } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { PgServer } from './pg-server.js';
import { usePostgres } from './use-postgres.js';

let server: PgServer;
let schemas = 0;

usePostgres((started) => {
  server = started;
});

const STORES = {
  sqlite: () => sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-manage-')), 'store.db')),
  postgres: () => postgresStore({ connectionString: server.url, schema: `m${++schemas}_${process.pid}` }),
};

/** Polls `condition` until it holds (bounded: 30 s, for a loaded machine). */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(Object.keys(STORES) as (keyof typeof STORES)[])('management on %s', (kind) => {
  function open(): Scheduler {
    return new Scheduler({ store: STORES[kind](), onError: () => {} });
  }

  it('jobs: list, read, pause, resume, trigger (run now), cancel by key, with nextRunAt, lastRunAt and counts', async () => {
    const scheduler = open();
    const runs: string[] = [];
    scheduler.define('report', (_ctx, payload: { which: string }) => {
      runs.push(payload.which);
      return `report ${payload.which}`;
    });
    scheduler.define('other', () => {});
    await scheduler.start();
    const daily = await scheduler.every('1h').run('report', { key: 'report:daily', payload: { which: 'daily' } });
    expect(daily).toMatchObject({ key: 'report:daily', state: 'scheduled', runs: 0, lastRunAt: null });
    expect(daily.counts).toEqual({ blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 });
    expect(daily.createdAt).toBeInstanceOf(Date);
    await scheduler.every('1h').run('report', { key: 'report:weekly', payload: { which: 'weekly' } });
    await scheduler.every('1h').run('other', { key: 'other:1' });

    expect((await scheduler.listJobs()).map((j) => j.key)).toEqual(['other:1', 'report:daily', 'report:weekly']);
    expect((await scheduler.listJobs({ keyPrefix: 'report:' })).map((j) => j.key)).toEqual(['report:daily', 'report:weekly']);
    expect((await scheduler.listJobs({ name: 'other' })).map((j) => j.key)).toEqual(['other:1']);
    const first = await scheduler.listJobs({ limit: 2 });
    expect((await scheduler.listJobs({ limit: 2, after: first.at(-1)!.key })).map((j) => j.key)).toEqual(['report:weekly']);

    // Pause: state and next time kept; resume brings it back.
    expect(await scheduler.pauseJob('report:daily')).toBe(true);
    expect(await scheduler.pauseJob('report:daily')).toBe(false);
    const paused = (await scheduler.getJob('report:daily'))!;
    expect(paused.state).toBe('paused');
    expect(paused.nextRunAt).toEqual(daily.nextRunAt);
    expect((await scheduler.listJobs({ state: 'paused' })).map((j) => j.key)).toEqual(['report:daily']);

    // Trigger runs a paused job now, without touching its schedule.
    const task = await scheduler.triggerJob('report:daily');
    expect(task).toMatchObject({ name: 'report', jobKey: 'report:daily', payload: { which: 'daily' } });
    expect((await scheduler.waitFor(task.id, { timeout: '20s' })).result).toBe('report daily');
    const after = (await scheduler.getJob('report:daily'))!;
    expect(after).toMatchObject({ state: 'paused', runs: 0 });
    expect(after.nextRunAt).toEqual(daily.nextRunAt);
    expect(after.counts.succeeded).toBe(1);
    expect(after.lastRunAt).toEqual(task.runAt);
    expect(runs).toEqual(['daily']);

    // Registering the same schedule again (every deploy does) keeps the pause; a new rule starts it anew.
    expect((await scheduler.every('1h').run('report', { key: 'report:daily', payload: { which: 'daily' } })).state).toBe('paused');
    expect(await scheduler.pauseJob('other:1')).toBe(true);
    expect((await scheduler.every('2h').run('other', { key: 'other:1' })).state).toBe('scheduled');

    expect(await scheduler.resumeJob('report:daily')).toBe(true);
    expect(await scheduler.resumeJob('report:daily')).toBe(false);
    expect((await scheduler.getJob('report:daily'))?.state).toBe('scheduled');

    expect(await scheduler.cancelJob('report:weekly')).toBe(true);
    expect(await scheduler.cancelJob('report:weekly')).toBe(false);
    expect((await scheduler.getJob('report:weekly'))?.state).toBe('cancelled');
    await expect(scheduler.triggerJob('report:weekly')).rejects.toMatchObject({ code: 'ERR_JOB_NOT_FOUND' });
    await expect(scheduler.triggerJob('nope')).rejects.toMatchObject({ code: 'ERR_JOB_NOT_FOUND' });
    expect(await scheduler.getJob('nope')).toBeUndefined();
    expect(await scheduler.pauseJob('nope')).toBe(false);

    expect(() => scheduler.listJobs({ state: 'sleeping' } as never)).toThrow(/state/);
    expect(() => scheduler.listJobs({ limit: 0 })).toThrow(RangeError);
    expect(() => scheduler.getJob('')).toThrow(TypeError);
    await scheduler.close();
  }, 60_000);

  it('resume skips the occurrences that fell in the pause, as an in-memory job does: nextRunAt is never in the past', async () => {
    const scheduler = open();
    const ran: number[] = [];
    scheduler.define('tick', (ctx) => void ran.push(ctx.scheduledAt.getTime()));
    await scheduler.start();
    await scheduler.every('1s').run('tick', { key: 'tick' });
    await until(() => ran.length >= 1, 'the first occurrence runs');
    expect(await scheduler.pauseJob('tick')).toBe(true);
    const pausedAt = Date.now();
    const paused = (await scheduler.getJob('tick'))!;
    // Two occurrences fall in the pause (the one that was next, and one more).
    await until(() => Date.now() > paused.nextRunAt!.getTime() + 1_100, 'two occurrences pass while paused');
    const resumedAt = Date.now();
    expect(await scheduler.resumeJob('tick')).toBe(true);
    const resumed = (await scheduler.getJob('tick'))!;
    expect(resumed.state).toBe('scheduled');
    expect(resumed.nextRunAt!.getTime()).toBeGreaterThan(resumedAt - 50);
    await until(() => ran.some((at) => at >= resumedAt - 50), 'an occurrence after the resume runs');
    // None of the occurrences due while paused was inserted or run.
    const occurrences = await scheduler.listTasks({ jobKey: 'tick' });
    const inPause = occurrences.filter((task) => task.runAt.getTime() > pausedAt + 50 && task.runAt.getTime() < resumedAt - 50);
    expect(inPause).toEqual([]);
    await scheduler.close();
  }, 60_000);

  it('listTasks: state, name, key prefix, job key and due-time filters; cursor pages without gaps or repeats', async () => {
    const scheduler = open();
    const base = Date.UTC(2030, 0, 1);
    const added: StoredTask[] = [];
    for (let i = 0; i < 25; i++) {
      // Pairs share a due time, so the cursor's id tiebreak matters.
      added.push(
        await scheduler.schedule(base + Math.floor(i / 2) * 1_000, i % 3 === 0 ? 'a' : 'b', {
          key: `${i % 2 === 0 ? 'even' : 'odd'}:${i}`,
        }),
      );
    }
    await scheduler.cancelTask(added[4]!.id);
    const all = await scheduler.listTasks({ limit: 1_000 });
    expect(all.map((t) => t.id)).toEqual(added.map((t) => t.id));

    const pages: number[][] = [];
    let page = await scheduler.listTasks({ limit: 4 });
    while (page.length > 0) {
      pages.push(page.map((t) => t.id));
      page = await scheduler.listTasks({ limit: 4, after: page.at(-1) });
    }
    expect(pages).toHaveLength(7);
    expect(pages.flat()).toEqual(added.map((t) => t.id));

    expect((await scheduler.listTasks({ keyPrefix: 'odd:' })).map((t) => t.key)).toEqual(
      added.filter((_, i) => i % 2 === 1).map((t) => t.key),
    );
    expect((await scheduler.listTasks({ name: 'a' })).length).toBe(9);
    expect((await scheduler.listTasks({ name: 'a', keyPrefix: 'even:' })).length).toBe(5);
    expect((await scheduler.listTasks({ state: 'cancelled' })).map((t) => t.id)).toEqual([added[4]!.id]);
    const window = await scheduler.listTasks({ from: new Date(base + 2_000), to: base + 4_000 });
    expect(window.map((t) => t.id)).toEqual(added.slice(4, 8).map((t) => t.id));
    expect(await scheduler.listTasks({ jobKey: 'none' })).toEqual([]);

    expect(() => scheduler.listTasks({ sort: 'id' } as never)).toThrow(/sort/);
    expect(() => scheduler.listTasks({ state: 'done' as never })).toThrow(RangeError);
    expect(() => scheduler.listTasks({ limit: 10_001 })).toThrow(/10000/);
    expect(() => scheduler.listTasks({ from: 'yesterday' as never })).toThrow(TypeError);
    expect(() => scheduler.listTasks({ after: { runAt: base } as never })).toThrow(/after\.id/);
    await scheduler.close();
  }, 60_000);
});
