import { describe, expect, it } from 'vitest';
import { START, gate, setup } from '../helpers.js';

describe('worker pool', () => {
  it('runs at most `workers` tasks at once; the rest wait in deadline order', async () => {
    const { clock, scheduler } = setup({ workers: 2 });
    const gates = Array.from({ length: 5 }, () => gate());
    const started: number[] = [];
    [4, 3, 2, 1, 0].forEach((i) =>
      scheduler.after(i, () => {
        started.push(i);
        return gates[i]!.promise;
      }),
    );
    await clock.advance(10);
    expect(started).toEqual([0, 1]);
    expect(scheduler.stats()).toMatchObject({ running: 2, waiting: 3 });
    gates[1]!.open();
    await clock.advance(0);
    expect(started).toEqual([0, 1, 2]);
    gates[0]!.open();
    gates[2]!.open();
    await clock.advance(0);
    expect(started).toEqual([0, 1, 2, 3, 4]);
  });

  it('records how late waiting tasks started', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const slot = gate();
    scheduler.after(0, () => slot.promise);
    const late = scheduler.after(0, (ctx) => ctx.startedAt.getTime() - ctx.scheduledAt.getTime());
    await clock.advance(250);
    slot.open();
    await clock.advance(0);
    expect(await late.result).toBe(250);
    expect(scheduler.stats().lateness.max).toBe(250);
  });

  it('growing the pool starts waiting tasks at once', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const hold = gate();
    let started = 0;
    for (let i = 0; i < 5; i++)
      scheduler.after(0, () => {
        started++;
        return hold.promise;
      });
    await clock.advance(0);
    expect(started).toBe(1);
    scheduler.workers = 4;
    expect(started).toBe(4);
    scheduler.workers = Infinity;
    expect(started).toBe(5);
    hold.open();
  });

  it('shrinking never interrupts running tasks, and takes effect as they finish', async () => {
    const { clock, scheduler } = setup({ workers: 3 });
    const gates = Array.from({ length: 6 }, () => gate());
    const aborted: boolean[] = [];
    let started = 0;
    gates.forEach((g) =>
      scheduler.after(0, (ctx) => {
        started++;
        return g.promise.then(() => aborted.push(ctx.signal.aborted));
      }),
    );
    await clock.advance(0);
    expect(started).toBe(3);
    scheduler.workers = 1;
    expect(scheduler.running).toBe(3);
    gates[0]!.open();
    await clock.advance(0);
    expect(started).toBe(3); // 2 still running, above the new limit of 1
    gates[1]!.open();
    gates[2]!.open();
    await clock.advance(0);
    expect(started).toBe(4);
    expect(scheduler.running).toBe(1);
    expect(aborted).toEqual([false, false, false]);
    gates.forEach((g) => g.open());
  });

  it('resizing from inside a task is safe', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const order: string[] = [];
    const hold = gate();
    scheduler.after(0, () => {
      order.push('resizer');
      scheduler.workers = 3;
      order.push('resized');
      return hold.promise;
    });
    scheduler.after(0, () => {
      order.push('second');
      return hold.promise;
    });
    scheduler.after(0, () => {
      order.push('third');
    });
    await clock.advance(0);
    expect(order).toEqual(['resizer', 'resized', 'second', 'third']);
    expect(scheduler.running).toBe(2);
    hold.open();
  });

  it('a synchronous task that shrinks the pool to 1 from inside does not deadlock', async () => {
    const { clock, scheduler } = setup({ workers: 4 });
    const ran: number[] = [];
    for (let i = 0; i < 10; i++)
      scheduler.after(i, () => {
        ran.push(i);
        if (i === 3) scheduler.workers = 1;
      });
    await clock.advance(20);
    expect(ran).toEqual([...Array(10).keys()]);
  });

  it('unbounded workers run every due task together', async () => {
    const { clock, scheduler } = setup({ workers: Infinity });
    const hold = gate();
    for (let i = 0; i < 1_000; i++) scheduler.after(0, () => hold.promise);
    await clock.advance(0);
    expect(scheduler.running).toBe(1_000);
    hold.open();
    await clock.advance(0);
    expect(scheduler.running).toBe(0);
  });

  it('a long burst of due synchronous tasks all run, in order', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const ran: number[] = [];
    for (let i = 0; i < 50_000; i++) scheduler.schedule(START, () => ran.push(i));
    await clock.advance(0);
    expect(ran.length).toBe(50_000);
    expect(ran.every((v, i) => v === i)).toBe(true);
  });
});
