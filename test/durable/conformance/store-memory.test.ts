// The store conformance suite (test/durable/conformance/) in memory: a
// Scheduler without a store, on a ManualClock. What memory does not do is
// said by its capabilities (no Store to call, keys that add beside a running
// task, no stored jobs or batches), and the scenarios that need it are
// skipped, naming the capability; everything else runs as on the stores.
//
// The scenarios speak the durable API: `define(name, handler)`, then
// `schedule(when, name, { payload })`, and reads by id (`getTask`,
// `listTasks`). In memory a task is a function and the caller keeps its
// `Task` handle, so `MemoryScheduler` below maps the one to the other and
// nothing more: a handler name to the function defined for it (with its
// payload, and its `define()` queue as the task's `queue` option), each
// `Task` handle it got back by id, read as the store's record would show
// it (its state, attempts, due time, key and limits as the loop holds them;
// its handler name and payload as the call gave them). It decides nothing:
// dedupe, limits, queues, retries, flows and validation are the in-memory
// engine's. (An in-memory flow's tasks are read, cancelled and retried by
// id through `scheduler.flows`, as this base has it.)
import {
  Scheduler,
  type DefineOptions,
  type DurableTaskItem,
  type EnqueuedTask,
  type Flows,
  type Handler,
  type StoredJob,
  type StoredJobOptions,
  type StoredTask,
  type Task,
  type TaskFilter,
  type TaskContext,
  type TaskOptions,
  type When,
} from '../../../src/index.js';
import type { FlowSpec, FlowTask } from '../../../src/durable/flow-graph.js';
import type { Store } from '../../../src/durable/store.js';
import type { JobBounds, RulePlan } from '../../../src/rules/plan.js';
import { storeConformance } from './index.js';
import type { StoreOptions } from './backend.js';

/** A task added through `schedule()`: its handle, and what the call gave. */
interface Added {
  task: Task;
  name: string;
  payload: unknown;
  createdAt: number;
  startedAt?: number;
  result?: unknown;
  lastError: string | null;
}

function errorText(error: unknown): string {
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}

/**
 * A Scheduler without a store, spoken to as the scenarios speak to one with
 * a store: handler names mapped to the functions defined for them, and the
 * `Task` handles it returned read by id.
 */
class MemoryScheduler extends Scheduler {
  readonly #handlers = new Map<string, { handler: Handler; queue: string | undefined }>();
  readonly #added = new Map<number, Added>();
  /** The ids of in-memory flows' tasks (their own id space: an id must not name a task of both). */
  readonly #flowTasks = new Set<number>();

  override define(name: string, handler: Handler | URL, options: DefineOptions = {}): this {
    if (typeof handler !== 'function') throw new TypeError('memory: define() a function');
    this.#handlers.set(name, { handler, queue: options.queue });
    return this;
  }

  // One implementation of Scheduler.schedule's overloads: a handler name here, the rest as they are.
  override schedule(when: When, fn: any, options?: any): any {
    if (typeof fn !== 'string') return super.schedule(when, fn, options);
    const { payload, ...rest } = (options ?? {}) as { payload?: unknown; queue?: string };
    const defined = this.#handlers.get(fn);
    if (defined === undefined) throw new TypeError(`memory: no function defined for the handler name ${JSON.stringify(fn)}`);
    const queue = rest.queue ?? defined.queue;
    const taskOptions: TaskOptions = { ...rest, name: fn, ...(queue === undefined ? {} : { queue }) };
    const record: Omit<Added, 'task'> = { name: fn, payload, createdAt: this.clock.now(), lastError: null };
    const task = super.schedule(
      when,
      (ctx: TaskContext) => {
        record.startedAt = ctx.startedAt.getTime();
        return defined.handler(ctx as never, payload);
      },
      taskOptions,
    ) as Task;
    // An add that returned the key's existing task ('existing') added nothing: its record stays.
    let added = this.#added.get(task.id);
    if (added === undefined) {
      if (this.#flowTasks.has(task.id)) throw new Error(`memory: id ${task.id} names a flow's task and a scheduled task`);
      added = Object.assign(record, { task });
      this.#added.set(task.id, added);
      const noted = added;
      task.result.then(
        (value) => (noted.result = value),
        (error) => (noted.lastError = errorText(error)),
      );
    }
    const view = this.#view(added) as EnqueuedTask;
    Object.defineProperty(view, 'enqueued', { value: task.enqueued ?? 'inserted', enumerable: false });
    return Promise.resolve(view);
  }

  /** Memory adds one task per call: a batch's items, one by one, in order. */
  override scheduleMany(items: readonly DurableTaskItem[]): Promise<EnqueuedTask[]> {
    return Promise.all(items.map(({ when, name, ...options }) => this.schedule(when, name, options)));
  }

  /**
   * A task added through `schedule()`, as a store's record shows it: its
   * state, attempts, due time and limits as the loop holds them (its
   * settings, validated), its name and payload as the call gave them.
   */
  #view(added: Added): StoredTask {
    const { task } = added;
    const settings = task._settings;
    const limits = settings.limits;
    const rate = limits?.rate;
    return {
      id: task.id,
      name: added.name,
      key: limits?.dedupe?.key ?? null,
      payload: added.payload,
      state: task.state,
      attempts: task.attempts,
      maxAttempts: settings.retry?.attempts ?? 1,
      runAt: task.runAt,
      lastError: added.lastError,
      jobKey: null,
      createdAt: new Date(added.createdAt),
      updatedAt: new Date(added.createdAt),
      result: added.result,
      errors: [],
      // As a store shows them: `serial` is a concurrency group of limit 1, shown as the serial group alone.
      serial: limits?.serial ?? null,
      priority: limits?.priority ?? 0,
      concurrency: limits?.serial === undefined ? (limits?.concurrency ?? null) : null,
      rate: rate === undefined ? null : { group: rate.group, limit: rate.limit, interval: rate.interval },
      queue: limits?.queue ?? 'default',
      startedAt: added.startedAt === undefined ? null : new Date(added.startedAt),
    };
  }

  #flows(): Flows {
    return super.flows;
  }

  /** `scheduler.flows`, its tasks' handler names mapped to functions. */
  override get flows(): Flows {
    const flows = this.#flows();
    const add = (spec: FlowSpec) => {
      const tasks: Record<string, FlowTask> = {};
      for (const [name, task] of Object.entries(spec.tasks ?? {})) {
        const defined = typeof task.handler === 'string' ? this.#handlers.get(task.handler) : undefined;
        tasks[name] =
          defined === undefined
            ? task
            : { ...task, handler: (ctx, payload) => defined.handler(ctx as never, payload), queue: task.queue ?? defined.queue };
      }
      // Throws at the call as the in-memory flows do; the ids are noted once it is added.
      return flows.add({ ...spec, tasks }).then((flow) => {
        for (const task of Object.values(flow.tasks)) {
          if (this.#added.has(task.id)) throw new Error(`memory: id ${task.id} names a flow's task and a scheduled task`);
          this.#flowTasks.add(task.id);
        }
        return flow;
      });
    };
    return new Proxy(flows, {
      get(target, property) {
        if (property === 'add') return (spec: FlowSpec) => (spec !== null && typeof spec === 'object' ? add(spec) : flows.add(spec));
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  override getTask(id: number): Promise<StoredTask | undefined> {
    const added = this.#added.get(id);
    if (added !== undefined) return Promise.resolve(this.#view(added));
    return Promise.resolve(this.#flowTasks.has(id) ? this.#flows().memoryTask(id) : undefined);
  }

  override async listTasks(filter: TaskFilter = {}): Promise<StoredTask[]> {
    const all = [...this.#added.values()].map((added) => this.#view(added));
    for (const id of this.#flowTasks) {
      const task = this.#flows().memoryTask(id);
      if (task) all.push(task);
    }
    return all
      .filter(
        (task) =>
          (filter.state === undefined || task.state === filter.state) &&
          (filter.name === undefined || task.name === filter.name) &&
          (filter.queue === undefined || task.queue === filter.queue) &&
          (filter.keyPrefix === undefined || (task.key ?? '').startsWith(filter.keyPrefix)) &&
          (filter.jobKey === undefined || task.jobKey === filter.jobKey),
      )
      .sort((a, b) => a.runAt.getTime() - b.runAt.getTime() || a.id - b.id)
      .slice(0, filter.limit ?? 100);
  }

  override cancelTask(id: number): Promise<boolean> {
    const added = this.#added.get(id);
    if (added !== undefined) return Promise.resolve(added.task.cancel());
    // In-memory flows' tasks are cancelled by id (the task verbs reach them without a store).
    return this.#flowTasks.has(id) ? super.cancelTask(id) : Promise.resolve(false);
  }

  override retryTask(id: number): Promise<StoredTask> {
    // In-memory flows' tasks are retried by id; a scheduled function task cannot be (the scheduler says so).
    return super.retryTask(id);
  }

  override async waitFor(id: number, options: { signal?: AbortSignal; timeout?: number } = {}): Promise<StoredTask> {
    const added = this.#added.get(id);
    if (added === undefined) return super.waitFor(id, options);
    await added.task.result.catch(() => {});
    return this.#view(added);
  }

  /** A job of a handler name: an in-memory job of the function defined for it (memory has no job keys: `storedJobs`). */
  override createStoredJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    const { payload, key, ...rest } = options ?? {};
    if (key !== undefined) throw new Error('memory: a job key needs a store (caps.storedJobs)');
    const defined = this.#handlers.get(name);
    if (defined === undefined) throw new TypeError(`memory: no function defined for the handler name ${JSON.stringify(name)}`);
    const queue = rest.queue ?? defined.queue;
    const job = this.createJob(
      (ctx) => defined.handler(ctx as never, payload),
      { ...rest, name, ...(queue === undefined ? {} : { queue }) },
      plan,
      bounds,
    );
    return Promise.resolve(this.#jobView(job, name, payload));
  }

  override async listJobs(): Promise<StoredJob[]> {
    return this.jobs().map((job) => this.#jobView(job, job.name ?? '', undefined));
  }

  #jobView(job: ReturnType<Scheduler['jobs']>[number], name: string, payload: unknown): StoredJob {
    const at = new Date(this.clock.now());
    return {
      key: String(job.id),
      name,
      payload,
      state: job.state,
      nextRunAt: job.nextRunAt ?? null,
      runs: job.runs,
      lastRunAt: job.lastRunAt ?? null,
      counts: { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 },
      createdAt: at,
      updatedAt: at,
      rule: job.rule,
    };
  }
}

/** What `db.store()` gives in memory: nothing to call (caps.store is false), only closed after the test. */
function noStore(_options: StoreOptions = {}): Store {
  const stub = { close: async () => {} };
  return new Proxy(stub, {
    get(target, property) {
      if (property in target) return Reflect.get(target, property);
      throw new Error(`memory has no Store (caps.store is false): a scenario read store.${String(property)}`);
    },
  }) as unknown as Store;
}

const noDatabase = (what: string) => () => {
  throw new Error(`memory has no database (caps.store is false): a scenario called db.${what}`);
};

storeConformance({
  name: 'memory',
  caps: {
    store: false,
    oneTaskPerKey: false,
    storedJobs: false,
    cancelIsFinal: false,
    handlerNames: false,
    batches: false,
    // A ManualClock drives the in-memory loop.
    clockDriven: true,
    multiProcess: false,
    notify: false,
    transactionsWithClient: false,
  },
  async fresh() {
    return {
      store: noStore,
      ownerDies: noDatabase('ownerDies'),
      writeNewerSchema: noDatabase('writeNewerSchema'),
      tables: noDatabase('tables'),
      refuseLongPayloads: noDatabase('refuseLongPayloads'),
    };
  },
  // No store: the scenario's options (a poll, a prefetch, a lease) mean nothing here, and nothing polls.
  scheduler: ({ store: _store, ...options }) => new MemoryScheduler(options),
});
