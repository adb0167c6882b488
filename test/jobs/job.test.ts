import { describe, expect, it } from 'vitest';
import type { SkipInfo } from '../../src/index.js';
import { START, gate, setup } from '../helpers.js';

const MINUTE = 60_000;

describe('Job state', () => {
  it('tracks runs, lastRunAt, failures and lastError', async () => {
    const { clock, scheduler } = setup();
    const job = scheduler
      .every(1)
      .minute()
      .run(
        (ctx) => {
          if (ctx.scheduledAt.getTime() === START + 2 * MINUTE) throw new Error('second run fails');
        },
        { name: 'tick' },
      );
    expect(job.name).toBe('tick');
    expect(job.state).toBe('scheduled');
    expect(job.runs).toBe(0);
    await clock.advance(3 * MINUTE);
    expect(job.runs).toBe(3);
    expect(job.failures).toBe(1);
    expect((job.lastError as Error).message).toBe('second run fails');
    expect(job.lastRunAt).toEqual(new Date(START + 3 * MINUTE));
    expect(job.nextRunAt).toEqual(new Date(START + 4 * MINUTE));
  });

  it("an occurrence's task names its job (task.job), in events and from trigger(); other tasks name none", async () => {
    const { clock, scheduler } = setup();
    const job = scheduler
      .every(1)
      .minute()
      .run(
        () => {
          throw new Error('boom');
        },
        { name: 'digest' },
      );
    const other = scheduler
      .every(1)
      .minute()
      .run(() => {});
    const plain = scheduler.after(10, () => {});
    const failed: unknown[] = [];
    scheduler.on('failure', (task) => failed.push(task.job));
    await clock.advance(MINUTE);
    expect(failed).toEqual([job]);
    expect(failed[0]).not.toBe(other);
    expect(plain.job).toBeUndefined();
    const triggered = job.trigger();
    expect(triggered.job).toBe(job);
    expect(triggered.job?.name).toBe('digest');
    expect(other.trigger().job?.id).toBe(other.id);
  });

  it('keeps exactly one entry in the heap', async () => {
    const { clock, scheduler } = setup();
    scheduler
      .every(1)
      .second()
      .run(() => {});
    scheduler.cron('* * * * *').run(() => {});
    expect(scheduler.size).toBe(2);
    await clock.advance(10 * MINUTE);
    expect(scheduler.size).toBe(2);
  });

  it('nextRuns(n) lists upcoming occurrences within until and times', () => {
    const { scheduler } = setup();
    const job = scheduler
      .every(5)
      .minutes()
      .times(3)
      .run(() => {});
    expect(job.nextRuns(10).map((d) => d.getTime() - START)).toEqual([5, 10, 15].map((m) => m * MINUTE));
    expect(job.nextRuns(0)).toEqual([]);
    expect(() => job.nextRuns(-1)).toThrow(RangeError);
  });

  it('running is true while a run is in progress', async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    const job = scheduler
      .every(1)
      .minute()
      .run(() => hold.promise);
    await clock.advance(MINUTE);
    expect(job.running).toBe(true);
    hold.open();
    await clock.advance(0);
    expect(job.running).toBe(false);
  });
});

describe('pause, resume, trigger, cancel', () => {
  it('pause stops planning runs; resume continues from now without catching up', async () => {
    const { clock, scheduler } = setup();
    const at: number[] = [];
    const job = scheduler
      .every(1)
      .minute()
      .run(() => at.push((clock.now() - START) / MINUTE));
    await clock.advance(2 * MINUTE);
    expect(job.pause()).toBe(true);
    expect(job.pause()).toBe(false);
    expect(job.state).toBe('paused');
    expect(job.nextRunAt).toBeUndefined();
    expect(scheduler.size).toBe(0);
    await clock.advance(5 * MINUTE + 30_000);
    expect(job.resume()).toBe(true);
    expect(job.resume()).toBe(false);
    await clock.advance(2 * MINUTE);
    expect(at).toEqual([1, 2, 8, 9]);
  });

  it('trigger() runs now without moving the schedule', async () => {
    const { clock, scheduler } = setup();
    const at: number[] = [];
    const job = scheduler
      .every(10)
      .minutes()
      .times(2)
      .run(() => at.push((clock.now() - START) / MINUTE));
    await clock.advance(3 * MINUTE);
    const task = job.trigger();
    await clock.advance(0);
    expect(task.state).toBe('succeeded');
    await clock.advance(30 * MINUTE);
    expect(at).toEqual([3, 10, 20]);
    expect(job.runs).toBe(3);
  });

  it('cancel() removes the next occurrence and aborts a run in progress', async () => {
    const { clock, scheduler } = setup();
    let aborted = false;
    const job = scheduler
      .every(1)
      .minute()
      .run(
        (ctx) =>
          new Promise<void>((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              resolve();
            });
          }),
      );
    await clock.advance(MINUTE);
    expect(job.cancel()).toBe(true);
    expect(job.cancel()).toBe(false);
    expect(aborted).toBe(true);
    expect(job.state).toBe('cancelled');
    expect(scheduler.size).toBe(0);
    expect(scheduler.jobs()).toEqual([]);
    expect(() => job.trigger()).toThrow(/cancelled/);
    expect(job.resume()).toBe(false);
  });

  it('a job cancelled through its signal is gone for good', async () => {
    const { clock, scheduler } = setup();
    const controller = new AbortController();
    let runs = 0;
    const jobs = [1, 2, 3].map(() =>
      scheduler
        .every(1)
        .minute()
        .run(() => void runs++, { signal: controller.signal }),
    );
    await clock.advance(MINUTE);
    controller.abort();
    expect(jobs.map((job) => job.state)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(jobs[0]!.resume()).toBe(false);
    await clock.advance(10 * MINUTE);
    expect(runs).toBe(3);
    expect(scheduler.size).toBe(0);
  });

  it('an already-aborted signal throws at run()', () => {
    const { scheduler } = setup();
    expect(() =>
      scheduler
        .every()
        .second()
        .run(() => {}, { signal: AbortSignal.abort('no') }),
    ).toThrow('no');
    expect(scheduler.jobs()).toEqual([]);
  });

  it('close() cancels jobs but lets their running runs finish', async () => {
    const { clock, scheduler } = setup();
    const hold = gate();
    let aborted = false;
    const job = scheduler
      .every(1)
      .minute()
      .run((ctx) =>
        hold.promise.then(() => {
          aborted = ctx.signal.aborted;
        }),
      );
    await clock.advance(MINUTE);
    const closing = scheduler.close();
    expect(job.state).toBe('cancelled');
    hold.open();
    await closing;
    expect(aborted).toBe(false);
  });
});

describe('overlap', () => {
  function slowJob(overlap: 'skip' | 'queue' | 'allow') {
    const { clock, scheduler } = setup({ workers: 4 });
    const starts: number[] = [];
    const skips: SkipInfo[] = [];
    scheduler.on('skip', (info) => skips.push(info));
    // Each run takes 2.5 minutes; the job is due every minute.
    const job = scheduler
      .every(1)
      .minute()
      .run(
        async () => {
          starts.push((clock.now() - START) / MINUTE);
          await new Promise<void>((resolve) => clock.setTimer(resolve, 2.5 * MINUTE));
        },
        { overlap },
      );
    return { clock, job, starts, skips };
  }

  it("'skip' (default) skips a run due while the previous one runs, and reports it", async () => {
    const { clock, job, starts, skips } = slowJob('skip');
    await clock.advance(7 * MINUTE);
    expect(starts).toEqual([1, 4, 7]);
    expect(skips.map((s) => [(s.scheduledAt.getTime() - START) / MINUTE, s.reason])).toEqual([
      [2, 'overlap'],
      [3, 'overlap'],
      [5, 'overlap'],
      [6, 'overlap'],
    ]);
    expect(skips[0]!.job).toBe(job);
  });

  it("'queue' runs them one after another", async () => {
    const { clock, starts, skips } = slowJob('queue');
    await clock.advance(7 * MINUTE);
    expect(starts).toEqual([1, 3.5, 6]);
    expect(skips).toEqual([]);
  });

  it("'allow' runs them alongside", async () => {
    const { clock, starts } = slowJob('allow');
    await clock.advance(4 * MINUTE);
    expect(starts).toEqual([1, 2, 3, 4]);
  });
});

describe('misfire', () => {
  function jumpy(misfire: 'once' | 'skip' | 'all') {
    const { clock, scheduler } = setup();
    const starts: number[] = [];
    const skips: string[] = [];
    scheduler.on('skip', (info) => skips.push(`${(info.scheduledAt.getTime() - START) / MINUTE} ${info.reason}`));
    scheduler
      .every(1)
      .minute()
      .run(() => void starts.push((clock.now() - START) / MINUTE), { misfire });
    return { clock, starts, skips };
  }

  it("'once' (default) collapses missed occurrences into one late run", async () => {
    const { clock, starts } = jumpy('once');
    await clock.advance(MINUTE);
    clock.stall(9 * MINUTE + 1_000); // the loop is stuck for 9 minutes
    await clock.advance(59_000);
    expect(starts[0]).toBe(1);
    expect(starts).toHaveLength(3); // the minute-1 run, one late run, then the 11-minute run
    expect(starts[1]).toBeGreaterThan(10);
    expect(starts[1]).toBeLessThan(11);
    expect(starts[2]).toBe(11);
  });

  it("'skip' drops missed occurrences and waits for the next one", async () => {
    const { clock, starts, skips } = jumpy('skip');
    await clock.advance(MINUTE);
    clock.stall(9 * MINUTE + 1_000);
    await clock.advance(59_000);
    expect(starts).toEqual([1, 11]);
    expect(skips).toEqual(['2 misfire']);
  });

  it("'all' runs every missed occurrence", async () => {
    const { clock, starts } = jumpy('all');
    await clock.advance(MINUTE);
    clock.stall(9 * MINUTE + 1_000);
    await clock.advance(59_000);
    expect(starts).toHaveLength(11); // 1, then 2..10 late, then 11
    expect(starts.at(-1)).toBe(11);
  });

  it('a run that is merely late (no whole period missed) is not a misfire', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const hold = gate();
    scheduler.after(0, () => hold.promise);
    const starts: number[] = [];
    scheduler
      .every(1)
      .minute()
      .run(() => void starts.push(clock.now() - START), { misfire: 'skip' });
    await clock.advance(MINUTE + 20_000);
    hold.open();
    await clock.advance(0);
    expect(starts).toEqual([MINUTE + 20_000]);
  });
});

describe('jitter and retry inside a job', () => {
  it('jitter delays each run by up to that many ms', async () => {
    const { clock, scheduler } = setup();
    const offsets: number[] = [];
    scheduler
      .every(1)
      .minute()
      .jitter(5_000)
      .run(() => void offsets.push(clock.now() - START));
    await clock.advance(10 * MINUTE + 5_000);
    expect(offsets).toHaveLength(10);
    offsets.forEach((offset, i) => {
      expect(offset).toBeGreaterThanOrEqual((i + 1) * MINUTE);
      expect(offset).toBeLessThan((i + 1) * MINUTE + 5_000);
    });
  });

  it('retries a failed run with backoff; the job counts one run and its final outcome', async () => {
    const { clock, scheduler } = setup();
    const attempts: [number, number][] = [];
    const job = scheduler
      .every(10)
      .minutes()
      .times(1)
      .run(
        (ctx) => {
          attempts.push([ctx.attempt, (clock.now() - START) / 1_000]);
          if (ctx.attempt < 3) throw new Error('flaky');
        },
        { retry: { attempts: 3, delay: 1_000, backoff: 'fixed' } },
      );
    await clock.advance(20 * MINUTE);
    expect(attempts).toEqual([
      [1, 600],
      [2, 601],
      [3, 602],
    ]);
    expect(job.runs).toBe(1);
    expect(job.failures).toBe(0);
  });

  it('a timeout frees the worker and counts as a failure', async () => {
    const { clock, scheduler } = setup();
    const job = scheduler
      .every(1)
      .minute()
      .times(1)
      .run(() => new Promise(() => {}), { timeout: 1_000 });
    await clock.advance(2 * MINUTE);
    expect(job.failures).toBe(1);
    expect(job.running).toBe(false);
    expect(scheduler.running).toBe(0);
  });
});

describe('pause and resume keep a pending occurrence the rule cannot recompute', () => {
  it('a paused at() job still runs at its time after resume', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const job = scheduler.at(START + 10 * MINUTE).run(() => void runs++);
    job.pause();
    await clock.advance(MINUTE);
    job.resume();
    expect(job.nextRunAt).toEqual(new Date(START + 10 * MINUTE));
    await clock.advance(10 * MINUTE);
    expect(runs).toBe(1);
    expect(job.state).toBe('done');
  });

  it('an at() job whose time passed during the pause does not run', async () => {
    const { clock, scheduler } = setup();
    let runs = 0;
    const job = scheduler.at(START + MINUTE).run(() => void runs++);
    job.pause();
    await clock.advance(2 * MINUTE);
    job.resume();
    await clock.advance(MINUTE);
    expect(runs).toBe(0);
    expect(job.state).toBe('done');
  });

  it('exposes its rule', () => {
    const { scheduler } = setup();
    const job = scheduler.cron('0 9 * * MON-FRI').run(() => {});
    expect((job.rule as { expression?: string }).expression).toBe('0 9 * * MON-FRI');
  });
});
