// The whole store contract: the `Store` interface every store implements, with
// the parts its capabilities add (`FlowStore`, `LimitListStore`) and their
// guards, and the records it speaks in (stored tasks and jobs, claims,
// outcomes, filters, flows, links, limit groups), with what is shared by the
// stores (final states, the schema version; rules as stored are in
// rule-json.ts).
import type { ConcurrencyLimit, Dedupe, DedupeOutcome, FairShare } from '../core/limit-options.js';

/** How a keyed task meets the task stored with its key (validated). */
export type { Dedupe };
import type { TaskLogLine } from '../core/journal.js';
import type { Rule } from '../rules/rule.js';

/** The life of a stored task. */
export type StoredState = 'blocked' | 'waiting' | 'running' | 'succeeded' | 'failed' | 'timed-out' | 'cancelled';

/** A task as the store keeps it; what `scheduler.getTask(id)` returns. */
export interface StoredTask {
  /** The store's id, unique across processes. */
  id: number;
  /** The handler name given to `define()`. */
  name: string;
  /** The idempotency key, if one was given. */
  key: string | null;
  /** The payload, parsed from JSON. */
  payload: unknown;
  /** Where the task is in its life. */
  state: StoredState;
  /** Runs started so far. */
  attempts: number;
  /** Runs allowed in all (`retry.attempts`, or 1). */
  maxAttempts: number;
  /** When it is (or was last) due; a retry moves it. */
  runAt: Date;
  /** The error of the last failed run (its stack), if any. */
  lastError: string | null;
  /** The key of the recurring job this is an occurrence of. */
  jobKey: string | null;
  /** When it was first stored. */
  createdAt: Date;
  /** When it last changed. */
  updatedAt: Date;
  /**
   * What the handler returned, parsed from JSON, once the task succeeded;
   * `undefined` if it returned nothing (or has not succeeded).
   */
  result: unknown;
  /** The errors of its failed attempts, oldest first: the last 10 are kept. */
  errors: AttemptError[];
  /** Its serial group (`serial` option), or null. */
  serial: string | null;
  /** Its priority (`priority` option; 0 by default). */
  priority: number;
  /** Its concurrency group and limit (`concurrency` option), or null. */
  concurrency?: ConcurrencyLimit | null;
  /** When it last started, by the store's clock (PostgreSQL: the claim's database time); null if it never has. */
  startedAt?: Date | null;
  /** Its group's rate limit (`rate` option), interval in ms, or null. */
  rate: {
    /** The group (its bucket). */
    group: string;
    /** Starts allowed per interval. */
    limit: number;
    /** The window, ms. */
    interval: number;
  } | null;
  /** The named queue it belongs to (`queue` option, or its handler's). @default 'default' */
  queue: string;
  /** Its fair share (`fair` option, its weight given), or null. */
  fair?: Readonly<Required<FairShare>> | null;
  /** The latest value its handler passed to `ctx.progress()`, or undefined (written at most every 500 ms). */
  progress?: unknown;
  /** Its latest 100 `ctx.log()` lines, oldest first (retries included). */
  logs?: TaskLogLine[];
  /** Its steps (`ctx.step`, `ctx.sleep`, `ctx.receive`) in the order its runs reached them; empty if none. */
  steps?: StoredStep[];
  /** While a process holds it (running, or claimed): that process's claim owner id and when its lease runs out. */
  lease?: {
    /** The holding process's claim owner id. */
    owner: string;
    /** When the lease runs out unless renewed. */
    until: Date;
  };
}

/** What `Store.endedTasks()` found among the ids it was asked about. */
export interface EndedTasks {
  /** The tasks that are over, whole. */
  tasks: StoredTask[];
  /** The ids whose task does not exist. */
  gone: number[];
}

/** A named queue as the store keeps it: its shared settings and its tasks by state. */
export interface StoredQueue {
  /** The queue's name. */
  name: string;
  /** Paused: its waiting tasks are not claimed by any process. */
  paused: boolean;
  /** Its tasks running at once across all processes at most, or null for no limit. */
  globalConcurrency: number | null;
  /** Its rate across all processes (interval in ms), or null for none. */
  rate: QueueRate | null;
  /** Its stored tasks by state. */
  counts: Record<StoredState, number>;
}

/** A queue's rate as stored: at most \`limit\` of its tasks start in any window of \`interval\` ms. */
export interface QueueRate {
  /** Starts at most in any window. */
  readonly limit: number;
  /** The window, ms. */
  readonly interval: number;
}

/** The room this process has for some queues' tasks (its per-process concurrency, less what it holds); queues not named: no limit. */
export type QueueRooms = ReadonlyMap<string, number>;

/** A change to a queue's shared settings: what is not given stays. */
export interface QueueChange {
  /** Paused (true) or not (false). */
  paused?: boolean;
  /** A number, or null for no limit. */
  globalConcurrency?: number | null;
  /** A rate (its starts already made stay and count), or null for none. */
  rate?: QueueRate | null;
}

/**
 * What a durable `schedule()` or `scheduleMany()` returns: the stored task as
 * it is after the call, and what the call did (`enqueued`). `enqueued` is
 * not part of the stored record: it is a non-enumerable property, so the
 * task still equals what `getTask()` returns, and reads (`getTask`,
 * `listTasks`, `waitFor`) have no such property.
 */
export interface EnqueuedTask extends StoredTask {
  /**
   * What the call did: `'inserted'`, a new task (no task with its key was
   * waiting or running; a finished one with the key, if any, was
   * overwritten and its id reused); `'replaced'`, the waiting task with its
   * key was overwritten; `'existing'`, nothing was written and this is the
   * task that was already there (running, or kept by `'keep'` or throttle).
   */
  readonly enqueued: DedupeOutcome;
}

/** A stored task with what its add did (`enqueued`, non-enumerable: see `EnqueuedTask`). @internal */
export function enqueued(task: StoredTask, what: DedupeOutcome): EnqueuedTask {
  return Object.defineProperty(task, 'enqueued', { value: what, enumerable: false, writable: false, configurable: true }) as EnqueuedTask;
}

/** One failed attempt of a stored task. */
export interface AttemptError {
  /** Which attempt (1 is the first run). */
  attempt: number;
  /** When it was recorded. */
  at: Date;
  /** The error's stack (or its text). */
  error: string;
}

/** Every state of a stored task, in the order of its life (and of listings by state). */
export const TASK_STATES: readonly StoredState[] = ['blocked', 'waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled'];

/** The states a stored task does not leave by itself (the last four of TASK_STATES). */
export const FINAL_STATES: ReadonlySet<StoredState> = new Set(TASK_STATES.slice(3));

/** SQL: the states not final, as a list (\`('blocked', 'waiting', 'running')\`), for the statements that look for a task still under way. @internal */
export const UNFINISHED_SQL = `(${TASK_STATES.filter((state) => !FINAL_STATES.has(state))
  .map((state) => `'${state}'`)
  .join(', ')})`;

/** A recurring job as the store keeps it. */
export interface StoredJob {
  /** The job's key (given, or generated when none was). */
  key: string;
  /** The handler name. */
  name: string;
  /** The payload every run receives. */
  payload: unknown;
  /** `scheduled` while occurrences remain. */
  state: 'scheduled' | 'paused' | 'done' | 'cancelled';
  /** When the next occurrence is due. */
  nextRunAt: Date | null;
  /** Occurrences created so far. */
  runs: number;
  /** When the latest occurrence that has started (or finished) was due; null if none has. */
  lastRunAt: Date | null;
  /** The stored occurrences by state (retention deletes old finished ones). */
  counts: Record<StoredState, number>;
  /** When the job was first stored. */
  createdAt: Date;
  /** When it last changed (registered again, advanced, paused...). */
  updatedAt: Date;
  /** Its rule (a `CronRule`, `CalendarRule` or `IntervalRule`, with its zone): `rule.next(t)` is its first occurrence after `t`. */
  rule?: Rule;
}

/** Filters of `scheduler.listJobs()`. */
export interface JobFilter {
  /** Only jobs in this state. */
  state?: StoredJob['state'];
  /** Only jobs of this handler. */
  name?: string;
  /** Only jobs whose key starts with this. */
  keyPrefix?: string;
  /** The page after this key (the last job of the previous page): jobs come in key order. */
  after?: string;
  /** @default 100 */
  limit?: number;
}

/**
 * A database connection of the caller's, inside their own transaction: a
 * `pg` `Client` or `PoolClient` (what `option.client` of a durable
 * `schedule()` takes). The task commits or rolls back with that transaction.
 */
export interface QueryClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** What is written when a task is scheduled. */
export interface NewTask {
  /** The handler name. */
  name: string;
  /** The idempotency key, or null. */
  key: string | null;
  /** The payload as JSON text. */
  payload: string;
  /** When it is due, epoch ms. */
  runAt: number;
  /** Runs allowed in all. */
  maxAttempts: number;
  /** Timeout and retry policy as JSON text. */
  options: string;
  /** The serial group, or null (also in `options`; a column so the claim can see it). @default null */
  serial?: string | null;
  /** The priority (also in `options`; a column so the claim can order by it). @default 0 */
  priority?: number;
  /** The rate group (also in `options`; a column so the claim can find the bucket's tasks). @default null */
  rateGroup?: string | null;
  /** The named queue (also in `options`; a column so the claim can pick by it). @default 'default' */
  queue?: string;
  /** The fair share's group (also in `options`; a column so the claim can share starts by it), or null. @default null */
  fairGroup?: string | null;
  /** The fair share's weight (also in `options`). @default 1 */
  fairWeight?: number;
  /** How it meets a task with the same key (keyed tasks only). @default { mode: 'replace', period: 0 } */
  dedupe?: Pick<Dedupe, 'mode' | 'period'>;
}

/**
 * What a claim must respect besides the stored limits (docs/limits.md): the free
 * workers (limited tasks are claimed only to start at once, never
 * prefetched), and whether this process applies the scheduler-wide bucket.
 */
export interface ClaimLimits {
  /** Workers free for tasks that take a slot or a token. */
  readonly free: number;
  /** The scheduler-wide rate this process sets (stored with `setRate`), or undefined. */
  readonly rate:
    | {
        /** Starts at most in any window. */
        readonly limit: number;
        /** The window, ms. */
        readonly interval: number;
      }
    | undefined;
}

/** What `Store.claim` is asked. The claimer changes one object per round (rounds overlap): a store reads it before its call returns. */
export interface ClaimParams {
  /** The claiming process's id: it holds what is claimed. */
  owner: string;
  /** The scheduler's clock (see `Store` on time). */
  now: number;
  /** ms a claim lasts from the moment it is written. */
  lease: number;
  /** Tasks claimed at most. */
  limit: number;
  /** A due recurring job's next occurrences, decided inside the claim's transaction. */
  advance: (job: DueJob, now: number, running: boolean) => JobAdvance;
  /** Only tasks of these handlers (the ones this process has defined); others wait for a process that defines them. */
  names?: readonly string[];
  /** None beyond this process's room for a queue. */
  rooms?: QueueRooms;
  /** What the claim must respect besides the stored limits. */
  limits?: ClaimLimits;
  /**
   * This process held no claim before this one: a store many processes
   * share tells the others when the leases it takes run out, so that an idle
   * one, whatever its poll, takes them over if this process dies.
   */
  announceLease?: boolean;
}

/** What `Store.warm` is told of the process about to claim. */
export interface WarmParams {
  /** The claiming process's id. */
  owner: string;
  /** ms a claim lasts. */
  lease: number;
  /** The handlers it runs. */
  names?: readonly string[];
  /** It applies limits of its own (a queue's concurrency in this process, the scheduler-wide rate): every claim it sends weighs them. */
  ownLimits: boolean;
}

/** What `Store.renew` is asked. */
export interface RenewParams {
  /** The process whose leases they are. */
  owner: string;
  /** The tasks whose leases are extended; those `owner` no longer holds are returned. */
  ids: readonly number[];
  /** The scheduler's clock (see `Store` on time). */
  now: number;
  /** ms the leases last from now. */
  lease: number;
  /**
   * A shared store puts tasks the owner holds but did not list, claimed long ago (their answer was lost), back to waiting, unrun.
   * False while a claim of the caller's is on its way, whose answer may just not have been read yet. @default true
   */
  handBack?: boolean;
  /** Prefetched claims (among `ids`) that have started since, marked so. */
  started?: readonly number[];
}

/** What `Store.nextDue` is asked. */
export interface NextDueParams {
  /** The scheduler's clock (see `Store` on time). */
  now: number;
  /** Tasks of these handlers only. */
  names?: readonly string[];
  /** This process's room for queues: tasks the claim could not take (paused or full queues) do not count. */
  rooms?: QueueRooms;
  /** This process applies the scheduler-wide rate (`ClaimLimits.rate`), which gates every waiting task. */
  rated?: boolean;
}

/** What is written when a recurring job is registered. */
export interface NewJob {
  /** The job key (unique). */
  key: string;
  /** The handler name. */
  name: string;
  /** The payload as JSON text. */
  payload: string;
  /** The rule as JSON text (see `ruleToJson`). */
  rule: string;
  /** The first occurrence, epoch ms, or null if none. */
  nextRunAt: number | null;
  /** Occurrences left (`times`), or null for no limit. */
  remaining: number | null;
  /** No occurrence after this, epoch ms, or null. */
  until: number | null;
  /** Timeout, retry, overlap and misfire as JSON text. */
  options: string;
}

/** A task a process has claimed: it holds the lease until `complete` or `retry`. */
export interface ClaimedTask {
  /** The store id. */
  id: number;
  /** The handler name. */
  name: string;
  /** The payload as JSON text. */
  payload: string;
  /** Runs started, this claim included. */
  attempts: number;
  /** Runs allowed in all. */
  maxAttempts: number;
  /** When it was due, epoch ms. */
  runAt: number;
  /** Timeout and retry policy as JSON text. */
  options: string;
  /** The priority: claims come ordered by priority (highest first), then due time, then id. */
  priority: number;
  /**
   * Whether the claim counted it started (it goes into a free worker at
   * once); false: prefetched, and `renew` marks it once it starts. A lease
   * that runs out counts against a task only once it started.
   */
  started: boolean;
  /**
   * Set only on a task the claim failed instead of taking, its lease having
   * run out this many times while it ran (more than `maxLeaseExpiries`):
   * the claiming process reports it once (`failure`, `onError`), never runs it.
   */
  failedAfterExpiries?: number;
  /** Its step record (JSON) from earlier runs; absent: none. */
  steps?: string;
}

/** A recurring job due for its next occurrence. */
export interface DueJob {
  /** The job key. */
  key: string;
  /** The handler name. */
  name: string;
  /** The payload as JSON text. */
  payload: string;
  /** The rule as JSON text. */
  rule: string;
  /** The due occurrence, epoch ms. */
  nextRunAt: number;
  /** Occurrences left, or null for no limit. */
  remaining: number | null;
  /** No occurrence after this, epoch ms, or null. */
  until: number | null;
  /** Timeout, retry, overlap and misfire as JSON text. */
  options: string;
}

/** What `materialize` decides for one due job. */
export interface JobAdvance {
  /** occurrence times to insert as tasks */
  occurrences: number[];
  /** The job's next occurrence after these, or null when it is done. */
  nextRunAt: number | null;
  /** Occurrences left after these, or null for no limit. */
  remaining: number | null;
  /**
   * Occurrences dropped by the job's policies, reported by the `skip` event
   * once the claim committed: the first of them, and why.
   */
  skipped?: { at: number; reason: 'overlap' | 'misfire' };
}

/** Filters of `scheduler.listTasks()`; all given ones must hold. Tasks come ordered by due time, then id (`order: 'desc'`: the reverse). */
export interface TaskFilter {
  /** Only tasks in this state. */
  state?: StoredState;
  /** Only tasks of this handler. */
  name?: string;
  /** Only tasks whose key starts with this (`'invoice:'`). */
  keyPrefix?: string;
  /** Only occurrences of this recurring job. */
  jobKey?: string;
  /** Only tasks of this named queue. */
  queue?: string;
  /** Only tasks due at or after this time. */
  from?: Date | number;
  /** Only tasks due before this time. */
  to?: Date | number;
  /**
   * The page after this task: pass the last task of the previous page
   * (its `runAt` and `id` are the cursor).
   * @example
   * const next = await scheduler.listTasks({ state: 'failed', after: page.at(-1) });
   */
  after?: { runAt: Date | number; id: number };
  /** At most this many, 1 to 10,000. */
  /** @default 100 */
  limit?: number;
  /** `'desc'`: newest due time first (then id), and `after` pages towards older ones. @default 'asc' */
  order?: 'asc' | 'desc';
}

/** Filters of `scheduler.countTasks()`: those of `listTasks()` that select tasks (counts cover every state). */
export type TaskCountFilter = Omit<TaskFilter, 'state' | 'after' | 'limit' | 'order'>;

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

/** One end of an edge as a store writes it: a task of the flow by its index, or a stored task by id. */
export type EdgeEnd =
  | {
      /** An index into `NewFlow.tasks`. */
      readonly index: number;
    }
  | {
      /** A stored task's id. */
      readonly id: number;
    };

/** One edge as a store writes it: the dependent's index in the flow, and its dependency's index or stored id. */
export interface NewEdge {
  /** The dependent: an index into `NewFlow.tasks`. */
  readonly task: number;
  /** The dependency: an index into `NewFlow.tasks`, or a stored task's id. */
  readonly dep: EdgeEnd;
  /** Its failure rule. */
  readonly onFailure: OnFailure;
  /** Its place in the dependent's `after` (the order `ctx.dependencies()` lists them). */
  readonly ord: number;
}

/** A checked flow, as `addFlow` takes it (`T`: each task as the backend takes it, a store's row by default). */
export interface NewFlow<T = NewTask> {
  /** The tasks, in the order given (their ids increase in this order). */
  readonly tasks: readonly T[];
  /** Its edges, each dependent's in the order of its \`after\`. */
  readonly edges: readonly NewEdge[];
  /** The stored tasks the flow depends on (ids, no duplicates). */
  readonly external: readonly number[];
}

/** One edge of a stored flow. */
export interface StoredEdge {
  /** The dependent's id. */
  readonly task: number;
  /** The dependency's id. */
  readonly dep: number;
  /** Its failure rule. */
  readonly onFailure: OnFailure;
  /** Whether the dependent counted it done (it succeeded, or failed under a rule that lets the dependent run). */
  readonly counted: boolean;
  /** The dependency's state now, or null if it is gone (deleted by retention). */
  readonly depState: StoredState | null;
}

/** A stored flow as a store reads it: its tasks and their edges. */
export interface StoredFlowGraph {
  /** Its tasks, by id. */
  tasks: StoredTask[];
  /** Its edges, each dependent's in the order of its \`after\`. */
  edges: StoredEdge[];
}

/** One edge seen from one of its ends: the task at the other end, its state, and the rule of the edge. */
export interface TaskLink {
  /** The task at the other end. */
  readonly id: number;
  /** Its handler. */
  readonly name: string;
  /** Its state now. */
  readonly state: StoredState;
  /** The dependent's rule for this dependency. */
  readonly onFailure: OnFailure;
  /** Whether the dependent counted the dependency done (it succeeded, or ended under a rule that lets the dependent run). */
  readonly done: boolean;
}

/** What `scheduler.flows.links(id)` returns: a task's flow, dependencies and dependents. */
export interface TaskLinks {
  /** The task's id. */
  readonly id: number;
  /** Its state now. */
  readonly state: StoredState;
  /** The flow it was added with (`flows.get(flowId)`), or null for a task added on its own. */
  readonly flowId: number | null;
  /** What it waits for, in the order of its `after` (at most `limit`). */
  readonly dependencies: readonly TaskLink[];
  /** How many dependencies it has in all. */
  readonly dependencyCount: number;
  /** What waits for it, by id (at most `limit`). */
  readonly dependents: readonly TaskLink[];
  /** How many dependents it has in all. */
  readonly dependentCount: number;
}

/** One limit group as the listing shows it. */
export interface LimitGroup {
  /** `rate` (a `rate: { group }` bucket), `concurrency` (a `concurrency: { group }`) or `serial` (a concurrency group with limit 1, as `serial` makes it). */
  readonly kind: 'rate' | 'concurrency' | 'serial';
  /** The group. */
  readonly group: string;
  /** Its limit: starts per interval for a rate group, tasks at once otherwise. */
  readonly limit: number;
  /** A rate group's window in ms; null for the others. */
  readonly interval: number | null;
  /** In use now: the starts within the window (rate), or the tasks holding a slot (concurrency, serial; a task waiting for its retry keeps its slot). */
  readonly inUse: number;
  /** Waiting tasks that name the group (a holder waiting for its retry among them). */
  readonly waiting: number;
}

/** The final states a claimed task can be recorded in. */
export type FinalState = 'succeeded' | 'failed' | 'timed-out' | 'cancelled';

/** What a store can do (`Store.capabilities`): the only way the scheduler tells stores apart. */
export interface StoreCapabilities {
  /**
   * Due times are compared on the \`now\` the scheduler passes in (its
   * clock), so a \`ManualClock\` drives the store. False where the database
   * server's clock decides.
   */
  readonly clockDriven: boolean;
  /** Several processes may share one database and its work. */
  readonly multiProcess: boolean;
  /** Work added, cancels and final states reach the other processes at once (LISTEN/NOTIFY): \`watch()\` and \`subscribe()\` are told. */
  readonly notify: boolean;
  /** Adds through a caller's \`client\`, in their transaction, and has \`completeWithin()\` (\`ctx.transaction()\`) and, with \`steps\`, \`recordStepsWithin()\`. */
  readonly transactionsWithClient: boolean;
  /** Flows: it is a \`FlowStore\` (dependencies between tasks, a task's links). */
  readonly flows: boolean;
  /** It is a \`LimitListStore\`: the limit groups in use, for the dashboard. */
  readonly limitList: boolean;
  /**
   * Fair shares (`fair` on stored tasks, jobs and flow tasks): its claim
   * shares starts between the groups with due work by weight, as memory
   * does. Where false, `fair` is refused at the call.
   */
  readonly fairShares: boolean;
  /**
   * Steps (`ctx.step`, `ctx.sleep`, `ctx.receive`, `scheduler.send`): it is
   * a `StepStore`, keeps a task's step record and messages, and settles a
   * `suspend` outcome. Where false, the calls reject with
   * `ERR_STEPS_NOT_STORED`.
   */
  readonly steps: boolean;
}

/**
 * How a claimed run ended, as the runner hands it to the store. The runner
 * keeps the task under lease until the store confirms the outcome.
 */
export type Outcome =
  /** A final state. */
  | {
      readonly id: number;
      readonly kind: 'complete';
      readonly state: FinalState;
      readonly error: string | null;
      readonly result?: string | null;
      /**
       * The worker keeps nothing of this state (retention 0) and nobody in
       * its process waits for the task: the store deletes the row instead of
       * recording the outcome, unless something still needs it (a key, a
       * flow, steps, a waiter's mark: see docs/retention.md).
       */
      readonly discard?: boolean;
    }
  /** Waiting again, due `delay` ms after the store's now. */
  | { readonly id: number; readonly kind: 'retry'; readonly delay: number; readonly error: string }
  /** Handed back unrun: waiting again, the claim's attempt not counted. */
  | { readonly id: number; readonly kind: 'release' }
  /**
   * Suspended by a step (a sleep, a wait for a message): waiting again, due
   * `delay` ms after the store's now, the attempt not counted, its step
   * record `steps` (JSON) kept and `waitingOn` the topic a message on which
   * makes it due at once. It keeps its serial group's place.
   */
  | {
      readonly id: number;
      readonly kind: 'suspend';
      readonly delay: number;
      /** The task's step record, JSON. */
      readonly steps: string;
      /** The topic whose message makes it due at once; null: none. */
      readonly waitingOn: string | null;
    };

/**
 * Where durable work lives. taskheap ships two: `sqliteStore` (one process)
 * and `postgresStore` (many processes). Every method is one transaction.
 *
 * Time: `now` arguments are the scheduler's clock. A store shared by many
 * processes (PostgreSQL) ignores them for due times and leases and uses the
 * database server's clock instead, so process clocks may disagree.
 *
 * Capabilities: every method is required (a no-op where a store has nothing to do, as documented on it) but `completeWithin` and
 * `recordStepsWithin`, there when `capabilities.transactionsWithClient` says so; `flows` and `limitList` add `FlowStore` and `LimitListStore`. Nothing is
 * guessed from the presence of a method.
 */
export interface Store {
  /** What this store can do, as data: the scheduler and the conformance suite read it (nothing is guessed from its methods). */
  readonly capabilities: StoreCapabilities;
  /** ms a claim lasts without renewal (default 30 s). */
  readonly lease?: number;
  /** ms between checks for work when nothing wakes the process (default 5 s). */
  readonly poll?: number;
  /**
   * ms the runner keeps retrying unconfirmed outcomes on `close()` before it
   * gives up on them (their leases then lapse and the tasks run again).
   */
  readonly closeTimeout?: number;
  /**
   * Tasks claimed beyond the free workers (default: adaptive, from the
   * worker count to 32 times it, at most 1,000, as tasks are short next to
   * a claim's round trip; 0 with unlimited workers).
   */
  readonly prefetch?: number;
  /** Creates or upgrades the schema; throws `SchemaVersionError` if the database is newer. */
  migrate(): Promise<void>;
  /**
   * Inserts a task, or meets the one with the same key as its `dedupe` says
   * (by default replaces it unless it is running), deciding atomically
   * against the key's latest row. `now` is the scheduler's clock: a store
   * with its own clock (PostgreSQL) ignores it and measures dedupe periods
   * on the database's.
   */
  addTask(task: NewTask, via?: QueryClient, now?: number): Promise<EnqueuedTask>;
  /**
   * Adds many tasks in one transaction, all or none, as `addTask` would one
   * after another (a key given twice: the items meet in order, and each
   * reports the key's final row with what its own add did); returns the
   * stored rows in the order given. With `via`, in the caller's transaction, as
   * `addTask` (stores that cannot share one throw as `addTask` does).
   */
  addTasks(tasks: readonly NewTask[], via?: QueryClient, now?: number): Promise<EnqueuedTask[]>;
  /** Inserts or updates (by key) a recurring job. */
  addJob(job: NewJob): Promise<StoredJob>;
  /**
   * Turns due recurring jobs into occurrence tasks (once per job and time,
   * whichever process gets there first), then claims due waiting tasks, and
   * running ones whose lease expired, for `owner`. An expired task whose
   * lease has already expired `maxLeaseExpiries` times is not claimed but
   * recorded `failed`. Named queues: no task of a paused queue, none beyond
   * a queue's global concurrency (across processes).
   */
  claim(params: ClaimParams): Promise<ClaimedTask[]>;
  /**
   * Stores the scheduler-wide bucket's limit (the most recent process to
   * set it decides); its past starts stay. Undefined: this process stops
   * applying it (others that set it keep it).
   */
  setRate(rate: { limit: number; interval: number } | undefined): Promise<void>;
  /** ms from now until any waiting task, expiring lease or scheduled job is due (0 if overdue), or undefined: nothing is. */
  nextDue(params: NextDueParams): Promise<number | undefined>;
  /** Named queues: changes a queue's shared settings (made if new); a resume wakes the processes. */
  setQueue(name: string, change: QueueChange): Promise<void>;
  /** Every queue with a row or a task (or just `name`), by name, with its tasks counted by state. */
  listQueues(name?: string): Promise<StoredQueue[]>;
  /** Extends the leases of the tasks still held by their owner; returns the ids no longer held. */
  renew(params: RenewParams): Promise<number[]>;
  /**
   * Records outcomes of claimed tasks, all or none, in one statement
   * (PostgreSQL) or one transaction (SQLite). An outcome for a task
   * `owner` no longer holds (its lease was taken over, or it was cancelled)
   * is ignored: resolving means none of them needs writing again.
   */
  settle(owner: string, outcomes: readonly Outcome[], now: number): Promise<void>;
  /** Cancels a waiting or running task; true if it was. Running ones are told through `onCancel`. */
  cancel(id: number): Promise<boolean>;
  /** Cancels a recurring job and its waiting occurrences. */
  cancelJob(key: string): Promise<boolean>;
  /** One task by id. */
  getTask(id: number): Promise<StoredTask | undefined>;
  /**
   * Of `ids`, the tasks that are over (a final state), whole, and the ids
   * of those that do not exist (`gone`); tasks still to run are left out.
   * One read for many waitFor() calls of a process. With `awaited` (a
   * waiter's first look), those still to run are marked where another
   * process may settle them, so that its settle keeps their rows whatever
   * its retention (PostgreSQL); where one process owns the database (SQLite)
   * its worker asks its own waiters instead.
   */
  endedTasks(ids: readonly number[], awaited?: boolean): Promise<EndedTasks>;
  /** Tasks matching `filter`, earliest first. */
  listTasks(filter: TaskFilter): Promise<StoredTask[]>;
  /** Tasks matching `filter` (`state`, `after` and `limit` aside) counted by state. */
  countTasks(filter: TaskCountFilter): Promise<Record<StoredState, number>>;
  /** Deletes finished tasks matching `filter` (`after` aside; a `state` must be final), at most `limit` (default 10,000); how many went. */
  deleteTasks(filter: TaskFilter): Promise<number>;
  /**
   * Writes handlers' progress (JSON, or null: unchanged) and log lines of
   * tasks `owner` holds, in one transaction. When the database refuses one
   * task's entry for what it holds (a value it cannot store, not a lost
   * connection), that entry alone is lost: the others are written and
   * `lost(id, error)` is called once for it. Any other failure rejects.
   */
  journal(
    owner: string,
    writes: readonly { id: number; progress: string | null; lines: readonly TaskLogLine[] }[],
    lost: (id: number, error: unknown) => void,
  ): Promise<void>;
  /**
   * Calls `onWake` when another process adds work due at a time (so a sleeping
   * process can re-arm), `onCancel` when a task is cancelled anywhere, and
   * `onPause` when a named queue is paused anywhere (stores whose writers all
   * live in this process need not). A listening connection lost calls
   * `onWake` at once (announcements may be missed until it is back, see
   * `listening`), and again once it is back.
   */
  subscribe(onWake: (runAt: number) => void, onCancel: (id: number) => void, onPause?: (queue: string) => void): Promise<void>;
  /**
   * Whether every change that makes work due elsewhere is announced to this
   * process now (`subscribe`'s `onWake`): an idle process then checks the
   * store only as a long safety net (idleCheck() in claimer.ts), not every
   * `poll`. False where nothing can listen (PostgreSQL behind PgBouncer
   * without `listenConnectionString`), nothing announces (SQLite), or the
   * listening connection is lost for now.
   */
  readonly listening: boolean;
  /**
   * Puts a failed, timed-out or cancelled task back to waiting, due `now`
   * (the store's now where it has its own clock), with its attempts reset;
   * undefined if there is no such task in one of those states.
   */
  requeue(id: number, now: number): Promise<StoredTask | undefined>;
  /**
   * Calls `onDone` with the id of a task another process brought to a final
   * state (`null`: some announcements may have been missed, e.g. while the
   * listening connection reconnected). Resolves with whether other
   * processes' final states are announced to this one at all: false where
   * nothing can listen (PostgreSQL behind PgBouncer without
   * `listenConnectionString`) or nothing announces (SQLite, whose writers
   * all live in this process), where waiters must look for themselves every
   * poll (they resolve false at once).
   */
  watch(onDone: (id: number | null) => void): Promise<boolean>;
  /**
   * Retention: deletes at most `limit` finished tasks last changed more than
   * `succeeded` ms ago (succeeded ones) or `failed` ms ago (failed, timed-out,
   * cancelled), and as many finished jobs older than `failed`; null keeps
   * that kind. Also deletes at most `limit` limit rows that limit nothing
   * now (whatever the retention). Resolves with how many rows went: `limit`
   * or more suggests more.
   */
  prune(succeeded: number | null, failed: number | null, limit: number): Promise<number>;
  /** One recurring job by key, with its occurrences' counts. */
  getJob(key: string): Promise<StoredJob | undefined>;
  /** Recurring jobs matching `filter`, in key order. */
  listJobs(filter: JobFilter): Promise<StoredJob[]>;
  /** Sets a job's state: pause ('scheduled' to 'paused') or resume ('paused' to 'scheduled'); false if it was not in `from`. */
  setJobState(key: string, from: 'scheduled' | 'paused', to: 'scheduled' | 'paused'): Promise<boolean>;
  /**
   * Resumes a paused job; false if it was not paused. `resumedAt` says when
   * it is due next (null: never, it is done), from the job and the store's
   * now (`now`, or the database server's).
   */
  resumeJob(key: string, now: number, resumedAt: (job: DueJob, now: number) => number | null): Promise<boolean>;
  /** Adds an occurrence of a job due now (not counted against `times`); undefined if there is no such job or it was cancelled. */
  triggerJob(key: string, now: number): Promise<StoredTask | undefined>;
  /**
   * Runs `fn` in a transaction on the store's database and, in the same
   * transaction, records task `id` (held by `owner`) succeeded with
   * `result(value)`; rolls back if the lease is no longer ours. Stores
   * that cannot (SQLite) leave it out: a store has it exactly when its
   * `capabilities.transactionsWithClient` is true.
   */
  completeWithin?<T>(owner: string, id: number, fn: (client: QueryClient) => Promise<T>, result: (value: T) => string | null): Promise<T>;
  /**
   * Returns running tasks of a previous life of this store to waiting; the ones it failed instead (ClaimedTask.failedAfterExpiries).
   * A shared store resolves `[]`: the next claim takes expired leases over.
   */
  recover(): Promise<ClaimedTask[]>;
  /**
   * Readies the store for the first claims of a process once it starts:
   * PostgreSQL opens a few connections and plans on each the claims they will
   * send, so work due right after start() is not late by a cold connection's
   * first plan; SQLite has nothing to ready. Best effort: it never rejects.
   */
  warm(params: WarmParams): Promise<void>;
  /** Releases connections and files. */
  close(): Promise<void>;
}

/** What a store with `capabilities.flows` adds: flows, their dependencies and a task's links. */
export interface FlowStore {
  /**
   * Adds every task and edge of `flow` in one transaction (the caller's with
   * `via`), all or none; a stored id the flow depends on that does not exist
   * rejects it. Returns the rows in the order given.
   */
  addFlow(flow: NewFlow, via?: unknown, now?: number): Promise<StoredTask[]>;
  /** The tasks of flow `id` (the id of its first task) with their edges, or undefined. */
  getFlow(id: number): Promise<StoredFlowGraph | undefined>;
  /** Task `id`'s dependencies in the order given, each with its rule. */
  getDependencies(id: number): Promise<DependencyInfo[]>;
  /** Task `id`'s links, at most `limit` of each kind, or undefined if there is no such task. */
  getTaskLinks(id: number, limit: number): Promise<TaskLinks | undefined>;
}

/** What a store with `capabilities.limitList` adds: its limit groups. */
export interface LimitListStore {
  /** The `limit` keys with the most waiting tasks (then by kind and key); `now` is the time of rate windows where the store keeps the clock's. */
  listLimitGroups(limit: number, now: number): Promise<LimitGroup[]>;
}

/** Whether a store is a `FlowStore`: its capabilities say so. @internal */
export function hasFlows(store: Store): store is Store & FlowStore {
  return store.capabilities.flows;
}

/** One step of a stored task (`ctx.step`, `ctx.sleep`, `ctx.receive`) as its record keeps it. */
export interface StoredStep {
  /** Its name: a step's own (`name#2` for its second call in a run), `sleep`, or a receive's topic. */
  name: string;
  /** The call: `ctx.step`, `ctx.sleep` or `ctx.receive`. */
  kind: 'step' | 'sleep' | 'receive';
  /** `done`; `failed` (a step whose last run threw: the next run runs it again); or, until `until`, `sleeping` (a sleep) or `waiting` (a receive, for a message). */
  state: 'done' | 'failed' | 'sleeping' | 'waiting';
  /** Runs that ran it: each one in which a step threw, and the one that finished it (or sleeps or waits in it). A run its process died in is not counted. */
  attempts: number;
  /** When a run first reached it. */
  startedAt: Date;
  /** When it finished; null while it sleeps or waits. */
  endedAt: Date | null;
  /** A sleep's wake-up time, a receive's deadline; null for a step. */
  until: Date | null;
  /** Characters of the JSON it keeps (a step's value, the message taken); 0 if none. */
  resultSize: number;
}

/** A step record write (`StepStore.recordSteps`). */
export interface RecordStepsParams {
  readonly owner: string;
  readonly id: number;
  /** The task's whole step record, JSON. */
  readonly steps: string;
}

/** A message taken for a `ctx.receive()` (`StepStore.takeMessage`). */
export interface TakeMessageParams {
  readonly owner: string;
  readonly id: number;
  readonly topic: string;
  /** The receive's place among the run's step calls: a message it took before is taken again. */
  readonly position: number;
}

/** A message sent to a stored task (`StepStore.send`). */
export interface SendParams {
  /** The task's id, or the dedupe key of an unfinished task. */
  readonly to: number | { readonly key: string };
  readonly topic: string;
  /** The message, JSON. */
  readonly message: string;
  /** The scheduler's clock (a clock-driven store's "now"). */
  readonly now: number;
}

/** What a store with `capabilities.steps` adds: a task's step record and its messages. */
export interface StepStore {
  /** Writes task `id`'s step record while `owner` holds it; false if it no longer does (nothing written). */
  recordSteps(params: RecordStepsParams): Promise<boolean>;
  /** The oldest message on the topic for the task (or the one this receive took before), marked taken; undefined if none. JSON. */
  takeMessage(params: TakeMessageParams): Promise<string | undefined>;
  /** Keeps a message for an unfinished task, due at once if it waits on the topic; false if there is no such task. */
  send(params: SendParams): Promise<boolean>;
  /**
   * Runs `body` in a transaction on the store's database, then writes task
   * `id`'s step record (`steps()`, read once `body` resolved) in the same
   * transaction while `owner` holds the task; rolls back and rejects with
   * `LeaseLostError` if it does not (`ctx.transactionStep()`). There exactly
   * when `capabilities.transactionsWithClient` is true, as `completeWithin`.
   */
  recordStepsWithin?(owner: string, id: number, body: (client: QueryClient) => Promise<void>, steps: () => string): Promise<void>;
}

/** Whether a store is a `StepStore`: its capabilities say so. @internal */
export function hasSteps(store: Store): store is Store & StepStore {
  return store.capabilities.steps;
}

/** Whether a store is a `LimitListStore`: its capabilities say so. @internal */
export function listsLimits(store: Store): store is Store & LimitListStore {
  return store.capabilities.limitList;
}

/** The schema version this library writes. */
export const SCHEMA_VERSION = 14;
