// In-memory flows (docs/flows.md), one task of a flow: what the graph keeps of it
// (its state, outcome and edges both ways), its view as a `StoredTask` (the
// shape `flows.get()` and `scheduler.waitFor()` give on every backend) and the
// context its function receives (a task's, plus its id and
// `dependencies()`). The graph that moves it is memory-graph.ts.
import type { Duration } from '../core/duration.js';
import type { SleepFor } from '../core/steps.js';
import type { StepLog } from '../core/steps.js';
import type { Task, TaskContext, TaskSettings } from '../core/task.js';
import type { FlowContext, FlowFunction } from '../durable/flow-graph.js';
import type { AttemptError, DependencyInfo, OnFailure, StoredState, StoredTask } from '../durable/store.js';

/** One edge: `task` waits for `dep` under its rule. */
export interface MemoryEdge {
  readonly task: MemoryNode;
  readonly dep: MemoryNode;
  readonly onFailure: OnFailure;
}

/** The stored errors kept per task, as the stores keep them. */
const ERRORS_KEPT = 10;

/** The text a failure is kept as (`lastError`, `dependencies()`'s `error`): the stack of an Error, as the stores keep it. */
function errorText(error: unknown): string {
  if (error instanceof Error) return error.stack ?? `${error.name}: ${error.message}`;
  return String(error);
}

/** One task of an in-memory flow. */
export class MemoryNode {
  /** Where it is: `blocked` and `waiting` until it starts (`waiting`: its task is in the loop). */
  state: StoredState = 'blocked';
  /** Started since it was (re)queued: its dependencies no longer move it. */
  started = false;
  /** Runs started since it was (re)queued. */
  attempts = 0;
  result: unknown = undefined;
  lastError: string | null = null;
  readonly errors: AttemptError[] = [];
  /** Sunk by a `'fail'` dependency: the id of the task whose failure did it. */
  root: number | undefined = undefined;
  /** Its task in the loop while it is waiting or running; a task that is not this one is no longer its. */
  task: Task | undefined = undefined;
  startedAt: number | null = null;
  updatedAt: number;
  /** Its dependencies in the order of its `after`, and the edges of the tasks that depend on it. */
  readonly deps: MemoryEdge[] = [];
  readonly dependents: MemoryEdge[] = [];
  /** Its step record (and messages sent to it, blocked or not), kept across its retries as a store keeps it. */
  steps: StepLog | undefined = undefined;
  /** Told when it reaches a final state (`scheduler.waitFor()`). */
  waiters: (() => void)[] = [];

  constructor(
    readonly id: number,
    readonly flowId: number,
    readonly name: string,
    readonly fn: FlowFunction,
    readonly payload: unknown,
    /** Its task settings: options checked once, the graph as observer. */
    readonly settings: TaskSettings,
    public runAt: number,
    readonly createdAt: number,
  ) {
    this.updatedAt = createdAt;
  }

  /** Its state now: a waiting task that started a run and waits for a retry (its retry policy) is `waiting`. */
  get current(): StoredState {
    if (this.state !== 'running' && this.state !== 'waiting') return this.state;
    return this.task?.state === 'running' ? 'running' : 'waiting';
  }

  /** A failed attempt (kept as the stores keep them: the last 10). */
  noteError(error: unknown, at: number): void {
    this.lastError = errorText(error);
    this.errors.push({ attempt: this.attempts, at: new Date(at), error: this.lastError });
    if (this.errors.length > ERRORS_KEPT) this.errors.shift();
  }

  /** Its dependencies as its function sees them: a failed one only under `'continue'`. */
  dependencies(): DependencyInfo[] {
    return this.deps
      .filter((edge) => edge.dep.state === 'succeeded' || edge.onFailure === 'continue')
      .map((edge) => ({
        id: edge.dep.id,
        name: edge.dep.name,
        state: edge.dep.state,
        result: edge.dep.result,
        error: edge.dep.lastError,
        onFailure: edge.onFailure,
      }));
  }

  /** A copy as a `StoredTask`, the shape of a flow's task on every backend. */
  snapshot(): StoredTask {
    const limits = this.settings.limits;
    const task = this.task;
    return {
      id: this.id,
      name: this.name,
      key: null,
      payload: this.payload,
      state: this.current,
      attempts: this.attempts,
      maxAttempts: this.settings.retry?.attempts ?? 1,
      runAt: new Date(this.runAt),
      lastError: this.lastError,
      jobKey: null,
      createdAt: new Date(this.createdAt),
      updatedAt: new Date(this.updatedAt),
      result: this.state === 'succeeded' ? this.result : undefined,
      errors: [...this.errors],
      serial: limits?.serial ?? null,
      priority: limits?.priority ?? 0,
      startedAt: this.startedAt === null ? null : new Date(this.startedAt),
      rate: null,
      queue: limits?.queue ?? 'default',
      ...(task === undefined ? {} : { progress: task.progress, logs: task.logs }),
    };
  }
}

/** The `ctx` of a flow task's run: the run's context, the task's id and its dependencies. */
export class FlowRunContext implements FlowContext {
  readonly #run: TaskContext;
  readonly #node: MemoryNode;

  constructor(run: TaskContext, node: MemoryNode) {
    this.#run = run;
    this.#node = node;
  }

  get id(): number {
    return this.#node.id;
  }
  get signal(): AbortSignal {
    return this.#run.signal;
  }
  get scheduledAt(): Date {
    return this.#run.scheduledAt;
  }
  get startedAt(): Date {
    return this.#run.startedAt;
  }
  get attempt(): number {
    return this.#run.attempt;
  }
  get name(): string | undefined {
    return this.#run.name;
  }
  progress(value: unknown): void {
    this.#run.progress(value);
  }
  log(line: string): void {
    this.#run.log(line);
  }
  step<T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> {
    return this.#run.step(name, fn);
  }
  sleep(duration: SleepFor): Promise<void> {
    return this.#run.sleep(duration);
  }
  receive<T = unknown>(topic: string, options: { timeout: Duration }): Promise<T | undefined> {
    return this.#run.receive<T>(topic, options);
  }
  dependencies(): Promise<DependencyInfo[]> {
    return Promise.resolve(this.#node.dependencies());
  }
}
