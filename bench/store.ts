/**
 * `npx tsx bench/store.ts [--quick]`
 *
 * Store throughput: how many no-op durable tasks per second are claimed, run
 * and recorded as succeeded, with SQLite (1 process) and PostgreSQL (1 and 3
 * processes), next to the in-memory scheduler draining the same N no-op
 * tasks. Starts a throwaway PostgreSQL (test/durable/pg-server.ts) and a temp SQLite
 * file. N = 20,000 (quick: 2,000). Prints a markdown table and writes
 * bench/results/store-latest.json.
 *
 * Each store run: the parent schedules N tasks due now through the store's
 * `addTask` (timed: "scheduled/s"), starts the worker processes and waits
 * until each has loaded, then says "go" and times until the database shows
 * all N succeeded ("claimed + completed/s"). Workers: 16 slots per process,
 * the default lease and poll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { Scheduler } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { sqliteStore } from '../src/sqlite.js';
import type { Store } from '../src/durable/store.js';
import { startPgServer } from '../test/durable/pg-server.js';

const WORKERS = 16;
const SELF = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------- child side

/** `bench/store.ts --child sqlite <path>` or `--child postgres <url> <schema>`: waits for "go" on stdin, runs until "stop". */
async function child(kind: string, target: string, schema: string | undefined): Promise<void> {
  const store = kind === 'sqlite' ? sqliteStore(target) : postgresStore({ connectionString: target, schema });
  const errors: unknown[] = [];
  const scheduler = new Scheduler({ store, workers: WORKERS, onError: (error) => errors.push(error) });
  scheduler.define('noop', () => {});
  const lines = createInterface({ input: process.stdin });
  process.stdout.write('ready\n');
  let watching = false;
  for await (const line of lines) {
    if (line === 'go') {
      await scheduler.start();
      // The SQLite file is locked by its one owner: the parent cannot count, so the child says when it is drained.
      if (kind === 'sqlite' && !watching) {
        watching = true;
        void (async () => {
          for (;;) {
            const left = [
              ...(await scheduler.listTasks({ state: 'waiting', limit: 1 })),
              ...(await scheduler.listTasks({ state: 'running', limit: 1 })),
            ];
            if (left.length === 0) return void process.stdout.write('drained\n');
            await sleep(10);
          }
        })();
      }
    }
    if (line === 'stop') break;
  }
  await scheduler.close();
  process.stdout.write(`stopped ${errors.length} errors${errors.length > 0 ? `: ${String(errors[0])}` : ''}\n`);
  process.exit(0);
}

// --------------------------------------------------------------- parent side

interface Row {
  run: string;
  processes: number;
  n: number;
  /** addTask calls committed per second (16 in flight); undefined for memory */
  scheduledPerSec?: number;
  seconds: number;
  tasksPerSec: number;
}

function spawnChild(args: string[]) {
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', SELF, '--child', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    proc.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ready\n')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`worker exited early (${code}): ${out}`)));
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return { proc, ready, exited, output: () => out, send: (line: string) => proc.stdin!.write(`${line}\n`) };
}

/** Adds N no-op tasks due now through `store.addTask`, 16 at a time; returns the rate. */
async function seed(store: Store, n: number): Promise<number> {
  await store.migrate();
  const now = Date.now();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < n) {
        next++;
        await store.addTask({ name: 'noop', key: null, payload: 'null', runAt: now, maxAttempts: 1, options: '{}' });
      }
    }),
  );
  const rate = (n / (performance.now() - t0)) * 1000;
  await store.close();
  return rate;
}

async function storeRun(
  run: string,
  processes: number,
  n: number,
  store: Store,
  childArgs: string[],
  succeeded: (children: ReturnType<typeof spawnChild>[]) => Promise<number>,
): Promise<Row> {
  const scheduledPerSec = await seed(store, n);
  const children = Array.from({ length: processes }, () => spawnChild(childArgs));
  await Promise.all(children.map((c) => c.ready));
  const t0 = performance.now();
  for (const c of children) c.send('go');
  for (;;) {
    if ((await succeeded(children)) >= n) break;
    if (performance.now() - t0 > 600_000) throw new Error(`${run}: not done after 10 minutes`);
    await sleep(10);
  }
  const seconds = (performance.now() - t0) / 1000;
  for (const c of children) c.send('stop');
  await Promise.all(children.map((c) => c.exited));
  for (const c of children) {
    const line = c
      .output()
      .split('\n')
      .find((l) => l.startsWith('stopped'));
    if (line !== undefined && !line.startsWith('stopped 0 errors')) console.error(`${run}: ${line}`);
  }
  return { run, processes, n, scheduledPerSec, seconds, tasksPerSec: n / seconds };
}

async function memoryRun(n: number): Promise<Row> {
  const scheduler = new Scheduler({ workers: WORKERS });
  const noop = () => {};
  const at = Date.now();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) scheduler.schedule(at, noop);
  await scheduler.onIdle();
  const seconds = (performance.now() - t0) / 1000;
  await scheduler.close();
  return { run: 'in-memory (no store)', processes: 1, n, seconds, tasksPerSec: n / seconds };
}

const rate = (value: number) =>
  value >= 1e4 ? `${Math.round(value / 1e3).toLocaleString('en-US')}k/s` : `${Math.round(value).toLocaleString('en-US')}/s`;

function table(rows: Row[]): string {
  const lines = [
    '| run | processes | N | scheduled (addTask, 16 in flight) | drain time | claimed + completed |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.run} | ${r.processes} | ${r.n.toLocaleString('en-US')} | ${r.scheduledPerSec === undefined ? '—' : rate(r.scheduledPerSec)} | ${r.seconds.toFixed(2)} s | ${rate(r.tasksPerSec)} |`,
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const n = quick ? 2_000 : 20_000;
  const dir = mkdtempSync(join(os.tmpdir(), 'taskheap-bench-'));
  const server = await startPgServer({ database: 'taskheap_bench' });
  const admin = new pg.Pool({ connectionString: server.url, max: 2 });
  admin.on('error', () => {});
  const rows: Row[] = [];
  const load = [os.loadavg()[0]!];
  let version = '';
  try {
    version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    rows.push(await memoryRun(n));

    const file = join(dir, 'bench.db');
    rows.push(
      await storeRun('SQLite', 1, n, sqliteStore(file), ['sqlite', file], async (children) => {
        return children[0]!.output().includes('drained\n') ? n : 0;
      }),
    );
    const db = new Database(file, { readonly: true, fileMustExist: true });
    const done = (db.prepare(`SELECT COUNT(*) AS n FROM taskheap_tasks WHERE state = 'succeeded'`).get() as { n: number }).n;
    db.close();
    if (done !== n) throw new Error(`SQLite: ${done} of ${n} tasks succeeded`);

    for (const processes of [1, 3]) {
      const schema = `bench_${processes}`;
      rows.push(
        await storeRun(
          'PostgreSQL',
          processes,
          n,
          postgresStore({ connectionString: server.url, schema }),
          ['postgres', server.url, schema],
          async () => {
            const {
              rows: [count],
            } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.taskheap_tasks WHERE state = 'succeeded'`);
            return count!.n;
          },
        ),
      );
    }
  } finally {
    load.push(os.loadavg()[0]!);
    await admin.end();
    await server.destroy();
    rmSync(dir, { recursive: true, force: true });
  }

  const cpus = os.cpus();
  const machine = `${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GB, Node ${process.version}`;
  console.log(`# taskheap store throughput${quick ? ' (quick)' : ''}\n`);
  console.log(`- Machine: ${machine}; load average (1 min) ${load[0]!.toFixed(2)} at start, ${load[1]!.toFixed(2)} at end`);
  console.log(
    `- No-op handler, ${WORKERS} worker slots per process; PostgreSQL ${version} on loopback with fsync=off, synchronous_commit=off; SQLite in WAL mode`,
  );
  console.log('- "claimed + completed": from "go" until the database shows all N succeeded (claim, run, record)\n');
  console.log(table(rows));
  const results = new URL('./results/', import.meta.url);
  mkdirSync(results, { recursive: true });
  writeFileSync(
    new URL('store-latest.json', results),
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        quick,
        n,
        workersPerProcess: WORKERS,
        machine,
        postgres: version,
        loadAverage: load,
        rows,
      },
      null,
      2,
    )}\n`,
  );
  console.log('\nSaved bench/results/store-latest.json');
}

const at = process.argv.indexOf('--child');
if (at >= 0) await child(process.argv[at + 1]!, process.argv[at + 2]!, process.argv[at + 3]);
else await main();
