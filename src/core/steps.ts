// A task's steps (`ctx.step`, `ctx.sleep`, `ctx.receive`): the rule every
// engine follows, and the record memory keeps. A handler that uses them runs
// again from its start after a retry, a sleep or a wait (and, with a store,
// after a crash); each call is matched to the record by its position among
// the run's calls and its name, so a finished step returns what it returned
// the first time without running again. A run that reaches a step its record
// contradicts (another name at that position) ends with ERR_STEP_MISMATCH.
//
// The states of one record:
//
//   step:     finished when recorded with its value (a transaction step in
//             its own transaction); one whose fn threw is recorded
//             unfinished, its failures counted, and runs again
//   sleep:    recorded at the call with its wake time; done once it has passed
//   receive:  recorded at the call with its deadline; done once a message is
//             taken (its result) or the deadline passed (timedOut)
import { toDuration } from './duration.js';
import { StepSuspended, TaskheapError } from './errors.js';
import { assertStorableText, describe, MAX_TIME, toEpoch, type When } from './validate.js';

/** What a task recorded of one step call. */
export interface StepRecord {
  /** The call's name: its own for `step`, `sleep` for `sleep`, the topic for `receive`; `#2`, `#3`... for repeats in one run. */
  readonly id: string;
  readonly kind: 'step' | 'sleep' | 'receive';
  /** When the call first ran (the scheduler's clock). */
  readonly startedAt: number;
  /** When it finished; undefined while a sleep or a wait is under way. */
  endedAt?: number;
  /** A step's or a received message's JSON value. */
  result?: unknown;
  /** A sleep's wake time, a receive's deadline. */
  readonly until?: number;
  /** A receive that reached its deadline without a message. */
  timedOut?: boolean;
  /** Runs in which a step's `fn` threw (a step not finished since is run again). */
  readonly failures?: number;
}

/** Characters a step name or topic may have. */
const MAX_NAME = 200;

/**
 * The record of a task's steps, carried from run to run, and its messages
 * not yet taken (by topic). Memory keeps it per task until the task ends.
 */
export class StepLog {
  /** By position in the run's calls. */
  readonly records: StepRecord[] = [];
  /** Messages sent and not yet taken, oldest first, by topic. */
  mailbox: Map<string, unknown[]> | undefined;
  /** The topic a run suspended on, waiting for a message: a message on it makes the task due at once. */
  waitingOn: string | undefined;

  /** Keeps `message` for the task; true if the task waits for it now (the caller makes it due). */
  deliver(topic: string, message: unknown): boolean {
    const mailbox = (this.mailbox ??= new Map());
    const queue = mailbox.get(topic);
    if (queue === undefined) mailbox.set(topic, [message]);
    else queue.push(message);
    return this.waitingOn === topic;
  }

  /** Whether a message on `topic` waits to be taken. */
  has(topic: string): boolean {
    return (this.mailbox?.get(topic)?.length ?? 0) > 0;
  }

  /** Takes the oldest message on `topic`, if any. */
  take(topic: string): { message: unknown } | undefined {
    const queue = this.mailbox?.get(topic);
    if (queue === undefined || queue.length === 0) return undefined;
    const message = queue.shift();
    if (queue.length === 0) this.mailbox!.delete(topic);
    return { message };
  }
}

/** What a run's step calls need of its engine: the record, the clock, messages, and where to mark a suspension. */
export interface StepHost {
  /** The task's record. */
  readonly log: StepLog;
  now(): number;
  /**
   * Takes the oldest message on `topic` for the call at `position`: memory
   * takes it from the log; a store marks it taken by that call, so a run
   * that crashed before it recorded the step takes the same one again.
   */
  take(topic: string, position: number): Promise<{ message: unknown } | undefined>;
  /** A record finished (a step's value, a message, a timeout): a store writes the log before the handler goes on. */
  recorded(): Promise<void>;
  /** Marks the run suspended until `until` (ms). */
  suspend(until: number): void;
  /**
   * Runs `body` in a transaction and writes the record, as `body` left it, in
   * that same transaction (`ctx.transactionStep()`); undefined where the
   * engine cannot (memory, SQLite).
   */
  readonly within?: (body: (client: unknown) => Promise<void>) => Promise<void>;
}

/** The host of an in-memory task's steps: its log is the record. */
export function memoryHost(log: StepLog, now: () => number, suspend: (until: number) => void): StepHost {
  return { log, now, suspend, take: (topic) => Promise.resolve(log.take(topic)), recorded: () => Promise.resolve() };
}

/**
 * One run's walk through its steps: the position of the next call and how
 * often each name came so far (repeats in a loop are told apart by count).
 */
export class StepCursor {
  #position = 0;
  #seen = new Map<string, number>();
  /** Set once the run suspended: later calls suspend at once. */
  suspended = false;

  constructor(readonly host: StepHost) {}

  /** `ctx.step(name, fn)`: the record is written once `fn`'s value is in it. */
  step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    return this.#step(name, fn, 'ctx.step()', async (body) => {
      await body(undefined);
      await this.host.recorded();
    });
  }

  /**
   * `ctx.transactionStep(name, fn)`: a step whose writes commit with its
   * record (the host's `within`). Rolled back, it is recorded unfinished
   * (#failed): a later write of the record must not claim a step whose
   * effects are gone.
   */
  transactionStep<T, C>(name: string, fn: (client: C) => PromiseLike<T>): Promise<T> {
    return this.#step(name, fn, 'ctx.transactionStep()', this.host.within);
  }

  /**
   * A step: its kept value if it finished, else `write` runs `body` (`fn`,
   * then its record) and writes the record; a failure of either is recorded
   * unfinished (#failed). `write` undefined: the engine cannot run `call`.
   */
  async #step<T, C>(
    name: string,
    fn: (client: C) => T | PromiseLike<T>,
    call: string,
    write: ((body: (client: unknown) => Promise<void>) => Promise<void>) | undefined,
  ): Promise<T> {
    checkName(name, 'step name');
    if (typeof fn !== 'function') throw new TypeError(`Expected ${call}'s second argument to be a function, got ${describe(fn)}`);
    if (write === undefined) throw new TypeError(`${call} needs postgresStore(): only PostgreSQL hands out its connection`);
    const [position, id, record] = this.#next(name, 'step');
    if (record?.endedAt !== undefined) return record.result as T;
    const startedAt = record?.startedAt ?? this.host.now();
    const failures = record?.failures;
    let result: unknown;
    try {
      await write(async (client) => {
        result = toStepJson(await fn(client as C), `The value of step '${id}'`);
        this.host.log.records[position] = { id, kind: 'step', startedAt, endedAt: this.host.now(), result, failures };
      });
    } catch (error) {
      return this.#failed(position, id, startedAt, error);
    }
    return result as T;
  }

  /**
   * A step's `fn` threw (or its transaction rolled back): the record counts
   * the failure, unfinished, so the next run runs it again; written as the
   * other records are, at best (a lost lease refuses it), before the error
   * goes on to the handler.
   */
  async #failed(position: number, id: string, startedAt: number, error: unknown): Promise<never> {
    const failures = (this.host.log.records[position]?.failures ?? 0) + 1;
    this.host.log.records[position] = { id, kind: 'step', startedAt, failures };
    await this.host.recorded().catch(() => {});
    throw error;
  }

  /** `ctx.sleep(duration)`, or `ctx.sleep({ until })`. */
  async sleep(duration: SleepFor): Promise<void> {
    const until = this.#wakeAt(duration);
    const [position, id, record] = this.#next('sleep', 'sleep');
    const log = this.host.log;
    const due = record?.until ?? until;
    if (record === undefined) log.records[position] = { id, kind: 'sleep', startedAt: this.host.now(), until };
    else if (record.endedAt !== undefined) return;
    if (this.host.now() >= due) {
      log.records[position]!.endedAt = this.host.now();
      return;
    }
    return this.#suspend(due);
  }

  /** `ctx.receive(topic, { timeout })`. */
  async receive<T>(topic: string, options: { timeout: unknown }): Promise<T | undefined> {
    checkName(topic, 'topic');
    if (typeof options !== 'object' || options === null)
      throw new TypeError(`Expected ctx.receive()'s options to be { timeout }, got ${describe(options)}`);
    const timeout = toDuration(options.timeout, 'receive timeout');
    const [position, id, record] = this.#next(topic, 'receive');
    const log = this.host.log;
    if (record !== undefined && record.endedAt !== undefined) return (record.timedOut ? undefined : record.result) as T;
    const now = this.host.now();
    const current = record ?? { id, kind: 'receive', startedAt: now, until: Math.min(now + timeout, MAX_TIME) };
    log.records[position] = current;
    const taken = await this.host.take(topic, position);
    if (taken !== undefined || now >= current.until!) {
      // Recorded before the handler goes on: a replay returns this, whatever comes meanwhile.
      if (taken !== undefined) current.result = taken.message;
      else current.timedOut = true;
      current.endedAt = now;
      log.waitingOn = undefined;
      await this.host.recorded();
      return taken?.message as T | undefined;
    }
    log.waitingOn = topic;
    return this.#suspend(current.until!);
  }

  /** The next call's position, id and record (undefined: not run yet); throws on a contradiction. */
  #next(name: string, kind: StepRecord['kind']): [number, string, StepRecord | undefined] {
    if (this.suspended) throw suspended();
    const count = (this.#seen.get(name) ?? 0) + 1;
    this.#seen.set(name, count);
    const id = count === 1 ? name : `${name}#${count}`;
    const position = this.#position++;
    // A hole (a step before it threw and was caught; null in a store's JSON) is a call not run yet.
    const record = this.host.log.records[position] ?? undefined;
    if (record !== undefined && (record.id !== id || record.kind !== kind)) {
      throw new TaskheapError(
        `Step ${position + 1} of this run is ${kind} '${id}', but the task's record has ${record.kind} '${record.id}' there: ` +
          'the handler changed its steps before this point (see the steps guide on changing a handler safely)',
        'ERR_STEP_MISMATCH',
      );
    }
    return [position, id, record];
  }

  #wakeAt(duration: SleepFor): number {
    if (typeof duration === 'object' && duration !== null && !(duration instanceof Date) && 'until' in duration) {
      return toEpoch(duration.until, 'sleep until');
    }
    return Math.min(this.host.now() + toDuration(duration, 'sleep duration'), MAX_TIME);
  }

  #suspend(until: number): never {
    this.suspended = true;
    this.host.suspend(until);
    throw suspended();
  }
}

/**
 * What a run that suspended keeps in place of its cursor once it ended (its
 * task keeps its last run while it sleeps, and its own cursor, host and
 * closures were most of what a sleeping task held): a later call suspends at
 * once, as its own would have.
 */
export const SUSPENDED_CURSOR: StepCursor = new StepCursor(memoryHost(new StepLog(), Date.now, () => {}));
SUSPENDED_CURSOR.suspended = true;

/**
 * The one StepSuspended every suspension throws: it only says "let this
 * through" (the run is marked), and an Error's stack trace, taken for each
 * of a hundred thousand sleeping tasks, was most of what a sleep cost.
 */
let SUSPENDED: StepSuspended | undefined;
const suspended = (): StepSuspended => (SUSPENDED ??= new StepSuspended());

/** `ctx.sleep()`'s argument: a duration (ms, or a string such as `'1d'`), or `{ until }` a time. */
export type SleepFor =
  | number
  | string
  | {
      /** The time to wake up at. */
      until: When;
    };

/** Throws unless `name` is a step name or topic: 1 to 200 characters a database can store. */
function checkName(name: unknown, what: string): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_NAME) {
    throw new TypeError(`Expected the ${what} to be a string of 1 to ${MAX_NAME} characters, got ${describe(name)}`);
  }
  assertStorableText(name, what);
}

/** A step's value or a message as it is recorded and returned, every time: its JSON (undefined stays undefined). */
function toStepJson(value: unknown, id: string): unknown {
  if (value === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`${id} is not JSON (${(error as Error).message})`);
  }
  return json === undefined ? undefined : JSON.parse(json);
}

/**
 * `scheduler.send()`'s arguments, checked: `to` a task (`isTask`), a stored
 * task's id, or `{ key }`; the topic; the message as its JSON value.
 */
export function toSendArgs(to: unknown, topic: unknown, message: unknown, isTask: (value: unknown) => boolean): unknown {
  const byKey = typeof to === 'object' && to !== null && typeof (to as { key?: unknown }).key === 'string';
  if (!isTask(to) && !byKey && !(typeof to === 'number' && Number.isSafeInteger(to) && to > 0)) {
    throw new TypeError(`Expected send()'s first argument to be a Task, a stored task's id or { key }, got ${describe(to)}`);
  }
  checkName(topic, 'topic');
  // A message is a value: none given is null, so a receive tells it from its timeout (undefined).
  return toStepJson(message ?? null, 'The message');
}

/** A run that reached a step its record contradicts fails the same way every time: it is not retried. */
export function isStepMismatch(error: unknown): boolean {
  return error instanceof TaskheapError && error.code === 'ERR_STEP_MISMATCH';
}
