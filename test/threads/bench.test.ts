// bench/threads.ts on a tiny input, as a child process: the script runs and
// prints its table (the figures are not checked: this machine is shared).
import { describe, expect, it } from 'vitest';
import { runExample } from '../examples/child.js';

describe('bench/threads.ts', () => {
  it('runs on a tiny input and prints its table', async () => {
    const { code, stdout, stderr } = await runExample('bench/threads.ts', {
      args: ['--tasks=2', '--ms=2', '--trivial=10', '--timers=3'],
      timeout: 60_000,
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\| taskheap threads \(\d+\) \| \d+ \| [\d.]+x \| \d+ \| [\d.]+ \/ [\d.]+ \/ [\d.]+ \|$/m);
    expect(stdout).toMatch(/^\| main thread \| \d+ \| 1\.00x \|/m);
  });
});
