// The types of durable work as users write it: a handler and its context,
// the options of a stored task and of a stored job, and what is stored of them.
import type { When } from '../core/validate.js';
import type { RetryOptions } from '../core/retry.js';
import type { TaskContext } from '../core/task.js';
import type { FairShare } from '../core/limit-options.js';
import type { DedupeOptions, JobPolicyOptions, LimitOptions, RunOptions } from '../core/options.js';
import type { DependencyInfo } from './store.js';

/** The connection `ctx.transaction()` and `ctx.transactionStep()` hand their callback: one of the store's, in a transaction. */
export interface TransactionClient {
  /** Runs one statement with its `$1`... values, in the transaction. */
  query(
    text: string,
    values?: unknown[],
  ): Promise<{
    /** The rows it returned. */
    // biome-ignore lint/suspicious/noExplicitAny: rows are whatever the caller's statement returns, as pg types them
    rows: any[];
  }>;
}

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
  transaction<T>(fn: (client: TransactionClient) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL only: a step (`ctx.step()`) whose database writes commit
   * with its record. Runs `fn` in a transaction on the store's database and
   * records the step, with what `fn` returns, in that same transaction: its
   * writes happen exactly once, and a run after a crash, a retry or a sleep
   * returns the kept value without running `fn`. If `fn` throws it rolls
   * back and the attempt fails as a step's would; if the lease was lost
   * meanwhile it rolls back and rejects with `LeaseLostError`. Rejects on
   * SQLite and in memory.
   * @example
   * const charge = await ctx.transactionStep('charge', async (client) => {
   *   const { rows } = await client.query('INSERT INTO charges (order_id) VALUES ($1) RETURNING id', [order]);
   *   return rows[0].id;
   * });
   */
  transactionStep<T>(name: string, fn: (client: TransactionClient) => Promise<T>): Promise<T>;
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

/**
 * Options of a durable `schedule(when, name, options)`: a run's, its limits
 * and its dedupe key, as in memory, plus its payload and the caller's
 * transaction. What differs from memory: the limits are enforced by the
 * store (with PostgreSQL across every process, by the database's clock); a
 * store keeps one task per key, so `dedupe` returns a running task rather
 * than adding one beside it, and periods go up to ten years; a `timeout` is
 * at most 2^31 - 1 ms and `retry.attempts` at most 2^31 - 1.
 */
export interface DurableTaskOptions extends RunOptions, LimitOptions, DedupeOptions {
  /** JSON-serialisable data handed to the handler. */
  payload?: unknown;
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
  /** The group's rate limit, interval in ms. */
  rate?: { group: string; limit: number; interval: number };
  /** The group's concurrency limit; the serial column holds its group. */
  concurrency?: { group: string; limit: number };
  serial?: string;
  priority?: number;
  /** The named queue; absent: 'default'. */
  queue?: string;
  /** The fair share, its weight given; its group is in the fair_group column too. */
  fair?: Required<FairShare>;
}

/**
 * Options of `run(name, options)` for a stored job (a scheduler with a
 * `store`): a run's and its limits, as in memory, and the job's policies but
 * `jitter`; its occurrences are stored tasks (see `DurableTaskOptions` for
 * what differs from memory). `overlap: 'queue'` is for memory only.
 */
export interface StoredJobOptions extends RunOptions, LimitOptions, Omit<JobPolicyOptions, 'overlap' | 'jitter'> {
  /** A label for logs and errors. */
  name?: string;
  /** JSON-serialisable data handed to the handler on every run. */
  payload?: unknown;
  /** Registering a job with the same key again updates it instead of adding one. */
  key?: string;
  /**
   * A run that comes due while the previous one is still running somewhere is
   * skipped (`'skip'`) or run alongside it (`'allow'`).
   * @default 'skip'
   */
  overlap?: 'skip' | 'allow';
}
