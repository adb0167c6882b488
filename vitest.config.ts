import { defineConfig } from 'vitest/config';

/**
 * Files that only compute in memory (a ManualClock, no server, file, child
 * process, browser, fake timers or memory measurement): they share their
 * workers' module state (`isolate: false`), so src/ and vitest are imported
 * once per worker rather than once per file, which was most of each file's
 * CPU (measured on these 26 files: 55 s of CPU isolated, 30 s shared). A file
 * here must leave nothing behind (listeners, spies, globals): one that does
 * belongs in the isolated project. test/core/time.test.ts (fake timers, a
 * child process), memory.test.ts and flow-memory.test.ts (they measure the
 * heap) stay isolated.
 */
const SHARED = [
  'test/core/!(time|memory|flow-memory).test.ts',
  'test/rules/**/*.test.ts',
  'test/jobs/**/*.test.ts',
  'test/flows/**/*.test.ts',
];

export default defineConfig({
  test: {
    // A bound for a test that hangs, not a speed check: CPU-bound tests take seconds on an idle
    // 2-core machine and many times that under load (three files at once, or the stress script).
    testTimeout: 60_000,
    // The same for hooks (a server started, a database created), whose default of 10 s a loaded machine exceeds.
    hookTimeout: 60_000,
    // Most of the suite waits (on PostgreSQL, child processes, browsers, timers) rather than
    // computes: three files at once on two cores, where vitest's default would run one.
    maxWorkers: 3,
    // expect.poll() waits for what a real browser or server does next (the dashboard test):
    // its default second is too short on a loaded 2-core machine; a test's own timeout still bounds it.
    expect: { poll: { timeout: 15_000 } },
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: SHARED,
          pool: 'threads',
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'isolated',
          include: ['test/**/*.test.ts'],
          exclude: SHARED,
          pool: 'forks',
          // One PostgreSQL server for the run; each file gets a database of its own on it.
          globalSetup: ['test/global-postgres.ts'],
        },
      },
    ],
  },
});
