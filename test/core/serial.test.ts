import { describe, expect, it } from 'vitest';
import { gate, setup, worker } from '../helpers.js';

describe('serial groups', () => {
  it('async tasks sharing a key run one at a time, in due-time order; other keys run alongside', async () => {
    const { clock, scheduler } = setup({ workers: 10 });
    const log: string[] = [];
    const task = worker(clock, log);
    scheduler.after(20, task('a2', 100), { serial: 'chat:1' });
    scheduler.after(10, task('a1', 100), { serial: 'chat:1' });
    scheduler.after(30, task('a3', 50), { serial: 'chat:1' });
    scheduler.after(15, task('b1', 100), { serial: 'chat:2' });
    scheduler.after(15, task('u', 100));
    await clock.advance(1_000);
    expect(log.filter((e) => e.startsWith('a'))).toEqual(['a1+10', 'a1-110', 'a2+110', 'a2-210', 'a3+210', 'a3-260']);
    expect(log).toContain('b1+15');
    expect(log).toContain('u+15');
  });

  it('a failing task releases the key; the next one runs', async () => {
    const { clock, scheduler, errors } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    scheduler.after(0, task('a', 10, 1), { serial: 'k' });
    scheduler.after(0, task('b', 10), { serial: 'k' });
    await clock.advance(100);
    expect(log).toEqual(['a+0', 'a-10', 'b+10', 'b-20']);
    expect(errors).toHaveLength(1);
  });

  it('the key is held through retries: the next task waits for the last attempt', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const a = scheduler.after(0, task('a', 10, 2), { serial: 'k', retry: { attempts: 3, delay: 100, backoff: 'fixed' } });
    scheduler.after(5, task('b', 10), { serial: 'k' });
    await clock.advance(1_000);
    expect(log).toEqual(['a+0', 'a-10', 'a+110', 'a-120', 'a+220', 'a-230', 'b+230', 'b-240']);
    expect(a.state).toBe('succeeded');
  });

  it('a timed-out task releases the key', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const a = scheduler.after(0, task('a', 1_000), { serial: 'k', timeout: 50 });
    scheduler.after(0, task('b', 10), { serial: 'k' });
    await clock.advance(100);
    expect(a.state).toBe('timed-out');
    expect(log.slice(0, 3)).toEqual(['a+0', 'b+50', 'b-60']);
  });

  it('cancelling a waiting task skips it; cancelling the holder while it waits for a retry releases the key', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const a = scheduler.after(0, task('a', 10, 5), { serial: 'k', retry: { attempts: 5, delay: 1_000, backoff: 'fixed' } });
    const b = scheduler.after(0, task('b', 10), { serial: 'k' });
    scheduler.after(0, task('c', 10), { serial: 'k' });
    await clock.advance(20);
    expect(scheduler.stats()).toMatchObject({ waiting: 3, due: 2, running: 0 });
    expect(b.cancel()).toBe(true);
    expect(b.state).toBe('cancelled');
    expect(scheduler.stats()).toMatchObject({ waiting: 2, due: 1 });
    // a waits for its retry, in the heap, still holding the key.
    expect(a.state).toBe('waiting');
    a.cancel();
    expect(log).toEqual(['a+0', 'a-10', 'c+20']);
    await clock.advance(100);
    expect(log).toEqual(['a+0', 'a-10', 'c+20', 'c-30']);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, cancelled: 2, succeeded: 1 });
  });

  it('cancelling a running holder: the next task starts once the run ends', async () => {
    const { clock, scheduler } = setup();
    const order: string[] = [];
    const a = scheduler.after(
      0,
      async (ctx) => {
        order.push('a');
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        throw ctx.signal.reason;
      },
      { serial: 'k' },
    );
    scheduler.after(0, () => void order.push('b'), { serial: 'k' });
    await clock.advance(10);
    expect(order).toEqual(['a']);
    a.cancel();
    await clock.advance(0);
    expect(order).toEqual(['a', 'b']);
    expect(a.state).toBe('cancelled');
  });

  it('a job with a serial group: a slow run holds later occurrences and one-off tasks of the key', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const job = scheduler.every(100).milliseconds().run(task('j', 150), { serial: 'k', overlap: 'allow' });
    scheduler.after(120, task('x', 10), { serial: 'k' });
    await clock.advance(420);
    job.cancel();
    // j due at 100 runs to 250; x (due 120) then j (due 200) wait for the key, in due order.
    expect(log.slice(0, 6)).toEqual(['j+100', 'j-250', 'x+250', 'x-260', 'j+260', 'j-410']);
  });

  it('close() cancels tasks waiting for a key', async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    scheduler.after(0, () => hold.promise, { serial: 'k' });
    const waiting = scheduler.after(0, () => {}, { serial: 'k' });
    await clock.advance(0);
    const closed = scheduler.close();
    expect(waiting.state).toBe('cancelled');
    hold.open();
    await closed;
    expect(scheduler.stats()).toMatchObject({ waiting: 0, running: 0, succeeded: 1, cancelled: 1 });
  });

  it('serial groups and rate groups together (a chat: one message at a time, one a second)', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const chat = { serial: 'chat:1', rate: { group: 'chat:1', limit: 1, interval: 1_000 } };
    scheduler.after(0, task('m1', 1_500), chat);
    scheduler.after(0, task('m2', 100), chat);
    scheduler.after(0, task('m3', 100), chat);
    await clock.advance(5_000);
    // m2 waits for m1 to end (1500), m3 for the window after m2's start (2500).
    expect(log).toEqual(['m1+0', 'm1-1500', 'm2+1500', 'm2-1600', 'm3+2500', 'm3-2600']);
  });
});
