import type { When } from '../core/validate.js';
import type { Duration } from '../core/duration.js';
import type { RetryOptions } from '../core/retry.js';
import type { TaskContext } from '../core/task.js';
import type { KeyedRateLimit } from '../core/flow-options.js';

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
  transaction<T>(fn: (client: { query(text: string, values?: unknown[]): Promise<{ rows: any[] }> }) => Promise<T>): Promise<T>;
}

/** A named handler: what durable tasks run. The payload is the stored JSON, parsed. */
export type Handler<P = any> = (ctx: DurableContext, payload: P) => unknown;

/** Options of a durable `schedule(when, name, options)`. */
export interface DurableTaskOptions {
  /** JSON-serialisable data handed to the handler. */
  payload?: unknown;
  /** Makes scheduling idempotent: the same key replaces the task instead of adding one. */
  key?: string;
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
   * starts per `interval`. Stored with the task; enforced **per process**
   * (each process that claims the task counts its own starts), not across
   * processes.
   * @example { key: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: KeyedRateLimit;
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
  /** The key's rate limit, interval in ms (issue 16). */
  rate?: { key: string; limit: number; interval: number };
  serial?: string;
  priority?: number;
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
   * starts per `interval`. Stored with the job and its occurrences; enforced **per process**
   * (each process that claims the task counts its own starts), not across
   * processes.
   * @example { key: `chat:${chatId}`, limit: 1, interval: '1s' }
   */
  rate?: KeyedRateLimit;
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
}

