// Writes test/durations.json from the durations vitest cached on the last
// `npm test` (node_modules/.vite/vitest/*/results.json): what the sequencer
// (test/sequencer.ts) orders a fresh checkout's first run by. Run it after a
// full run on the idle machine when files were added or their times changed
// much; rounded to 100 ms so that small changes do not churn the file.
//
// Usage: node scripts/durations.mjs
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const cacheDir = join(root, 'node_modules/.vite/vitest');
const durations = {};
for (const dir of existsSync(cacheDir) ? readdirSync(cacheDir) : []) {
  const file = join(cacheDir, dir, 'results.json');
  if (!existsSync(file)) continue;
  for (const [key, { duration }] of JSON.parse(readFileSync(file, 'utf8')).results) {
    const [, path] = key.split(':');
    if (existsSync(join(root, path))) durations[key] = Math.round(duration / 100) * 100;
  }
}
if (Object.keys(durations).length === 0) {
  console.error('durations: no cached results; run `npm test` first');
  process.exit(1);
}
const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(join(root, 'test/durations.json'), `${JSON.stringify(sorted, null, 2)}\n`);
console.log(`durations: ${Object.keys(sorted).length} files written to test/durations.json`);
