import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { compiled } from '../compiled-fixture.js';

/** The repository root: examples are run from there, as the README shows. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit, in ms. */
  ms: number;
}

/**
 * The `node` arguments that run `file` (from the repository root) as a
 * program: by default the file bundled once per test file by
 * ../compiled-fixture.ts (the program `npx tsx <file>` runs, without tsx's
 * start-up, about a second of CPU, in every child); with `tsx`, `--import tsx
 * <file>` itself, for a program that finds other files by its own
 * `import.meta.url` (a worker module beside it). Under Bun or Deno (the
 * runtimes run of .ci/run: scripts/ci/runtimes.sh) the child is that runtime,
 * running the TypeScript file itself, as their users would.
 */
export function program(file: string, { tsx = false }: { tsx?: boolean } = {}): string[] {
  if (process.versions.bun !== undefined) return [file];
  // --sloppy-imports: the examples import src/*.ts as '.js', the way tsc wants it.
  if (process.versions.deno !== undefined) return ['run', '-A', '--sloppy-imports', file];
  return tsx ? ['--import', 'tsx', file] : [compiled(file)];
}

/**
 * Runs `file` (see program()) with `args` from the repository root, feeding
 * `input` to stdin (then closing it). Rejects if it outlives `timeout`: by
 * default 30 s, as starting a child can take seconds on a loaded 2-core
 * machine running several of these at once (a test using it allows 60 s).
 */
export function runExample(
  file: string,
  {
    args = [],
    input,
    env = {},
    timeout = 30_000,
    tsx = false,
  }: { args?: string[]; input?: string; env?: Record<string, string>; timeout?: number; tsx?: boolean } = {},
): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [...program(file, { tsx }), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not exit within ${timeout} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, timeout);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started });
    });
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

/**
 * Sends SIGTERM to `child`, unless it has exited. Through process.kill(), not
 * child.kill(): under Deno (scripts/ci/runtimes.sh) the latter reports the
 * child killed by the signal even when it handled it and exited 0.
 */
export function terminate(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.pid, 'SIGTERM');
  } catch (error) {
    // It exited between the look and the kill: nothing to stop.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Lines of output, without the trailing empty one. */
export function lines(text: string): string[] {
  return text.split('\n').filter((line, index, all) => line !== '' || index < all.length - 1);
}
