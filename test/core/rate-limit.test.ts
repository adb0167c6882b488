import { describe, expect, it } from 'vitest';
import { type Clock, type Queue, Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { START, gate, setup } from '../helpers.js';

/** Offsets from START of each start, in start order, with a label. */
function recorder(clock: { now(): number }) {
  const starts: [string, number][] = [];
  const task = (label: string) => () => {
    starts.push([label, clock.now() - START]);
  };
  return { starts, task };
}

describe('scheduler-wide rate limit', () => {
  it('starts at most `limit` tasks in any window of `interval`: exact start times', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 3, interval: 1_000 } });
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 8; i++) scheduler.after(0, task(`t${i}`));
    await clock.advance(5_000);
    expect(starts).toEqual([
      ['t0', 0],
      ['t1', 0],
      ['t2', 0],
      ['t3', 1_000],
      ['t4', 1_000],
      ['t5', 1_000],
      ['t6', 2_000],
      ['t7', 2_000],
    ]);
  });

  it('a window that frees between two reads of the clock in one pump still wakes the held tasks', async () => {
    // Found by the rate-limited bot's example on a loaded machine (it exited with its tasks held and no
    // timer armed): the pump found the window full, and by the time it asked when to wake (a later read
    // of the clock) the window had room, which the wake-up ignored. Here every first, second or third
    // read of elapsed time takes a millisecond, as a preempted process sees it.
    const stuck: string[] = [];
    for (const interval of [1, 2, 3, 5]) {
      for (const limit of [1, 2, 3]) {
        for (const every of [1, 2, 3]) {
          const manual = new ManualClock(START);
          let reads = 0;
          const clock: Clock = {
            now: () => manual.now(),
            monotonic: () => {
              if (++reads % every === 0) manual.stall(1);
              return manual.monotonic();
            },
            setTimer: (callback, delay) => manual.setTimer(callback, delay),
            clearTimer: (handle) => manual.clearTimer(handle),
          };
          const scheduler = new Scheduler({ clock, workers: 4, rate: { limit, interval } });
          let ran = 0;
          for (let i = 0; i < 20; i++) scheduler.after(0, () => void ran++);
          for (let step = 0; step < 500 && ran < 20; step++) await manual.advance(1);
          if (ran < 20)
            stuck.push(`${limit} per ${interval} ms, a ms every ${every} reads: ${ran} of 20 ran, ${manual.pendingTimers} timers`);
          await scheduler.close();
        }
      }
    }
    expect(stuck).toEqual([]);
  });

  it('is a sliding window: no burst at a window edge', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 2, interval: '1s' } });
    const { starts, task } = recorder(clock);
    scheduler.after(0, task('a'));
    scheduler.after(900, task('b'));
    scheduler.after(950, task('c'));
    scheduler.after(1_000, task('d'));
    scheduler.after(1_100, task('e'));
    await clock.advance(5_000);
    // a@0 and b@900 fill the window; c waits until a leaves it (1000); d until b leaves (1900); e until c leaves (2000).
    expect(starts).toEqual([
      ['a', 0],
      ['b', 900],
      ['c', 1_000],
      ['d', 1_900],
      ['e', 2_000],
    ]);
  });

  it('records lateness against the due time when a held task finally starts', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 500 } });
    scheduler.after(0, () => {});
    const late = scheduler.after(100, (ctx) => ctx.startedAt.getTime() - ctx.scheduledAt.getTime());
    await clock.advance(1_000);
    expect(await late.result).toBe(400);
    expect(scheduler.stats().lateness.max).toBe(400);
  });

  it('arms one timer, for the instant the window frees (no polling)', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 60_000 } });
    for (let i = 0; i < 100; i++) scheduler.after(0, () => {});
    await clock.advance(0);
    expect(scheduler.stats()).toMatchObject({ waiting: 99, due: 99, running: 0 });
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(59_999);
    expect(scheduler.size).toBe(99);
    await clock.advance(1);
    expect(scheduler.size).toBe(98);
    expect(clock.pendingTimers).toBe(1);
  });

  it('can be changed at run time: waiting tasks are re-evaluated at once', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 1_000 } });
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 6; i++) scheduler.after(0, task(`t${i}`));
    await clock.advance(0);
    expect(starts).toHaveLength(1);
    expect(scheduler.rate).toEqual({ limit: 1, interval: 1_000 });
    scheduler.rate = { limit: 3, interval: '1s' };
    // The start at 0 still counts: two more fit now.
    expect(starts.map(([label]) => label)).toEqual(['t0', 't1', 't2']);
    scheduler.rate = undefined;
    expect(scheduler.rate).toBeUndefined();
    expect(starts).toHaveLength(6);
  });

  it('a lowered limit holds back tasks that would have started', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 10, interval: 1_000 } });
    const { starts, task } = recorder(clock);
    scheduler.after(0, task('a'));
    await clock.advance(10);
    scheduler.rate = { limit: 1, interval: 1_000 };
    scheduler.after(0, task('b'));
    scheduler.after(0, task('c'));
    await clock.advance(3_000);
    expect(starts).toEqual([
      ['a', 0],
      ['b', 1_000],
      ['c', 2_000],
    ]);
  });

  it('windows follow elapsed time: setting the wall clock neither frees nor freezes a bucket', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 10_000 } });
    const elapsed: number[] = [];
    for (let i = 0; i < 3; i++) scheduler.after(0, () => void elapsed.push(clock.monotonic()));
    await clock.advance(0);
    clock.set(clock.now() + 3_600_000); // an hour ahead: no window frees early
    await clock.advance(5_000);
    expect(elapsed).toEqual([0]);
    clock.set(clock.now() - 7_200_000); // two hours back: nothing freezes
    await clock.advance(5_000);
    expect(elapsed).toEqual([0, 10_000]);
    await clock.advance(10_000);
    expect(elapsed).toEqual([0, 10_000, 20_000]);
  });

  it('a larger pool does not lift a rate limit; a smaller one still holds back starts the limit allows', async () => {
    const { clock, scheduler } = setup({ workers: 1, rate: { limit: 2, interval: 1_000 } });
    const hold = gate();
    const { starts } = recorder(clock);
    for (let i = 0; i < 5; i++)
      scheduler.after(0, async () => {
        starts.push([`t${i}`, clock.now() - START]);
        await hold.promise;
      });
    await clock.advance(0);
    expect(starts).toEqual([['t0', 0]]);
    scheduler.workers = 10;
    expect(starts).toEqual([
      ['t0', 0],
      ['t1', 0],
    ]);
    await clock.advance(1_000);
    expect(starts.map(([label]) => label)).toEqual(['t0', 't1', 't2', 't3']);
    hold.open();
    await clock.advance(1_000);
    expect(starts).toEqual([
      ['t0', 0],
      ['t1', 0],
      ['t2', 1_000],
      ['t3', 1_000],
      ['t4', 2_000],
    ]);
  });

  it('a limit removed and set again still counts the starts made in its window', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 3, interval: 1_000 } });
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`a${i}`));
    await clock.advance(0);
    scheduler.rate = undefined;
    scheduler.rate = { limit: 3, interval: '1s' };
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`b${i}`));
    await clock.advance(999);
    // Not 6 starts in one second under a limit of 3: the b's wait for the a's to leave the window.
    expect(starts).toHaveLength(3);
    await clock.advance(1);
    expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual(['a0@0', 'a1@0', 'a2@0', 'b0@1000', 'b1@1000', 'b2@1000']);
  });

  it('starts made while no limit was set count against the next one', async () => {
    for (const first of [undefined, { limit: 1, interval: 1_000 }]) {
      const { clock, scheduler } = setup(first === undefined ? {} : { rate: first });
      const { starts, task } = recorder(clock);
      if (first !== undefined) scheduler.rate = undefined;
      scheduler.after(0, task('a'));
      scheduler.after(0, task('b'));
      await clock.advance(100);
      expect(starts).toHaveLength(2);
      scheduler.rate = { limit: 3, interval: 1_000 };
      for (let i = 0; i < 3; i++) scheduler.after(0, task(`c${i}`));
      await clock.advance(0);
      // Two starts in the window already: one more fits now, the others when a and b leave it.
      expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual(['a@0', 'b@0', 'c0@100']);
      await clock.advance(900);
      expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual(['a@0', 'b@0', 'c0@100', 'c1@1000', 'c2@1000']);
    }
  });

  it('a larger limit with a longer window counts the starts the smaller one no longer held, at their times', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 2, interval: 100 } });
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 6; i++) scheduler.after(0, task(`a${i}`));
    await clock.advance(200);
    // Starts at 0, 0, 100, 100, 200, 200: six in the last 10 s, of which the window (limit 2) holds the last two.
    expect(starts.map(([, at]) => at)).toEqual([0, 0, 100, 100, 200, 200]);
    scheduler.rate = { limit: 6, interval: 10_000 };
    scheduler.after(0, task('b'));
    // The four it no longer held came as fast as 2 per 100 ms let them (tasks were waiting), so they
    // count at 100, 100, 0 and 0: b goes when the two at 0 leave the window, never a seventh start within 10 s.
    await clock.advance(9_799);
    expect(starts).toHaveLength(6);
    await clock.advance(1);
    expect(starts.at(-1)).toEqual(['b', 10_000]);
  });

  it('a larger limit with a longer window counts the starts already made at their times: 1 per 100 ms, then 3 per 1 s', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 100 } });
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 4; i++) scheduler.after(0, task(`a${i}`));
    await clock.advance(300);
    expect(starts.map(([, at]) => at)).toEqual([0, 100, 200, 300]);
    scheduler.rate = { limit: 3, interval: 1_000 };
    scheduler.after(0, task('b'));
    // Starts at 100, 200 and 300 fill the new window: b goes when the one at 100 leaves it (not at 1,200,
    // as if the starts at 100 and 200 had both been made at 200).
    await clock.advance(799);
    expect(starts).toHaveLength(4);
    await clock.advance(1);
    expect(starts.at(-1)).toEqual(['b', 1_100]);
  });

  it('a longer interval with the same limit counts the starts a shorter one set before it had let go of', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 100 } });
    const { starts, task } = recorder(clock);
    scheduler.after(0, task('a0'));
    scheduler.after(0, task('a1'));
    await clock.advance(250);
    expect(starts.map(([, at]) => at)).toEqual([0, 100]);
    // 3 per 100 ms: the starts at 0 and 100 are out of its window.
    scheduler.rate = { limit: 3, interval: 100 };
    // 3 per second: both are in it again, so one more start fits, and the next ones wait for them to leave.
    scheduler.rate = { limit: 3, interval: 1_000 };
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`b${i}`));
    await clock.advance(2_000);
    expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual(['a0@0', 'a1@100', 'b0@250', 'b1@1000', 'b2@1100']);
  });

  it('starts made later than the old limit allowed are taken as made as late as it allowed', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 1, interval: 100 } });
    const { starts, task } = recorder(clock);
    for (const due of [0, 150, 300]) scheduler.after(due, task(`a${due}`));
    await clock.advance(300);
    expect(starts.map(([, at]) => at)).toEqual([0, 150, 300]);
    scheduler.rate = { limit: 3, interval: 1_000 };
    scheduler.after(0, task('b'));
    // The window kept the time of the last start (300) and of the newest it no longer held (150); the one
    // before that came at least 100 ms before 150 (the old limit), so it counts as a start at 50: b waits
    // until 1,050, where the exact count (the start at 0) would let it go at 1,000.
    await clock.advance(749);
    expect(starts).toHaveLength(3);
    await clock.advance(1);
    expect(starts.at(-1)).toEqual(['b', 1_050]);
  });

  it('refuses bad values, naming them, and keeps the old limit', () => {
    const { scheduler } = setup({ rate: { limit: 5, interval: 100 } });
    expect(() => (scheduler.rate = { limit: 0, interval: 100 })).toThrow(/`rate.limit`.*got 0 \(number\)/);
    expect(() => (scheduler.rate = { limit: 1, interval: '1 s' as never })).toThrow(/rate.interval/);
    expect(() => (scheduler.rate = { group: 'x', limit: 1, interval: 1 } as never)).toThrow(/Unknown `rate` option "group"/);
    expect(() => (scheduler.rate = 5 as never)).toThrow(TypeError);
    expect(scheduler.rate).toEqual({ limit: 5, interval: 100 });
    expect(() => setup({ rate: { limit: 1.5, interval: 100 } })).toThrow(/`rate.limit`.*1.5/);
  });
});

describe('rate limit per key', () => {
  it('each key has its own bucket, on top of the scheduler-wide one', async () => {
    const { clock, scheduler } = setup({ rate: { limit: 3, interval: 1_000 } });
    const { starts, task } = recorder(clock);
    const chat = (id: number) => ({ group: `chat:${id}`, limit: 1, interval: 1_000 });
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`a${i}`), { rate: chat(1) });
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`b${i}`), { rate: chat(2) });
    for (let i = 0; i < 3; i++) scheduler.after(0, task(`u${i}`));
    await clock.advance(10_000);
    expect(starts).toEqual([
      ['a0', 0],
      ['b0', 0],
      ['u0', 0],
      ['a1', 1_000],
      ['b1', 1_000],
      ['u1', 1_000],
      ['a2', 2_000],
      ['b2', 2_000],
      ['u2', 2_000],
    ]);
  });

  it('keeps due-time order within a key, even for tasks scheduled out of order', async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    const rate = { group: 'route', limit: 2, interval: 1_000 };
    scheduler.after(30, task('c'), { rate });
    scheduler.after(10, task('a'), { rate });
    scheduler.after(20, task('b'), { rate });
    scheduler.after(20, task('b2'), { rate });
    await clock.advance(5_000);
    expect(starts).toEqual([
      ['a', 10],
      ['b', 20],
      ['b2', 1_010],
      ['c', 1_020],
    ]);
  });

  it('the limit of a key is the one of the most recently scheduled task naming it', async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    for (let i = 0; i < 4; i++) scheduler.after(0, task(`t${i}`), { rate: { group: 'k', limit: 1, interval: 1_000 } });
    await clock.advance(0);
    expect(starts).toHaveLength(1);
    // A task naming the key with a higher limit lifts it for the waiting ones too.
    scheduler.after(0, task('t4'), { rate: { group: 'k', limit: 3, interval: 1_000 } });
    await clock.advance(0);
    expect(starts.map(([label]) => label)).toEqual(['t0', 't1', 't2']);
    await clock.advance(1_000);
    expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual(['t0@0', 't1@0', 't2@0', 't3@1000', 't4@1000']);
  });

  it('a limit given by a later-scheduled task applies before that task is due', async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    scheduler.after(0, task('x1'), { rate: { group: 'k', limit: 1, interval: 1_000 } });
    scheduler.after(0, task('x2'), { rate: { group: 'k', limit: 1, interval: 1_000 } });
    // Scheduled last, due last: its limit (3 a second) is the key's from now on.
    scheduler.after(500, task('y'), { rate: { group: 'k', limit: 3, interval: 1_000 } });
    await clock.advance(600);
    expect(starts).toEqual([
      ['x1', 0],
      ['x2', 0],
      ['y', 500],
    ]);
  });

  it("a key's larger limit with a longer window, and a queue's, count the starts already made at their times", async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    const queue = scheduler.queue('q') as Queue;
    queue.rate = { limit: 1, interval: 100 };
    for (let i = 0; i < 4; i++) {
      scheduler.after(0, task(`k${i}`), { rate: { group: 'k', limit: 1, interval: 100 } });
      scheduler.after(0, task(`q${i}`), { queue: 'q' });
    }
    await clock.advance(300);
    expect(starts.map(([label, at]) => `${label}@${at}`)).toEqual([0, 1, 2, 3].flatMap((i) => [`k${i}@${i * 100}`, `q${i}@${i * 100}`]));
    // 3 per second from 300 on: the starts at 100, 200 and 300 fill the window until 1,100.
    scheduler.after(0, task('k'), { rate: { group: 'k', limit: 3, interval: 1_000 } });
    queue.rate = { limit: 3, interval: '1s' };
    scheduler.after(0, task('q'), { queue: 'q' });
    await clock.advance(799);
    expect(starts).toHaveLength(8);
    await clock.advance(1);
    expect(starts.slice(8)).toEqual([
      ['k', 1_100],
      ['q', 1_100],
    ]);
  });

  it('a key with no waiting work and an expired window keeps no state', async () => {
    const { clock, scheduler } = setup();
    for (let i = 0; i < 5_000; i++) scheduler.after(i % 7, () => {}, { rate: { group: `chat:${i}`, limit: 1, interval: 1_000 } });
    await clock.advance(10);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, succeeded: 5_000 });
    // No timer for any key, and the next task of a key starts at once (its window expired).
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    const again = scheduler.after(0, () => 'ok', { rate: { group: 'chat:1', limit: 1, interval: 1_000 } });
    await clock.advance(0);
    expect(again.state).toBe('succeeded');
  });

  it('async tasks: the limit counts starts, not completions', async () => {
    const { clock, scheduler } = setup();
    const { starts } = recorder(clock);
    const hold = gate();
    const rate = { group: 'k', limit: 2, interval: 100 };
    for (let i = 0; i < 4; i++) {
      scheduler.after(
        0,
        async () => {
          starts.push([`t${i}`, clock.now() - START]);
          await hold.promise;
        },
        { rate },
      );
    }
    await clock.advance(250);
    expect(starts).toEqual([
      ['t0', 0],
      ['t1', 0],
      ['t2', 100],
      ['t3', 100],
    ]);
    expect(scheduler.running).toBe(4);
    hold.open();
  });

  it('a waiting task can be cancelled; the next of its key takes its place', async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    const rate = { group: 'k', limit: 1, interval: 1_000 };
    scheduler.after(0, task('a'), { rate });
    const b = scheduler.after(0, task('b'), { rate });
    scheduler.after(0, task('c'), { rate });
    await clock.advance(100);
    expect(scheduler.stats()).toMatchObject({ waiting: 2, due: 2 });
    expect(b.state).toBe('waiting');
    expect(b.cancel()).toBe(true);
    await expect(b.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(scheduler.stats()).toMatchObject({ waiting: 1, due: 1, cancelled: 1 });
    expect(b.cancel()).toBe(false);
    await clock.advance(2_000);
    expect(starts).toEqual([
      ['a', 0],
      ['c', 1_000],
    ]);
    await scheduler.onIdle();
  });

  it('waitingTasks() lists waiting tasks, earliest first, and close() cancels them', async () => {
    const { clock, scheduler } = setup();
    const rate = { group: 'k', limit: 1, interval: 1_000 };
    const a = scheduler.after(0, () => {}, { rate });
    const b = scheduler.after(5, () => {}, { rate, name: 'b' });
    const c = scheduler.after(10, () => {}, { rate });
    const later = scheduler.after(50_000, () => {});
    await clock.advance(20);
    expect(a.state).toBe('succeeded');
    expect(scheduler.waitingTasks()).toEqual([b, c, later]);
    expect(scheduler.waitingTasks(1)).toEqual([b]);
    expect(scheduler.waitingByName().get('b')).toEqual({ waiting: 1, due: 1 });
    await scheduler.close();
    expect([b.state, c.state, later.state]).toEqual(['cancelled', 'cancelled', 'cancelled']);
    await expect(b.result).rejects.toMatchObject({ code: 'ERR_SCHEDULER_CLOSED' });
    expect(scheduler.stats()).toMatchObject({ waiting: 0, due: 0 });
  });

  it('maxWaiting counts waiting tasks', async () => {
    const { clock, scheduler } = setup({ maxWaiting: 3 });
    const rate = { group: 'k', limit: 1, interval: 1_000 };
    for (let i = 0; i < 3; i++) scheduler.after(0, () => {}, { rate });
    await clock.advance(0);
    // One started; two wait for the bucket and still count.
    expect(scheduler.size).toBe(2);
    scheduler.after(0, () => {});
    expect(() => scheduler.after(0, () => {})).toThrow(/3 tasks are already waiting/);
  });

  it('jobs take a rate group: a job held past its next occurrence follows its misfire policy', async () => {
    const { clock, scheduler } = setup();
    const { starts, task } = recorder(clock);
    const job = scheduler
      .every(100)
      .milliseconds()
      .run(task('j'), { rate: { group: 'api', limit: 1, interval: 250 } });
    scheduler.after(0, task('other'), { rate: { group: 'api', limit: 1, interval: 250 } });
    await clock.advance(1_000);
    job.cancel();
    // 'other' at 0; the job's run due at 100 waits to 250; the one due at 300 to 500; and so on,
    // each late run collapsing the occurrences it missed (misfire 'once').
    expect(starts).toEqual([
      ['other', 0],
      ['j', 250],
      ['j', 500],
      ['j', 750],
      ['j', 1_000],
    ]);
    expect(job.runs).toBe(4);
  });

  it('bad options throw at the call, naming the value, and schedule nothing', async () => {
    const { clock, scheduler } = setup();
    const fn = () => {};
    const { starts, task } = recorder(clock);
    scheduler.after(0, task('a'), { rate: { group: 'k', limit: 1, interval: 1_000 }, serial: 's' });
    scheduler.after(0, task('b'), { rate: { group: 'k', limit: 1, interval: 1_000 }, serial: 's' });
    expect(() => scheduler.after(0, fn, { rate: { limit: 1, interval: 1 } as never })).toThrow(
      /`rate.group` to be a string, got undefined/,
    );
    expect(() => scheduler.after(0, fn, { rate: { group: '', limit: 1, interval: 1 } })).toThrow(/`rate.group`.*""/);
    expect(() => scheduler.after(0, fn, { rate: { group: 'k', limit: 2e6, interval: 1 } })).toThrow(/`rate.limit`.*2000000/);
    expect(() => scheduler.after(0, fn, { rate: { group: 'k', limit: 1, interval: '2d' } })).toThrow(/`rate.interval`.*at most a day/);
    expect(() => scheduler.after(0, fn, { rate: { group: 'k', limit: 1, interval: 1, burst: 2 } as never })).toThrow(
      /Unknown `rate` option "burst"/,
    );
    expect(() => scheduler.after(0, fn, { serial: 42 as never })).toThrow(/`serial` to be a string, got 42/);
    expect(() => scheduler.after(0, fn, { serial: 'x'.repeat(513) })).toThrow(/`serial` to be 1 to 512/);
    expect(() => scheduler.after(0, fn, { priority: 1.5 })).toThrow(/`priority`.*1.5/);
    expect(() => scheduler.after(0, fn, { priority: 2 ** 31 })).toThrow(/`priority`.*2147483648/);
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fn, { priority: 'high' as never }),
    ).toThrow(/`priority`.*"high"/);
    expect(() =>
      scheduler
        .every(1)
        .seconds()
        .run(fn, { rate: { group: 'k', limit: -1, interval: 1 } }),
    ).toThrow(/`rate.limit`.*-1/);
    expect(scheduler.size).toBe(2);
    expect(scheduler.jobs()).toEqual([]);
    // The key's limit is still the one of the last task accepted.
    await clock.advance(2_000);
    expect(starts).toEqual([
      ['a', 0],
      ['b', 1_000],
    ]);
  });
});
