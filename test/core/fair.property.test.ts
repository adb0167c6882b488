// Fair shares against a reference model (fast-check), on a ManualClock:
// random tasks of a few groups (weights per group, some tasks in none),
// priorities and due times, runs ended at random, time passing and the pool
// resized. After every step the tasks started so far, in order, are the
// model's, and no worker is free while a task is due (work conservation).
// The model's rule, written out plainly: whenever a worker is free, every
// due task joins its group's line (a task of higher priority, then the
// earlier due, first); a group whose line was empty comes back at the
// virtual time (the pass of the latest start) if its pass is behind it.
// The next start is the head of the group whose head has the highest
// priority, then the lowest pass, then the lowest id; that start sets the
// virtual time to the group's pass if higher, and adds 1 / weight to it.
// Until a task names a group the pool starts in priority, then due order,
// and passes do not move.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { fairOps, Model, type Op } from './fair-model.js';

const GROUPS = ['a', 'b', 'c', undefined] as const;
const opArb = fairOps(GROUPS.length);

async function check(ops: Op[], weights: Record<string, number>, workers: number): Promise<void> {
  const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
  const scheduler = new Scheduler({ clock, workers });
  const model = new Model(workers, { ...weights, '': 1 });
  const started: number[] = [];
  const ends = new Map<number, () => void>();
  const flush = () => clock.advance(0);
  try {
    for (const step of ops) {
      if (step.op === 'add') {
        const group = GROUPS[step.group];
        const due = clock.now() + step.at;
        const slot = { id: 0 };
        const task = scheduler.schedule(
          due,
          (ctx) =>
            new Promise<void>((resolve) => {
              started.push(slot.id);
              ends.set(slot.id, resolve);
              ctx.signal.addEventListener('abort', () => resolve());
            }),
          { priority: step.priority, ...(group === undefined ? {} : { fair: { group, weight: weights[group] } }) },
        );
        slot.id = task.id;
        model.tasks.push({ id: task.id, group: group ?? '', due, priority: step.priority, state: 'waiting' });
        if (group !== undefined) model.on = true;
        await flush();
        model.pump(clock.now());
      } else if (step.op === 'end') {
        const running = model.tasks.filter((t) => t.state === 'running');
        if (running.length === 0) continue;
        const task = running[step.pick % running.length]!;
        ends.get(task.id)!();
        task.state = 'done';
        await flush();
        model.pump(clock.now());
      } else if (step.op === 'tick') {
        // A millisecond at a time: the pool admits what is due at each instant it has a free worker.
        for (let i = 0; i < step.by; i++) {
          await clock.advance(1);
          model.pump(clock.now());
        }
      } else {
        scheduler.workers = step.workers;
        model.workers = step.workers;
        await flush();
        model.pump(clock.now());
      }
      expect(started, JSON.stringify(step)).toEqual(model.started);
      // Work conservation: a free worker means nothing is due and waiting.
      const due = model.tasks.filter((t) => t.state !== 'running' && t.state !== 'done' && t.due <= clock.now());
      if (model.running < model.workers) expect(due, 'a free worker while a task is due').toEqual([]);
    }
  } finally {
    await scheduler.close({ abort: true });
  }
}

/** Tasks that run until the test ends them (`running`, oldest first), their names in start order. */
function heldRuns() {
  const order: string[] = [];
  const running: (() => void)[] = [];
  const run = (name: string) => (ctx: { signal: AbortSignal }) =>
    new Promise<void>((resolve) => {
      order.push(name);
      running.push(resolve);
      ctx.signal.addEventListener('abort', () => resolve());
    });
  return { order, running, run };
}

describe('fair shares against a reference model (fast-check)', () => {
  it('every start is the one the weighted round-robin names, with priorities, due times, ended runs and a resized pool; no worker idles while a task is due', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 5, maxLength: 60 }),
        fc.record({ a: fc.integer({ min: 1, max: 3 }), b: fc.integer({ min: 1, max: 3 }), c: fc.integer({ min: 1, max: 3 }) }),
        fc.integer({ min: 1, max: 3 }),
        (ops, weights, workers) => check(ops, weights, workers),
      ),
      { numRuns: 300 },
    );
  }, 60_000);

  it("a flood of one group shares the pool: nine other groups each start their task before the flood's next", async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock, workers: 1 });
    const { order, running, run } = heldRuns();
    for (let i = 0; i < 100; i++) scheduler.after(0, run('flood'), { fair: { group: 'flood' } });
    await clock.advance(0);
    for (let g = 0; g < 9; g++) scheduler.after(0, run(`small:${g}`), { fair: { group: `small:${g}` } });
    while (order.length < 12) {
      running.shift()!();
      await clock.advance(0);
    }
    // The first flood task started before the others arrived; the flood's next waits for each small group's turn.
    expect(order).toEqual(['flood', ...Array.from({ length: 9 }, (_, g) => `small:${g}`), 'flood', 'flood']);
    await scheduler.close({ abort: true });
  });

  it('weights: a group of weight 2 starts two tasks for each of weight 1; with rate, concurrency, a gated queue and a cancel, every task still runs once', async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock, workers: 1, queues: { jobs: { concurrency: 1 } } });
    const { order, running, run } = heldRuns();
    const heavy = { group: 'heavy', weight: 2 };
    for (let i = 0; i < 6; i++) scheduler.after(0, run(`h${i}`), { fair: heavy, queue: 'jobs' });
    for (let i = 0; i < 3; i++)
      scheduler.after(0, run(`l${i}`), { fair: { group: 'light' }, queue: 'jobs', concurrency: { group: 'l', limit: 1 } });
    const rated = scheduler.after(0, run('r0'), {
      fair: { group: 'rated' },
      queue: 'jobs',
      rate: { group: 'r', limit: 1, interval: '1h' },
    });
    const cancelled = scheduler.after(0, run('gone'), { fair: { group: 'light' }, queue: 'jobs' });
    await clock.advance(0);
    expect(cancelled.cancel()).toBe(true);
    while (running.length > 0) {
      running.shift()!();
      await clock.advance(0);
    }
    expect(order).toEqual(['h0', 'l0', 'r0', 'h1', 'h2', 'l1', 'h3', 'h4', 'l2', 'h5']);
    expect([rated.state, cancelled.state]).toEqual(['succeeded', 'cancelled']);
    await scheduler.close();
  });

  it("a group is per queue: once shares are in use, two queues' tasks without one take turns", async () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00Z'));
    const scheduler = new Scheduler({ clock, workers: 1 });
    const { order, running, run } = heldRuns();
    scheduler.after(0, run('first'), { fair: { group: 'x' } });
    await clock.advance(0);
    for (let i = 0; i < 3; i++) scheduler.after(0, run(`a${i}`), { queue: 'a' });
    for (let i = 0; i < 3; i++) scheduler.after(0, run(`b${i}`), { queue: 'b' });
    while (running.length > 0) {
      running.shift()!();
      await clock.advance(0);
    }
    expect(order).toEqual(['first', 'a0', 'b0', 'a1', 'b1', 'a2', 'b2']);
    await scheduler.close();
  });
});
