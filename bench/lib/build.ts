/**
 * Transpiles bench/ and src/ to plain JavaScript once per run, so each child
 * process starts as `node file.js` instead of loading the tsx loader (about
 * half a second per child, and a run starts dozens of them). The code that
 * runs is what tsx would have produced: both use esbuild, file by file.
 *
 * The output keeps the repository layout under node_modules/.cache, where
 * git does not look and package imports (croner, luxon...) still resolve.
 */
import { rmSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BUILD_DIR = `${ROOT}node_modules/.cache/taskheap-bench/`;

async function tsFiles(dir: string): Promise<string[]> {
  const entries = await readdir(`${ROOT}${dir}`, { recursive: true });
  return entries.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')).map((f) => `${ROOT}${dir}/${f}`);
}

/** How to start a workload child: `node [...nodeArgs] <dir><workload><ext> <json>`. */
export interface ChildCommand {
  dir: string;
  ext: '.js' | '.ts';
  nodeArgs: string[];
}

/**
 * Builds once; if that fails (a source file mid-edit by someone else, say),
 * falls back to running the TypeScript through tsx, which is only slower.
 */
export async function buildForChildren(): Promise<ChildCommand> {
  try {
    await transpile();
    return { dir: `${BUILD_DIR}bench/workloads/`, ext: '.js', nodeArgs: [] };
  } catch (error) {
    process.stderr.write(`bench: transpiling failed, children use tsx instead (${String(error).split('\n')[0]})\n`);
    return { dir: `${ROOT}bench/workloads/`, ext: '.ts', nodeArgs: ['--import', 'tsx'] };
  }
}

async function transpile(): Promise<void> {
  rmSync(BUILD_DIR, { recursive: true, force: true }); // no stale file from a deleted source
  await build({
    entryPoints: [...(await tsFiles('bench')), ...(await tsFiles('src'))],
    outdir: BUILD_DIR,
    outbase: ROOT,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'silent',
  });
}
