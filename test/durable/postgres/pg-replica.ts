// A streaming replica of a throwaway test server (pg-server.ts), for failover
// tests: a cold copy of the primary's data directory made its standby
// (standby.signal, primary_conninfo) in a temp dir, started on its
// own free loopback port as a hot standby, and promoted with pg_ctl promote.
// The binaries are found by test/binaries.ts (postgresBinaries); as root every
// command runs as the `nobody` OS user, as pg-server.ts does. Also a TCP forwarder
// standing for the address a deployment's workers use (a DNS name or a
// virtual IP that a failover moves to the new primary).
import { execFile } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { postgresBinaries } from '../../binaries.js';
import { freePort, osUser, type PgServer } from '../pg-server.js';

const run = promisify(execFile);

export interface PgReplica {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>` */
  readonly url: string;
  /** `pg_ctl promote -w`: the standby becomes a primary on a new timeline. */
  promote(): Promise<void>;
  destroy(): Promise<void>;
  log(): string;
}

/** Clones `primary` (a cold copy; it is restarted) and starts the clone as its hot standby, streaming its WAL. */
export async function startReplica(primary: PgServer): Promise<PgReplica> {
  const bin = postgresBinaries().path;
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-pg-replica-'));
  let as: (file: string, args: string[]) => [string, string[]] = (file, args) => [file, args];
  if (userInfo().uid === 0) {
    const user = osUser('nobody');
    if (user === undefined) throw new Error('Running as root, PostgreSQL needs an unprivileged OS user `nobody` to run the server as');
    chownSync(dir, user.uid, user.gid);
    as = (file, args) => ['runuser', ['-u', 'nobody', '--', file, ...args]];
  }
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4_000) : '');
  const exec = async (tool: string, args: string[]) => {
    const [file, argv] = as(join(bin, tool), args);
    try {
      return await run(file, argv, { cwd: dir, env: { ...process.env, LC_ALL: 'C', PGTZ: 'UTC' } });
    } catch (error) {
      const { stderr, stdout } = error as { stderr?: string; stdout?: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${String(stderr ?? '')}${String(stdout ?? '')}\n${log()}`);
    }
  };
  // A cold copy of the primary's data directory, configured as its standby: the npm
  // PostgreSQL binaries have no pg_basebackup. The primary stops cleanly (its shutdown
  // checkpoint is where the standby starts) and starts again at once; the standby then
  // streams the WAL from that checkpoint on, as one made by pg_basebackup -R would.
  await primary.stop();
  try {
    const [file, argv] = as('cp', ['-a', primary.dataDir, data]);
    await run(file, argv);
  } finally {
    await primary.start();
  }
  writeFileSync(join(data, 'standby.signal'), '');
  appendFileSync(join(data, 'postgresql.auto.conf'), `primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres'\n`);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
    '-c timezone=UTC',
    '-c hot_standby=on',
  ].join(' ');
  let running = false;
  await exec('pg_ctl', ['-D', data, '-l', logFile, '-o', options, '-w', '-t', '60', 'start']);
  running = true;
  let destroyed = false;
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/${primary.database}`,
    log,
    async promote() {
      await exec('pg_ctl', ['-D', data, '-w', '-t', '60', 'promote']);
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      try {
        if (running) await exec('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
        running = false;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** A TCP forwarder on a free loopback port: the one address workers know, pointed at one server or another. */
export interface Forwarder {
  readonly port: number;
  /** Sends new connections to `port`, and cuts the ones open (as a moved virtual IP does). */
  pointAt(port: number): void;
  close(): Promise<void>;
}

export async function startForwarder(target: number): Promise<Forwarder> {
  let to = target;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: to });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    pointAt(next: number) {
      to = next;
      for (const socket of sockets) socket.destroy();
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
