// The layout of src/ is part of the design: each folder may import only the
// folders below it (CONTRIBUTING.md, "The layout of `src/`"), no file may reach itself through
// its imports, and a file past 800 lines of code says why its role is that large. This test reads every import (type-only and dynamic ones too)
// with TypeScript's own pre-processor and fails on a cycle or a forbidden edge.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** What each folder may import, besides itself. Keep in step with the layout table of CONTRIBUTING.md. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  core: [],
  rules: ['core'],
  durable: ['core', 'rules'],
  'durable/sqlite': ['core', 'durable'],
  'durable/postgres': ['core', 'durable'],
  jobs: ['core', 'rules', 'durable'],
  flows: ['core', 'durable'],
  testing: ['core'],
  threads: ['core'],
  ops: ['core', 'jobs', '.'],
  dashboard: ['core', 'rules', 'durable', 'jobs', '.'],
  cli: ['core', 'durable', '.'],
};
/** Files at the top of src/: the scheduler and the entry points. */
const TOP_MAY_IMPORT: Record<string, readonly string[]> = {
  'scheduler.ts': ['core', 'rules', 'durable', 'jobs', 'threads'],
  'scheduler-options.ts': ['core', 'rules', 'durable', 'jobs', 'threads'],
  'scheduler-queues.ts': ['core', 'durable'],
  'scheduler-flows.ts': ['core', 'durable', 'flows'],
  'index.ts': ['.', 'core', 'rules', 'durable', 'jobs', 'threads'],
  'sqlite.ts': ['durable/sqlite'],
  'postgres.ts': ['durable/postgres'],
  'store.ts': ['durable'],
  'testing.ts': ['testing'],
  'metrics.ts': ['ops'],
  'otel.ts': ['ops'],
  'dashboard.ts': ['dashboard'],
};

function sourceFiles(): string[] {
  return (readdirSync(SRC, { recursive: true }) as string[])
    .map((file) => file.split('\\').join('/'))
    .filter((file) => file.endsWith('.ts'))
    .sort();
}

/** The src-relative files `file` imports (relative specifiers only; packages are not ours). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(join(SRC, file), 'utf8'), true, true);
  return info.importedFiles
    .map((ref) => ref.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, '.ts'));
}

const graph = new Map(sourceFiles().map((file) => [file, importsOf(file)]));

/** Past this many lines of code a file's opening comment says why its role is that large. */
const MAX_CODE_LINES = 800;

/** Lines that are neither blank nor comment-only. */
function codeLines(text: string): number {
  return text.split('\n').filter((line) => !/^\s*(\/\/|\*|\/\*\*?|\*\/|$)/.test(line)).length;
}

/** The comment lines a file opens with. */
function openingComment(text: string): string {
  const lines = text.split('\n');
  const end = lines.findIndex((line) => !/^\s*(\/\/|\/\*|\*)/.test(line));
  return lines.slice(0, end === -1 ? lines.length : end).join('\n');
}

function folderOf(file: string): string {
  return dirname(file);
}

/** Every import cycle, each as the path that closes it. */
function cycles(): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

describe('src/ layout', () => {
  it('every import resolves to a file in src/', () => {
    const missing = [...graph].flatMap(([file, targets]) => targets.filter((t) => !graph.has(t)).map((t) => `${file} -> ${t}`));
    expect(missing).toEqual([]);
  });

  it('has no import cycle', () => {
    expect(cycles().map((cycle) => cycle.join(' -> '))).toEqual([]);
  });

  it('the cycle check finds a cycle when there is one', () => {
    // Guards the guard: a graph with a known cycle must be reported.
    graph.set('core/__a.ts', ['core/__b.ts']);
    graph.set('core/__b.ts', ['core/__a.ts']);
    try {
      expect(cycles().map((cycle) => cycle.join(' -> '))).toEqual(['core/__a.ts -> core/__b.ts -> core/__a.ts']);
    } finally {
      graph.delete('core/__a.ts');
      graph.delete('core/__b.ts');
    }
  });

  it('each folder imports only the folders below it', () => {
    const forbidden: string[] = [];
    for (const [file, targets] of graph) {
      const folder = folderOf(file);
      const allowed = folder === '.' ? TOP_MAY_IMPORT[file] : MAY_IMPORT[folder];
      if (allowed === undefined) {
        forbidden.push(`${file}: its folder has no entry in MAY_IMPORT (add one, and a line in CONTRIBUTING.md)`);
        continue;
      }
      for (const target of targets) {
        const to = folderOf(target);
        if (to !== folder && !allowed.includes(to)) forbidden.push(`${file} -> ${target}`);
      }
    }
    expect(forbidden).toEqual([]);
  });

  it('a file past 800 lines of code (comments and blank lines not counted) says in its opening comment why its role is that large', () => {
    // Files are sized by their role, never split or merged to meet a line count (CONTRIBUTING.md, "The layout of `src/`").
    const unexplained = sourceFiles().filter((file) => {
      const text = readFileSync(join(SRC, file), 'utf8');
      return codeLines(text) > MAX_CODE_LINES && !/\b(lines|large)\b/i.test(openingComment(text));
    });
    expect(unexplained).toEqual([]);
  });

  it('the file rule counts code, not comments', () => {
    // Guards the guard: 801 lines of code with no reason fail it; TSDoc does not count.
    const code = Array.from({ length: MAX_CODE_LINES + 1 }, (_, i) => `const x${i} = ${i};`).join('\n');
    expect(codeLines(`// one role\n${code}`)).toBe(MAX_CODE_LINES + 1);
    expect(codeLines(`/**\n * docs\n */\n\n// why\nconst a = 1;`)).toBe(1);
    expect(/\b(lines|large)\b/i.test(openingComment(`// The parser: one grammar, so its role is large.\n${code}`))).toBe(true);
  });

  it('the in-memory scheduler loads no database driver', () => {
    const reached = new Set<string>();
    const walk = (file: string): void => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const next of graph.get(file) ?? []) walk(next);
    };
    walk('index.ts');
    const drivers = [...reached].filter((file) => file.startsWith('durable/sqlite/') || file.startsWith('durable/postgres/'));
    expect(drivers).toEqual([]);
  });

  it("CONTRIBUTING.md's layout table names every file of src/, and each file opens with a comment saying what it owns", () => {
    const contributing = readFileSync(fileURLToPath(new URL('../CONTRIBUTING.md', import.meta.url)), 'utf8');
    const start = contributing.indexOf('\n## The layout of `src/`');
    // To the next section, or the end of the file.
    const end = contributing.indexOf('\n## ', start + 1);
    const layout = contributing.slice(start, end === -1 ? undefined : end);
    expect(start).toBeGreaterThan(0);
    const unnamed = sourceFiles().filter((file) => !layout.includes(`\`${file}\``) && !layout.includes(`\`${posix.basename(file)}\``));
    expect(unnamed).toEqual([]);
    // A program (the `bin` entry) may start with its `#!` line first.
    const silent = sourceFiles().filter((file) => !/^(#![^\n]*\n)?(\/\/|\/\*)/.test(readFileSync(join(SRC, file), 'utf8')));
    expect(silent).toEqual([]);
  });

  it("each folder's error classes are in its errors.ts, and each code given to a TaskheapError is a TaskheapErrorCode", () => {
    const elsewhere = sourceFiles().filter(
      (file) => posix.basename(file) !== 'errors.ts' && /\bclass \w+ extends \w*Error\b/.test(readFileSync(join(SRC, file), 'utf8')),
    );
    expect(elsewhere).toEqual([]);
    const union = readFileSync(join(SRC, 'core/errors.ts'), 'utf8');
    const declared = new Set(
      union
        .slice(union.indexOf('export type TaskheapErrorCode'), union.indexOf(';', union.indexOf('export type TaskheapErrorCode')))
        .match(/ERR_[A-Z_]+/g),
    );
    const given = new Set(
      sourceFiles()
        .flatMap((file) => readFileSync(join(SRC, file), 'utf8').match(/'ERR_[A-Z_]+'/g) ?? [])
        .map((code) => code.slice(1, -1)),
    );
    // Node's own codes that taskheap reads (loading a peer dependency, a worker thread out of memory, node:sqlite's errors).
    for (const node of ['ERR_MODULE_NOT_FOUND', 'ERR_DLOPEN_FAILED', 'ERR_WORKER_OUT_OF_MEMORY', 'ERR_SQLITE_ERROR']) given.delete(node);
    expect([...given].filter((code) => !declared.has(code))).toEqual([]);
    expect([...declared].filter((code) => !given.has(code))).toEqual([]);
  });

  it('comments point to the docs pages, not to issue numbers', () => {
    const citing = sourceFiles().filter((file) => /\bissues? \d/i.test(readFileSync(join(SRC, file), 'utf8')));
    expect(citing).toEqual([]);
  });
});
