// A fixture (or the CLI) run as a child process, compiled once per test process: esbuild
// bundles it with what it imports from src/ (packages stay in node_modules)
// into one ES module that plain `node` runs. The same program as
// `node --import tsx <fixture>`, without tsx's start-up in every child: the
// suite spawns dozens of these, and tsx was most of each one's CPU.
// (A fixture that finds files by its own `import.meta.url` must keep tsx.)
import { buildSync } from 'esbuild';
import { existsSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const cache = join(root, 'node_modules', '.cache');
const dir = join(cache, `taskheap-fixtures-${process.pid}`);
// Built once per process: a worker that runs several files (vitest's isolate: false) builds each fixture once.
const built = new Map<string, string>();

/** Whether process `pid` is running. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
// Removed when this process exits; vitest may end its workers with a signal, so the
// directories of processes no longer running are swept here too.
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
for (const name of existsSync(cache) ? readdirSync(cache) : []) {
  const pid = /^taskheap-fixtures-(\d+)$/.exec(name)?.[1];
  if (pid !== undefined && !alive(Number(pid))) rmSync(join(cache, name), { recursive: true, force: true });
}

/** The path of `fixture` (from the repository root, e.g. 'test/fixtures/pg-worker.ts') compiled: `spawn(process.execPath, [compiled(fixture), ...args])`. */
export function compiled(fixture: string): string {
  let out = built.get(fixture);
  if (out === undefined) {
    out = join(dir, fixture.replace(/\.ts$/, '.mjs'));
    buildSync({
      entryPoints: [join(root, fixture)],
      outfile: out,
      bundle: true,
      packages: 'external',
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'silent',
    });
    // Its real path (node_modules may be a symlink, as in a git worktree): what the program's
    // import.meta.url says, so a program that checks it is the main module (`import.meta.url ===
    // pathToFileURL(process.argv[1]).href`, as the examples do) finds that it is.
    out = realpathSync(out);
    built.set(fixture, out);
  }
  return out;
}
