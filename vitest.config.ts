import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/sequencer.js';

/**
 * Files that only compute in memory (a ManualClock, no server, file, child
 * process or browser): they run in worker threads that share their modules
 * (`isolate: false`).
 */
const IN_MEMORY = [
  'test/core/!(time|memory|limits-memory).test.ts',
  'test/rules/**/*.test.ts',
  'test/jobs/**/*.test.ts',
  'test/flows/**/*.test.ts',
];

/**
 * Files that change what the process has (fake timers, the environment, V8
 * flags) or measure its heap: a process of their own each.
 */
const ALONE = [
  'test/core/time.test.ts',
  'test/core/memory.test.ts',
  'test/core/limits-memory.test.ts',
  'test/ops/counts.test.ts',
  'test/binaries.test.ts',
];

export default defineConfig({
  test: {
    // A bound for a test that hangs, not a speed check: CPU-bound tests take seconds on an idle
    // 2-core machine and many times that under load (three files at once, or the stress script).
    testTimeout: 60_000,
    // The same for hooks (a server started, a database created), whose default of 10 s a loaded machine exceeds.
    hookTimeout: 60_000,
    // Most of the suite waits (on PostgreSQL, child processes, browsers, timers) rather than
    // computes: five files at once on two cores, where vitest's default would run one. On the idle
    // 2-core machine (2026-11-24): 3 at once took 141 s, 4 took 117 s, 5 took 112 s, 6 took 106 s,
    // all with about 122 s of CPU; past 5 the gain is small and each file's share of a loaded
    // machine smaller still. Projects take this limit too (the CLI's --maxWorkers does not reach them).
    maxWorkers: 5,
    // Longest files first, by the durations committed in test/durations.json where vitest has
    // cached none (a fresh checkout): see test/sequencer.ts.
    sequence: { sequencer: LongestFirst },
    // expect.poll() waits for what a real browser or server does next (the dashboard test):
    // its default second is too short on a loaded 2-core machine; a test's own timeout still bounds it.
    expect: { poll: { timeout: 15_000 } },
    // Every project but ALONE shares modules between the files a worker runs (`isolate: false`):
    // src/, vitest and the helpers are imported once per worker instead of once per file, which
    // was about a second of CPU per file (the worker's imports and the main process serving them).
    // A file there must leave nothing behind (listeners, spies, globals, open handles): one that
    // cannot belongs in ALONE.
    projects: [
      {
        extends: true,
        // Forks under Deno (scripts/ci/runtimes.sh): its worker_threads lack parentPort.removeAllListeners(),
        // which the threads pool calls when it tears a worker down (an unhandled rejection that fails the run).
        test: { name: 'in-memory', include: IN_MEMORY, pool: process.versions.deno === undefined ? 'threads' : 'forks', isolate: false },
      },
      {
        extends: true,
        test: { name: 'alone', include: ALONE, pool: 'forks', isolate: true },
      },
      {
        extends: true,
        test: {
          name: 'real',
          include: ['test/**/*.test.ts'],
          exclude: [...IN_MEMORY, ...ALONE],
          pool: 'forks',
          isolate: false,
          // One PostgreSQL server for the run; each file gets a database of its own on it.
          globalSetup: ['test/global-postgres.ts'],
        },
      },
    ],
  },
});
