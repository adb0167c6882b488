import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { START, gate, setup } from '../helpers.js';

/** Async tasks that log `label+start` and `label-end` and take `ms` of (manual) time. */
function worker(clock: { now(): number; setTimer(cb: () => void, ms: number): unknown }, log: string[]) {
  return (label: string, ms: number) => () => {
    log.push(`${label}+${clock.now() - START}`);
    return new Promise<void>((resolve) =>
      clock.setTimer(() => {
        log.push(`${label}-${clock.now() - START}`);
        resolve();
      }, ms),
    );
  };
}

const started = (log: string[]) => log.filter((e) => e.includes('+'));

describe('named queues', () => {
  it("a queue's concurrency bounds its running tasks; other queues and plain tasks go on", async () => {
    const { clock, scheduler } = setup({ workers: 10, queues: { emails: { concurrency: 2 } } });
    const log: string[] = [];
    const task = worker(clock, log);
    for (let i = 0; i < 5; i++) scheduler.after(0, task(`e${i}`, 100), { queue: 'emails' });
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`s${i}`, 100), { queue: 'sms' });
    scheduler.after(0, task('u', 100));
    await clock.advance(0);
    expect(started(log)).toEqual(['e0+0', 'e1+0', 's0+0', 's1+0', 's2+0', 'u+0']);
    expect(await scheduler.queue('emails').counts()).toEqual({ waiting: 3, due: 3, running: 2 });
    await clock.advance(1_000);
    expect(started(log).filter((e) => e.startsWith('e'))).toEqual(['e0+0', 'e1+0', 'e2+100', 'e3+100', 'e4+200']);
  });

  it("a queue's rate limit: exact start times, on top of the scheduler's", async () => {
    const { clock, scheduler } = setup({ queues: { sms: { rate: { limit: 2, interval: '1s' } } } });
    const starts: string[] = [];
    for (let i = 0; i < 5; i++) scheduler.after(0, () => void starts.push(`s${i}@${clock.now() - START}`), { queue: 'sms' });
    scheduler.after(0, () => void starts.push(`u@${clock.now() - START}`));
    await clock.advance(5_000);
    expect(starts).toEqual(['s0@0', 's1@0', 'u@0', 's2@1000', 's3@1000', 's4@2000']);
    // One timer at a time, for the instant the window frees: none left.
    expect(clock.pendingTimers).toBe(0);
  });

  it('pause(): due tasks wait (nothing lost), running ones go on, other queues are not held back; resume() starts them', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const emails = scheduler.queue('emails');
    scheduler.after(0, task('e0', 100), { queue: 'emails' });
    await clock.advance(0);
    await emails.pause();
    expect((await emails.info()).paused).toBe(true);
    for (let i = 1; i < 4; i++) scheduler.after(i * 10, task(`e${i}`, 100), { queue: 'emails' });
    scheduler.after(10, task('u', 10));
    await clock.advance(1_000);
    expect(started(log)).toEqual(['e0+0', 'u+10']);
    expect(log).toContain('e0-100');
    expect(await emails.counts()).toEqual({ waiting: 3, due: 3, running: 0 });
    expect(scheduler.stats()).toMatchObject({ waiting: 3, due: 3 });
    await emails.resume();
    expect((await emails.info()).paused).toBe(false);
    // At once, in due order.
    expect(started(log)).toEqual(['e0+0', 'u+10', 'e1+1000', 'e2+1000', 'e3+1000']);
  });

  it('a paused queue starts nothing, however long it stays paused; close() cancels its waiting tasks', async () => {
    const { clock, scheduler } = setup({ queues: { reports: { paused: true } } });
    const report = scheduler
      .every(1)
      .minutes()
      .run(() => {}, { queue: 'reports' });
    const once = scheduler.after(0, () => {}, { queue: 'reports' });
    await clock.advance(3_600_000);
    expect(report.runs).toBe(0);
    expect(once.state).toBe('waiting');
    expect(await scheduler.queue('reports').counts()).toMatchObject({ running: 0 });
    await scheduler.close();
    expect(once.state).toBe('cancelled');
    expect(scheduler.stats()).toMatchObject({ waiting: 0, due: 0 });
  });

  it('concurrency is live: raising it starts waiting tasks at once, lowering it lets running ones finish', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    const q = scheduler.queue('q');
    expect(q.concurrency).toBe(Infinity);
    q.concurrency = 1;
    for (let i = 0; i < 6; i++) scheduler.after(0, task(`t${i}`, 100), { queue: 'q' });
    await clock.advance(0);
    expect(started(log)).toEqual(['t0+0']);
    q.concurrency = 3;
    expect(q.concurrency).toBe(3);
    expect(started(log)).toEqual(['t0+0', 't1+0', 't2+0']);
    q.concurrency = 1;
    await clock.advance(100);
    // Three ended at 100; one starts in their place.
    expect(started(log)).toEqual(['t0+0', 't1+0', 't2+0', 't3+100']);
    q.concurrency = Infinity;
    expect(started(log)).toHaveLength(6);
  });

  it('the default queue governs tasks that name none, even those started before it was limited', async () => {
    const { clock, scheduler } = setup();
    const log: string[] = [];
    const task = worker(clock, log);
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`a${i}`, 100));
    await clock.advance(0);
    scheduler.queue('default').concurrency = 2;
    for (let i = 0; i < 2; i++) scheduler.after(0, task(`b${i}`, 100));
    scheduler.after(0, task('o', 100), { queue: 'other' });
    await clock.advance(0);
    // Three run already: no b starts until fewer than two do; 'other' is not held back.
    expect(started(log)).toEqual(['a0+0', 'a1+0', 'a2+0', 'o+0']);
    expect(await scheduler.queue('default').counts()).toEqual({ waiting: 2, due: 2, running: 3 });
    await clock.advance(100);
    expect(started(log).slice(4)).toEqual(['b0+100', 'b1+100']);
  });

  it("a queue's rate can change at run time; starts already made in the window still count", async () => {
    const { clock, scheduler } = setup();
    const starts: string[] = [];
    const q = scheduler.queue('api');
    for (let i = 0; i < 3; i++) scheduler.after(0, () => void starts.push(`a${i}@${clock.now() - START}`), { queue: 'api' });
    await clock.advance(0);
    // The one API's method (a Promise, the change made before it returns), and the in-memory Queue's setter.
    const set = q.setRate({ limit: 3, interval: '1s' });
    expect((q as Queue).rate).toEqual({ limit: 3, interval: 1_000 });
    await set;
    expect((await q.info()).rate).toEqual({ limit: 3, interval: 1_000 });
    for (let i = 0; i < 3; i++) scheduler.after(0, () => void starts.push(`b${i}@${clock.now() - START}`), { queue: 'api' });
    await clock.advance(500);
    expect(starts).toHaveLength(3);
    (q as Queue).rate = undefined;
    expect((await q.info()).rate).toBeUndefined();
    expect(starts).toEqual(['a0@0', 'a1@0', 'a2@0', 'b0@500', 'b1@500', 'b2@500']);
  });

  it('priority orders tasks within a queue and across queues; a full queue passes its turn', async () => {
    const { clock, scheduler } = setup({ workers: 1, queues: { slow: { concurrency: 1 } } });
    const order: string[] = [];
    const hold = gate();
    scheduler.after(0, () => hold.promise, { queue: 'slow' });
    scheduler.after(1, () => void order.push('slow-high'), { queue: 'slow', priority: 10 });
    scheduler.after(1, () => void order.push('fast-low'), { queue: 'fast', priority: -1 });
    scheduler.after(2, () => void order.push('fast-high'), { queue: 'fast', priority: 5 });
    await clock.advance(10);
    expect(order).toEqual([]);
    hold.open();
    await clock.advance(0);
    expect(order).toEqual(['slow-high', 'fast-high', 'fast-low']);
  });

  it('globalConcurrency: in one process, the lower of it and concurrency applies', async () => {
    const { clock, scheduler } = setup({ queues: { q: { concurrency: 3, globalConcurrency: 1 } } });
    const log: string[] = [];
    const task = worker(clock, log);
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`t${i}`, 100), { queue: 'q' });
    await clock.advance(0);
    expect(started(log)).toEqual(['t0+0']);
    const q = scheduler.queue('q');
    expect(q).toBeInstanceOf(Queue);
    expect([q.concurrency, (q as Queue).globalConcurrency]).toEqual([3, 1]);
    await q.setGlobalConcurrency(Infinity);
    expect(started(log)).toEqual(['t0+0', 't1+0', 't2+0']);
  });

  it('queues() lists every queue with its settings, paused flag and counts; a queue read is not made', async () => {
    const { clock, scheduler } = setup({ queues: { emails: { concurrency: 2, rate: { limit: 10, interval: '1s' } } } });
    expect(scheduler.queue('never').concurrency).toBe(Infinity);
    scheduler.after(0, () => new Promise(() => {}), { queue: 'sms' });
    scheduler.after(60_000, () => {}, { queue: 'sms' });
    await scheduler.queue('emails').pause();
    scheduler.after(0, () => {}, { queue: 'emails' });
    await clock.advance(0);
    expect(await scheduler.queues()).toEqual([
      {
        name: 'default',
        concurrency: Infinity,
        globalConcurrency: Infinity,
        rate: undefined,
        paused: false,
        counts: { waiting: 0, due: 0, running: 0 },
      },
      {
        name: 'emails',
        concurrency: 2,
        globalConcurrency: Infinity,
        rate: { limit: 10, interval: 1_000 },
        paused: true,
        counts: { waiting: 1, due: 1, running: 0 },
      },
      {
        name: 'sms',
        concurrency: Infinity,
        globalConcurrency: Infinity,
        rate: undefined,
        paused: false,
        counts: { waiting: 1, due: 0, running: 1 },
      },
    ]);
    expect(scheduler.queue('sms')).toBeInstanceOf(Queue);
    expect(scheduler.queue('sms').name).toBe('sms');
  });

  it('a scheduler that names no queue lists only the default one', async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    scheduler.after(0, () => hold.promise);
    scheduler.after(10, () => {});
    await clock.advance(0);
    expect(await scheduler.queues()).toEqual([
      {
        name: 'default',
        concurrency: Infinity,
        globalConcurrency: Infinity,
        rate: undefined,
        paused: false,
        counts: { waiting: 1, due: 0, running: 1 },
      },
    ]);
    hold.open();
  });

  it('jobs join a queue: a paused queue holds back their occurrences (misfire policy on resume)', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const job = scheduler
      .every(1)
      .seconds()
      .run(() => void runs++, { queue: 'jobs' });
    await clock.advance(2_000);
    expect(runs).toBe(2);
    await scheduler.queue('jobs').pause();
    await clock.advance(5_000);
    expect(runs).toBe(2);
    await scheduler.queue('jobs').resume();
    expect(runs).toBe(3);
    job.cancel();
  });

  it('refuses bad names and settings, naming them, and changes nothing', async () => {
    const { scheduler } = setup({ queues: { q: { concurrency: 2 } } });
    const fn = () => {};
    expect(() => setup({ queues: { q: { concurrency: 0 } } })).toThrow(/`queues.q.concurrency`.*got 0/);
    expect(() => setup({ queues: { q: { concurency: 2 } as never } })).toThrow(/Unknown `queues.q` option `concurency`/);
    expect(() => setup({ queues: { q: { rate: { limit: 0, interval: 1 } } } })).toThrow(/`queues.q.rate.limit`/);
    expect(() => setup({ queues: { q: { paused: 'yes' as never } } })).toThrow(/`queues.q.paused` to be a boolean/);
    expect(() => setup({ queues: { q: 3 as never } })).toThrow(/`queues.q` to be an object/);
    expect(() => setup({ queues: [] as never })).toThrow(/`queues` to be an object/);
    expect(() => setup({ queues: { '': {} } })).toThrow(/`queues` to be 1 to 512/);
    expect(() => scheduler.queue('')).toThrow(RangeError);
    expect(() => scheduler.queue(5 as never)).toThrow(/`name` to be a string, got 5/);
    expect(() => scheduler.after(0, fn, { queue: '' })).toThrow(/`queue` to be 1 to 512/);
    expect(() => scheduler.after(0, fn, { queue: 1 as never })).toThrow(/`queue` to be a string, got 1/);
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fn, { queue: null as never }),
    ).toThrow(/`queue` to be a string, got null/);
    const q = scheduler.queue('q');
    expect(() => (q.concurrency = 1.5)).toThrow(/`concurrency`.*1.5/);
    expect(() => (q.concurrency = -1)).toThrow(RangeError);
    await expect(q.setGlobalConcurrency(0)).rejects.toThrow(/`globalConcurrency`/);
    expect(() => ((q as Queue).globalConcurrency = 0)).toThrow(/`globalConcurrency`/);
    expect(() => ((q as Queue).rate = { limit: 1, interval: '1 s' as never })).toThrow(/rate.interval/);
    await expect(q.setRate({ limit: 1, interval: '1 s' as never })).rejects.toThrow(/`rate.interval`.*1 s/);
    await expect(q.setRate({ group: 'k', limit: 1, interval: 1 } as never)).rejects.toThrow(/Unknown `rate` option "group"/);
    await expect(q.setRate({ limit: 0, interval: 1 })).rejects.toThrow(RangeError);
    await expect(q.setRate('fast' as never)).rejects.toThrow(TypeError);
    expect(q.concurrency).toBe(2);
    expect((q as Queue).rate).toBeUndefined();
    expect(scheduler.size).toBe(0);
    expect((await scheduler.queues()).map((queue) => queue.name)).toEqual(['default', 'q']);
  });
});
