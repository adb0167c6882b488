/**
 * Every `ts`/`js` code block of the documentation (README.md, CONTRIBUTING.md
 * and every page of docs/, the generated docs/api/ aside) runs as written: each is saved to a
 * temp directory (imports of `taskheap` pointed at this checkout's src/,
 * bundled once by esbuild as the package's entry points), its types stripped
 * by esbuild (what `npx tsx` does), and run in its own `node` process there
 * (a `js` block using `require()` as CommonJS), and must exit 0 on its own,
 * with the output the block promises where it prints something. (Plain
 * `node` on stripped code and one bundle, rather than `node --import tsx` on
 * src/: a fifth of the CPU per block, for the same program.)
 *
 * A block that imports `taskheap/postgres` runs with `DATABASE_URL` set to a
 * database of its own on the run's shared PostgreSQL server.
 *
 * Blocks run three at a time (each waits on its own process, and the suite's
 * time is bounded by this file's), each in a directory of its own, so two
 * blocks that open `app.db` never share it.
 *
 * A block preceded by `<!-- not run: reason -->` is a fragment and is skipped;
 * the reason is required, and this test lists the skipped blocks so they stay
 * few. The marker is an HTML comment, which no reader sees (GitHub, npm and
 * the TypeDoc site hide it), so a skipped block must also be labelled where a
 * reader sees it: the paragraph before the marker starts with `**Sketch:**`.
 * Every other block is `ts`, `js` (both run) or `sh` (commands, not run).
 *
 * The links between these pages resolve: a relative link names a file that
 * exists, and a `#anchor` a heading of its page (GitHub's slugs).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildSync, transformSync } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import type { PgServer } from './durable/pg-server.js';
import { sharedDatabase } from './durable/use-postgres.js';

const root = resolve(import.meta.dirname, '..');
/** The pages whose blocks run: README.md, CONTRIBUTING.md and docs/*.md (docs/api/ is TypeDoc's output). */
const pages = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`),
];
const texts = new Map(pages.map((page) => [page, readFileSync(join(root, page), 'utf8')]));

interface Block {
  /** The page it is on, relative to the root. */
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
  /** The reason of a preceding `<!-- not run: reason -->`. */
  skip: string | undefined;
  /** The section heading it is under. */
  heading: string;
  /** The paragraph before the block (before its marker, if it has one), as a reader sees it. */
  before: string;
}

/** The fenced code blocks of a markdown text, with the marker before each. */
function codeBlocks(page: string, markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i]!;
    if (text.startsWith('#')) heading = text.replace(/^#+\s*/, '');
    const open = /^```(\w*)\s*$/.exec(text);
    if (open === null) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
    let before = start - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const marker = before >= 0 ? /^<!--\s*not run:\s*(.*?)\s*-->$/.exec(lines[before]!.trim()) : null;
    if (marker !== null) for (before--; before >= 0 && lines[before]!.trim() === ''; ) before--;
    let first = before;
    while (first > 0 && lines[first - 1]!.trim() !== '') first--;
    const paragraph = before >= 0 ? lines.slice(first, before + 1).join(' ') : '';
    blocks.push({ page, line: start + 1, lang: open[1]!, code: body.join('\n'), skip: marker?.[1], heading, before: paragraph });
  }
  return blocks;
}

const ENTRY: Record<string, string> = {
  taskheap: 'src/index.ts',
  'taskheap/testing': 'src/testing.ts',
  'taskheap/sqlite': 'src/sqlite.ts',
  'taskheap/postgres': 'src/postgres.ts',
  'taskheap/store': 'src/store.ts',
  'taskheap/metrics': 'src/metrics.ts',
  'taskheap/otel': 'src/otel.ts',
  'taskheap/dashboard': 'src/dashboard.ts',
};

/** Points `from 'taskheap…'` at the bundle of this checkout's src/ (the package is not installed into itself). */
function localImports(code: string): string {
  const local = (name: string) => {
    const file = ENTRY[name];
    if (file === undefined) throw new Error(`a code block imports unknown entry point ${name}`);
    return join(work, 'taskheap', file.replace(/^src\/(.*)\.ts$/, '$1.mjs'));
  };
  return code
    .replace(/from '(taskheap(?:\/\w+)?)'/g, (_, name: string) => `from '${pathToFileURL(local(name)).href}'`)
    .replace(/require\('(taskheap(?:\/\w+)?)'\)/g, (_, name: string) => `require(${JSON.stringify(local(name))})`);
}

// Inside the checkout, so a block's other imports (express, hono, luxon) resolve from its node_modules.
mkdirSync(join(root, 'node_modules/.cache'), { recursive: true });
const work = mkdtempSync(join(root, 'node_modules/.cache/taskheap-readme-'));
// The entry points, as the package has them: one module graph (shared chunks), so that
// `taskheap/testing`'s ManualClock and `taskheap`'s Scheduler are the same classes.
buildSync({
  entryPoints: Object.values(ENTRY).map((file) => join(root, file)),
  outdir: join(work, 'taskheap'),
  outExtension: { '.js': '.mjs' },
  bundle: true,
  splitting: true,
  packages: 'external',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'silent',
});
const databases: PgServer[] = [];
afterAll(async () => {
  rmSync(work, { recursive: true, force: true });
  await Promise.all(databases.map((database) => database.destroy()));
});

/** At most three block processes at once: more would only make each slower on two cores. */
let running = 0;
const queued: (() => void)[] = [];
async function slot<T>(task: () => Promise<T>): Promise<T> {
  if (running === 3) await new Promise<void>((resolve) => queued.push(resolve));
  else running++;
  try {
    return await task();
  } finally {
    const next = queued.shift();
    if (next === undefined) running--;
    else next();
  }
}

function run(file: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [file], {
      cwd: dirname(file),
      env: { ...process.env, TZ: 'UTC', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    // Bounded: a block that keeps the process alive fails instead of hanging. Generous: a block
    // can take seconds on a loaded 2-core machine.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', fail);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

const allBlocks = pages.flatMap((page) => codeBlocks(page, texts.get(page)!));
const blocks = allBlocks.filter((block) => block.lang === 'ts' || block.lang === 'js');

describe('code blocks of README.md, CONTRIBUTING.md and docs/', () => {
  it('finds the blocks, and skips only marked fragments with a reason', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(30);
    expect(blocks.filter((block) => block.page === 'README.md').length, 'README.md: install and three examples').toBeGreaterThanOrEqual(5);
    for (const block of blocks) if (block.skip !== undefined) expect(block.skip, `${block.page}:${block.line}`).not.toBe('');
    const skipped = blocks.filter((block) => block.skip !== undefined);
    expect(skipped.length, 'most blocks must run').toBeLessThan(blocks.length - skipped.length);
    const unlabelled = skipped.filter((block) => !block.before.startsWith('**Sketch:**')).map((block) => `${block.page}:${block.line}`);
    expect(unlabelled, 'a block that does not run says so where a reader sees it: **Sketch:** before its marker').toEqual([]);
    const other = allBlocks
      .filter((block) => !['ts', 'js', 'sh'].includes(block.lang))
      .map((block) => `${block.page}:${block.line} (${block.lang || 'no language'})`);
    expect(other, 'a code block is ts or js (run) or sh (commands)').toEqual([]);
  });

  for (const block of blocks) {
    const title = `${block.page}:${block.line} (${block.heading})`;
    if (block.skip !== undefined) {
      it.skip(`${title}: not run: ${block.skip}`, () => {});
      continue;
    }
    // Time for the run's own bound (30 s) and for waiting its turn.
    it.concurrent(`${title} runs and exits 0`, async () => {
      // A js block that uses require() is CommonJS; the rest are ES modules.
      const commonjs = block.lang === 'js' && /\brequire\(/.test(block.code) && !/^import /m.test(block.code);
      const dir = join(work, `${block.page.replace(/\W/g, '-')}-${block.line}`);
      mkdirSync(dir);
      const file = join(dir, `block.${commonjs ? 'cjs' : 'mjs'}`);
      const code = localImports(block.code);
      writeFileSync(file, block.lang === 'ts' ? transformSync(code, { loader: 'ts', format: 'esm', target: 'node20' }).code : code);
      const env: Record<string, string> = {};
      if (block.code.includes("'taskheap/postgres'")) {
        const database = await sharedDatabase();
        databases.push(database);
        env.DATABASE_URL = database.url;
      }
      const result = await slot(() => run(file, env));
      expect(result.stderr, title).toBe('');
      expect(result.code, `${title}\n${result.stdout}`).toBe(0);
      // Lines the block prints are shown in it as `// prints: ...` comments.
      const promised = [...block.code.matchAll(/\/\/ prints: (.*)$/gm)].map((match) => match[1]!.trim());
      for (const line of promised) expect(result.stdout, title).toContain(line);
    }, 120_000);
  }
});

/** GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings (outside code blocks), repeats numbered as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (heading === null) continue;
    const base = slug(heading[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** The relative link targets of a page, outside code blocks and inline code. */
function links(markdown: string): { target: string; line: number }[] {
  const found: { target: string; line: number }[] = [];
  let fenced = false;
  markdown.split('\n').forEach((text, i) => {
    if (text.startsWith('```')) fenced = !fenced;
    if (fenced) return;
    for (const match of text.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (!/^[a-z]+:/i.test(target)) found.push({ target, line: i + 1 });
    }
  });
  return found;
}

describe('links between README.md, CONTRIBUTING.md and docs/', () => {
  it('lists every guide in docs/README.md, and docs/README.md in README.md', () => {
    const index = texts.get('docs/README.md')!;
    const unlisted = pages.filter((page) => page.startsWith('docs/') && page !== 'docs/README.md' && !index.includes(`](${page.slice(5)}`));
    expect(unlisted).toEqual([]);
    expect(texts.get('README.md')).toContain('](docs/README.md)');
  });

  it('points every relative link at a file that exists, and every #anchor at a heading of its page', () => {
    const broken: string[] = [];
    for (const page of pages) {
      // Multi-line link texts are joined first, so a link broken over two lines is still read.
      for (const { target, line } of links(texts.get(page)!.replace(/\[([^\]]*)\n([^\]]*)\]\(/g, '[$1 $2]('))) {
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const file = path === '' ? page : relative(root, resolve(root, dirname(page), path));
        if (!existsSync(join(root, file))) {
          broken.push(`${page}:${line}: ${target} (no file ${file})`);
          continue;
        }
        if (anchor === undefined || !file.endsWith('.md')) continue;
        const text = texts.get(file) ?? readFileSync(join(root, file), 'utf8');
        if (!anchors(text).has(anchor)) broken.push(`${page}:${line}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
