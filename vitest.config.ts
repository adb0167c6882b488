import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A bound for a test that hangs, not a speed check: CPU-bound tests take seconds on an idle
    // 2-core machine and many times that under load (three files at once, or the stress script).
    testTimeout: 60_000,
    // The same for hooks (a server started, a database created), whose default of 10 s a loaded machine exceeds.
    hookTimeout: 60_000,
    pool: 'forks',
    // Most of the suite waits (on PostgreSQL, child processes, browsers, timers) rather than
    // computes: three files at once on two cores, where vitest's default would run one.
    maxWorkers: 3,
    // One PostgreSQL server for the run; each file gets a database of its own on it.
    globalSetup: ['test/global-postgres.ts'],
    // expect.poll() waits for what a real browser or server does next (the dashboard test):
    // its default second is too short on a loaded 2-core machine; a test's own timeout still bounds it.
    expect: { poll: { timeout: 15_000 } },
  },
});
