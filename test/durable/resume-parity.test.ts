// Resuming a paused job is the same in memory and in a store (issue 25, "One
// word per concept"): occurrences that fell in the pause are not run, whatever
// the misfire policy (it is for downtime, not for a pause), the occurrence
// that was next when paused stands if it is still ahead, and `nextRunAt` after
// a resume is never in the past (nor now). One script, a ManualClock, and the
// same expected runs for an in-memory job and a stored job on a real SQLite file.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler, type MisfirePolicy } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';

const START = Date.UTC(2030, 0, 1);
const MIN = 60_000;

/** One paused-and-resumed job, seen the same way on both sides. */
interface Side {
  /** When each run was due (`ctx.scheduledAt`), in order. */
  runs: number[];
  nextRunAt(): Promise<number | undefined>;
  pause(): Promise<boolean>;
  resume(): Promise<boolean>;
  /** When each occurrence the scheduler ever made was due (a stored job's rows; the runs in memory). */
  occurrences(): Promise<number[]>;
  close(): Promise<void>;
}

async function memory(clock: ManualClock, misfire: MisfirePolicy): Promise<Side> {
  const scheduler = new Scheduler({ clock });
  const runs: number[] = [];
  const job = scheduler
    .every(1)
    .minutes()
    .run((ctx) => void runs.push(ctx.scheduledAt.getTime()), { misfire });
  return {
    runs,
    nextRunAt: async () => job.nextRunAt?.getTime(),
    pause: async () => job.pause(),
    resume: async () => job.resume(),
    occurrences: async () => [...runs],
    close: () => scheduler.close(),
  };
}

async function stored(clock: ManualClock, misfire: MisfirePolicy): Promise<Side> {
  const path = join(mkdtempSync(join(tmpdir(), 'taskheap-resume-')), 'store.db');
  const scheduler = new Scheduler({ clock, store: sqliteStore(path) });
  const runs: number[] = [];
  scheduler.define('tick', (ctx) => void runs.push(ctx.scheduledAt.getTime()));
  await scheduler.start();
  await scheduler.every(1).minutes().run('tick', { key: 'tick', misfire });
  return {
    runs,
    nextRunAt: async () => (await scheduler.getJob('tick'))?.nextRunAt?.getTime(),
    pause: () => scheduler.pauseJob('tick'),
    resume: () => scheduler.resumeJob('tick'),
    occurrences: async () => (await scheduler.listTasks({ jobKey: 'tick' })).map((task) => task.runAt.getTime()),
    close: () => scheduler.close(),
  };
}

/** A real turn for the store's I/O, the ManualClock's due timers fired. */
async function turn(clock: ManualClock): Promise<void> {
  await clock.advance(0);
  await new Promise((resolve) => setTimeout(resolve, 5));
  await clock.advance(0);
}

/** Moves the clock to `at` in steps, giving the store its turns. */
async function advanceTo(clock: ManualClock, at: number): Promise<void> {
  while (clock.now() < at) {
    await clock.advance(Math.min(15_000, at - clock.now()));
    await turn(clock);
  }
}

/** Polls (bounded: 30 s, for a loaded machine) until `side` has run exactly `expected`; fails naming what it saw. */
async function ranExactly(clock: ManualClock, side: Side, expected: number[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (side.runs.length < expected.length && Date.now() < deadline) await turn(clock);
  // A few more turns: a run that should not happen has its chance to.
  for (let i = 0; i < 5; i++) await turn(clock);
  expect(side.runs.map((at) => (at - START) / MIN)).toEqual(expected.map((at) => (at - START) / MIN));
}

const SIDES = { memory, sqlite: stored };

describe.each(['once', 'all'] as const)('resume with misfire %s', (misfire) => {
  it.each(Object.keys(SIDES) as (keyof typeof SIDES)[])(
    '%s: the pause’s occurrences are skipped, the next one stands if still ahead, nextRunAt is never in the past',
    async (kind) => {
      const clock = new ManualClock(START);
      const side = await SIDES[kind](clock, misfire);
      await advanceTo(clock, START + MIN);
      await ranExactly(clock, side, [START + MIN]);
      expect(await side.nextRunAt()).toBe(START + 2 * MIN);

      // A long pause: the occurrences at 2, 3 and 4 minutes fall in it.
      expect(await side.pause()).toBe(true);
      expect(await side.pause()).toBe(false);
      await advanceTo(clock, START + 4.5 * MIN);
      await ranExactly(clock, side, [START + MIN]);
      expect(await side.resume()).toBe(true);
      expect(await side.resume()).toBe(false);
      const afterLong = (await side.nextRunAt())!;
      expect(afterLong).toBeGreaterThan(clock.now());
      expect(afterLong).toBe(START + 5 * MIN);
      await advanceTo(clock, START + 6.5 * MIN);
      await ranExactly(clock, side, [START + MIN, START + 5 * MIN, START + 6 * MIN]);

      // A short pause, over before the next occurrence: that occurrence stands.
      expect(await side.pause()).toBe(true);
      await advanceTo(clock, START + 6.75 * MIN);
      expect(await side.resume()).toBe(true);
      expect(await side.nextRunAt()).toBe(START + 7 * MIN);
      await advanceTo(clock, START + 7.5 * MIN);
      await ranExactly(clock, side, [START + MIN, START + 5 * MIN, START + 6 * MIN, START + 7 * MIN]);

      // Resumed exactly at the time of the occurrence that was next: it is not "ahead", so the next one after now.
      expect(await side.pause()).toBe(true);
      await advanceTo(clock, START + 8 * MIN);
      expect(await side.resume()).toBe(true);
      expect(await side.nextRunAt()).toBe(START + 9 * MIN);
      await advanceTo(clock, START + 9.5 * MIN);
      const expected = [1, 5, 6, 7, 9].map((minutes) => START + minutes * MIN);
      await ranExactly(clock, side, expected);
      // Nothing that fell in a pause was ever made (a stored job inserted no row for it).
      expect(await side.occurrences()).toEqual(expected);
      await side.close();
    },
    60_000,
  );
});
