// Work given as a function on a scheduler whose store many processes share
// is not stored: each process runs its own copy. It says so once per process,
// as a warning with a code that `--disable-warning` silences. Real child
// processes: the warning is once per process, so the suite's shared workers
// cannot see it reliably.
import { describe, expect, it } from 'vitest';
import { runExample } from '../../examples/child.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
usePostgres((started) => {
  server = started;
});
const freshSchema = schemaNamer('local');

describe('work given as a function on a shared store', () => {
  it('warns once per process, with the code TASKHEAP_LOCAL_WORK, and not on a SQLite store', async () => {
    const { code, stdout, stderr } = await runExample('test/fixtures/local-work.ts', { args: [server.url, freshSchema()] });
    expect([code, stdout]).toEqual([0, 'done\n']);
    const lines = stderr.split('\n');
    const warnings = lines.filter((line) => line.includes('TaskheapWarning'));
    expect(warnings).toHaveLength(1);
    // Not on the SQLite store (one process), whose task came first.
    expect(lines.indexOf(warnings[0]!)).toBeGreaterThan(lines.indexOf('shared store'));
    expect(warnings[0]).toMatch(/\[TASKHEAP_LOCAL_WORK\] TaskheapWarning: A task or job given as a function is not stored/);
  });

  it('is silenced by --disable-warning=TASKHEAP_LOCAL_WORK', async () => {
    const { code, stderr } = await runExample('test/fixtures/local-work.ts', {
      args: [server.url, freshSchema()],
      env: { NODE_OPTIONS: '--disable-warning=TASKHEAP_LOCAL_WORK' },
    });
    expect(code).toBe(0);
    expect(stderr).not.toMatch(/TaskheapWarning/);
  });
});
