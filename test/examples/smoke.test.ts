import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { lines, program, ROOT, runExample, terminate } from './child.js';

// Each example runs as a child process, the way the README tells people to run it.
describe.concurrent('examples run on their own and exit 0', { timeout: 60_000 }, () => {
  it('many-timers (N = 20,000)', async () => {
    const { code, stdout, stderr } = await runExample('examples/many-timers.ts', { args: ['20000'] });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^scheduled 20,000 reminders in \d+ ms/m);
    expect(stdout).toMatch(/heap: \d+ bytes per reminder/);
    expect(stdout).toMatch(/^cancelled [\d,]+ reminders in \d+ ms; waiting now 0$/m);
    expect(stdout).toMatch(/^memory after cancel: heap \d+ MB/m);
  });

  it('many-timers rejects a bad count', async () => {
    const { code, stderr } = await runExample('examples/many-timers.ts', { args: ['lots'] });
    expect(code).toBe(1);
    expect(stderr).toContain('usage: npx tsx examples/many-timers.ts [count]');
  });

  it('retry-backoff', async () => {
    const { code, stdout } = await runExample('examples/retry-backoff.ts');
    expect(code).toBe(0);
    const out = lines(stdout);
    expect(out.filter((line) => /warming-up: attempt \d \(due/.test(line))).toHaveLength(4);
    expect(out.filter((line) => /retrying in/.test(line)).map((line) => line.replace(/^.*retrying in /, ''))).toEqual([
      '200 ms',
      '200 ms',
      '400 ms',
      '400 ms',
      '600 ms',
      '600 ms',
    ]);
    expect(stdout).toContain('warming-up: succeeded with "200 OK after 4 calls"');
    expect(stdout).toContain('down: gave up after 4 attempts (503 Service Unavailable)');
    expect(stdout).toContain('down: failed (503 Service Unavailable)');
  });

  it('timeout', async () => {
    const { code, stdout } = await runExample('examples/timeout.ts');
    expect(code).toBe(0);
    expect(stdout).toContain('https://slow.example/report: request aborted (TimeoutError)');
    expect(stdout).toContain('slow: timed-out; result rejected with TimeoutError: Task "slow" timed out after 300 ms');
    expect(stdout).toContain('fast: 200 OK from https://fast.example/ping (succeeded)');
    expect(stdout).toContain('stats: {"succeeded":1,"timedOut":1}');
  });

  it('testing-with-manual-clock', async () => {
    const { code, stdout } = await runExample('examples/testing-with-manual-clock.ts');
    expect(code).toBe(0);
    const out = lines(stdout);
    expect(out.filter((line) => line.startsWith('digest for'))).toHaveLength(7);
    expect(out).toContain('digest for 2026-03-07 sent Sun 2026-03-08 09:00 EDT (2026-03-08T13:00:00.000Z)');
    expect(out.at(-1)).toMatch(/^✓ 7 digests, each at 09:00 New York time across the DST change/);
  });

  it('http-server: prints its port, serves, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, program('examples/http-server.ts'), {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', WORKERS: '2' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8');
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.stdout.on('data', (chunk: string) => {
          stdout += chunk;
          const match = /listening on http:\/\/127\.0\.0\.1:(\d+) \(workers: 2\)/.exec(stdout);
          if (match !== null) resolve(Number(match[1]));
        });
        child.on('close', () => reject(new Error(`exited before listening:\n${stdout}`)));
      });
      expect(port).toBeGreaterThan(0);
      const created = await fetch(`http://127.0.0.1:${port}/jobs`, {
        method: 'POST',
        body: JSON.stringify({ type: 'once', in: 0, message: 'hi' }),
      });
      expect(created.status).toBe(201);
      const stats = (await (await fetch(`http://127.0.0.1:${port}/stats`)).json()) as { workers: number };
      expect(stats.workers).toBe(2);
    } finally {
      terminate(child);
    }
    expect(await exited).toBe(0);
    expect(stdout).toContain('SIGTERM: no new connections; waiting for running jobs to finish');
    expect(stdout).toMatch(/bye\n$/);
  });
});
