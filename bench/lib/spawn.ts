/**
 * Parent side: runs one workload for one contender in a fresh Node process,
 * so no contender inherits another's heap, timers or JIT state, and one that
 * hangs or blows up cannot take the whole run down with it.
 */
import { spawn } from 'node:child_process';
import type { ChildCommand } from './build.js';
import { RESULT_PREFIX } from './child-runtime.js';

export type Status = 'ok' | 'n/a' | 'timeout' | 'OOM' | 'error' | 'skipped';

export interface Outcome {
  status: Status;
  data?: Record<string, unknown>;
  message?: string;
  /** Wall time of the child process, start-up included. */
  wallMs?: number;
}

/** The error line of an uncaught exception ("CronError: ..."), else the last line of stderr. */
function crashReason(stderr: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const error = lines.find((l) => /^[A-Za-z]*Error\b.*:/.test(l));
  return error === undefined ? (lines.at(-1) ?? 'no output') : `uncaught ${error}`;
}

/** The same explicit heap limit everywhere, so "OOM" means the same thing for every contender. */
export const HEAP_LIMIT_MB = 4096;

const OOM_PATTERN = /heap out of memory|Reached heap limit|Allocation failed|invalid array length/i;
const STDERR_KEEP = 4_000;

/**
 * Runs one workload file (see build.ts) with `params` as JSON in argv[2].
 * By hand: `node --expose-gc --import tsx bench/workloads/<workload>.ts '{"contender":"taskheap","n":10000,"budgetMs":0}'`.
 */
export function runChild(command: ChildCommand, workload: string, params: object, limitMs: number): Promise<Outcome> {
  const file = `${command.dir}${workload}${command.ext}`;
  const args = ['--expose-gc', `--max-old-space-size=${HEAP_LIMIT_MB}`, ...command.nodeArgs, file, JSON.stringify(params)];
  const started = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });

  let result: string | undefined;
  let partial = '';
  let stderr = '';
  // Libraries may log a lot; keep only the result line and the tail of stderr.
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.startsWith(RESULT_PREFIX)) result = line.slice(RESULT_PREFIX.length);
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_KEEP);
  });

  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, limitMs);

  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const wallMs = performance.now() - started;
      if (partial.startsWith(RESULT_PREFIX)) result = partial.slice(RESULT_PREFIX.length);
      if (timedOut) return resolve({ status: 'timeout', message: `killed after ${Math.round(limitMs / 1000)} s`, wallMs });
      if (OOM_PATTERN.test(stderr)) return resolve({ status: 'OOM', message: `heap limit ${HEAP_LIMIT_MB} MB`, wallMs });
      if (result !== undefined) return resolve({ ...(JSON.parse(result) as Outcome), wallMs });
      resolve({ status: 'error', message: `exit ${code ?? signal}: ${crashReason(stderr)}`, wallMs });
    });
  });
}
