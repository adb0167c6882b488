import { describe, expect, it } from 'vitest';
import { START, gate, setup } from '../helpers.js';

describe('priorities', () => {
  it('with a full pool, the highest priority due task starts first; equal priorities keep due-time order', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const hold = gate();
    const order: string[] = [];
    scheduler.after(0, () => hold.promise);
    const add = (label: string, delay: number, priority?: number) =>
      scheduler.after(delay, () => void order.push(label), priority === undefined ? undefined : { priority });
    add('low-early', 1, -1);
    add('plain-1', 2);
    add('high', 5, 10);
    add('plain-2', 3);
    add('mid-b', 4, 5);
    add('mid-a', 3, 5);
    await clock.advance(10);
    expect(order).toEqual([]);
    expect(scheduler.stats()).toMatchObject({ running: 1, waiting: 6 });
    hold.open();
    await clock.advance(0);
    expect(order).toEqual(['high', 'mid-a', 'mid-b', 'plain-1', 'plain-2', 'low-early']);
  });

  it('does not reorder tasks that are not due yet: a due low priority task starts before a later high one', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const order: string[] = [];
    scheduler.after(0, () => void order.push('low'), { priority: -5 });
    scheduler.after(1, () => void order.push('high'), { priority: 5 });
    await clock.advance(10);
    expect(order).toEqual(['low', 'high']);
  });

  it('orders the starts the scheduler-wide rate allows', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 1_000 } });
    const starts: string[] = [];
    scheduler.after(0, () => void starts.push(`a@${clock.now() - START}`));
    scheduler.after(0, () => void starts.push(`b@${clock.now() - START}`));
    scheduler.after(10, () => void starts.push(`urgent@${clock.now() - START}`), { priority: 1 });
    await clock.advance(5_000);
    expect(starts).toEqual(['a@0', 'urgent@1000', 'b@2000']);
  });

  it('strict: lower priorities wait as long as higher ones are due (documented starvation)', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const order: string[] = [];
    scheduler.after(0, () => void order.push('low'), { priority: -1 });
    // A steady stream of normal-priority work, each due before the previous ends.
    for (let i = 0; i < 5; i++)
      scheduler.after(
        0,
        () =>
          new Promise<void>((resolve) =>
            clock.setTimer(() => {
              order.push(`n${i}`);
              resolve();
            }, 10),
          ),
      );
    await clock.advance(1_000);
    expect(order).toEqual(['n0', 'n1', 'n2', 'n3', 'n4', 'low']);
  });

  it('growing the pool starts the best waiting tasks; shrinking lets running ones finish', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const hold = gate();
    const started: number[] = [];
    for (let p = 0; p < 6; p++)
      scheduler.after(
        0,
        () => {
          started.push(p);
          return hold.promise;
        },
        { priority: p },
      );
    await clock.advance(0);
    expect(started).toEqual([5]);
    scheduler.workers = 3;
    expect(started).toEqual([5, 4, 3]);
    scheduler.workers = 1;
    hold.open();
    await clock.advance(0);
    expect(started).toEqual([5, 4, 3, 2, 1, 0]);
  });

  it('jobs take a priority: a cron occurrence passes plain work that is due', async () => {
    const { clock, scheduler } = setup({ workers: 1, timezone: 'UTC' });
    const hold = gate();
    const order: string[] = [];
    scheduler.after(0, () => hold.promise);
    scheduler.after(0, () => void order.push('plain'));
    const job = scheduler.cron('* * * * * *').run(() => void order.push('cron'), { priority: 3 });
    await clock.advance(1_500);
    hold.open();
    await clock.advance(0);
    job.cancel();
    expect(order).toEqual(['cron', 'plain']);
  });

  it('cancelling a waiting prioritised task', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const hold = gate();
    const order: string[] = [];
    scheduler.after(0, () => hold.promise);
    await clock.advance(0);
    const high = scheduler.after(0, () => void order.push('high'), { priority: 9 });
    scheduler.after(0, () => void order.push('low'));
    await clock.advance(0);
    expect(high.state).toBe('waiting');
    expect(high.cancel()).toBe(true);
    expect(scheduler.stats()).toMatchObject({ waiting: 1, due: 1 });
    hold.open();
    await clock.advance(0);
    expect(order).toEqual(['low']);
  });
});
