// The types of durable work as users write it: a handler and its context,
// the options of a stored task and of a stored job, and what is stored of them.
import type { When } from '../core/validate.js';
import type { Duration } from '../core/duration.js';
import type { RetryOptions } from '../core/retry.js';
import type { TaskContext } from '../core/task.js';
import type { ConcurrencyLimit, DedupeMode, KeyedRateLimit } from '../core/limit-options.js';
import type { StoredState } from './store.js';

/** What a durable handler receives: the run's context plus the stored task's id. */
export interface DurableContext extends TaskContext {
  /**
   * The stored task's id: the same on every delivery of the task, so a
   * handler can use it to make its effects idempotent.
   */
  readonly id: number;
  /**
   * PostgreSQL only: runs `fn` in a transaction on the store's database and
   * records this task `succeeded` (its result: what `fn` returns) in the
   * same transaction, so the handler's database writes and the task's
   * completion commit together or not at all. If the lease was lost
   * meanwhile it rolls back and rejects with `LeaseLostError`. Return (or
   * await) its promise from the handler. Rejects on SQLite.
   * @example
   * scheduler.define('pay', (ctx, { order }) => ctx.transaction(async (client) => {
   *   await client.query('UPDATE orders SET paid = true WHERE id = $1', [order]);
   *   return { paid: order };
   * }));
   */
  // biome-ignore lint/suspicious/noExplicitAny: rows are whatever the caller's statement returns, as pg types them
  transaction<T>(fn: (client: { query(text: string, values?: unknown[]): Promise<{ rows: any[] }> }) => Promise<T>): Promise<T>;
  /**
   * Flows (see docs/flows.md): the tasks this one depends on, in the order
   * of its \`after\`, each with its id, handler name, state, \`result\` and
   * \`error\`. A failed one appears only if its rule is \`'continue'\` (an
   * \`'ignore'\` failure is left out). Empty for a task without dependencies.
   * @example
   * scheduler.define('album', async (ctx) => {
   *   const photos = (await ctx.dependencies()).map((dep) => dep.result);
   * });
   */
  dependencies(): Promise<DependencyInfo[]>;
}

/** A named handler: what durable tasks run. The payload is the stored JSON, parsed. */
// biome-ignore lint/suspicious/noExplicitAny: a handler defined without a payload type accepts any JSON payload
export type Handler<P = any> = (ctx: DurableContext, payload: P) => unknown;

/** Options of a durable `schedule(when, name, options)`. */
export interface DurableTaskOptions {
  /** JSON-serialisable data handed to the handler. */
  payload?: unknown;
  /**
   * Makes scheduling idempotent: one stored task per key. What an add with a
   * key already stored does is `dedupe`'s choice (by default it replaces a
   * waiting task).
   */
  key?: string;
  /**
   * How a task meets the task already stored with its `key` (needs `key`).
   * Decided atomically by the database, so concurrent adds of one key from
   * many processes end as if they came one after another. The returned task
   * says what happened (`enqueued`: `'inserted'`, `'replaced'` or `'existing'`).
   * - `'replace'`: replaces a waiting task (new payload, time, options);
   *   a running one is left alone and returned; a finished one is
   *   overwritten and runs again.
   * - `'keep'`: a waiting or running task is returned unchanged; otherwise
   *   the task is added (over a finished one).
   * - `{ throttle: period }`: at most one task per key per period, finished
   *   ones included: if the key's task was created less than `period` ago
   *   (whatever its state), it is returned unchanged; otherwise as
   *   `'replace'`. A throttled add that writes the task sets its `createdAt`:
   *   the next period starts there.
   * - `{ debounce: period }`: as `'replace'`, and the task is due `period`
   *   after `when`: each add pushes the waiting task back, and with `when`
   *   now the last one runs once the key has been quiet for `period`. A
   *   running task is left alone and returned.
   *
   * The modes mean what they mean in memory (`TaskOptions.dedupe`), with one
   * stored task per key: see docs/dedupe.md. A throttle's
   * period is measured on the database server's clock with PostgreSQL, on
   * the scheduler's clock with SQLite; a period is a duration (ms or a
   * string such as `'1m'`) from 1 ms to ten years.
   * @default 'replace'
   * @example
   * // one digest per user per hour, however many events ask for one
   * await scheduler.schedule(Date.now(), 'digest', { key: `digest:${user}`, dedupe: { throttle: '1h' } });
   * // re-index once edits stop for 10 s
   * await scheduler.schedule(Date.now(), 'reindex', { key: `reindex:${doc}`, payload: { doc }, dedupe: { debounce: '10s' } });
   */
  dedupe?: DedupeMode;
  /** milliseconds or a string such as `'30s'`; see TaskOptions.timeout */
  timeout?: Duration;
  /** see TaskOptions.retry */
  retry?: RetryOptions | number;
  /**
   * PostgreSQL only: a `pg` client inside the caller's own transaction
   * (`BEGIN` sent, not yet committed). The task is written through it, so it
   * is stored if and only if that transaction commits; workers hear of it
   * at the commit.
   * @example
   * await client.query('BEGIN');
   * await client.query('INSERT INTO orders ...');
   * await scheduler.schedule(Date.now(), 'email-receipt', { payload: { order }, client });
   * await client.query('COMMIT');
   */
  client?: { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };
  /**
   * A rate limit shared by every task naming the same `key`: at most `limit`
   * starts in any window of `interval`. Enforced by the store at the claim:
   * with PostgreSQL across every process, by the database's clock (a retry
   * is a start).
   * @example { key: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: KeyedRateLimit;
  /**
   * At most `limit` tasks naming the same `key` run at once; with PostgreSQL
   * across every process. A task holds its slot from its start to its final
   * state (a retry keeps it). `serial: key` is `limit: 1`; a task names one
   * or the other. A key's tasks start in due order.
   * @example { key: `tenant:${tenantId}`, limit: 3 }
   */
  concurrency?: ConcurrencyLimit;
  /**
   * Tasks sharing a serial key run one at a time, in due order (due time,
   * then id; priority does not reorder one key's tasks). Enforced by the
   * database: with PostgreSQL across every process. A task waiting for its
   * retry keeps the key.
   * @example `chat:${chatId}`
   */
  serial?: string;
  /**
   * Higher runs first when more tasks are due than workers are free: the
   * claim orders due tasks by priority, then due time. An integer.
   * @default 0
   */
  priority?: number;
  /**
   * The named queue the task belongs to: its per-process and global
   * concurrency, rate and pause apply (see `scheduler.queue(name)`).
   * @default the handler's queue (`define(name, handler, { queue })`), else 'default'
   * @example 'emails'
   */
  queue?: string;
}

/**
 * One task of `scheduler.scheduleMany()`: when, which handler, and the
 * options of a durable `schedule()`. A `client` must be the same on every
 * item: the batch is written in one transaction, the caller's.
 */
export interface DurableTaskItem extends DurableTaskOptions {
  /** a `Date`, epoch milliseconds, or a luxon `DateTime` */
  when: When;
  /** The handler name given to `define()`. */
  name: string;
}

/** Options a stored task or job keeps with it, as JSON. @internal */
export interface StoredOptions {
  timeout?: number;
  retry?: RetryOptions;
  overlap?: 'skip' | 'allow';
  misfire?: 'once' | 'skip' | 'all';
  catchUp?: number;
  /** The key's rate limit, interval in ms. */
  rate?: { key: string; limit: number; interval: number };
  /** The key's concurrency limit; the serial column holds its key. */
  concurrency?: { key: string; limit: number };
  serial?: string;
  priority?: number;
  /** The named queue; absent: 'default'. */
  queue?: string;
}

/** Options of `run(name, options)` for a stored job (a scheduler with a `store`). */
export interface StoredJobOptions {
  /** A label for logs and errors. */
  name?: string;
  /** JSON-serialisable data handed to the handler on every run. */
  payload?: unknown;
  /** Registering a job with the same key again updates it instead of adding one. */
  key?: string;
  /** milliseconds or a string such as `'30s'`; see TaskOptions.timeout */
  timeout?: Duration;
  /** see TaskOptions.retry */
  retry?: RetryOptions | number;
  /**
   * A run that comes due while the previous one is still running somewhere is
   * skipped (`'skip'`) or run alongside it (`'allow'`); `'queue'` is not
   * available for stored jobs.
   * @default 'skip'
   */
  overlap?: 'skip' | 'allow';
  /**
   * Occurrences missed while no process was running collapse into one late run
   * (`'once'`), are dropped (`'skip'`), or all run (`'all'`).
   * @default 'once'
   */
  misfire?: 'once' | 'skip' | 'all';
  /**
   * With `misfire: 'all'`, the most missed occurrences one catch-up inserts;
   * the rest are dropped and the job resumes at its next future occurrence.
   * @default 1000
   */
  catchUp?: number;
  /**
   * A rate limit shared by every task naming the same `key`: at most `limit`
   * starts in any window of `interval`. Stored with the job and its occurrences; enforced by the store at the claim:
   * with PostgreSQL across every process, by the database's clock (a retry
   * is a start).
   * @example { key: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: KeyedRateLimit;
  /**
   * At most `limit` tasks naming the same `key` run at once; with PostgreSQL
   * across every process. A task holds its slot from its start to its final
   * state (a retry keeps it). `serial: key` is `limit: 1`; a task names one
   * or the other. A key's tasks start in due order.
   * @example { key: `tenant:${tenantId}`, limit: 3 }
   */
  concurrency?: ConcurrencyLimit;
  /**
   * Tasks sharing a serial key run one at a time, in due order (due time,
   * then id; priority does not reorder one key's tasks). Enforced by the
   * database: with PostgreSQL across every process. A task waiting for its
   * retry keeps the key.
   * @example `chat:${chatId}`
   */
  serial?: string;
  /**
   * Higher runs first when more tasks are due than workers are free: the
   * claim orders due tasks by priority, then due time. An integer.
   * @default 0
   */
  priority?: number;
  /**
   * The named queue the job's occurrences belong to (see `scheduler.queue(name)`).
   * @default the handler's queue (`define(name, handler, { queue })`), else 'default'
   */
  queue?: string;
}

/**
 * What a dependent does when a task it depends on ends `failed`,
 * `timed-out` or `cancelled`:
 * - `'fail'` (the default): it does not run; it ends `failed` (`cancelled`
 *   if the dependency was cancelled), and so do, in turn, the tasks that
 *   depend on it by this rule.
 * - `'continue'`: it runs once its other dependencies are done, and
 *   `ctx.dependencies()` shows the failure (state and error).
 * - `'ignore'`: it runs once its other dependencies are done, as if this one
 *   were not a dependency: `ctx.dependencies()` leaves it out.
 */
export type OnFailure = 'fail' | 'continue' | 'ignore';

/** A dependency as `ctx.dependencies()` and `getDependencies()` show it. */
export interface DependencyInfo {
  /** The dependency's id. */
  readonly id: number;
  /** Its handler. */
  readonly name: string;
  /** Its state now (final once the dependent runs). */
  readonly state: StoredState;
  /** What its handler returned, once it succeeded. */
  readonly result: unknown;
  /** Its last error, if it failed. */
  readonly error: string | null;
  /** The dependent's rule for it. */
  readonly onFailure: OnFailure;
}
