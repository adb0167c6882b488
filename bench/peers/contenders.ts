/**
 * One adapter per job system, all doing the same things: add no-op jobs one
 * at a time or in bulk, and work them with 16 slots per process. Each runs
 * with its documented settings for throughput (listed in SETTINGS, printed
 * with the results). Loaded only in the bench's child processes.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CACHE } from './cache.js';

/** A job as the bench sees it: its index, and when it is due (epoch ms; absent: now). */
export interface BenchJob {
  i: number;
  due?: number;
}

export interface Target {
  /** PostgreSQL database of this run. */
  pgUrl: string;
  /** Redis of this run (BullMQ). */
  redisUrl?: string;
  /** Queue (BullMQ) name of this run. */
  queue: string;
}

export interface Contender {
  /** Migrations and queue creation: done before anything is timed. */
  prepare(): Promise<void>;
  addOne(job: BenchJob): Promise<void>;
  /** One call, one transaction where the system has one; undefined without a bulk API. */
  addMany: ((jobs: BenchJob[]) => Promise<void>) | undefined;
  /** Starts working with `concurrency` slots per process. */
  work(concurrency: number, onJob: (job: BenchJob) => void): Promise<void>;
  close(): Promise<void>;
}

export const CONCURRENCY = 16;
/** taskheap's claim-ahead for many short jobs: the same as graphile-worker's localQueue below. */
const PREFETCH = 500;

/** What each contender runs with, for the report. */
export const SETTINGS: Record<string, string> = {
  taskheap: `postgresStore defaults (lease 30 s, poll 5 s) but prefetch ${PREFETCH} (as graphile-worker's localQueue.size), workers: ${CONCURRENCY}, retention { succeeded: 0 } (as graphile-worker, which deletes a job as it completes)`,
  'graphile-worker': `the performance preset of its docs with concurrentJobs ${CONCURRENCY}: maxPoolSize ${CONCURRENCY + 1}, localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0`,
  'pg-boss': `work() with batchSize ${CONCURRENCY}, burstWhenBatchFull, pollingIntervalSeconds 0.5 (its minimum)`,
  bullmq: `Worker concurrency ${CONCURRENCY}; Redis in memory (no RDB, no AOF)`,
  'bullmq-postgres': `its PostgreSQL backend (createPostgresBackend) with the tuning tips of its guide: Worker concurrency ${CONCURRENCY}, pool max ${CONCURRENCY}, removeOnComplete; schema by runMigrations()`,
};

/** The peers' modules, from the cache bench/peers/runtime.ts fills (the flows bench uses them too). */
export const peers = () =>
  import(pathToFileURL(join(CACHE, 'peers.mjs')).href) as Promise<{
    graphile(): Promise<any>;
    pgBoss(): Promise<any>;
    bullmq(): Promise<any>;
    ioredis(): Promise<any>;
    pg(): Promise<any>;
  }>;

const payload = (job: BenchJob) => ({ i: job.i, due: job.due });

/** BullMQ's PostgreSQL schema, made by its `runMigrations()` on one connection to `url`. */
export async function migrateBullmq(url: string, runMigrations: (client: unknown) => Promise<void>): Promise<void> {
  const pg = await (await peers()).pg();
  const pool = new (pg.default ?? pg).Pool({ connectionString: url, max: 1 });
  const client = await pool.connect();
  try {
    await runMigrations(client);
  } finally {
    client.release();
    await pool.end();
  }
}

async function taskheap(target: Target): Promise<Contender> {
  const { Scheduler } = await import('../../src/index.js');
  const { postgresStore } = await import('../../src/postgres.js');
  const store = postgresStore({ connectionString: target.pgUrl, prefetch: PREFETCH });
  let scheduler: InstanceType<typeof Scheduler> | undefined;
  let open: Promise<void> | undefined;
  // A process that only adds work: until taskheap has producers (issue 13),
  // the bench adds through the store, which is what a durable schedule()
  // does once its arguments are checked.
  const row = (job: BenchJob) => ({
    name: 'noop',
    key: null,
    payload: JSON.stringify(payload(job)),
    runAt: job.due ?? Date.now(),
    maxAttempts: 1,
    options: '{}',
  });
  const add = (job: BenchJob) => store.addTask(row(job));
  return {
    prepare: async () => {
      await store.migrate();
      await store.close();
    },
    addOne: async (job) => {
      await (open ??= store.migrate());
      await add(job);
    },
    // What scheduler.scheduleMany() does once every item is checked: one statement, one transaction.
    addMany: async (jobs) => {
      await (open ??= store.migrate());
      await store.addTasks(jobs.map(row));
    },
    work: async (concurrency, onJob) => {
      scheduler = new Scheduler({
        store,
        workers: concurrency,
        retention: { succeeded: 0 },
        onError: (error) => process.stderr.write(`taskheap: ${String(error)}\n`),
      });
      scheduler.define('noop', (_ctx, job: BenchJob) => onJob(job));
      await scheduler.start();
    },
    close: async () => {
      if (scheduler !== undefined) await scheduler.close();
      else await store.close();
    },
  };
}

async function graphileWorker(target: Target): Promise<Contender> {
  const gw = await (await peers()).graphile();
  const logger = new gw.Logger(() => () => {});
  const preset = {
    worker: {
      connectionString: target.pgUrl,
      concurrentJobs: CONCURRENCY,
      maxPoolSize: CONCURRENCY + 1,
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
  let utils: any;
  let runner: any;
  const getUtils = async () => (utils ??= await gw.makeWorkerUtils({ connectionString: target.pgUrl, logger }));
  const spec = (job: BenchJob) => ({
    identifier: 'noop',
    payload: payload(job),
    ...(job.due === undefined ? {} : { runAt: new Date(job.due) }),
  });
  return {
    prepare: () => gw.runMigrations({ connectionString: target.pgUrl, logger }),
    addOne: async (job) => {
      const { identifier, payload: data, ...options } = spec(job);
      await (await getUtils()).addJob(identifier, data, options);
    },
    addMany: async (jobs) => {
      await (await getUtils()).addJobs(jobs.map(spec));
    },
    work: async (_concurrency, onJob) => {
      runner = await gw.run({ preset, logger, noHandleSignals: true, taskList: { noop: async (job: BenchJob) => onJob(job) } });
    },
    close: async () => {
      await runner?.stop();
      await utils?.release();
    },
  };
}

async function pgBoss(target: Target): Promise<Contender> {
  const module = await (await peers()).pgBoss();
  const PgBoss = module.PgBoss ?? module.default;
  const boss = new PgBoss({ connectionString: target.pgUrl });
  boss.on('error', (error: unknown) => process.stderr.write(`pg-boss: ${String(error)}\n`));
  let started: Promise<unknown> | undefined;
  const start = () => (started ??= boss.start());
  const options = (job: BenchJob) => (job.due === undefined ? {} : { startAfter: new Date(job.due) });
  return {
    prepare: async () => {
      await start();
      await boss.createQueue('bench');
      await boss.stop({ graceful: false });
    },
    addOne: async (job) => {
      await start();
      await boss.send('bench', payload(job), options(job));
    },
    addMany: async (jobs) => {
      await start();
      await boss.insert(
        'bench',
        jobs.map((job) => ({ data: payload(job), ...options(job) })),
      );
    },
    work: async (concurrency, onJob) => {
      await start();
      await boss.work(
        'bench',
        { batchSize: concurrency, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
        async (jobs: { data: BenchJob }[]) => {
          for (const job of jobs) onJob(job.data);
        },
      );
    },
    close: async () => {
      if (started !== undefined) await boss.stop({ graceful: true, wait: true });
    },
  };
}

async function bullmq(target: Target): Promise<Contender> {
  const { Queue, Worker } = await (await peers()).bullmq();
  const { Redis } = await (await peers()).ioredis();
  // BullMQ 6 loads no Redis client of its own under ESM: each queue and worker gets one.
  const connect = () => new Redis(target.redisUrl!, { maxRetriesPerRequest: null });
  const queue = new Queue(target.queue, { connection: connect() });
  let worker: any;
  const options = (job: BenchJob) => (job.due === undefined ? {} : { delay: Math.max(0, job.due - Date.now()) });
  return {
    prepare: async () => {},
    addOne: async (job) => {
      await queue.add('noop', payload(job), options(job));
    },
    addMany: async (jobs) => {
      await queue.addBulk(jobs.map((job) => ({ name: 'noop', data: payload(job), opts: options(job) })));
    },
    work: async (concurrency, onJob) => {
      worker = new Worker(target.queue, async (job: { data: BenchJob }) => onJob(job.data), { connection: connect(), concurrency });
      await worker.waitUntilReady();
    },
    close: async () => {
      await worker?.close();
      await queue.close();
    },
  };
}

/**
 * BullMQ 6 on PostgreSQL: the same Queue and Worker, built by
 * `createPostgresBackend` (docs/gitbook/guide/postgresql.md of BullMQ):
 * migrations run once by `runMigrations()`, a pool sized for the worker's
 * concurrency, and `removeOnComplete` so finished jobs leave the table.
 */
async function bullmqPostgres(target: Target): Promise<Contender> {
  const { Queue, Worker, createPostgresBackend, runMigrations } = await (await peers()).bullmq();
  const connection = { connectionString: target.pgUrl, max: CONCURRENCY };
  let queue: any;
  const getQueue = () => (queue ??= new Queue('bench', { connection }, createPostgresBackend));
  let worker: any;
  const options = (job: BenchJob) => ({
    removeOnComplete: true,
    ...(job.due === undefined ? {} : { delay: Math.max(0, job.due - Date.now()) }),
  });
  return {
    prepare: () => migrateBullmq(target.pgUrl, runMigrations),
    addOne: async (job) => {
      await getQueue().add('noop', payload(job), options(job));
    },
    addMany: async (jobs) => {
      await getQueue().addBulk(jobs.map((job) => ({ name: 'noop', data: payload(job), opts: options(job) })));
    },
    work: async (concurrency, onJob) => {
      worker = new Worker('bench', async (job: { data: BenchJob }) => onJob(job.data), { connection, concurrency }, createPostgresBackend);
      await worker.waitUntilReady();
    },
    close: async () => {
      await worker?.close();
      await queue?.close();
    },
  };
}

export const CONTENDERS: Record<string, (target: Target) => Promise<Contender>> = {
  taskheap,
  'graphile-worker': graphileWorker,
  'pg-boss': pgBoss,
  bullmq,
  'bullmq-postgres': bullmqPostgres,
};
