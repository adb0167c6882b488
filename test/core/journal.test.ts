// ctx.progress() and ctx.log() in memory: kept on the task (across retries),
// bounded, announced as events, checked at the call, ignored after the run.
import { describe, expect, it } from 'vitest';
import { MAX_LOG_LINE, Scheduler, type Task, type TaskLogLine } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { tryUnstorable, UNSTORABLE_MESSAGES } from '../helpers.js';

describe('progress and logs in memory', () => {
  it('keeps the latest progress and the lines with time and attempt, and emits progress and log', async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock, onError: () => {} });
    const events: unknown[] = [];
    scheduler.on('progress', (task, value, id) => events.push(['progress', task.name, value, id]));
    scheduler.on('log', (task, line, id) => events.push(['log', task.name, line.line, line.attempt, id]));
    const task = scheduler.after(
      0,
      (ctx) => {
        ctx.log('first');
        ctx.progress(10);
        ctx.progress({ done: 3, of: 4 });
        if (ctx.attempt === 1) throw new Error('again');
        ctx.log('second');
        return 'ok';
      },
      { name: 'work', retry: { attempts: 2, delay: 1_000 } },
    );
    expect(task.progress).toBeUndefined();
    expect(task.logs).toEqual([]);
    await clock.advance(0);
    expect(task.state).toBe('waiting');
    await clock.advance(1_000);
    await expect(task.result).resolves.toBe('ok');
    expect(task.progress).toEqual({ done: 3, of: 4 });
    expect(task.logs.map((l: TaskLogLine) => [l.line, l.attempt, l.at.toISOString()])).toEqual([
      ['first', 1, '2026-01-01T00:00:00.000Z'],
      ['first', 2, '2026-01-01T00:00:01.000Z'],
      ['second', 2, '2026-01-01T00:00:01.000Z'],
    ]);
    expect(events).toEqual([
      ['log', 'work', 'first', 1, undefined],
      ['progress', 'work', 10, undefined],
      ['progress', 'work', { done: 3, of: 4 }, undefined],
      ['log', 'work', 'first', 2, undefined],
      ['progress', 'work', 10, undefined],
      ['progress', 'work', { done: 3, of: 4 }, undefined],
      ['log', 'work', 'second', 2, undefined],
    ]);
    await scheduler.close();
  });

  it('keeps the latest 100 lines, cuts long ones, and copies progress values', async () => {
    const scheduler = new Scheduler();
    const value = { n: 1 };
    const task = scheduler.after(0, (ctx) => {
      for (let i = 0; i < 150; i++) ctx.log(`line ${i}`);
      ctx.log('x'.repeat(5_000));
      ctx.progress(value);
      value.n = 2;
    });
    await task.result;
    const logs = task.logs;
    expect(logs).toHaveLength(100);
    expect(logs[0]!.line).toBe('line 51');
    expect(logs.at(-1)!.line).toHaveLength(1_000);
    expect(logs.at(-1)!.line.endsWith('…')).toBe(true);
    expect(task.progress).toEqual({ n: 1 });
    // A copy: changing what was returned changes nothing kept.
    logs.pop();
    expect(task.logs).toHaveLength(100);
    await scheduler.close();
  });

  it('throws at the call for bad values and ignores calls after the run ended', async () => {
    const scheduler = new Scheduler();
    const errors: unknown[] = [];
    let late: ((n: number) => void) | undefined;
    const task: Task = scheduler.after(0, (ctx) => {
      for (const bad of [Number.NaN, Infinity, undefined, () => 1, 10n, { big: 'x'.repeat(2_000) }]) {
        try {
          ctx.progress(bad);
        } catch (error) {
          errors.push((error as Error).constructor.name);
        }
      }
      try {
        ctx.log(42 as unknown as string);
      } catch (error) {
        errors.push((error as Error).constructor.name);
      }
      late = (n) => {
        ctx.progress(n);
        ctx.log('late');
      };
      ctx.progress(50);
    });
    await task.result;
    expect(errors).toEqual(['RangeError', 'RangeError', 'TypeError', 'TypeError', 'TypeError', 'RangeError', 'TypeError']);
    late!(99);
    expect(task.progress).toBe(50);
    expect(task.logs).toEqual([]);
    await scheduler.close();
  });

  it('refuses at the call text a store cannot keep (NUL, a lone surrogate) in a line or any string of a progress value; the rest is kept', async () => {
    const scheduler = new Scheduler();
    let refused: string[] = [];
    const task = scheduler.after(0, (ctx) => {
      ctx.log('before');
      ctx.progress({ done: 1 });
      refused = tryUnstorable(ctx);
      // Text that only looks like an escape, and surrogate pairs, are text like any other.
      ctx.log('a\\u0000b 😀');
      ctx.progress({ face: '😀', path: 'C:\\u0000' });
      ctx.log('after');
    });
    await task.result;
    expect(refused).toEqual(UNSTORABLE_MESSAGES);
    expect(task.logs.map((l) => l.line)).toEqual(['before', 'a\\u0000b 😀', 'after']);
    expect(task.progress).toEqual({ face: '😀', path: 'C:\\u0000' });
    await scheduler.close();
  });

  it('a long line is cut before a surrogate pair, never between its halves', async () => {
    const scheduler = new Scheduler();
    const task = scheduler.after(0, (ctx) => {
      ctx.log(`${'x'.repeat(MAX_LOG_LINE - 2)}😀 and more`);
      ctx.log(`${'x'.repeat(MAX_LOG_LINE - 3)}😀 and more`);
    });
    await task.result;
    expect(task.logs.map((l) => l.line)).toEqual([`${'x'.repeat(MAX_LOG_LINE - 2)}…`, `${'x'.repeat(MAX_LOG_LINE - 3)}😀…`]);
    await scheduler.close();
  });

  it('recurring jobs: a run reports progress on its occurrence task', async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock });
    const seen: unknown[] = [];
    scheduler.on('progress', (_task, value) => seen.push(value));
    scheduler
      .every(1)
      .minutes()
      .run((ctx) => ctx.progress(ctx.scheduledAt.getUTCMinutes()));
    await clock.advance(120_000);
    expect(seen).toEqual([1, 2]);
    await scheduler.close();
  });
});
