import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Scheduler, type Task } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';

type Op =
  | { kind: 'schedule'; delay: number; duration: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'resize'; workers: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('schedule' as const),
      delay: fc.integer({ min: 0, max: 200 }),
      duration: fc.integer({ min: 0, max: 100 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 150 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('resize' as const), workers: fc.integer({ min: 1, max: 4 }) }) },
);

interface ModelTask {
  id: number;
  time: number;
  duration: number;
  state: 'waiting' | 'running' | 'done' | 'cancelled';
  end: number;
  abortRequested: boolean;
}

/**
 * The reference: a sorted list and a discrete-event loop. Tasks start at the
 * earliest moment they are due and a slot is free, earliest due first, ties
 * by scheduling order.
 */
class Model {
  now = 0;
  tasks: ModelTask[] = [];
  starts: [number, number][] = [];
  constructor(public workers: number) {}

  running() {
    return this.tasks.filter((t) => t.state === 'running');
  }

  startDue() {
    const due = this.tasks.filter((t) => t.state === 'waiting' && t.time <= this.now).sort((a, b) => a.time - b.time || a.id - b.id);
    for (const task of due) {
      if (this.running().length >= this.workers) break;
      task.state = 'running';
      task.end = this.now + task.duration;
      this.starts.push([task.id, this.now]);
    }
  }

  advance(ms: number) {
    const target = this.now + ms;
    for (;;) {
      // Completions at the current time free their slots first.
      for (const t of this.running()) if (t.end <= this.now) t.state = 'done';
      this.startDue();
      for (const t of this.running()) if (t.end <= this.now) t.state = 'done';
      if (this.tasks.some((t) => t.state === 'waiting' && t.time <= this.now) && this.running().length < this.workers) continue;
      const ends = this.running().map((t) => t.end);
      const free = this.running().length < this.workers;
      const dues = free ? this.tasks.filter((t) => t.state === 'waiting').map((t) => t.time) : [];
      const next = Math.min(...ends, ...dues);
      if (next > target) break;
      this.now = next;
    }
    this.now = target;
  }
}

describe('scheduler against a reference model', () => {
  it('runs the same tasks, in the same order, at the same virtual times, never above `workers`', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 60 }), async (workers, ops) => {
        const clock = new ManualClock(0);
        const scheduler = new Scheduler({ clock, workers, onError: () => {} });
        const model = new Model(workers);
        const tasks: Task[] = [];
        const modelTasks: ModelTask[] = [];
        const starts: [number, number][] = [];
        let running = 0;
        let overLimit = false;
        for (const step of ops) {
          if (step.kind === 'schedule') {
            const index = tasks.length;
            tasks.push(
              scheduler.after(step.delay, () => {
                starts.push([index, clock.now()]);
                if (++running > scheduler.workers) overLimit = true;
                return new Promise<void>((resolve) =>
                  clock.setTimer(() => {
                    running--;
                    resolve();
                  }, step.duration),
                );
              }),
            );
            const task: ModelTask = {
              id: index,
              time: model.now + step.delay,
              duration: step.duration,
              state: 'waiting',
              end: 0,
              abortRequested: false,
            };
            modelTasks.push(task);
            model.tasks.push(task);
          } else if (step.kind === 'cancel' && tasks.length > 0) {
            const i = step.pick % tasks.length;
            const expected = modelTasks[i]!.state === 'waiting' || (modelTasks[i]!.state === 'running' && !modelTasks[i]!.abortRequested);
            if (modelTasks[i]!.state === 'waiting') modelTasks[i]!.state = 'cancelled';
            else if (modelTasks[i]!.state === 'running') modelTasks[i]!.abortRequested = true;
            expect(tasks[i]!.cancel()).toBe(expected);
          } else if (step.kind === 'advance') {
            await clock.advance(step.ms);
            model.advance(step.ms);
          } else if (step.kind === 'resize') {
            scheduler.workers = step.workers;
            model.workers = step.workers;
            model.startDue();
          }
        }
        await clock.advance(1_000);
        model.advance(1_000);
        expect(starts).toEqual(model.starts);
        expect(overLimit).toBe(false);
        expect(scheduler.size).toBe(0);
      }),
      { numRuns: 300 },
    );
  });
});
