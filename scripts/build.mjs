// `npm run build`: dist/ as the package ships it.
//
// - Types: tsc writes the declarations (stripInternal, with declaration maps)
//   file by file, as src/ is laid out: the .d.ts files are what consumers'
//   compilers read, and their layout is what test/declarations.test.ts and the
//   package check look at.
// - JavaScript: esbuild bundles each entry point of package.json's "exports"
//   (and the CLI) into one file, with the code entry points share in chunks
//   (dist/chunks/), and what loads on first use (a dynamic import) in chunks of
//   its own. Why bundled: Node loads an ES module graph one module at a time,
//   and the root entry's ~55 modules cost about 35 ms on top of their code
//   (bench/import.ts). One module per entry point keeps one copy of every class
//   (an error thrown by the store is `instanceof` the class the root exports).
//   Packages (luxon, tinyqueue, the optional drivers) stay imports.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../', import.meta.url));
process.chdir(root);
rmSync('dist', { recursive: true, force: true });

execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json', '--emitDeclarationOnly'], {
  stdio: 'inherit',
});

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
/** src/ files of the entry points: "./dist/sqlite.js" is built from src/sqlite.ts. */
const sources = [
  ...Object.values(pkg.exports).flatMap((target) => (typeof target === 'object' ? [target.import] : [])),
  pkg.bin.taskheap,
  // Loaded on first use by path (core/load-on-use.ts): the runner, for a store that brings none of its own.
  './dist/durable/runner.js',
].map((file) => file.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));

await build({
  entryPoints: sources,
  outdir: 'dist',
  outbase: 'src',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: true,
  logLevel: 'warning',
});
