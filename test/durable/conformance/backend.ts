// What the store conformance suite (test/durable/conformance/*.ts) needs to
// know of a backend: how to open a store on a fresh database, a fresh one
// per test, what the backend can do (its capabilities), and a few hooks
// into the database for what a test cannot do through the Store interface.
// A backend-specific test file (store-sqlite.test.ts, store-postgres.test.ts,
// store-memory.test.ts: a Scheduler without a store) describes its backend
// and hands it to storeConformance().
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, it } from 'vitest';
import { Scheduler, type Clock, type SchedulerOptions } from '../../../src/index.js';
import type { Store } from '../../../src/durable/store.js';
import { ManualClock } from '../../../src/testing.js';
import { START } from '../../helpers.js';

/**
 * What a backend can do. For a store, `clockDriven`, `multiProcess`,
 * `notify` and `transactionsWithClient` are the store's own
 * `capabilities` (the data the scheduler reads too); the others say where a
 * Scheduler without a store (memory) differs.
 */
export interface Capabilities {
  /**
   * There is a Store: scenarios may call the Store interface directly
   * (`openStore()`, claim, settle, nextDue...) and the database hooks of
   * `Database`. False in memory (a Scheduler without a store), where only
   * the scenarios that go through the Scheduler run.
   */
  store: boolean;
  /**
   * A key names one unfinished task (one row per key): an add meeting the
   * key's running task returns it, one meeting its waiting task overwrites
   * it in place (same id), one meeting its finished task adds a new task
   * and the finished one gives up the key (as in memory). False in
   * memory, where a key meets its last task and a new task is added beside
   * a running one or in place of a waiting one, under a new id
   * (docs/dedupe.md, "Beside the in-memory keys").
   */
  oneTaskPerKey: boolean;
  /**
   * Recurring jobs of a handler name registered by `key` and managed by it
   * (`triggerJob`, `listTasks({ jobKey })`). False in memory, whose jobs
   * are `Job` objects (no key, no stored occurrences).
   */
  storedJobs: boolean;
  /**
   * Cancelling a running task ends it `cancelled` whatever its handler then
   * does (the stored state). False in memory, where cancellation of a run is
   * cooperative: it ends `cancelled` if it then fails, `succeeded` if it
   * finishes anyway (docs/cancel-retry-timeout.md).
   */
  cancelIsFinal: boolean;
  /**
   * Work names its handler (`define()`): a task's `name` is its handler's
   * name. False in memory, where handlers are functions and a flow's task is
   * named by its name in the flow (docs/flows.md).
   */
  handlerNames: boolean;
  /**
   * `scheduleMany()`: a batch checked whole before anything is added, all
   * or nothing, a bad item named by its index. False in memory, which adds
   * one task per call (the backend adds a batch's items one by one).
   */
  batches: boolean;
  /**
   * Due times are compared on the `now` the scheduler passes in (its Clock),
   * so a ManualClock drives the store: true for SQLite. False where the
   * database server's clock decides (PostgreSQL): scenarios then run in real
   * time, with short delays, and assert bounds instead of exact instants.
   */
  clockDriven: boolean;
  /** Several stores (processes) may have one database open at once and share its work. */
  multiProcess: boolean;
  /** Work added and cancels made through another store reach a running scheduler at once (LISTEN/NOTIFY). */
  notify: boolean;
  /** `schedule(..., { client })`: a task added in the caller's own transaction. */
  transactionsWithClient: boolean;
}

/**
 * The capabilities every store has where memory differs (the rest are the
 * store's own `capabilities`): SQLite's and PostgreSQL's backends spread
 * them, then their store's.
 */
export const STORE_CAPS = {
  store: true,
  oneTaskPerKey: true,
  storedJobs: true,
  cancelIsFinal: true,
  handlerNames: true,
  batches: true,
} as const satisfies Omit<Capabilities, 'clockDriven' | 'multiProcess' | 'notify' | 'transactionsWithClient'>;

/**
 * Options of a store a scenario opens: the factories' own (`lease`,
 * `maxLeaseExpiries`), and the Store interface's `poll` and `prefetch`, which
 * a backend whose factory has no such option sets on the store it returns.
 */
export interface StoreOptions {
  lease?: number;
  maxLeaseExpiries?: number;
  /**
   * ms between looks for work when nothing wakes the scheduler. A scenario
   * that proves a wake-up (an add, a cancel, a retry, NOTIFY) gives a poll of
   * an hour (HOUR): then only the wake-up can start the work in time, and
   * none of it depends on how fast the machine is.
   */
  poll?: number;
  /** Tasks claimed beyond the free workers (the default adapts to real-time measurements). */
  prefetch?: number;
}

/** A poll no scenario outlasts: work that starts was woken. */
export const HOUR = 3_600_000;

/** One fresh, empty database (a SQLite file, a PostgreSQL schema) for one test. */
export interface Database {
  /** A new store of this database (not yet migrated); the suite closes it after the test. */
  store(options?: StoreOptions): Store;
  /**
   * The process of `store` dies holding its claims, and their leases run out:
   * the store is closed, and what it held is left running to be taken over by the next store.
   */
  ownerDies(store: Store): Promise<void>;
  /** Makes the database look written by a newer taskheap (schema version `version`). Call before any store opens it. */
  writeNewerSchema(version: number): Promise<void>;
  /** The names of the tables in the database (sorted); call with no store open. */
  tables(): Promise<string[]>;
  /**
   * Rows of a query on the database while stores have it open (`{s}` stands
   * for the schema prefix), where the backend allows that; undefined where it
   * cannot (SQLite: the store holds its file in EXCLUSIVE locking mode), and
   * the assertions made through it are then left out, saying so in the test.
   */
  peek?: (sql: string) => Promise<Record<string, unknown>[]>;
  /**
   * From now on the database refuses a task whose payload is 20 characters or
   * more, with an error naming `short_payload` (a constraint the library does
   * not know of). Call with no store open.
   */
  refuseLongPayloads(): Promise<void>;
  /** A connection of the caller's own, for `schedule(..., { client })` (where transactionsWithClient). */
  connect?: () => Promise<{ query(text: string, values?: unknown[]): Promise<unknown>; release(): void }>;
}

export interface Backend {
  /** As it appears in test names: 'sqlite (node:sqlite)', 'postgres', 'memory'. */
  name: string;
  /** Why this backend cannot run here (its tests are then skipped, naming the reason), or undefined. */
  unavailable?: string;
  caps: Capabilities;
  /** A fresh database for one test. */
  fresh(): Promise<Database>;
  /**
   * The Scheduler a scenario opens (`Env.open`); by default a `Scheduler`
   * on `options.store`. A backend without a store (memory) makes its own.
   */
  scheduler?: (options: SchedulerOptions) => Scheduler;
}

/**
 * Time as a scenario sees it: a ManualClock where the store is clock-driven
 * (instants exact, nothing slept), the real clock otherwise (bounds only).
 */
export interface Time {
  /** The clock to give a Scheduler: a ManualClock, or undefined for the real one. */
  readonly clock: Clock | undefined;
  /** Whether instants are exact (a ManualClock). */
  readonly exact: boolean;
  now(): number;
  /** Lets `ms` pass: advances the ManualClock (firing what falls due), or sleeps. */
  pass(ms: number): Promise<void>;
  /**
   * Resolves once `condition` holds. `within` is how much time the scenario
   * expects it to take: a ManualClock is advanced by up to that much; in real
   * time it is waited for, with room for a slow machine. Throws naming `what`.
   */
  until(condition: () => boolean | Promise<boolean>, what: string, within?: number): Promise<void>;
}

/** Slack for a loaded machine in real time, on top of what a scenario expects. */
const SLACK = 10_000;

/** Lets pending store calls and their continuations run. */
export async function ticks(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

export function manualTime(start = START): Time & { clock: ManualClock } {
  const clock = new ManualClock(start);
  return {
    clock,
    exact: true,
    now: () => clock.now(),
    async pass(ms) {
      await clock.advance(ms);
      await ticks();
    },
    async until(condition, what, within = 0) {
      const end = clock.now() + within;
      const step = Math.max(1, Math.ceil(within / 100));
      // The slack runs from when the ManualClock has reached `end`: however long the steps there took in real time.
      let realDeadline: number | undefined;
      for (;;) {
        if (await condition()) return;
        if (clock.now() < end) await clock.advance(Math.min(step, end - clock.now()));
        else {
          realDeadline ??= Date.now() + SLACK;
          if (Date.now() > realDeadline) throw new Error(`Timed out after ${within} ms of ManualClock time waiting until ${what}`);
          await clock.advance(0); // fires timers due now
        }
        await ticks(3);
      }
    },
  };
}

export function realTime(): Time {
  return {
    clock: undefined,
    exact: false,
    now: () => Date.now(),
    pass: (ms) => sleep(ms),
    async until(condition, what, within = 0) {
      const deadline = Date.now() + within + SLACK;
      for (;;) {
        if (await condition()) return;
        if (Date.now() > deadline) throw new Error(`Timed out after ${within + SLACK} ms waiting until ${what}`);
        await sleep(10);
      }
    },
  };
}

/** What one test of the suite works with; everything it opens is closed after it. */
export interface Env {
  backend: Backend;
  caps: Capabilities;
  db: Database;
  time: Time;
  /** A store of the test's database, migrated (and recovered, as a scheduler's start() does). */
  openStore(options?: StoreOptions): Promise<Store>;
  /** A scheduler on a new store of the test's database, on the test's time; its errors are collected. */
  open(options?: Omit<SchedulerOptions, 'store' | 'clock' | 'onError'> & { store?: Store; clock?: Clock }): {
    scheduler: Scheduler;
    store: Store;
    errors: unknown[];
  };
}

/** Registers the per-test clean-up and returns a function that sets up one test's Env. */
export function envFor(backend: Backend): () => Promise<Env> {
  const schedulers: Scheduler[] = [];
  const stores: Store[] = [];
  afterEach(async () => {
    for (const scheduler of schedulers.splice(0)) await scheduler.close({ abort: true }).catch(() => {});
    for (const store of stores.splice(0)) await store.close().catch(() => {});
  });
  return async () => {
    const db = await backend.fresh();
    const time = backend.caps.clockDriven ? manualTime() : realTime();
    const tracked: Database = {
      ...db,
      store(options) {
        const store = db.store(options);
        stores.push(store);
        return store;
      },
    };
    return {
      backend,
      caps: backend.caps,
      db: tracked,
      time,
      async openStore(options) {
        const store = tracked.store(options);
        await store.migrate();
        await store.recover();
        return store;
      },
      open(options = {}) {
        const { store = tracked.store(), clock = time.clock, ...rest } = options;
        const errors: unknown[] = [];
        const settings: SchedulerOptions = {
          store,
          onError: (error) => errors.push(error),
          ...(clock === undefined ? {} : { clock }),
          ...rest,
        };
        const scheduler = backend.scheduler?.(settings) ?? new Scheduler(settings);
        schedulers.push(scheduler);
        return { scheduler, store, errors };
      },
    };
  };
}

/**
 * `it` where `ok`; otherwise `it.skip`, with `why` (the capability the
 * backend lacks) in the skipped test's name, so a skip is never silent.
 */
/**
 * The time limit of a scenario that lets an owner die (ownerDies) and takes its work over:
 * PostgreSQL takes no lease over before the server has been up for a lease (30 s in these
 * scenarios), so the first such scenario of a file may wait for that.
 */
export const TAKEOVER_TIMEOUT = 60_000;

export function itWhen(ok: boolean, why: string): (name: string, fn: () => Promise<void> | void, timeout?: number) => void {
  return ok ? (name, fn, timeout) => it(name, fn, timeout) : (name, fn) => it.skip(`${name} (skipped: ${why})`, fn);
}
