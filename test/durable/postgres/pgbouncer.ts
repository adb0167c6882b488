// A throwaway PgBouncer in front of a test's PostgreSQL server: Debian's
// (the system's /usr/sbin/pgbouncer, $PGBOUNCER, or else Debian's package
// unpacked by test/binaries.ts's pgbouncerBinary()), in transaction pooling with a small
// pool, on a free loopback port. It refuses to run as root, so as root it runs
// as the `postgres` (or `nobody`) OS user (setpriv, which execs it: the child's pid is
// PgBouncer's own). kill() SIGKILLs it; start() starts it again on the same port.
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgbouncerBinary } from '../../binaries.js';
import { freePort, osUser, type PgServer } from '../pg-server.js';

export interface PgBouncer {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>`, through PgBouncer. */
  readonly url: string;
  /** SIGKILLs PgBouncer: every client connection drops at once. */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Kills it and deletes its files. Idempotent. */
  destroy(): Promise<void>;
  log(): string;
}

/** Resolves once something accepts connections on 127.0.0.1:`port`. */
async function listening(port: number, timeout: number, log: () => string): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`PgBouncer did not listen on 127.0.0.1:${port} within ${timeout} ms:\n${log()}`);
    await sleep(50);
  }
}

/**
 * Starts PgBouncer in front of `server` (its database), `pool_mode =
 * transaction`, `default_pool_size` server connections per user and database.
 * Throws, saying how to get one, if there is no PgBouncer.
 */
export async function startPgBouncer(server: PgServer, options: { poolSize?: number } = {}): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-pgbouncer-'));
  const port = await freePort();
  const logFile = join(dir, 'pgbouncer.log');
  const ini = join(dir, 'pgbouncer.ini');
  writeFileSync(join(dir, 'users.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      `${server.database} = host=127.0.0.1 port=${server.port} dbname=${server.database} user=postgres`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 2}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      'max_client_conn = 500',
      `logfile = ${logFile}`,
      'server_check_delay = 0',
      'server_login_retry = 1',
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  );
  const root = userInfo().uid === 0;
  let command: [string, string[]] = [binary.path, [ini]];
  if (root) {
    // `postgres` where Debian's packages made it, else `nobody` (as test/durable/pg-server.ts does).
    const user = osUser('postgres') ?? osUser('nobody');
    if (user === undefined) throw new Error('Running as root, PgBouncer needs an unprivileged OS user (`postgres` or `nobody`) to run as');
    chownSync(dir, user.uid, user.gid);
    for (const file of ['users.txt', 'pgbouncer.ini']) chownSync(join(dir, file), user.uid, user.gid);
    command = ['setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', binary.path, ini]];
  }
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4_000) : '');
  let child: ChildProcess | undefined;
  let output = '';
  const start = async () => {
    const started = spawn(command[0], command[1], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...binary.env } });
    child = started;
    started.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    started.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<never>((_, reject) =>
      started.once('exit', (code) => reject(new Error(`PgBouncer exited (${code}) on start:\n${output}\n${log()}`))),
    );
    exited.catch(() => {});
    await Promise.race([listening(port, 20_000, () => `${output}\n${log()}`), exited]);
  };
  const kill = async () => {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    const gone = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await gone;
  };
  let destroyed = false;
  await start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/${server.database}`,
    kill,
    start,
    log,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      try {
        await kill();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
