// In-memory flows: flows of function tasks in a scheduler without
// a store, with the rules of the stores' flows (docs/flows.md). A flow is
// checked whole at the call (memory-check.ts) before a task exists, and this
// file loads with a scheduler's first flow (scheduler-flows.ts); each of its tasks is born in the state `birth()` gives, and
// enters the loop (`TaskLoop.push`) only once its dependencies allow it;
// the loop tells the graph of every final state through the task's
// observer, and the graph moves the dependents: blocked, waiting, or sunk by
// a `'fail'` dependency. `cancel()`, `retry()` and `waitFor()` by id; a
// flow's status as the stores give it. (Not the limits gate of core/gate.ts,
// which decides when due tasks may start.)
import { StepLog } from '../core/steps.js';
import { ClosedError } from '../core/errors.js';
import type { TaskLoop } from '../core/loop.js';
import { materialize, State, type Task, type TaskContext, type TaskSettings } from '../core/task.js';
import { toSettings } from '../core/task-options.js';
import { TaskNotFoundError, WaitTimeoutError } from '../durable/errors.js';
import { birth, sunkText } from '../durable/flow-graph.js';
import { toFlowStatus, type FlowStatus, type StoredFlow } from '../durable/flows.js';
import { FINAL_STATES, type StoredEdge, type StoredState, type StoredTask, type TaskLink, type TaskLinks } from '../durable/store.js';
import type { CheckedFlow, CheckedTask } from './memory-check.js';
import { MemoryNode, FlowRunContext, type MemoryEdge } from './memory-node.js';

const FAILED: ReadonlySet<StoredState> = new Set(['failed', 'timed-out', 'cancelled']);
/** Finished flows kept for `flows.get()`, `waitFor()` and `retry()` after they end; older ones are forgotten. */
const FINISHED_FLOWS_KEPT = 1_000;

/** The flows of one scheduler without a store. @internal */
export class MemoryFlowGraph {
  readonly #loop: TaskLoop;
  readonly #nodes = new Map<number, MemoryNode>();
  /** Each node by its task settings, which every task of it in the loop carries (`flowTaskOf()`). */
  readonly #bySettings = new WeakMap<TaskSettings, MemoryNode>();
  /** Each flow's tasks in the order given, by the flow's id. */
  readonly #flows = new Map<number, MemoryNode[]>();
  /** Per flow, its tasks not in a final state. */
  readonly #open = new Map<number, number>();
  /** Flows every task of which is final, oldest first. */
  readonly #finished = new Set<number>();
  #nextId = 1;

  constructor(loop: TaskLoop) {
    this.#loop = loop;
  }

  /** Makes the tasks of a flow checked at the call (checkMemoryFlow); those free to run enter the loop. */
  add({ flow, now }: CheckedFlow): StoredFlow {
    if (this.#loop.closed) throw new ClosedError();
    const external = new Map<number, StoredState>();
    for (const id of flow.external) {
      const node = this.#nodes.get(id);
      if (node === undefined) throw new TaskNotFoundError(id);
      external.set(id, node.state);
    }
    const first = this.#nextId;
    this.#nextId += flow.tasks.length;
    const ids = flow.tasks.map((_, i) => first + i);
    const births = birth(flow, external, ids);
    const nodes = flow.tasks.map((checked, i) => this.#node(ids[i]!, first, checked, now));
    for (const edge of flow.edges) {
      const dep = 'index' in edge.dep ? nodes[edge.dep.index]! : this.#nodes.get(edge.dep.id)!;
      const link: MemoryEdge = { task: nodes[edge.task]!, dep, onFailure: edge.onFailure };
      link.task.deps.push(link);
      dep.dependents.push(link);
    }
    this.#flows.set(first, nodes);
    this.#open.set(first, nodes.length);
    for (const node of nodes) this.#nodes.set(node.id, node);
    for (const [i, node] of nodes.entries()) {
      const born = births[i]!;
      if (born.sunk !== undefined) {
        const dep = born.sunk.dep;
        this.#sink(node, born.state === 'cancelled' ? 'cancelled' : 'failed', 'index' in dep ? ids[dep.index]! : dep.id, now);
      }
    }
    // Reopened external dependencies are not possible here: a flow only adds edges into itself.
    for (const [i, node] of nodes.entries()) if (births[i]!.state === 'waiting') this.#release(node);
    return { id: first, tasks: Object.fromEntries(nodes.map((node) => [node.name, node.snapshot()])) };
  }

  #node(id: number, flowId: number, checked: CheckedTask, now: number): MemoryNode {
    let node: MemoryNode | undefined;
    const observer = {
      settled: (task: Task, state: State, outcome: unknown) => this.#settled(node!, task, state, outcome),
    };
    const settings: TaskSettings = { ...toSettings({ ...checked.options, name: checked.name }, this.#loop.defaults), observer };
    node = new MemoryNode(id, flowId, checked.name, checked.fn, checked.payload, settings, checked.runAt, now);
    this.#bySettings.set(settings, node);
    return node;
  }

  /** The id of the flow's task a task of the loop runs, or undefined if it runs none (still kept). */
  flowTaskOf(task: Task): number | undefined {
    const node = this.#bySettings.get(task._settings);
    return node !== undefined && this.#nodes.get(node.id) === node ? node.id : undefined;
  }

  /** A task's links as `flows.links()` gives a stored one's (at most `limit` of each); undefined if there is no such task. */
  links(id: number, limit: number): TaskLinks | undefined {
    const node = this.#nodes.get(id);
    if (node === undefined) return undefined;
    const link = (edge: MemoryEdge, other: MemoryNode): TaskLink => ({
      id: other.id,
      name: other.name,
      state: other.current,
      onFailure: edge.onFailure,
      done: counted(edge),
    });
    const dependents = [...node.dependents].sort((a, b) => a.task.id - b.task.id);
    return {
      id: node.id,
      state: node.current,
      flowId: node.flowId,
      dependencies: node.deps.slice(0, limit).map((edge) => link(edge, edge.dep)),
      dependencyCount: node.deps.length,
      dependents: dependents.slice(0, limit).map((edge) => link(edge, edge.task)),
      dependentCount: dependents.length,
    };
  }

  /** Flow `id`'s status, as the stores give it; undefined if there is no such flow. */
  get(id: number): FlowStatus | undefined {
    const nodes = this.#flows.get(id);
    if (nodes === undefined) return undefined;
    const edges: StoredEdge[] = [];
    for (const node of nodes)
      for (const edge of node.deps)
        edges.push({ task: node.id, dep: edge.dep.id, onFailure: edge.onFailure, counted: counted(edge), depState: edge.dep.current });
    return toFlowStatus(id, { tasks: nodes.map((node) => node.snapshot()), edges });
  }

  /** A flow's task by id, as a `StoredTask`; undefined if there is none. */
  getTask(id: number): StoredTask | undefined {
    return this.#nodes.get(id)?.snapshot();
  }

  /**
   * `send(id)` to a flow's task (`scheduler.send()`): to its task in the
   * loop, or, while it is blocked, kept in its step record until it enters
   * the loop. False if it is final or unknown.
   */
  send(id: number, topic: string, message: unknown): boolean {
    const node = this.#nodes.get(id);
    if (node === undefined || FINAL_STATES.has(node.state)) return false;
    if (node.task !== undefined) return this.#loop.send(node.task, topic, message);
    (node.steps ??= new StepLog()).deliver(topic, message);
    return true;
  }

  /**
   * Cancels a task of a flow: a blocked one at once; a waiting or running
   * one as `task.cancel()` does (a running one sees its signal abort, and
   * ends `cancelled` if it then fails). False if it is final or unknown.
   */
  cancel(id: number): boolean {
    const node = this.#nodes.get(id);
    if (node === undefined || FINAL_STATES.has(node.state)) return false;
    if (node.state !== 'blocked') return node.task?.cancel() ?? false;
    this.#set(node, 'cancelled', this.#loop.clock.now());
    this.#settle(node.dependents.map((edge) => edge.task));
    return true;
  }

  /**
   * `retry(id)` of a failed, timed-out or cancelled task: it and the failed
   * tasks above it that its `'fail'` rules wait for are requeued (due now,
   * attempts from 0); what their failure sank comes back and waits for its
   * dependencies again. Undefined if the task is not one to retry.
   */
  retry(id: number): StoredTask | undefined {
    const node = this.#nodes.get(id);
    if (node === undefined || !FAILED.has(node.state)) return undefined;
    const now = this.#loop.clock.now();
    const up = new Set<MemoryNode>([node]);
    const stack = [node];
    while (stack.length > 0) {
      for (const edge of stack.pop()!.deps) {
        if (edge.onFailure !== 'fail' || !FAILED.has(edge.dep.state) || up.has(edge.dep)) continue;
        up.add(edge.dep);
        stack.push(edge.dep);
      }
    }
    const roots = new Set([...up].map((n) => n.id));
    const touched: MemoryNode[] = [];
    for (const n of up) {
      n.started = false;
      n.attempts = 0;
      n.runAt = now;
      n.task = undefined;
      this.#unsink(n, now);
      touched.push(n);
    }
    // What their failure sank comes back (it never started: it was blocked or waiting when sunk).
    const seen = new Set<MemoryNode>(up);
    const down = [...up];
    while (down.length > 0) {
      for (const edge of down.pop()!.dependents) {
        const t = edge.task;
        if (seen.has(t)) continue;
        seen.add(t);
        down.push(t);
        if (t.root !== undefined && roots.has(t.root)) {
          this.#unsink(t, now);
          touched.push(t);
        }
      }
    }
    // Tasks that had not started and counted one of these done wait for it again.
    this.#settle([...touched, ...touched.flatMap((t) => t.dependents.map((edge) => edge.task))]);
    return node.snapshot();
  }

  /**
   * Resolves with the task once it is final (at once if it is); rejects on
   * `signal`, after `timeout` ms (`WaitTimeoutError`), or at once for an
   * unknown id (`TaskNotFoundError`).
   */
  waitFor(id: number, signal: AbortSignal | undefined, timeout: number): Promise<StoredTask> {
    const node = this.#nodes.get(id);
    if (node === undefined) return Promise.reject(new TaskNotFoundError(id));
    if (FINAL_STATES.has(node.state)) return Promise.resolve(node.snapshot());
    if (signal?.aborted) return Promise.reject(signal.reason);
    const clock = this.#loop.clock;
    return new Promise((resolve, reject) => {
      let timer: unknown;
      const stop = () => {
        node.waiters = node.waiters.filter((waiter) => waiter !== done);
        signal?.removeEventListener('abort', aborted);
        if (timer !== undefined) clock.clearTimer(timer);
      };
      const done = () => {
        stop();
        resolve(node.snapshot());
      };
      const aborted = () => {
        stop();
        reject(signal!.reason);
      };
      node.waiters.push(done);
      signal?.addEventListener('abort', aborted, { once: true });
      if (timeout !== Infinity)
        timer = clock.setTimer(() => {
          stop();
          reject(new WaitTimeoutError(id, timeout));
        }, timeout);
    });
  }

  /** The loop's word on a task's final state. */
  #settled(node: MemoryNode, task: Task, state: State, outcome: unknown): void {
    if (node.task !== task) return; // a task the graph took back (below)
    const now = this.#loop.clock.now();
    if (state === State.Succeeded) node.result = outcome;
    else if (state === State.TimedOut) node.noteError(materialize(outcome), now);
    const to: StoredState =
      state === State.Succeeded ? 'succeeded' : state === State.TimedOut ? 'timed-out' : state === State.Cancelled ? 'cancelled' : 'failed';
    this.#set(node, to, now);
    this.#settle(node.dependents.map((edge) => edge.task));
  }

  /**
   * Moves each unstarted task in `work` (and, in turn, those that depend on
   * it) to the state its dependencies give: sunk by a failed `'fail'`
   * dependency, waiting once all are final, blocked otherwise. Tasks enter
   * the loop at the end, once every state has settled.
   */
  #settle(work: MemoryNode[]): void {
    const now = this.#loop.clock.now();
    const freed: MemoryNode[] = [];
    while (work.length > 0) {
      const node = work.pop()!;
      if (node.started || (node.state !== 'blocked' && node.state !== 'waiting')) continue;
      const sinker = node.deps.find((edge) => edge.onFailure === 'fail' && FAILED.has(edge.dep.state));
      if (sinker !== undefined) {
        this.#takeBack(node);
        this.#sink(node, sinker.dep.state === 'cancelled' ? 'cancelled' : 'failed', sinker.dep.root ?? sinker.dep.id, now);
      } else {
        const next = node.deps.every((edge) => FINAL_STATES.has(edge.dep.state)) ? 'waiting' : 'blocked';
        if (next === node.state) continue;
        if (next === 'blocked') this.#takeBack(node);
        else freed.push(node);
        this.#set(node, next, now);
      }
      for (const edge of node.dependents) work.push(edge.task);
    }
    for (const node of freed) if (node.state === 'waiting' && node.task === undefined) this.#release(node);
  }

  /** A waiting task into the loop (once the scheduler is closed it is cancelled instead, so nothing waits forever). */
  #release(node: MemoryNode): void {
    if (this.#loop.closed) {
      this.#set(node, 'cancelled', this.#loop.clock.now());
      this.#settle(node.dependents.map((edge) => edge.task));
      return;
    }
    node.state = 'waiting';
    node.task = this.#loop.push(node.runAt, (run) => this.#run(node, run), node.settings);
    // One step record for all its runs: a retry of the flow's task (a new task) resumes as a store's does.
    this.#loop.keepSteps(node.task, (node.steps ??= new StepLog()));
  }

  /** A task that no longer may run leaves the loop (its cancel is not the node's: the observer ignores it). */
  #takeBack(node: MemoryNode): void {
    const task = node.task;
    if (task === undefined || task.state !== 'waiting') return;
    node.task = undefined;
    task.cancel();
  }

  #run(node: MemoryNode, run: TaskContext): unknown {
    const now = this.#loop.clock.now();
    node.started = true;
    node.attempts++;
    node.startedAt = now;
    node.updatedAt = now;
    node.state = 'running';
    // Each failed attempt is kept in `errors` (the loop tells the observer of the last one only).
    const failed = (error: unknown) => {
      node.noteError(error, this.#loop.clock.now());
      throw error;
    };
    let value: unknown;
    try {
      value = node.fn(new FlowRunContext(run, node), node.payload);
    } catch (error) {
      return failed(error);
    }
    return isThenable(value) ? Promise.resolve(value).catch(failed) : value;
  }

  #sink(node: MemoryNode, state: 'failed' | 'cancelled', root: number, now: number): void {
    node.root = root;
    node.lastError = sunkText(root, state === 'cancelled');
    this.#set(node, state, now);
  }

  /** Back to blocked: the error of a sinking goes with it (a failure of its own stays, with its `errors`). */
  #unsink(node: MemoryNode, now: number): void {
    if (node.root !== undefined) node.lastError = null;
    node.root = undefined;
    this.#set(node, 'blocked', now);
  }

  /** Every change of state: the flow's count of open tasks, the waiters of a final one, a finished flow kept or forgotten. */
  #set(node: MemoryNode, state: StoredState, now: number): void {
    const was = FINAL_STATES.has(node.state);
    const is = FINAL_STATES.has(state);
    node.state = state;
    node.updatedAt = now;
    if (was === is) return;
    const open = (this.#open.get(node.flowId) ?? 0) + (is ? -1 : 1);
    this.#open.set(node.flowId, open);
    if (is) {
      const waiters = node.waiters;
      node.waiters = [];
      for (const waiter of waiters) waiter();
    }
    if (open === 0) this.#finish(node.flowId);
    else if (!is) this.#finished.delete(node.flowId);
  }

  #finish(flowId: number): void {
    this.#finished.add(flowId);
    if (this.#finished.size <= FINISHED_FLOWS_KEPT) return;
    const oldest = this.#finished.values().next().value!;
    this.#finished.delete(oldest);
    for (const node of this.#flows.get(oldest) ?? []) this.#nodes.delete(node.id);
    this.#flows.delete(oldest);
    this.#open.delete(oldest);
  }
}

/** Whether the dependent counts the edge done: its dependency succeeded, or ended under a rule that lets it run. */
function counted(edge: MemoryEdge): boolean {
  return FINAL_STATES.has(edge.dep.state) && (edge.dep.state === 'succeeded' || edge.onFailure !== 'fail');
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
