// What `import { Scheduler } from 'taskheap'` loads: the in-memory core and
// recurring jobs, not the durable runner (a store's entry point brings it)
// nor the threads' code (loaded by the first module task). src/ is
// transpiled file by file (one module each: dist/ bundles them, which would
// hide what each entry loads) and run in a fresh `node` whose loader hook
// records every module loaded.
// Which modules, never how long: the figures are bench/import.ts's.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** What the root entry may load of durable/, flows/ and threads/: the error classes it exports, and what they and the options' checks need. */
const ALLOWED = new Set([
  'durable/errors.js',
  'durable/expiries.js', // LeaseExpiredError's text
  'durable/store.js', // SchemaVersionError's version; the rest of it is types
  'threads/errors.js',
  'threads/options.js', // the options `threads` and `threadOptions`, checked by the constructor
  'threads/job.js',
  'threads/pool.js', // its size, live; its threads' code (thread.ts) loads with the first module task
  // Flows: `flows.add()` checks a flow at the call, synchronously (the graph loads with the first flow);
  // `flows.links()` its limit.
  'durable/flow-graph.js',
  'flows/memory-check.js',
  'durable/links.js',
]);

let dir: string;

beforeAll(() => {
  // Under node_modules, so that the packages src/ imports (luxon, tinyqueue, better-sqlite3) resolve; the real path, as the hook sees it.
  const cache = join(fileURLToPath(new URL('../node_modules/.cache/', import.meta.url)));
  mkdirSync(cache, { recursive: true });
  dir = realpathSync(mkdtempSync(join(cache, 'taskheap-import-cost-')));
  const entryPoints = (readdirSync(SRC, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => join(SRC, f));
  buildSync({ entryPoints, outdir: join(dir, 'src'), outbase: SRC, format: 'esm', platform: 'node', target: 'node20', logLevel: 'error' });
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
  writeFileSync(
    join(dir, 'hook.js'),
    "import { appendFileSync } from 'node:fs';\n" +
      'export async function load(url, context, next) {\n' +
      "  appendFileSync(process.env.LOADED, url + '\\n');\n" +
      '  return next(url, context);\n' +
      '}\n',
  );
  writeFileSync(join(dir, 'register.js'), "import { register } from 'node:module';\nregister('./hook.js', import.meta.url);\n");
  writeFileSync(join(dir, 'task.js'), 'export default (_ctx, n) => n * 2;\n');
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `code` (an ES module in `dir`) in a fresh node; the modules it loaded, src/ ones relative to src/. */
function loaded(code: string): string[] {
  const script = join(dir, `run-${Math.random().toString(36).slice(2)}.js`);
  const list = `${script}.loaded`;
  writeFileSync(script, code);
  writeFileSync(list, '');
  const child = spawnSync(process.execPath, ['--import', join(dir, 'register.js'), script], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    env: { ...process.env, LOADED: list, NODE_PATH: '' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(child.stderr.replace(/.*ExperimentalWarning.*\n?|.*--trace-warnings.*\n?/g, '')).toBe('');
  expect(child.status).toBe(0);
  const src = `file://${join(dir, 'src')}/`;
  return readFileSync(list, 'utf8')
    .trim()
    .split('\n')
    .map((url) => (url.startsWith(src) ? url.slice(src.length) : url));
}

/** Script code: `luxonLoaded()`, whether luxon is in the require cache (it is required, not imported). */
const LUXON_LOADED = `const { createRequire } = await import('node:module');
      const luxonLoaded = () => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/node_modules/luxon/'));`;

const forbidden = (modules: string[]) =>
  modules.filter(
    (m) =>
      ((m.startsWith('durable/') || m.startsWith('threads/') || m.startsWith('flows/')) && !ALLOWED.has(m)) ||
      m === 'node:crypto' ||
      m === 'node:worker_threads',
  );

describe('the cost of importing taskheap', () => {
  it('the root entry loads neither the durable runner nor the threads, and a scheduler without a store that runs tasks and jobs loads none either', () => {
    const modules = loaded(`
      import { Scheduler } from './src/index.js';
      const scheduler = new Scheduler();
      const task = scheduler.after(0, () => 42);
      const job = scheduler.at(Date.now()).run(() => {});
      if ((await task.result) !== 42) throw new Error('task');
      await scheduler.onIdle();
      scheduler.every().day().at('10:30').timezone('Europe/Paris').run(() => {});
      scheduler.every(2).days().timezone('Asia/Tokyo').run(() => {});
      await scheduler.close();
      if (job.state !== 'done') throw new Error(job.state);
      ${LUXON_LOADED}
      if (luxonLoaded()) throw new Error('luxon loaded');
    `);
    expect(modules).toContain('scheduler.js');
    expect(forbidden(modules)).toEqual([]);
    // Nor luxon, for daily jobs in a zone either (checked in the script too: it is required, which the
    // hook does not see): the rules read zones from Intl.
    expect(modules.filter((m) => m.includes('/node_modules/luxon/'))).toEqual([]);
  });

  it('luxon loads with the first call that needs it: an ISO-8601 time', () => {
    const modules = loaded(`
      import { Scheduler } from './src/index.js';
      const scheduler = new Scheduler();
      const task = scheduler.schedule('2030-01-01T00:00:00+01:00', () => {});
      if (task.runAt.getTime() !== Date.UTC(2029, 11, 31, 23)) throw new Error(task.runAt.toISOString());
      await scheduler.close();
      ${LUXON_LOADED}
      if (!luxonLoaded()) throw new Error('luxon not loaded');
    `);
    expect(modules).toContain('core/load-on-use.js');
  });

  it("in-memory flows' code loads with the first flow, which runs", () => {
    const modules = loaded(`
      import { Scheduler } from './src/index.js';
      const scheduler = new Scheduler();
      const flow = await scheduler.flows.add({ tasks: { a: { handler: () => 20 }, b: { handler: async (ctx) => (await ctx.dependencies())[0].result + 1, after: ['a'] } } });
      const b = await scheduler.waitFor(flow.tasks.b.id);
      await scheduler.close();
      if (b.result !== 21) throw new Error(JSON.stringify(b));
    `);
    expect(modules).toEqual(expect.arrayContaining(['flows/memory-graph.js', 'flows/memory-node.js', 'durable/flows.js']));
  });

  it('the check sees them: a store brings the durable runner, a module task loads the threads', () => {
    const modules = loaded(`
      import { Scheduler } from './src/index.js';
      import { sqliteStore } from './src/sqlite.js';
      const scheduler = new Scheduler({ store: sqliteStore(${JSON.stringify(join(dir, 'brought.db'))}) });
      const doubled = await scheduler.after(0, new URL('../task.js', new URL('./src/', import.meta.url)), { payload: 21 }).result;
      if (doubled !== 42) throw new Error(String(doubled));
      await scheduler.close();
    `);
    expect(modules).toEqual(expect.arrayContaining(['durable/runner.js', 'durable/worker.js', 'threads/thread.js', 'node:worker_threads']));
  });

  it('a store of its own, without the runner taskheap stores bring, runs named work all the same', () => {
    const modules = loaded(`
      import { Scheduler } from './src/index.js';
      import { sqliteStore } from './src/sqlite.js';
      const real = sqliteStore(${JSON.stringify(join(dir, 'own.db'))});
      // A store of its own, as a wrapper that forwards the contract and nothing else.
      const own = new Proxy(real, {
        get: (target, key) => (key === 'runner' ? undefined : typeof target[key] === 'function' ? target[key].bind(target) : target[key]),
      });
      const scheduler = new Scheduler({ store: own });
      scheduler.define('double', (_ctx, n) => n * 2);
      await scheduler.start();
      const task = await scheduler.schedule(Date.now(), 'double', { payload: 21 });
      const done = await scheduler.waitFor(task.id, { timeout: 30_000 });
      await scheduler.close();
      if (done.result !== 42) throw new Error(JSON.stringify(done));
    `);
    expect(modules).toEqual(expect.arrayContaining(['durable/runner.js', 'durable/worker.js']));
  });
});
