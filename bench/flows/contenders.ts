/**
 * The flows bench's contenders (bench/flows.ts): taskheap's flows, BullMQ's
 * FlowProducer on its PostgreSQL backend, and pg-boss's flow(), each adding
 * one of three workloads in one call and working it with 16 slots in one
 * process, on the same PostgreSQL server. Every handler is a no-op that
 * counts. Loaded only in the bench's child processes (Node 24, the peers
 * from node_modules/.cache/taskheap-peers: bench/peers/runtime.ts).
 */
import { migrateBullmq, peers } from '../peers/contenders.js';

/** independent: n tasks without dependencies; fan-in: n children, then one task after all of them; chain: n steps, each after the one before. */
export type Workload = 'independent' | 'fan-in' | 'chain';

export interface FlowContender {
  /** Migrations and queue creation: not timed. */
  prepare(): Promise<void>;
  /** Adds the workload (one call, one transaction where the system has one); returns how many tasks will run. */
  add(workload: Workload, n: number): Promise<number>;
  /** Starts working with 16 slots; `ran` is called once per task run. */
  work(ran: () => void): Promise<void>;
  close(): Promise<void>;
}

export const SLOTS = 16;

/** What each contender runs with, for the report. */
export const FLOW_SETTINGS: Record<string, string> = {
  taskheap: `postgresStore defaults, workers: ${SLOTS}; flows.add() (fan-in and chain), scheduleMany() (independent)`,
  'bullmq-postgres': `BullMQ 6 on its PostgreSQL backend (createPostgresBackend), Worker concurrency ${SLOTS}, pool max ${SLOTS}; FlowProducer.add() of one tree (a chain is a tree as deep as the chain), addBulk() in calls of 1,000 (independent)`,
  'pg-boss': `pg-boss 12 flow() (dependsOn), insert() in calls of 1,000 (independent); work() with batchSize ${SLOTS}, burstWhenBatchFull, pollingIntervalSeconds 0.5 and flowIntervalSeconds 1 (both their minimums: pg-boss unblocks dependents in a background pass every flowIntervalSeconds)`,
};

const CHUNK = 1_000;
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

async function taskheap(url: string): Promise<FlowContender> {
  const { Scheduler } = await import('../../src/index.js');
  const { postgresStore } = await import('../../src/postgres.js');
  const store = postgresStore({ connectionString: url });
  const scheduler = new Scheduler({ store, workers: SLOTS, onError: (error) => process.stderr.write(`taskheap: ${String(error)}\n`) });
  let ran = () => {};
  scheduler.define('step', () => void ran());
  return {
    prepare: () => store.migrate(),
    async add(workload, n) {
      if (workload === 'independent') {
        for (let i = 0; i < n; i += CHUNK)
          await scheduler.scheduleMany(range(Math.min(CHUNK, n - i)).map(() => ({ when: Date.now(), name: 'step' })));
        return n;
      }
      const tasks: Record<string, { handler: string; after?: string[] }> = {};
      if (workload === 'fan-in') {
        for (const i of range(n)) tasks[`c${i}`] = { handler: 'step' };
        tasks.parent = { handler: 'step', after: Object.keys(tasks) };
      } else {
        for (const i of range(n)) tasks[`s${i}`] = { handler: 'step', after: i === 0 ? [] : [`s${i - 1}`] };
      }
      await scheduler.flows.add({ tasks });
      return Object.keys(tasks).length;
    },
    async work(onRun) {
      ran = onRun;
      await scheduler.start();
    },
    close: () => scheduler.close({ abort: true }),
  };
}

async function bullmqPostgres(url: string): Promise<FlowContender> {
  const { Queue, Worker, FlowProducer, createPostgresBackend, runMigrations } = await (await peers()).bullmq();
  const connection = { connectionString: url, max: SLOTS };
  const queueName = 'flows';
  let queue: any;
  let producer: any;
  let worker: any;
  return {
    prepare: () => migrateBullmq(url, runMigrations),
    async add(workload, n) {
      if (workload === 'independent') {
        queue = new Queue(queueName, { connection }, createPostgresBackend);
        for (let i = 0; i < n; i += CHUNK)
          await queue.addBulk(range(Math.min(CHUNK, n - i)).map((k) => ({ name: 'step', data: { i: i + k } })));
        return n;
      }
      producer = new FlowProducer({ connection }, createPostgresBackend);
      // A BullMQ flow is a tree: a parent runs after its children.
      if (workload === 'fan-in') {
        await producer.add({
          name: 'parent',
          queueName,
          data: {},
          children: range(n).map((i) => ({ name: 'step', queueName, data: { i } })),
        });
        return n + 1;
      }
      let node: any = { name: 'step', queueName, data: { i: 0 } };
      for (let i = 1; i < n; i++) node = { name: 'step', queueName, data: { i }, children: [node] };
      await producer.add(node);
      return n;
    },
    async work(onRun) {
      worker = new Worker(queueName, async () => onRun(), { connection, concurrency: SLOTS }, createPostgresBackend);
      await worker.waitUntilReady();
    },
    async close() {
      await worker?.close(true);
      await producer?.close();
      await queue?.close();
    },
  };
}

async function pgBoss(url: string): Promise<FlowContender> {
  const module = await (await peers()).pgBoss();
  const PgBoss = module.PgBoss ?? module.default;
  const boss = new PgBoss({ connectionString: url, flowIntervalSeconds: 1 });
  boss.on('error', (error: unknown) => process.stderr.write(`pg-boss: ${String(error)}\n`));
  const queue = 'flows';
  return {
    async prepare() {
      await boss.start();
      await boss.createQueue(queue);
    },
    async add(workload, n) {
      if (workload === 'independent') {
        for (let i = 0; i < n; i += CHUNK)
          await boss.insert(
            queue,
            range(Math.min(CHUNK, n - i)).map((k) => ({ data: { i: i + k } })),
          );
        return n;
      }
      if (workload === 'fan-in') {
        const children = range(n).map((i) => ({ ref: `c${i}`, name: queue, data: { i } }));
        await boss.flow([...children, { ref: 'parent', name: queue, data: {}, dependsOn: children.map((c) => c.ref) }]);
        return n + 1;
      }
      await boss.flow(range(n).map((i) => ({ ref: `s${i}`, name: queue, data: { i }, ...(i === 0 ? {} : { dependsOn: [`s${i - 1}`] }) })));
      return n;
    },
    async work(onRun) {
      await boss.work(queue, { batchSize: SLOTS, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, async (jobs: unknown[]) => {
        for (const _ of jobs) onRun();
      });
    },
    close: () => boss.stop({ graceful: false }),
  };
}

export const FLOW_CONTENDERS: Record<string, (url: string) => Promise<FlowContender>> = {
  taskheap,
  'bullmq-postgres': bullmqPostgres,
  'pg-boss': pgBoss,
};
