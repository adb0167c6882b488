import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Scheduler, type DedupeMode, type Task } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { START, gate, setup } from '../helpers.js';

describe('dedupe keys', () => {
  it("'replace' (the default) replaces a waiting task with the key: the new one runs, the old one is cancelled", async () => {
    const { clock, scheduler } = setup();
    const runs: string[] = [];
    const a = scheduler.after(100, () => void runs.push('a'), { key: 'k' });
    expect(a.enqueued).toBe('inserted');
    const b = scheduler.after(200, () => void runs.push('b'), { key: 'k', dedupe: 'replace' });
    expect(b.enqueued).toBe('replaced');
    expect(a.state).toBe('cancelled');
    await expect(a.result).rejects.toMatchObject({
      code: 'ERR_TASK_CANCELLED',
      message: expect.stringMatching(/Replaced by a newer task with the key "k"/),
    });
    await clock.advance(1_000);
    expect(runs).toEqual(['b']);
    // Other keys and tasks without one are not touched.
    const c = scheduler.after(0, () => {}, { key: 'other' });
    const d = scheduler.after(0, () => {});
    expect([c.enqueued, d.enqueued]).toEqual(['inserted', undefined]);
  });

  it("'replace' leaves a running task (or one waiting for its retry) alone and adds the new one", async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    const a = scheduler.after(0, () => hold.promise, { key: 'k' });
    await clock.advance(0);
    const b = scheduler.after(0, () => 'b', { key: 'k' });
    expect(b.enqueued).toBe('inserted');
    expect(a.state).toBe('running');
    let tries = 0;
    const r = scheduler.after(
      0,
      () => {
        if (++tries === 1) throw new Error('again');
      },
      { key: 'r', retry: { attempts: 2, delay: 100, backoff: 'fixed' } },
    );
    await clock.advance(10);
    expect(r.state).toBe('waiting');
    const r2 = scheduler.after(0, () => {}, { key: 'r' });
    expect(r2.enqueued).toBe('inserted');
    await clock.advance(200);
    expect([r.state, r2.state]).toEqual(['succeeded', 'succeeded']);
    hold.open();
    await scheduler.onIdle();
    expect(await b.result).toBe('b');
  });

  it("'keep' returns the existing task while it waits or runs, and adds a new one once it is done", async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    const a = scheduler.after(10, () => hold.promise, { key: 'sync', dedupe: 'keep' });
    const again = scheduler.after(0, () => {}, { key: 'sync', dedupe: 'keep' });
    expect(again).toBe(a);
    expect(a.enqueued).toBe('existing');
    await clock.advance(10);
    expect(a.state).toBe('running');
    expect(scheduler.after(0, () => {}, { key: 'sync', dedupe: 'keep' })).toBe(a);
    expect(scheduler.size).toBe(0);
    hold.open();
    await scheduler.onIdle();
    const b = scheduler.after(0, () => {}, { key: 'sync', dedupe: 'keep' });
    expect(b).not.toBe(a);
    expect(b.enqueued).toBe('inserted');
  });

  it('{ throttle }: at most one task per key per period, finished ones included', async () => {
    const { clock, scheduler } = setup();
    const runs: number[] = [];
    const call = () => scheduler.after(0, () => void runs.push(clock.now() - START), { key: 'report', dedupe: { throttle: '1s' } });
    const first = call();
    expect(first.enqueued).toBe('inserted');
    await clock.advance(300);
    expect(first.state).toBe('succeeded');
    expect(call()).toBe(first);
    expect(first.enqueued).toBe('existing');
    await clock.advance(699);
    expect(call()).toBe(first);
    await clock.advance(1);
    const second = call();
    expect(second.enqueued).toBe('inserted');
    await clock.advance(0);
    expect(runs).toEqual([0, 1_000]);
  });

  it('{ debounce }: each call replaces the waiting task and moves the run a period later; the last runs after a quiet period', async () => {
    const { clock, scheduler } = setup();
    const runs: string[] = [];
    const call = (label: string) =>
      scheduler.after(0, () => void runs.push(`${label}@${clock.now() - START}`), { key: 'save', dedupe: { debounce: 500 } });
    expect(call('a').enqueued).toBe('inserted');
    await clock.advance(300);
    expect(call('b').enqueued).toBe('replaced');
    await clock.advance(400);
    expect(call('c').enqueued).toBe('replaced');
    await clock.advance(499);
    expect(runs).toEqual([]);
    await clock.advance(1);
    expect(runs).toEqual(['c@1200']);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, cancelled: 2 });
  });

  it('refuses bad values, naming them, and changes nothing', () => {
    const { scheduler } = setup();
    const fn = () => {};
    const a = scheduler.after(10, fn, { key: 'k' });
    expect(() => scheduler.after(0, fn, { dedupe: 'keep' })).toThrow(/Expected a `key` with `dedupe: 'keep'`: deduplication is by key/);
    expect(() => scheduler.after(0, fn, { key: '' })).toThrow(/`key` to be 1 to 512/);
    expect(() => scheduler.after(0, fn, { key: 3 as never })).toThrow(/`key` to be a string, got 3/);
    expect(() => scheduler.after(0, fn, { key: 'k', dedupe: 'drop' as never })).toThrow(/`dedupe` to be 'replace', 'keep'.*"drop"/);
    expect(() => scheduler.after(0, fn, { key: 'k', dedupe: { throttle: 0 } })).toThrow(/`dedupe.throttle`/);
    expect(() => scheduler.after(0, fn, { key: 'k', dedupe: { debounce: '2d' } })).toThrow(/`dedupe.debounce`.*at most a day/);
    expect(() => scheduler.after(0, fn, { key: 'k', dedupe: { throttle: 1, debounce: 1 } as never })).toThrow(TypeError);
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fn, { key: 'k' } as never),
    ).toThrow(/Unknown job option `key`/);
    expect(a.state).toBe('waiting');
    expect(scheduler.size).toBe(1);
  });

  it('property: replace, keep and debounce never leave two waiting tasks of a key; every cancel is a replacement; the last call of a key runs', async () => {
    const call = fc.record({
      wait: fc.integer({ min: 0, max: 30 }),
      key: fc.constantFrom('a', 'b'),
      mode: fc.constantFrom<DedupeMode>('replace', 'keep', { debounce: 10 }),
      delay: fc.integer({ min: 0, max: 20 }),
      duration: fc.integer({ min: 0, max: 25 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.array(call, { maxLength: 30 }), async (workers, calls) => {
        const clock = new ManualClock(0);
        const scheduler = new Scheduler({ clock, workers, onError: () => {} });
        const added: { task: Task; key: string }[] = [];
        const last = new Map<string, Task>();
        let replaced = 0;
        for (const c of calls) {
          await clock.advance(c.wait);
          const task = scheduler.after(c.delay, () => new Promise<void>((resolve) => clock.setTimer(resolve, c.duration)), {
            key: c.key,
            dedupe: c.mode,
          });
          if (task.enqueued === 'existing') {
            // keep: the key's task is unfinished, and it is the one the key last added.
            expect(['waiting', 'running']).toContain(task.state);
            expect(last.get(c.key)).toBe(task);
          } else {
            if (task.enqueued === 'replaced') replaced++;
            added.push({ task, key: c.key });
            last.set(c.key, task);
          }
          for (const key of ['a', 'b']) {
            const waiting = added.filter((x) => x.key === key && x.task.state === 'waiting' && x.task.attempts === 0);
            expect(waiting.length).toBeLessThanOrEqual(1);
          }
        }
        await clock.advance(1_000);
        expect(added.filter((x) => x.task.state === 'cancelled')).toHaveLength(replaced);
        expect(added.every((x) => x.task.state === 'succeeded' || x.task.state === 'cancelled')).toBe(true);
        for (const task of last.values()) expect(task.state).toBe('succeeded');
        expect(scheduler.stats()).toMatchObject({ waiting: 0, running: 0 });
      }),
      { numRuns: 200, interruptAfterTimeLimit: 15_000 },
    );
  });
});
