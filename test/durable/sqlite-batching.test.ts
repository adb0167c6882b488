// The SQLite store's share of the throughput work, on a real file and a
// ManualClock: outcomes of tasks finishing together written in one
// transaction, claims only of defined handlers, prefetch handed back on
// close, and scheduleMany() all or nothing.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Outcome, type Store } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { START } from '../helpers.js';

const tempDb = () => join(mkdtempSync(join(tmpdir(), 'taskheap-batch-')), 'store.db');

function open(options: { workers?: number; path?: string } = {}) {
  const clock = new ManualClock(START);
  const errors: unknown[] = [];
  const store: Store = sqliteStore(options.path ?? tempDb());
  const batches: number[] = [];
  const settle = store.settle.bind(store);
  store.settle = (owner: string, outcomes: readonly Outcome[], now: number) => {
    batches.push(outcomes.length);
    return settle(owner, outcomes, now);
  };
  const scheduler = new Scheduler({ clock, store, onError: (error) => errors.push(error), workers: options.workers ?? 4 });
  return { clock, scheduler, store, errors, batches };
}

describe('sqliteStore: batching', () => {
  it('tasks finishing in the same turn share one settle() transaction; each runs exactly once', async () => {
    const { clock, scheduler, batches, errors } = open({ workers: 8 });
    const runs = new Map<number, number>();
    scheduler.define('noop', (_ctx, i: number) => void runs.set(i, (runs.get(i) ?? 0) + 1));
    await scheduler.start();
    await scheduler.scheduleMany(Array.from({ length: 64 }, (_, i) => ({ when: START, name: 'noop', payload: i })));
    await clock.advance(1_000);
    expect(runs.size).toBe(64);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(64);
    // Eight workers finish eight tasks per turn: eight outcomes per write, not one.
    expect(batches.length).toBeLessThanOrEqual(64 / 8);
    expect((await scheduler.listTasks({ state: 'succeeded', limit: 100 })).length).toBe(64);
    expect(errors).toEqual([]);
    await scheduler.close();
  });

  it('an idle worker asks the store one question per poll, and still finds work added behind its back within the poll', async () => {
    const { clock, scheduler, store } = open();
    const calls = { claim: 0, nextDue: 0 };
    const claim = store.claim.bind(store);
    const nextDue = store.nextDue.bind(store);
    store.claim = (...args) => (calls.claim++, claim(...args));
    store.nextDue = (...args) => (calls.nextDue++, nextDue(...args));
    const ran: number[] = [];
    scheduler.define('noop', () => void ran.push(clock.now() - START));
    await scheduler.start();
    await clock.advance(60_000);
    // Start-up: a claim and a nextDue; then one nextDue per 5 s poll, no claim (nothing was due).
    expect(calls).toEqual({ claim: 1, nextDue: 1 + 12 });
    // Another producer's task (no wake reaches this process): the next poll finds it due and claims it.
    await store.addTasks([{ name: 'noop', key: null, payload: 'null', runAt: START + 61_000, maxAttempts: 1, options: '{}' }]);
    await clock.advance(5_000);
    expect(ran).toEqual([65_000]);
    await scheduler.close();
  });

  it('a retry in a batch is due from the time it failed, by the scheduler clock', async () => {
    const { clock, scheduler } = open({ workers: 4 });
    const seen: [number, number][] = [];
    scheduler.define('flaky', (ctx, i: number) => {
      seen.push([i, clock.now() - START]);
      if (ctx.attempt === 1) throw new Error('first');
    });
    await scheduler.start();
    await scheduler.scheduleMany([0, 1, 2].map((i) => ({ when: START, name: 'flaky', payload: i, retry: { attempts: 2, delay: 1_000, backoff: 'fixed' as const } })));
    await clock.advance(5_000);
    expect(seen).toEqual([[0, 0], [1, 0], [2, 0], [0, 1_000], [1, 1_000], [2, 1_000]]);
    expect((await scheduler.listTasks({ state: 'succeeded' })).map((t) => t.attempts)).toEqual([2, 2, 2]);
    await scheduler.close();
  });

  it('claims only tasks of defined handlers: others stay waiting, not failed, and are run once a process defines them', async () => {
    const path = tempDb();
    const first = open({ path });
    const ran: string[] = [];
    first.scheduler.define('mine', () => void ran.push('mine'));
    await first.scheduler.start();
    // schedule() checks the name against this process's handlers: another process's task goes in through the store.
    await first.store.addTask({ name: 'theirs', key: null, payload: '1', runAt: START, maxAttempts: 1, options: '{}' });
    await first.scheduler.schedule(START, 'mine');
    await first.clock.advance(10_000);
    expect(ran).toEqual(['mine']);
    expect((await first.scheduler.listTasks({ name: 'theirs' })).map((t) => [t.state, t.attempts])).toEqual([['waiting', 0]]);
    expect(first.errors).toEqual([]);
    await first.scheduler.close();
    const second = open({ path });
    second.scheduler.define('theirs', (_ctx, p: number) => void ran.push(`theirs ${p}`));
    await second.scheduler.start();
    await second.clock.advance(1_000);
    expect(ran).toEqual(['mine', 'theirs 1']);
    await second.scheduler.close();
  });

  it('prefetched tasks (claimed beyond the free workers) go back unrun on close', async () => {
    const path = tempDb();
    const { clock, scheduler } = open({ workers: 1, path });
    const started: number[] = [];
    let finish: () => void = () => {};
    scheduler.define('slow', (_ctx, i: number) => {
      started.push(i);
      return new Promise<void>((resolve) => (finish = resolve));
    });
    await scheduler.start();
    await scheduler.scheduleMany([0, 1, 2].map((i) => ({ when: START, name: 'slow', payload: i })));
    await clock.advance(10);
    expect(started).toEqual([0]);
    expect((await scheduler.listTasks({ state: 'running' })).length).toBe(2);
    const closing = scheduler.close();
    finish();
    await closing;
    expect(started).toEqual([0]);
    // Reopened by a process without the handler: nothing is claimed, the rows are as close() left them.
    const reopened = open({ path });
    await reopened.scheduler.start();
    const rows = await reopened.scheduler.listTasks({});
    expect(rows.map((row) => [row.payload, row.state, row.attempts])).toEqual([[0, 'succeeded', 1], [1, 'waiting', 0], [2, 'waiting', 0]]);
    await reopened.scheduler.close();
  });
});

describe('sqliteStore: scheduleMany', () => {
  it('adds all items in order with their own times, payloads and keys; keys idempotent within and across calls', async () => {
    const { scheduler } = open();
    scheduler.define('a', () => {});
    await scheduler.start();
    const rows = await scheduler.scheduleMany([
      { when: START + 10, name: 'a', payload: { n: 1 }, key: 'k' },
      { when: START + 20, name: 'a', payload: { n: 2 } },
      { when: START + 30, name: 'a', payload: { n: 3 }, key: 'k' },
    ]);
    expect(rows.map((row) => [row.key, row.payload, row.runAt.getTime()])).toEqual([
      ['k', { n: 3 }, START + 30], [null, { n: 2 }, START + 20], ['k', { n: 3 }, START + 30],
    ]);
    expect(rows[0]!.id).toBe(rows[2]!.id);
    const again = await scheduler.scheduleMany([{ when: START + 40, name: 'a', key: 'k', payload: 4 }]);
    expect(again[0]!.id).toBe(rows[0]!.id);
    expect(again[0]!.payload).toBe(4);
    expect((await scheduler.listTasks({})).length).toBe(2);
    await scheduler.close();
  });

  it('a bad item throws naming its index and nothing is written', async () => {
    const { scheduler } = open();
    scheduler.define('a', () => {});
    await scheduler.start();
    expect(() => scheduler.scheduleMany([{ when: START, name: 'a' }, { when: START, name: 'a', timeout: -1 }])).toThrow(/scheduleMany\(\) item 1: /);
    expect(() => scheduler.scheduleMany([{ when: START, name: 'a' }, { when: START, name: 'b' }])).toThrow(/item 1: No handler named "b"/);
    expect(() => scheduler.scheduleMany([{ when: 'soon' as never, name: 'a' }])).toThrow(/item 0: /);
    expect(await scheduler.listTasks({})).toEqual([]);
    expect(await scheduler.scheduleMany([])).toEqual([]);
    await scheduler.close();
  });
});
