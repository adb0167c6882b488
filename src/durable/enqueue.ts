// Enqueue: what producers add to the store (schedule, scheduleMany, addJob)
// and the parsing of their options into what is stored. Everything is
// checked at the call, before anything is written, so a bad option throws
// where it was given; the stored options are then read back once per claim
// (dispatch.ts).
import type { JobBounds, RulePlan } from '../rules/plan.js';
import type { RetryOptions, RetryPolicy } from '../core/retry.js';
import { describe, keysOf, toEpoch } from '../core/validate.js';
import { toDedupe } from '../core/limit-options.js';
import {
  DEDUPE_KEYS,
  JOB_POLICY_KEYS,
  LIMIT_KEYS,
  RUN_KEYS,
  toJobPolicy,
  toLimits,
  toRun,
  type DedupeOptions,
  type JobPolicyOptions,
  type LimitOptions,
  type RunOptions,
} from '../core/options.js';
import type { DurableTaskOptions, StoredJobOptions, StoredOptions } from './options.js';
import { ruleToJson } from './rule-json.js';
import type { EnqueuedTask, NewJob, NewTask, QueryClient, Store, StoredJob } from './store.js';
import { assertKey, assertStoredTime, MAX_ATTEMPTS, STORE_RULES, toPayload } from './validate.js';
import type { Handlers } from './handlers.js';
import { JobKeyError } from './errors.js';
import { DEFAULT_QUEUE } from './queues.js';

/** The groups' keys: a field of an options type that no group has must be named beside them (else it does not compile). */
type GroupKey = keyof RunOptions | keyof LimitOptions | keyof DedupeOptions | keyof JobPolicyOptions;

/** A stored task's options: a run's, its limits and its dedupe key, with its payload and the caller's transaction. */
const TASK_KEYS: ReadonlySet<string> = new Set([
  ...keysOf<Omit<DurableTaskOptions, GroupKey>>({ payload: true, client: true }),
  ...RUN_KEYS,
  ...LIMIT_KEYS,
  ...DEDUPE_KEYS,
]);
/** A stored job's: a run's, its limits and the job policies but jitter, with its payload, key and name. */
const JOB_KEYS: ReadonlySet<string> = new Set([
  ...keysOf<Omit<StoredJobOptions, GroupKey>>({ payload: true, name: true }),
  'key',
  ...RUN_KEYS,
  ...LIMIT_KEYS,
  ...JOB_POLICY_KEYS.filter((key) => key !== 'jitter'),
]);

/** @internal */
export class Enqueuer {
  readonly #store: Store;
  readonly #handlers: Handlers;
  /** Opens and migrates the store once (the client's `ready()`). */
  readonly #ready: () => Promise<void>;
  /** Tells the claimer that work is due at a time: it may need to look sooner. */
  readonly #wake: (runAt: number) => void;
  /** The scheduler's clock (a store without its own clock measures throttle periods and writes createdAt on it). */
  readonly #now: () => number;
  /**
   * The handlers with a stored job this process registered without `key`.
   * Such a job's key is its handler's name, so registering it again at every
   * start (each deploy, each replica) updates the one job; a second keyless
   * job of the handler in one process would silently replace the first.
   */
  readonly #keyless = new Set<string>();

  constructor(store: Store, handlers: Handlers, ready: () => Promise<void>, wake: (runAt: number) => void, now: () => number = Date.now) {
    this.#store = store;
    this.#handlers = handlers;
    this.#ready = ready;
    this.#wake = wake;
    this.#now = now;
  }

  /** Validates at once (throwing at the call), then resolves when the store has committed. */
  schedule(runAt: number, name: string, options: DurableTaskOptions | undefined): Promise<EnqueuedTask> {
    this.#handlers.assertSchedulable(name);
    assertStoredTime(runAt, 'when');
    const task = toNewTask(name, runAt, options, this.#handlers.queueOf(name));
    assertFairShares(this.#store, task.fairGroup);
    const client = toClient(options?.client, task);
    return this.#ready()
      .then(() => this.#store.addTask(task, client, this.#now()))
      .then((row) => {
        // A debounced task may be due later than asked: the row says when.
        this.#wake(row.enqueued === 'existing' ? runAt : row.runAt.getTime());
        return row;
      });
  }

  /**
   * Validates every item first (an error names the item's index, and
   * nothing is written), then adds them all in one transaction: the
   * caller's, when the items give their `client` (every item the same one).
   */
  scheduleMany(items: readonly { runAt: unknown; name: unknown; options: object }[]): Promise<EnqueuedTask[]> {
    const tasks: NewTask[] = [];
    let earliest = Infinity;
    let client: QueryClient | undefined;
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      try {
        if (typeof item.name !== 'string')
          throw new TypeError(`Expected \`name\` to be a handler name (a string), got ${describe(item.name)}`);
        this.#handlers.assertSchedulable(item.name);
        const runAt = toEpoch(item.runAt);
        assertStoredTime(runAt, 'when');
        tasks.push(toNewTask(item.name, runAt, item.options, this.#handlers.queueOf(item.name)));
        assertFairShares(this.#store, tasks[i]!.fairGroup);
        const given = toClient((item.options as DurableTaskOptions).client, tasks[i]!);
        if (i === 0) client = given;
        else if (given !== client) throw new TypeError(differentClient(client, given));
        earliest = Math.min(earliest, runAt);
      } catch (error) {
        if (error instanceof Error) error.message = `scheduleMany() item ${i}: ${error.message}`;
        throw error;
      }
    }
    if (tasks.length === 0) return Promise.resolve([]);
    // A producer that never started opens the store here, as schedule() does.
    return this.#ready()
      .then(() => this.#store.addTasks(tasks, client, this.#now()))
      .then((rows) => {
        this.#wake(earliest);
        return rows;
      });
  }

  addJob(name: string, options: StoredJobOptions | undefined, plan: RulePlan, bounds: JobBounds): Promise<StoredJob> {
    this.#handlers.assertSchedulable(name);
    const { payload, key, stored } = parseOptions(options, JOB_KEYS, 'durable job', this.#handlers.queueOf(name));
    assertFairShares(this.#store, stored.fair?.group);
    if (bounds.jitter !== 0) throw new TypeError('jitter() is not supported for stored jobs');
    if (plan.first !== undefined) assertStoredTime(plan.first, 'the first occurrence');
    if (bounds.until !== Infinity) assertStoredTime(bounds.until, 'until');
    if (bounds.times !== Infinity && bounds.times > MAX_ATTEMPTS) {
      throw new RangeError(`Expected \`times\` of a stored job to be at most ${MAX_ATTEMPTS}, got ${describe(bounds.times)}`);
    }
    if (key === null && this.#keyless.has(name)) throw new JobKeyError(name);
    const job: NewJob = {
      key: key ?? name,
      name,
      payload,
      rule: ruleToJson(plan.rule),
      nextRunAt: plan.first ?? null,
      remaining: bounds.times === Infinity ? null : bounds.times,
      until: bounds.until === Infinity ? null : bounds.until,
      options: JSON.stringify(stored),
    };
    if (key === null) this.#keyless.add(name);
    // Its counts and last run are read after: registration is rare, one more read is cheap. The
    // schedule is the one the registration wrote (a claim may already have advanced it since).
    const write = this.#ready().then(async () => {
      const row = await this.#store.addJob(job);
      const stats = await this.#store.getJob(row.key);
      return stats === undefined ? row : { ...row, lastRunAt: stats.lastRunAt, counts: stats.counts };
    });
    return write.then((row) => {
      if (plan.first !== undefined) this.#wake(plan.first);
      return row;
    });
  }
}

/** Refuses a fair share (`group`, if given) where the store's claim has none (its `capabilities.fairShares`). @internal */
export function assertFairShares(store: Store, group: string | null | undefined): void {
  if (group !== undefined && group !== null && !store.capabilities.fairShares)
    throw new TypeError(
      'Expected no `fair`: this store does not share starts between groups (its capabilities.fairShares is false); a scheduler without a store, sqliteStore() and postgresStore() do',
    );
}

/** The row a durable task's options make (validated). @internal */
export function toNewTask(name: string, runAt: number, options: object | undefined, handlerQueue: string | undefined): NewTask {
  const { payload, key, stored } = parseOptions(options, TASK_KEYS, 'durable task', handlerQueue);
  const dedupe = toDedupe(key ?? undefined, (options as DurableTaskOptions | undefined)?.dedupe, STORE_RULES.longestPeriod);
  const task: NewTask = {
    name,
    key,
    payload,
    runAt,
    maxAttempts: stored.retry?.attempts ?? 1,
    options: JSON.stringify(stored),
    serial: stored.serial ?? stored.concurrency?.group ?? null,
    priority: stored.priority ?? 0,
    rateGroup: stored.rate?.group ?? null,
    queue: stored.queue ?? DEFAULT_QUEUE,
    fairGroup: stored.fair?.group ?? null,
    fairWeight: stored.fair?.weight ?? 1,
  };
  if (dedupe !== undefined) task.dedupe = { mode: dedupe.mode, period: dedupe.period };
  // A debounced task is due its period after `when`: that time too must be storable.
  if (dedupe?.mode === 'debounce') assertStoredTime(runAt + dedupe.period, 'the due time of a debounce (when + dedupe.debounce)');
  return task;
}

/** The `client` option: undefined, or something with a `query()` (the store says whether it can use it). */
function toClient(client: unknown, task: NewTask): QueryClient | undefined {
  if (client === undefined) return undefined;
  if (typeof client !== 'object' || client === null || typeof (client as QueryClient).query !== 'function') {
    throw new TypeError(`Expected \`client\` to be a pg Client or PoolClient inside your transaction, got ${describe(client)}`);
  }
  // Following a running task writes its row: your transaction would hold it to its end while the worker waits to renew its lease.
  if (task.dedupe?.mode === 'rerun') {
    throw new TypeError(
      "Expected no `client` with `dedupe: 'rerun'`: following a running task changes its row, which your transaction would lock until it ends",
    );
  }
  return client as QueryClient;
}

function differentClient(first: QueryClient | undefined, given: QueryClient | undefined): string {
  const which =
    first === undefined
      ? 'item 0 gives none and this one gives one'
      : given === undefined
        ? 'this item gives none'
        : 'this item gives another';
  return `Expected every item to give the same \`client\`: the items are written in one transaction (${which})`;
}

/**
 * Checks a durable task's or job's options (each group by its validator, with
 * the store's rules) and turns them into the payload, key and options the
 * store keeps.
 */
function parseOptions(options: object | undefined, keys: ReadonlySet<string>, what: string, handlerQueue?: string) {
  const given = (options ?? {}) as DurableTaskOptions & StoredJobOptions;
  for (const key in given) {
    if (!keys.has(key)) throw new TypeError(`Unknown ${what} option \`${key}\`; expected one of: ${[...keys].join(', ')}`);
  }
  const limits = toLimits(given, STORE_RULES);
  const run = toRun(given, STORE_RULES);
  const policy = keys.has('overlap') ? toJobPolicy(given, STORE_RULES) : undefined;
  const { payload, key } = given;
  if (key !== undefined) assertKey(key, 'key');
  // The queue: given, else the handler's (define), else 'default' (left out of the stored options).
  const queue = given.queue ?? handlerQueue;
  const rate = limits?.rate;
  const stored: StoredOptions = {
    timeout: run.timeout === Infinity ? undefined : run.timeout,
    retry: run.retry === undefined ? undefined : storable(run.retry),
    overlap: policy === undefined ? undefined : (given.overlap as StoredOptions['overlap']),
    misfire: policy === undefined ? undefined : given.misfire,
    catchUp: policy?.catchUp,
    rate: rate === undefined ? undefined : { group: rate.group, limit: rate.limit, interval: rate.interval },
    serial: limits?.serial,
    concurrency: given.concurrency === undefined ? undefined : limits?.concurrency,
    priority: limits === undefined || limits.priority === 0 ? undefined : limits.priority,
    queue: queue === DEFAULT_QUEUE ? undefined : queue,
    fair: limits?.fair === undefined ? undefined : { group: limits.fair.group, weight: limits.fair.weight },
  };
  return { payload: toPayload(payload), key: key ?? null, stored };
}

/** A retry policy as JSON can hold it: JSON has no Infinity, so the default is left out. */
function storable(policy: RetryPolicy): RetryOptions {
  return policy.maxDelay === Infinity ? { ...policy, maxDelay: undefined } : policy;
}
