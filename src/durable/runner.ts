// The durable runner as a store brings it to the scheduler it is given:
// what the scheduler needs of durable/ only when it has a store (the worker,
// the checks of the options only a store reads, the warning of work that is
// not stored). sqliteStore() and postgresStore() carry it as their `runner`,
// so that `import { Scheduler } from 'taskheap'` never loads durable/ for a
// scheduler without a store: a user of a store imports its entry point
// anyway. A store of one's own, without it, has it loaded by the scheduler
// (scheduler-options.ts).
import type { TaskLoop } from '../core/loop.js';
import { schedulerClients } from './client.js';
import { toDurableQueues, type DurableQueueOptions } from './queues.js';
import type { Store } from './store.js';
import { warnLocalWork } from './warnings.js';
import { DEFAULT_RETENTION, DurableWorker, type Retention } from './worker.js';

/** What a scheduler with a store asks of durable/. @internal */
export interface DurableRunner {
  /** How long finished tasks are kept when the option `retention` leaves it out. */
  readonly retention: Retention;
  /** The option `queues` with a store, checked. */
  queues(value: unknown): Map<string, DurableQueueOptions>;
  /** The worker of `scheduler` on `store`, registered as its client for the dashboard. */
  worker(
    scheduler: object,
    store: Store,
    loop: TaskLoop,
    handlers: readonly string[] | undefined,
    retention: Retention,
    queues: Map<string, DurableQueueOptions> | undefined,
  ): DurableWorker;
  /** Warns, once per process, that work given as a function on a shared store is not stored. */
  warnLocalWork(): void;
}

/** The runner of taskheap's stores. @internal */
export const durableRunner: DurableRunner = {
  retention: DEFAULT_RETENTION,
  queues: toDurableQueues,
  worker(scheduler, store, loop, handlers, retention, queues) {
    const worker = new DurableWorker(store, loop, handlers, retention, queues);
    schedulerClients.set(scheduler, worker.client);
    return worker;
  },
  warnLocalWork,
};
