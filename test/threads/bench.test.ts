// bench/threads.ts on a tiny input (one round, one grow sample), as a child process: the script runs every
// contender (taskheap, piscina, tinypool, Bree, the main thread) and prints
// its tables (the figures are not checked: this machine is shared).
import { describe, expect, it } from 'vitest';
import { runExample } from '../examples/child.js';

describe('bench/threads.ts', () => {
  it('runs on a tiny input and prints its tables', async () => {
    const { code, stdout, stderr } = await runExample('bench/threads.ts', {
      args: ['--tasks=2', '--ms=5', '--trivial=20', '--rounds=1', '--reps=1'],
      timeout: 300_000,
      tsx: true, // it finds its child and workloads by its own import.meta.url
    });
    expect(code).toBe(0);
    // Every child answered with figures (a failed one prints a "failed" note instead).
    expect(stderr).not.toMatch(/failed/);
    expect(stdout).not.toMatch(/failed/);
    const header = stdout.split('\n').find((line) => line.startsWith('| | '));
    expect(header).toBe('| | taskheap threads | piscina | tinypool | bree | main thread |');
    expect(stdout).toMatch(
      /^\| \(1\) 2 CPU-bound tasks of ~5 ms: wall ms \(lower is better\) \| \d+ \| \d+ \([\d.]+×\) \| \d+ \([\d.]+×\) \| [\d,]+ \([\d.]+×\) \| \d+ \([\d.]+×\) \|$/m,
    );
    expect(stdout).toMatch(/^\| \(2\) trivial tasks: tasks\/s \| [\d,]+ \| [\d,]+ \([\d.]+×\) \|/m);
    expect(stdout).toMatch(
      /^\| \(2\) trivial tasks: CPU per task, all threads, µs \(lower is better\) \| [\d.,]+ \| [\d.,]+ \([\d.]+×\) \|/m,
    );
    expect(stdout).toMatch(/^\| \(4\) shrink \d+ → 1 idle threads: ms until gone \(lower is better\) \| [\d.,]+ \| no run-time resize \|/m);
    expect(stdout).toMatch(/^\| \(2\) trivial tasks at least 0\.8× piscina \| [\d.]+× piscina's \| (met|missed) \|$/m);
    expect(stdout).toMatch(
      /^\| \(3\) 10 ms timers p99 late under 5 ms in threads \| [\d.]+ ms \(main thread: [\d.]+ ms\) \| (met|missed) \|$/m,
    );
    // Only a full run (no flags) records its figures.
    expect(stdout).not.toMatch(/Saved bench\/results/);
  }, 320_000);
});
