// The published types show only what is public: tsconfig.build.json strips
// every declaration marked @internal from the .d.ts files (stripInternal), so
// users' autocomplete never offers `task._time` or `scheduler.createJob()`.
// This test emits the declarations as `npm run build` does, into a temp dir
// inside the checkout (so `pg` and `@opentelemetry/api` resolve), then:
//   1. compiles every entry point's declarations as a strict consumer would,
//      skipLibCheck off: a public type naming a stripped one fails here;
//   2. walks every export of every entry point, and every member of each: none
//      is marked @internal in src/, and none is named `_...`;
//   3. finds the public API still there (a spot list).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const exportsMap = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports as Record<string, { types?: string }>;
/** Entry point (`taskheap`, `taskheap/sqlite`...) to its declaration file, relative to dist/. */
const ENTRIES = Object.entries(exportsMap)
  .filter(([, target]) => typeof target === 'object' && target.types !== undefined)
  .map(([path, target]) => [`taskheap${path.slice(1)}`, target.types!.replace(/^\.\/dist\//, '')] as const);

function buildConfig(): ts.ParsedCommandLine {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (parsed === undefined) throw new Error('tsconfig.build.json did not parse');
  return parsed;
}

function format(diagnostics: readonly ts.Diagnostic[]): string[] {
  return diagnostics.map((d) => {
    const where =
      d.file === undefined
        ? ''
        : `${d.file.fileName.slice(root.length + 1)}(${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}): `;
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

function isInternal(node: ts.Node): boolean {
  return ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal');
}

/** Everything src/ marks @internal: top-level names, and members as `Owner.member`. */
function internalsOf(program: ts.Program): { top: Set<string>; members: Set<string> } {
  const top = new Set<string>();
  const members = new Set<string>();
  for (const file of program.getSourceFiles()) {
    if (!file.fileName.startsWith(join(root, 'src'))) continue;
    for (const statement of file.statements) {
      const name = (statement as { name?: ts.Node }).name;
      if (name === undefined || !ts.isIdentifier(name)) continue;
      if (isInternal(statement)) top.add(name.text);
      if (!ts.isClassDeclaration(statement) && !ts.isInterfaceDeclaration(statement)) continue;
      for (const member of statement.members) {
        if (member.name !== undefined && ts.isIdentifier(member.name) && isInternal(member))
          members.add(`${name.text}.${member.name.text}`);
      }
    }
  }
  return { top, members };
}

let out: string;
let internals: { top: Set<string>; members: Set<string> };
let consumer: ts.Program;

beforeAll(() => {
  const config = buildConfig();
  expect(config.options.stripInternal, 'tsconfig.build.json sets stripInternal').toBe(true);
  mkdirSync(join(root, 'tmp'), { recursive: true });
  out = mkdtempSync(join(root, 'tmp', 'declarations-'));
  const program = ts.createProgram(config.fileNames, {
    ...config.options,
    outDir: out,
    declarationDir: out,
    emitDeclarationOnly: true,
    declarationMap: false,
    sourceMap: false,
  });
  const emitted = program.emit();
  expect(format(emitted.diagnostics)).toEqual([]);
  internals = internalsOf(program);
  consumer = ts.createProgram(
    ENTRIES.map(([, file]) => join(out, file)),
    {
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
      types: ['node'],
    },
  );
}, 180_000);

afterAll(() => {
  if (out !== undefined) rmSync(out, { recursive: true, force: true });
});

/** Every entry point's exports, each with its members (instance and static) as `Owner.member`. */
function publicSurface(): Map<string, string[]> {
  const checker = consumer.getTypeChecker();
  const surface = new Map<string, string[]>();
  for (const [entry, file] of ENTRIES) {
    const source = consumer.getSourceFile(join(out, file));
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`no declarations for ${entry}`);
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const members = new Set<string>();
      const add = (type: ts.Type) => {
        for (const member of checker.getPropertiesOfType(type)) {
          // `#private` fields show as one opaque member, not offered to users; `__@…` are symbol-named ([Symbol.asyncDispose]).
          if (member.name.startsWith('__#') || member.name.startsWith('#') || member.name.startsWith('__@')) continue;
          const owner = member.declarations?.[0]?.parent;
          const ownerName =
            owner !== undefined && (ts.isClassDeclaration(owner) || ts.isInterfaceDeclaration(owner)) ? owner.name?.text : symbol.name;
          members.add(`${ownerName}.${member.name}`);
        }
      };
      if (symbol.flags & (ts.SymbolFlags.Class | ts.SymbolFlags.Interface)) add(checker.getDeclaredTypeOfSymbol(symbol));
      if (symbol.flags & ts.SymbolFlags.Class) add(checker.getTypeOfSymbol(symbol));
      surface.set(`${entry}:${exported.name}`, [...members]);
    }
  }
  return surface;
}

// Type-checking every declaration is CPU work: minutes on a loaded 2-core machine, not seconds.
describe('published declarations (stripInternal)', { timeout: 180_000 }, () => {
  it('compile for a strict consumer, skipLibCheck off', () => {
    expect(format(ts.getPreEmitDiagnostics(consumer))).toEqual([]);
  });

  it('type TaskheapError.code as TaskheapErrorCode: a code that does not exist is a compile error', () => {
    const file = join(out, 'codes.ts');
    writeFileSync(
      file,
      [
        "import { TaskheapError, ThreadError, type TaskheapErrorCode } from './index.js';",
        'export function check(error: TaskheapError): TaskheapErrorCode {',
        "  if (error.code === 'ERR_QUEUE_FULL') return error.code;",
        "  if (error.code === 'ERR_QUEUE_FULLL') return error.code;",
        "  new TaskheapError('a typo', 'ERR_SCHEDULER_CLOSD');",
        "  new ThreadError('not a thread code', 'ERR_QUEUE_FULL');",
        "  return new ThreadError('a thread code', 'ERR_THREAD_EXIT').code;",
        '}',
      ].join('\n'),
    );
    const program = ts.createProgram([file], consumer.getCompilerOptions());
    const errors = ts.getPreEmitDiagnostics(program).map((d) => [d.file?.getLineAndCharacterOfPosition(d.start ?? 0).line, d.code]);
    // Line 3 (0-based): a comparison with no overlap (TS2367); 4 and 5: an argument not assignable (TS2345).
    expect(errors).toEqual([
      [3, 2367],
      [4, 2345],
      [5, 2345],
    ]);
  });

  it('src/ marks the internals this test looks for', () => {
    // Guards the guard: if these were no longer @internal, the checks below would prove nothing.
    for (const name of [
      'Task._time',
      'Task._run',
      'Task._finish',
      'Scheduler.now',
      'Scheduler.createJob',
      'Scheduler.createStoredJob',
      'Scheduler.waitingByName',
    ]) {
      expect(internals.members, name).toContain(name);
    }
    expect(internals.top).toContain('TaskLoop');
  });

  it('show nothing marked @internal, and no `_` member', () => {
    const leaks: string[] = [];
    for (const [name, members] of publicSurface()) {
      const exported = name.slice(name.indexOf(':') + 1);
      if (internals.top.has(exported)) leaks.push(name);
      for (const member of members) {
        const key = member.slice(member.indexOf('.') + 1);
        if (internals.members.has(member) || key.startsWith('_')) leaks.push(`${name}: ${member}`);
      }
    }
    expect(leaks).toEqual([]);
  });

  it('still show the public API', () => {
    const surface = publicSurface();
    const members = (name: string) => surface.get(name) ?? [];
    expect(members('taskheap:Scheduler')).toEqual(
      expect.arrayContaining(
        [
          'schedule',
          'after',
          'every',
          'cron',
          'at',
          'once',
          'on',
          'off',
          'close',
          'stats',
          'waitingTasks',
          'cancelTask',
          'retryTask',
          'maxWaiting',
          'workers',
          'rate',
          'threads',
          'getTask',
          'waitFor',
        ].map((m) => `Scheduler.${m}`),
      ),
    );
    expect(members('taskheap:Task')).toEqual(
      expect.arrayContaining(['id', 'name', 'runAt', 'state', 'attempts', 'result', 'cancel'].map((m) => `Task.${m}`)),
    );
    expect(members('taskheap:Every')).toEqual(expect.arrayContaining(['Every.minutes', 'JobBuilder.run', 'JobBuilder.from']));
    expect(members('taskheap/testing:ManualClock')).toEqual(
      expect.arrayContaining(['advance', 'now', 'setTimer', 'clearTimer'].map((m) => `ManualClock.${m}`)),
    );
    for (const [entry] of ENTRIES)
      expect(
        [...surface.keys()].some((name) => name.startsWith(`${entry}:`)),
        entry,
      ).toBe(true);
    for (const name of [
      'taskheap:Scheduler',
      'taskheap:SchedulerOptions',
      'taskheap:CronRule',
      'taskheap:ThreadError',
      'taskheap:ThreadOptions',
      'taskheap:ThreadContext',
      'taskheap/sqlite:sqliteStore',
      'taskheap/postgres:postgresStore',
      'taskheap/metrics:metrics',
      'taskheap/otel:otel',
      'taskheap/dashboard:dashboard',
    ]) {
      expect(surface.has(name), name).toBe(true);
    }
  });
});
