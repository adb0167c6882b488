// Named queues (docs/queues.md): the public handle and the validation of their
// settings. Their state lives in the gate (QueueLane in lanes.ts); a
// scheduler that never configures or names a queue never makes it.
import { assertLimit, assertQueueName, DEFAULT_QUEUE, toRate, type Rate, type RateLimit } from './limit-options.js';
import type { QueueSettings } from './gate.js';
import type { QueueLane } from './lanes.js';
import type { TaskLoop } from './loop.js';
import { State, type Task } from './task.js';
import { assertKnownKeys, describe, keysOf } from './validate.js';

/**
 * The settings of one queue, in `new Scheduler({ queues: { name: options } })`.
 * @example { concurrency: 2, rate: { limit: 10, interval: '1s' } }
 */
export interface QueueOptions {
  /**
   * At most this many of the queue's tasks run at once in this process
   * (within the scheduler's `workers`): an integer >= 1, or `Infinity`.
   * @default Infinity
   */
  concurrency?: number;
  /**
   * At most this many of the queue's tasks run at once across every process
   * sharing it. In memory there is one process, so it is the same as
   * `concurrency` (the lower of the two applies); durable queues give it its
   * cross-process meaning.
   * @default Infinity
   */
  globalConcurrency?: number;
  /**
   * At most `limit` of the queue's tasks start in any sliding window of
   * `interval`, on top of the scheduler's `rate`.
   * @default none (unlimited)
   * @example { limit: 10, interval: '1s' }
   */
  rate?: RateLimit;
  /**
   * Starts the queue paused: its due tasks wait until `resume()`.
   * @default false
   */
  paused?: boolean;
}

/** How many of a queue's tasks are in each state, as `scheduler.stats()` counts them. */
export interface QueueCounts {
  /** Tasks in state `waiting`: for their time, for a worker, or for their queue or keys (a stored queue's `waiting` too). */
  waiting: number;
  /** Waiting tasks already due (a paused queue's due tasks are here). */
  due: number;
  /** Tasks running now. */
  running: number;
}

/** Counts of nothing. */
function noCounts(): QueueCounts {
  return { waiting: 0, due: 0, running: 0 };
}

/** One queue as `scheduler.queues()` lists it. */
export interface QueueInfo {
  /** The queue's name (`'default'` for tasks that name none). */
  name: string;
  /** Its concurrency in this process; `Infinity` for none. */
  concurrency: number;
  /** Its concurrency across processes (in memory: the same as `concurrency`, the lower applies); `Infinity` for none. */
  globalConcurrency: number;
  /** The rate limit (interval in ms), or undefined for none. */
  rate: RateLimit | undefined;
  /** Whether it is paused. */
  paused: boolean;
  /** Its tasks by state. */
  counts: QueueCounts;
}

const QUEUE_KEYS: ReadonlySet<string> = new Set(
  keysOf<QueueOptions>({ concurrency: true, globalConcurrency: true, rate: true, paused: true }),
);

/** Validates one queue's options; `option` names them in errors (`queues.emails`). @internal */
function toQueueSettings(value: unknown, option: string): QueueSettings {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected \`${option}\` to be an object like { concurrency: 2 }, got ${describe(value)}`);
  }
  assertKnownKeys(value, QUEUE_KEYS, `\`${option}\``);
  const { concurrency, globalConcurrency, rate, paused } = value as QueueOptions;
  if (concurrency !== undefined) assertLimit(concurrency, `${option}.concurrency`, true);
  if (globalConcurrency !== undefined) assertLimit(globalConcurrency, `${option}.globalConcurrency`, true);
  if (paused !== undefined && typeof paused !== 'boolean')
    throw new TypeError(`Expected \`${option}.paused\` to be a boolean, got ${describe(paused)}`);
  return { concurrency, globalConcurrency, rate: rate === undefined ? undefined : toRate(rate, `${option}.rate`, false), paused };
}

/** Validates the scheduler's `queues` option: every queue, before anything is set up. @internal */
export function toQueues(value: unknown): Map<string, QueueSettings> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`Expected \`queues\` to be an object like { emails: { concurrency: 2 } }, got ${describe(value)}`);
  }
  const queues = new Map<string, QueueSettings>();
  for (const [name, options] of Object.entries(value)) {
    assertQueueName(name, 'queues');
    queues.set(name, toQueueSettings(options, `queues.${name}`));
  }
  return queues;
}

/** Sets up the validated `queues` option on a new scheduler's loop. @internal */
export function configureQueues(loop: TaskLoop, queues: Map<string, QueueSettings>): void {
  const gate = loop.gate();
  const now = loop.monotonic();
  for (const [name, settings] of queues) gate.configure(name, settings, now);
}

function rateOf(lane: QueueLane | undefined): RateLimit | undefined {
  const rate = lane?.rate;
  return rate === undefined ? undefined : { limit: rate.limit, interval: rate.interval };
}

/** The counts of every queue the loop knows, in one pass over the waiting tasks. */
function countAll(loop: TaskLoop): Map<string, QueueCounts> {
  const counts = new Map<string, QueueCounts>();
  const of = (name: string) => {
    let entry = counts.get(name);
    if (entry === undefined) counts.set(name, (entry = noCounts()));
    return entry;
  };
  const gate = loop.currentGate;
  if (gate === undefined) of(DEFAULT_QUEUE).running = loop.running;
  else for (const lane of gate.queues()) of(lane.name).running = lane.running;
  const now = loop.clock.now();
  loop.forEachWaiting((task: Task) => {
    const entry = of(task._settings.limits?.queue ?? DEFAULT_QUEUE);
    entry.waiting++;
    // Held tasks are all due (waiting for their queue, keys or a worker).
    if (task._state === State.Held || task._time <= now) entry.due++;
  });
  return counts;
}

/** Every queue: the default one, then the others in order of first use. @internal */
export function listQueues(loop: TaskLoop): QueueInfo[] {
  const counts = countAll(loop);
  const lanes = loop.currentGate === undefined ? [] : [...loop.currentGate.queues()];
  if (lanes.length === 0) return [info(DEFAULT_QUEUE, undefined, counts)];
  return lanes.map((lane) => info(lane.name, lane, counts));
}

function info(name: string, lane: QueueLane | undefined, counts: Map<string, QueueCounts>): QueueInfo {
  return {
    name,
    concurrency: lane?.concurrency ?? Infinity,
    globalConcurrency: lane?.globalConcurrency ?? Infinity,
    rate: rateOf(lane),
    paused: lane?.paused ?? false,
    counts: counts.get(name) ?? noCounts(),
  };
}

/** Runs `fn` now; a Promise of its outcome (a throw becomes a rejection). */
function settle(fn: () => void): Promise<void> {
  try {
    fn();
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * A named queue of a scheduler without a store, from `scheduler.queue(name)`
 * (with a store it is a `DurableQueue`, with the same members but the
 * synchronous `globalConcurrency`, `rate` and `paused`): its settings
 * are live (like `scheduler.workers`) and handles of the same name share
 * them. Tasks and jobs join it with the option `queue: name`; those that
 * name none are in `'default'`.
 * @example
 * const emails = scheduler.queue('emails');
 * emails.concurrency = 2;
 * await emails.pause();   // due emails wait...
 * await emails.resume();  // ...and start now
 */
export class Queue {
  readonly #loop: TaskLoop;
  /** The queue's name. */
  readonly name: string;

  /** @internal use `scheduler.queue(name)` */
  constructor(loop: TaskLoop, name: string) {
    assertQueueName(name, 'name');
    this.#loop = loop;
    this.name = name;
  }

  /** The queue's state, if it exists yet (reading never makes it). */
  get #lane(): QueueLane | undefined {
    return this.#loop.currentGate?.findQueue(this.name);
  }

  #configure(settings: QueueSettings): void {
    this.#loop.gate().configure(this.name, settings, this.#loop.monotonic());
    this.#loop.pump();
  }

  /**
   * At most this many of the queue's tasks run at once in this process
   * (within `workers`): an integer >= 1, or `Infinity`. Raising it starts
   * waiting tasks at once; lowering it lets running ones finish.
   * @default Infinity
   * @example
   * scheduler.queue('emails').concurrency = 2;
   */
  get concurrency(): number {
    return this.#lane?.concurrency ?? Infinity;
  }

  /** Sets the queue's concurrency; a bad value throws a RangeError and changes nothing. */
  set concurrency(value: number) {
    assertLimit(value, 'concurrency', true);
    this.#configure({ concurrency: value });
  }

  /**
   * The concurrency across every process sharing the queue; in memory (one
   * process) the same as `concurrency`: the lower of the two applies.
   * @default Infinity
   */
  get globalConcurrency(): number {
    return this.#lane?.globalConcurrency ?? Infinity;
  }

  /** Sets the queue's global concurrency; a bad value throws a RangeError and changes nothing. */
  set globalConcurrency(value: number) {
    assertLimit(value, 'globalConcurrency', true);
    this.#configure({ globalConcurrency: value });
  }

  /**
   * Sets the queue's global concurrency, as the durable queue's method does
   * (there it is stored for every process): in memory the change is made
   * before this returns, and the Promise resolves at once. A bad value
   * rejects with a RangeError and changes nothing.
   * @example
   * await scheduler.queue('emails').setGlobalConcurrency(5);
   */
  setGlobalConcurrency(value: number): Promise<void> {
    return settle(() => {
      this.globalConcurrency = value;
    });
  }

  /**
   * The queue's rate limit (`{ limit, interval }`, interval in ms), or
   * undefined for none: at most `limit` of its tasks start in any sliding
   * window of `interval`. Starts already made count against a new limit,
   * as with `scheduler.rate`.
   * @default undefined
   * @example
   * scheduler.queue('sms').rate = { limit: 1, interval: '1s' };
   */
  get rate(): RateLimit | undefined {
    return rateOf(this.#lane);
  }

  /** Sets (or with undefined removes) the queue's rate limit; a bad value throws and changes nothing. */
  set rate(value: RateLimit | undefined) {
    const rate: Rate | undefined = value === undefined ? undefined : toRate(value, 'rate', false);
    this.#configure({ rate: rate ?? null });
  }

  /**
   * Sets (or with undefined removes) the queue's rate limit, as the durable
   * queue's method does (there it is stored for every process): in memory
   * the change is made before this returns, and the Promise resolves at
   * once. Starts already made in the window count against the new limit. A
   * bad value rejects with a TypeError or RangeError and changes nothing.
   * @example
   * await scheduler.queue('sms').setRate({ limit: 1, interval: '1s' });
   */
  setRate(value: RateLimit | undefined): Promise<void> {
    return settle(() => {
      this.rate = value;
    });
  }

  /**
   * Whether the queue is paused.
   * @default false
   */
  get paused(): boolean {
    return this.#lane?.paused ?? false;
  }

  /**
   * Pauses the queue: none of its tasks starts until `resume()`; due ones
   * wait (nothing is lost, nothing is skipped), running ones go on. The
   * pause is made before this returns; the Promise (the durable queue's
   * shape) resolves at once.
   * @example
   * await scheduler.queue('emails').pause();
   */
  pause(): Promise<void> {
    this.#configure({ paused: true });
    return Promise.resolve();
  }

  /**
   * Resumes a paused queue: its due tasks start at once, as workers and
   * limits allow (before this returns; the Promise resolves at once).
   */
  resume(): Promise<void> {
    this.#configure({ paused: false });
    return Promise.resolve();
  }

  /**
   * The queue's settings, paused flag and counts, as `scheduler.queues()`
   * lists it: O(n) in the waiting tasks of the scheduler. Resolves at once.
   */
  info(): Promise<QueueInfo> {
    return Promise.resolve(info(this.name, this.#lane, countAll(this.#loop)));
  }

  /**
   * How many of the queue's tasks are waiting (of them, `due` already) and running:
   * O(n) in the waiting tasks of the scheduler. Resolves at once (the
   * durable queue's shape).
   * @example
   * const { waiting, due, running } = await scheduler.queue('emails').counts();
   */
  counts(): Promise<QueueCounts> {
    return Promise.resolve(countAll(this.#loop).get(this.name) ?? noCounts());
  }
}
