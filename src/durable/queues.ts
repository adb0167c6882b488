// Durable named queues (docs/queues.md): the settings of each queue in this
// process, the room a claim may take for each, and the handle
// `scheduler.queue(name)` returns on a scheduler with a store. What is per
// process (`concurrency`) lives here; what is shared by every process
// (`paused`, `globalConcurrency`, `rate`) lives in the store's queue rows,
// written through `store.setQueue` and read through `store.listQueues`, and
// the claim applies it in the database.
import { toRate, type RateLimit } from '../core/limit-options.js';
import { describe, keysOf } from '../core/validate.js';
import type { QueueChange, QueueRooms, Store, StoredQueue, StoredState } from './store.js';
import { assertKey } from './validate.js';

/** The queue of a task or job that names none (and whose handler names none). */
export const DEFAULT_QUEUE = 'default';

/** The most a concurrency may be (what the database's integer column holds); `Infinity` means none. */
const MAX_CONCURRENCY = 2_147_483_647;

/**
 * The settings of one durable queue, in `new Scheduler({ store, queues: { name: options } })`.
 * @example { concurrency: 2, globalConcurrency: 5, rate: { limit: 10, interval: '1s' } }
 */
export interface DurableQueueOptions {
  /**
   * At most this many of the queue's tasks run at once **in this process**
   * (claimed and held here, running or about to): an integer >= 1, or
   * `Infinity`. Claims never take more than this room, so a process does
   * not hoard the queue's tasks while other processes are idle.
   * @default Infinity
   */
  concurrency?: number;
  /**
   * At most this many of the queue's tasks run at once **across every
   * process** sharing the store, enforced by the claim in the database. It is
   * stored: the most recent process to start with it (or to set it) decides;
   * `Infinity` removes it. Not given: the stored value stays.
   * @default Infinity
   */
  globalConcurrency?: number;
  /**
   * At most `limit` of the queue's tasks start in any window of `interval`,
   * **across every process** sharing the store, by the store's clock (the
   * database's with PostgreSQL); a retry, and the takeover of an expired
   * lease, is a start. It is stored: the most recent process to start with
   * it (or to set it with `setRate()`) decides. Not given: the stored value
   * stays (remove it with `await scheduler.queue(name).setRate(undefined)`).
   * @default undefined (no limit)
   * @example { limit: 10, interval: '1s' }
   */
  rate?: RateLimit;
}

/** How many of a durable queue's stored tasks are in each state. */
export type DurableQueueCounts = Record<StoredState, number>;

/** One durable queue as `scheduler.queues()` lists it. */
export interface DurableQueueInfo {
  /** The queue's name (`'default'` for tasks that name none). */
  name: string;
  /** Its concurrency in this process; `Infinity` for none. */
  concurrency: number;
  /** Its concurrency across every process (stored); `Infinity` for none. */
  globalConcurrency: number;
  /** Its rate limit across every process (stored; interval in ms), or undefined for none. */
  rate: RateLimit | undefined;
  /** Whether it is paused (stored: for every process). */
  paused: boolean;
  /** Its stored tasks by state. */
  counts: DurableQueueCounts;
}

/** Checks a queue name (the `queue` option, `define`'s `queue`, `scheduler.queue(name)`). @internal */
export function assertQueueName(name: unknown, what: string): asserts name is string {
  assertKey(name, what);
}

/** Checks a concurrency: an integer >= 1, or Infinity. */
function assertConcurrency(value: unknown, what: string): asserts value is number {
  if (value === Infinity) return;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_CONCURRENCY) {
    throw new RangeError(`Expected \`${what}\` to be an integer from 1 to ${MAX_CONCURRENCY}, or Infinity, got ${describe(value)}`);
  }
}

const QUEUE_KEYS: ReadonlySet<string> = new Set(keysOf<DurableQueueOptions>({ concurrency: true, globalConcurrency: true, rate: true }));

/** Validates the scheduler's `queues` option with a store (every queue, before anything is set up). @internal */
export function toDurableQueues(value: unknown): Map<string, DurableQueueOptions> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected \`queues\` to be an object like { emails: { concurrency: 2 } }, got ${describe(value)}`);
  }
  const queues = new Map<string, DurableQueueOptions>();
  for (const [name, options] of Object.entries(value)) {
    assertQueueName(name, 'a queue name in `queues`');
    const option = `queues.${name}`;
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new TypeError(`Expected \`${option}\` to be an object like { concurrency: 2 }, got ${describe(options)}`);
    }
    for (const key of Object.keys(options)) {
      // `paused` is an in-memory queue's setting: a durable pause is stored for every process.
      if (key === 'paused') {
        throw new TypeError(
          `Unknown \`${option}\` option "paused" with a store: a durable queue's pause is stored and holds for every process; pause it with \`await scheduler.queue(${JSON.stringify(name)}).pause()\``,
        );
      }
      if (!QUEUE_KEYS.has(key))
        throw new TypeError(`Unknown \`${option}\` option ${describe(key)}; expected one of: ${[...QUEUE_KEYS].join(', ')}`);
    }
    const { concurrency, globalConcurrency, rate } = options as DurableQueueOptions;
    if (concurrency !== undefined) assertConcurrency(concurrency, `${option}.concurrency`);
    if (globalConcurrency !== undefined) assertConcurrency(globalConcurrency, `${option}.globalConcurrency`);
    const parsed = rate === undefined ? undefined : toRate(rate, `${option}.rate`, false);
    queues.set(name, {
      concurrency,
      globalConcurrency,
      rate: parsed === undefined ? undefined : { limit: parsed.limit, interval: parsed.interval },
    });
  }
  return queues;
}

/**
 * The queues of one durable runner: per-process settings, and what this
 * process holds of each (counted by the holdings as claims come and go).
 * @internal
 */
export class QueueBook {
  /** Each queue's concurrency in this process (queues given one). */
  readonly #local = new Map<string, number>();
  /** Claims held in this process per queue (only queues with a concurrency here are counted). */
  readonly #held = new Map<string, number>();
  /**
   * Room handed to claims still on their way, per queue: spoken for until
   * their tasks are held, or two claims at once could each take the room.
   */
  readonly #reserved = new Map<string, number>();
  /** A queue at its concurrency here had a task end: its room reopened, worth a claim. */
  reopened = false;
  /** The shared settings to write at start (the `queues` option's global concurrencies and rates). */
  readonly startup = new Map<string, QueueChange>();
  /**
   * Queues this process knows to have a global concurrency: a task of one
   * that ends may free a slot another of its tasks waits for, worth a claim
   * at once (PostgreSQL also announces it; a SQLite store has no one else to).
   */
  readonly #global = new Set<string>();

  constructor(queues: Map<string, DurableQueueOptions> | undefined) {
    for (const [name, options] of queues ?? []) {
      if (options.concurrency !== undefined) this.#local.set(name, options.concurrency);
      const change: QueueChange = {};
      if (options.globalConcurrency !== undefined) {
        change.globalConcurrency = options.globalConcurrency === Infinity ? null : options.globalConcurrency;
        this.setGlobal(name, options.globalConcurrency);
      }
      if (options.rate !== undefined) change.rate = options.rate as { limit: number; interval: number };
      if (Object.keys(change).length > 0) this.startup.set(name, change);
    }
  }

  /** This process set queue `name`'s global concurrency. */
  setGlobal(name: string, value: number): void {
    if (value === Infinity) this.#global.delete(name);
    else this.#global.add(name);
  }

  concurrency(name: string): number {
    return this.#local.get(name) ?? Infinity;
  }

  setConcurrency(name: string, value: number): void {
    this.#local.set(name, value);
    this.reopened = true;
  }

  /** The names of queues with settings in this process (a concurrency here, or shared ones to store at start). */
  names(): Set<string> {
    return new Set([...this.#local.keys(), ...this.startup.keys()]);
  }

  /** A claim of `queue` is held here. */
  hold(queue: string): void {
    if (!this.#local.has(queue) && !this.#global.has(queue)) return;
    this.#held.set(queue, (this.#held.get(queue) ?? 0) + 1);
  }

  /** A claim of `queue` is no longer held here. */
  release(queue: string): void {
    const held = this.#held.get(queue);
    if (held === undefined) return;
    if (held >= this.concurrency(queue) || this.#global.has(queue)) this.reopened = true;
    if (held <= 1) this.#held.delete(queue);
    else this.#held.set(queue, held - 1);
  }

  /** The room a claim may take for each queue limited in this process; undefined when none is. */
  rooms(): QueueRooms | undefined {
    let rooms: Map<string, number> | undefined;
    for (const [name, concurrency] of this.#local) {
      if (concurrency === Infinity) continue;
      const taken = (this.#held.get(name) ?? 0) + (this.#reserved.get(name) ?? 0);
      (rooms ??= new Map()).set(name, Math.max(0, concurrency - taken));
    }
    return rooms;
  }

  /** The rooms for a claim, spoken for until `unreserve()` (once its tasks are held). */
  reserve(): QueueRooms | undefined {
    const rooms = this.rooms();
    if (rooms !== undefined) for (const [name, room] of rooms) this.#reserved.set(name, (this.#reserved.get(name) ?? 0) + room);
    return rooms;
  }

  /** A claim given `rooms` came back and its tasks are held (or it failed). */
  unreserve(rooms: QueueRooms | undefined): void {
    if (rooms === undefined) return;
    for (const [name, room] of rooms) {
      const left = (this.#reserved.get(name) ?? 0) - room;
      if (left > 0) this.#reserved.set(name, left);
      else this.#reserved.delete(name);
    }
  }
}

/** The stored queue with this process's settings. @internal */
export function queueInfo(book: QueueBook, stored: StoredQueue): DurableQueueInfo {
  const rate = stored.rate;
  return {
    name: stored.name,
    concurrency: book.concurrency(stored.name),
    globalConcurrency: stored.globalConcurrency ?? Infinity,
    rate: rate === null ? undefined : { limit: rate.limit, interval: rate.interval },
    paused: stored.paused,
    counts: stored.counts,
  };
}

/** A queue the store has no row or task of. @internal */
export function emptyQueue(name: string): StoredQueue {
  return {
    name,
    paused: false,
    globalConcurrency: null,
    rate: null,
    counts: { blocked: 0, waiting: 0, running: 0, succeeded: 0, failed: 0, 'timed-out': 0, cancelled: 0 },
  };
}

/**
 * A named queue of a scheduler with a store, from `scheduler.queue(name)`.
 * `concurrency` is this process's (live, like `scheduler.workers`);
 * `pause()`, `resume()`, `setGlobalConcurrency()` and `setRate()` are
 * stored and hold for every process sharing the store; `counts()` and
 * `info()` read the store. It has no synchronous `rate`: the rate is shared,
 * so it is set with `await setRate()` and read with `await info()`.
 * @example
 * const emails = scheduler.queue('emails');
 * emails.concurrency = 2;              // this process runs at most 2 emails at once
 * await emails.setGlobalConcurrency(5); // all processes together at most 5
 * await emails.setRate({ limit: 10, interval: '1s' }); // all processes together at most 10 starts a second
 * await emails.pause();                // no process claims an email now...
 * await emails.resume();               // ...and now they do again
 * const { waiting, running } = await emails.counts();
 */
export class DurableQueue {
  readonly #book: QueueBook;
  readonly #store: () => Promise<Store>;
  readonly #changed: () => void;
  readonly #paused: (name: string) => void;
  /** The queue's name. */
  readonly name: string;

  /** @internal use `scheduler.queue(name)` */
  constructor(book: QueueBook, store: () => Promise<Store>, changed: () => void, paused: (name: string) => void, name: string) {
    assertQueueName(name, 'name');
    this.#book = book;
    this.#store = store;
    this.#changed = changed;
    this.#paused = paused;
    this.name = name;
  }

  /**
   * At most this many of the queue's tasks run at once in this process: an
   * integer >= 1, or `Infinity`. Raising it claims more at once; lowering
   * it lets the ones held finish.
   * @default Infinity
   * @example
   * scheduler.queue('emails').concurrency = 2;
   */
  get concurrency(): number {
    return this.#book.concurrency(this.name);
  }

  /** Sets the queue's concurrency in this process; a bad value throws a RangeError and changes nothing. */
  set concurrency(value: number) {
    assertConcurrency(value, 'concurrency');
    this.#book.setConcurrency(this.name, value);
    this.#changed();
  }

  /**
   * Sets the queue's concurrency across every process (stored: the claim
   * enforces it in the database), or with `Infinity` removes it.
   * @example
   * await scheduler.queue('emails').setGlobalConcurrency(5);
   */
  async setGlobalConcurrency(value: number): Promise<void> {
    assertConcurrency(value, 'globalConcurrency');
    const store = await this.#store();
    await store.setQueue(this.name, { globalConcurrency: value === Infinity ? null : value });
    this.#book.setGlobal(this.name, value);
    this.#changed();
  }

  /**
   * Sets the queue's rate across every process (stored: the claim takes its
   * tokens in the database, by its clock), or with undefined removes it: at
   * most `limit` of its tasks start in any window of `interval`. The starts
   * already made in the window count against a new limit. Claims that begin
   * once this resolves apply it. A bad value rejects with a TypeError or
   * RangeError naming it, and nothing is stored.
   * @example
   * await scheduler.queue('sms').setRate({ limit: 1, interval: '1s' });
   */
  async setRate(value: RateLimit | undefined): Promise<void> {
    const rate = value === undefined ? undefined : toRate(value, 'rate', false);
    const store = await this.#store();
    await store.setQueue(this.name, { rate: rate === undefined ? null : { limit: rate.limit, interval: rate.interval } });
    this.#changed();
  }

  /**
   * Pauses the queue for every process: once this resolves (the pause
   * committed), no claim takes its waiting tasks; they stay waiting, nothing
   * is lost or skipped. Running tasks go on. Tasks a process claimed but has
   * not started (prefetched) are handed back to waiting when it hears of the
   * pause: at once here, through NOTIFY elsewhere (PostgreSQL). Resolves
   * when stored.
   * @example
   * await scheduler.queue('emails').pause();
   */
  async pause(): Promise<void> {
    const store = await this.#store();
    await store.setQueue(this.name, { paused: true });
    this.#paused(this.name);
  }

  /** Resumes the queue for every process (stored); they are woken at once (NOTIFY on PostgreSQL). */
  async resume(): Promise<void> {
    const store = await this.#store();
    await store.setQueue(this.name, { paused: false });
    this.#changed();
  }

  /** The queue's state as stored (paused, global concurrency, rate, counts) with this process's concurrency. */
  async info(): Promise<DurableQueueInfo> {
    const store = await this.#store();
    const stored = (await store.listQueues(this.name))[0];
    return queueInfo(this.#book, stored ?? emptyQueue(this.name));
  }

  /**
   * The queue's stored tasks by state, read from the store (one grouped
   * count over the queue's tasks).
   * @example
   * const { waiting, running, failed } = await scheduler.queue('emails').counts();
   */
  async counts(): Promise<DurableQueueCounts> {
    return (await this.info()).counts;
  }
}
