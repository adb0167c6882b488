// Bad options and input are refused at the call, naming the bad value, and
// nothing reaches the database.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { postgresStore } from '../../src/postgres.js';
import { toPayload } from '../../src/durable/validate.js';

function tempDb(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-')), 'store.db');
}

describe('store options', () => {
  it('sqliteStore checks its path and every option', () => {
    expect(() => sqliteStore(':memory:')).toThrow(/in-memory database.*gone when the process ends/);
    expect(() => sqliteStore('file::memory:?cache=shared')).toThrow(/in-memory/);
    expect(() => sqliteStore('file:x?mode=memory')).toThrow(/in-memory/);
    expect(() => sqliteStore('')).toThrow(TypeError);
    expect(() => sqliteStore('a\0b')).toThrow(/NUL/);
    expect(() => sqliteStore(tempDb(), { lease: -5 })).toThrow(RangeError);
    expect(() => sqliteStore(tempDb(), { lease: 0 })).toThrow(/lease/);
    expect(() => sqliteStore(tempDb(), { lease: Number.NaN })).toThrow(/`lease`.*NaN/);
    expect(() => sqliteStore(tempDb(), { lease: 2 ** 31 })).toThrow(/at most 2147483647 ms \(the timer limit\)/);
    expect(() => sqliteStore(tempDb(), { leese: 1 } as never)).toThrow(/Unknown sqliteStore option `leese`/);
    expect(() => sqliteStore(tempDb(), { maxLeaseExpiries: 1.5 })).toThrow(/maxLeaseExpiries/);
    expect(() => sqliteStore(tempDb(), { maxLeaseExpiries: -1 })).toThrow(RangeError);
    expect(() => sqliteStore(tempDb(), null as never)).toThrow(TypeError);
    expect(sqliteStore(tempDb(), { lease: 2 ** 31 - 1, maxLeaseExpiries: 0 })).toMatchObject({ lease: 2 ** 31 - 1 });
  });

  it('postgresStore checks ranges, the timer limit and how lease and timeout fit together', () => {
    expect(() => postgresStore({ lease: 2 ** 31 })).toThrow(/`lease`.*timer limit/);
    expect(() => postgresStore({ poll: 2 ** 31 })).toThrow(/`poll`.*timer limit/);
    expect(() => postgresStore({ poll: Number.NaN })).toThrow(/`poll`/);
    expect(() => postgresStore({ timeout: 0 })).toThrow(/`timeout`/);
    expect(() => postgresStore({ lease: 1_000, timeout: 1_000 })).toThrow(/at least 3 × `timeout`/);
    expect(() => postgresStore({ maxLeaseExpiries: Number.POSITIVE_INFINITY })).toThrow(/maxLeaseExpiries/);
    expect(() => postgresStore({ schema: 'a\0b' })).toThrow(/NUL/);
    // PostgreSQL keeps 63 bytes of a name: longer ones would be cut, and two schemas become one. Bytes, not characters.
    expect(() => postgresStore({ schema: 's'.repeat(64) })).toThrow(/`schema`.*at most 63 bytes.*got 64 bytes/);
    expect(() => postgresStore({ schema: 'é'.repeat(32) })).toThrow(/got 64 bytes/);
    expect(() => postgresStore({ schema: 's'.repeat(63) })).not.toThrow();
    expect(() => postgresStore({ schema: 'é'.repeat(31) })).not.toThrow();
    expect(() => postgresStore({ lease: 3_000, timeout: 1_000, maxLeaseExpiries: 3 })).not.toThrow();
  });
});

describe('durable input', () => {
  async function started() {
    const scheduler = new Scheduler({ store: sqliteStore(tempDb()) });
    scheduler.define('known', () => {});
    await scheduler.start();
    return scheduler;
  }

  it('payloads JSON would change are refused, naming the path of the bad value', async () => {
    const scheduler = await started();
    const refuse = (payload: unknown, pattern: RegExp) =>
      expect(() => scheduler.schedule(Date.now() + 60_000, 'known', { payload })).toThrow(pattern);
    refuse({ m: new Map([[1, 2]]) }, /`payload\.m`.*Map becomes \{\}/);
    refuse({ tags: new Set(['a']) }, /`payload\.tags`.*Set/);
    refuse({ items: [1, 2, Number.NaN] }, /`payload\.items\[2\]`.*NaN becomes null/);
    refuse({ x: Number.POSITIVE_INFINITY }, /`payload\.x`.*Infinity/);
    refuse([1, undefined], /`payload\[1\]`.*undefined/);
    // biome-ignore lint/suspicious/noSparseArray: the hole is what is refused
    refuse([1, , 3], /`payload\[1\]`.*hole/);
    refuse({ when: new Date(0) }, /`payload\.when`.*Date becomes a string/);
    refuse({ f: () => {} }, /`payload\.f`.*function/);
    refuse({ s: Symbol('x') }, /`payload\.s`.*symbol/);
    refuse({ 'odd key': 1n }, /`payload\["odd key"\]`.*bigint/);
    refuse(
      new (class Point {
        x = 1;
      })(),
      /`payload`.*Point instance/,
    );
    const cycle: Record<string, unknown> = { a: {} };
    (cycle.a as Record<string, unknown>).back = cycle;
    refuse(cycle, /`payload\.a\.back`.*cycle/);
    expect(await scheduler.listTasks()).toEqual([]);
    // What reads back the same is accepted; an undefined property reads back as undefined.
    const task = await scheduler.schedule(Date.now() + 60_000, 'known', { payload: { a: [1, 'x', null, { b: true }], gone: undefined } });
    expect(task.payload).toEqual({ a: [1, 'x', null, { b: true }] });
    await scheduler.close();
  });

  it('names, keys, attempts and times are checked against what the database holds', async () => {
    const scheduler = await started();
    const later = Date.now() + 60_000;
    expect(() => scheduler.define('a\0b', () => {})).toThrow(/NUL/);
    expect(() => scheduler.define('x'.repeat(256), () => {})).toThrow(/at most 255 characters/);
    expect(() => scheduler.schedule(later, 'known', { key: 'k\0' })).toThrow(/`key`.*NUL/);
    expect(() => scheduler.schedule(later, 'known', { key: 'k'.repeat(513) })).toThrow(/`key`.*at most 512/);
    expect(() => scheduler.schedule(later, 'known', { key: '' })).toThrow(TypeError);
    expect(() => scheduler.schedule(later, 'known', { retry: 3e9 })).toThrow(/`retry.attempts`.*at most 2147483647/);
    expect(() => scheduler.schedule(later, 'known', { timeout: 2 ** 31 })).toThrow(/timer limit/);
    expect(() => scheduler.schedule(1e300, 'known')).toThrow(RangeError);
    // Outside the Date range: refused by the core, as for every schedule().
    expect(() => scheduler.schedule(1e300, 'known')).toThrow(/the Date range/);
    expect(() => scheduler.after(2 ** 53, 'known')).toThrow(/the Date range/);
    // Inside it but beyond what the store keeps: refused by the durable layer.
    expect(() => scheduler.schedule(Date.UTC(10_000, 0, 1), 'known')).toThrow(/years 1 and 9999/);
    expect(() => scheduler.schedule(-1e15, 'known')).toThrow(RangeError);
    expect(() => scheduler.every(1).second().until(1e300)).toThrow(/the Date range/);
    expect(() => scheduler.every(1).second().run('known', { key: 'j\0' })).toThrow(/NUL/);
    // A lone surrogate cannot be stored as UTF-8: 'x\ud800' and 'x\udc00' would become one key. Pairs are text like any other.
    expect(() => scheduler.schedule(later, 'known', { key: 'x\ud800' })).toThrow(/`key`.*lone surrogate \(\\ud800\) at index 1/);
    expect(() => scheduler.schedule(later, 'known', { key: 'x\udc00y' })).toThrow(TypeError);
    expect(() => scheduler.define('h\udc00', () => {})).toThrow(/lone surrogate/);
    expect(() => scheduler.schedule(later, 'known', { serial: 'chat\ud800' })).toThrow(/`serial`.*lone surrogate/);
    expect(() => scheduler.schedule(later, 'known', { rate: { group: '\ud800', limit: 1, interval: 1_000 } })).toThrow(
      /`rate.group`.*lone surrogate/,
    );
    expect(() => scheduler.schedule(later, 'known', { queue: 'q\udfff' })).toThrow(/`queue`.*lone surrogate/);
    expect(() => scheduler.every(1).second().run('known', { key: 'j\ud800' })).toThrow(/lone surrogate/);
    expect(() => scheduler.scheduleMany([{ when: later, name: 'known', key: 'a\ud800' }])).toThrow(/lone surrogate/);
    expect(await scheduler.listTasks()).toEqual([]);
    const emoji = await scheduler.schedule(later, 'known', { key: 'x\ud83d\ude00', serial: '\ud83d\ude00' });
    expect((await scheduler.getTask(emoji.id))!.key).toBe('x😀');
    await scheduler.cancelTask(emoji.id);
    await scheduler.close();
  });

  it('toPayload leaves undefined out as JSON does and serialises the rest unchanged', () => {
    expect(toPayload(undefined)).toBe('null');
    expect(toPayload({ a: 1, b: undefined, c: [true, null, 'x'] })).toBe('{"a":1,"c":[true,null,"x"]}');
    expect(toPayload(Object.create(null) as object)).toBe('{}');
  });
});
