// Worker processes for the tests across real processes (limits, flows, serial groups): a
// fixture script (compiled: ../compiled-fixture.ts), which prints "ready" once loaded, starts
// claiming on a first line on stdin and closes on a second. Every process
// still alive after a test is SIGKILLed.
import { spawn } from 'node:child_process';
import { afterEach } from 'vitest';
import { compiled } from '../compiled-fixture.js';

export interface WorkerProcess {
  ready: Promise<void>;
  /** Sends the next line: the first starts claiming, the second closes. */
  next: () => void;
  /** Resolves with its output once it exits with 0; rejects otherwise. */
  done: Promise<string>;
  kill: () => void;
  pid: number;
}

/** Registers the clean-up and returns the spawner: `fixture` (a path from the repository root) with `args`. */
export function workerProcesses(): (fixture: string, args: readonly string[]) => WorkerProcess {
  const children: { kill: (signal: NodeJS.Signals) => void; exited: Promise<unknown> }[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill('SIGKILL');
      await child.exited;
    }
  });
  return (fixture, args) => {
    const child = spawn(process.execPath, [compiled(fixture), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    children.push({ kill: (signal) => child.kill(signal), exited });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready\n')) resolve();
      });
      void exited.then(() => reject(new Error(`worker exited early: ${out}`)));
    });
    const done = exited.then((code) => {
      if (code !== 0) throw new Error(`worker exited with ${code}: ${out}`);
      return out;
    });
    done.catch(() => {});
    return { ready, next: () => child.stdin.write('next\n'), done, kill: () => child.kill('SIGKILL'), pid: child.pid! };
  };
}
