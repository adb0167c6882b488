/**
 * `npm run bench:import [-- --runs=10] [-- --no-build]`
 *
 * What `import` and `require` of each entry point of the package cost, as a
 * user's program pays it: the built package (`npm run build` first, unless
 * `--no-build`) imported by name from a consumer directory (a temporary one
 * whose node_modules links taskheap, croner and luxon), beside croner and
 * luxon in the same run. Each case runs in `--runs` fresh processes (default
 * 10), the cases interleaved round by round so that a machine busy for a
 * moment slows every case alike; each process times its one `import()` or
 * `require()` (Node's own start-up is not counted). Prints a markdown table:
 * median (min–max) ms, and each figure over luxon's.
 *
 * Runs on the Node that runs it; for Node 24:
 * `PATH="$(scripts/ci/install-node.sh 24 ~/.cache/taskheap-ci):$PATH" npm run bench:import`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PEERS = ['croner', 'luxon'] as const;
type Format = 'esm' | 'cjs';

function flag(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);
}

/** The package's JavaScript entry points, by the names a user imports them with. */
function entries(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
  return Object.keys(pkg.exports)
    .filter((key) => !key.endsWith('.json'))
    .map((key) => (key === '.' ? pkg.name : `${pkg.name}${key.slice(1)}`));
}

/** A directory whose node_modules holds taskheap (this checkout) and the peers, as a user's project has them. */
function consumer(): string {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-import-'));
  mkdirSync(join(dir, 'node_modules'));
  writeFileSync(join(dir, 'package.json'), '{"private":true}\n');
  symlinkSync(ROOT, join(dir, 'node_modules', 'taskheap'), 'dir');
  const require = createRequire(join(ROOT, 'package.json'));
  for (const peer of PEERS) symlinkSync(dirname(require.resolve(`${peer}/package.json`)), join(dir, 'node_modules', peer), 'dir');
  return dir;
}

/** What one import cost: wall time, and the CPU time of the process meanwhile (what other load disturbs least). */
interface Sample {
  wall: number;
  cpu: number;
}

/** One fresh process that imports `spec` once and prints how long that took, in ms. */
function once(dir: string, spec: string, format: Format): Sample {
  const load = format === 'esm' ? `await import(${JSON.stringify(spec)})` : `require(${JSON.stringify(spec)})`;
  const code =
    `const t = performance.now(), c = process.cpuUsage(); ${load}; const u = process.cpuUsage(c);` +
    'process.stdout.write(JSON.stringify({ wall: performance.now() - t, cpu: (u.user + u.system) / 1000 }));';
  const args = ['--disable-warning=ExperimentalWarning', ...(format === 'esm' ? ['--input-type=module'] : []), '-e', code];
  const child = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' });
  if (child.status !== 0 || !child.stdout.startsWith('{'))
    throw new Error(`${format} ${spec} failed (exit ${child.status}): ${child.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return JSON.parse(child.stdout) as Sample;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const ms = (value: number) => value.toFixed(1);
const signed = (value: number) => `${value < 0 ? '−' : '+'}${ms(Math.abs(value))}`;

function main(): void {
  const runs = Number(flag('runs') ?? 10);
  if (!Number.isInteger(runs) || runs < 1) throw new RangeError(`--runs must be an integer >= 1, got ${flag('runs')}`);
  if (!process.argv.includes('--no-build')) {
    const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    if (build.status !== 0) throw new Error('npm run build failed');
  }
  const dir = consumer();
  try {
    const specs = [...entries(), ...PEERS];
    const cases = specs.flatMap((spec) => (['esm', 'cjs'] as const).map((format) => ({ spec, format, samples: [] as Sample[] })));
    for (let run = 0; run < runs; run++) for (const c of cases) c.samples.push(once(dir, c.spec, c.format));
    const byCase = new Map(cases.map((c) => [`${c.format} ${c.spec}`, c.samples]));
    const mid = (spec: string, format: Format, what: keyof Sample) => median(byCase.get(`${format} ${spec}`)!.map((s) => s[what]));
    const cell = (spec: string, format: Format) => {
      const walls = byCase.get(`${format} ${spec}`)!.map((s) => s.wall);
      const wall = mid(spec, format, 'wall');
      const range = `${ms(Math.min(...walls))}–${ms(Math.max(...walls))}`;
      return `${ms(wall)} (${range}) | ${(wall / mid('luxon', format, 'wall')).toFixed(2)} | ${ms(mid(spec, format, 'cpu'))}`;
    };
    const lines = [
      `Node ${process.version}, ${runs} fresh processes per cell: the one \`import()\` or \`require()\`, median (min–max) ms of wall time,`,
      "÷ luxon: over luxon's median, CPU: median ms of CPU time.",
      '',
      '| entry point | `import` ms | ÷ luxon | CPU | `require` ms | ÷ luxon | CPU |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...specs.map((spec) => `| \`${spec}\` | ${cell(spec, 'esm')} | ${cell(spec, 'cjs')} |`),
      '',
      `\`taskheap\` over luxon, \`import\`: ${signed(mid('taskheap', 'esm', 'wall') - mid('luxon', 'esm', 'wall'))} ms ` +
        `(CPU ${signed(mid('taskheap', 'esm', 'cpu') - mid('luxon', 'esm', 'cpu'))} ms; target: at most +15 ms on Node 24).`,
    ];
    console.log(lines.join('\n'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();
