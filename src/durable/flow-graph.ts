// Flows (docs/flows.md): the types of a flow as users write it and as stores take
// it, the checks of its graph (names, references, cycles) and of its tasks'
// option names made before anything is written, and `birth()`, the state
// each task of a flow is stored in given the states of the stored tasks it
// depends on. Shared by both stores and the in-memory flows, so they decide
// alike; the checks are in the root entry's code (flows.add() throws at the
// call), the rest of the flows' code loads with the first flow.
import { describe, keysOf } from '../core/validate.js';
import type { When } from '../core/validate.js';
import type { TaskContext } from '../core/task.js';
import { FlowError } from './errors.js';
import { LIMIT_KEYS, RUN_KEYS, type LimitOptions, type RunOptions } from '../core/options.js';
import { FINAL_STATES, type DependencyInfo, type NewEdge, type NewFlow, type NewTask, type OnFailure, type StoredState } from './store.js';

/** A dependency with its failure rule. */
export interface DependencyRule {
  /** A task of the same flow by its name, or a stored task by id. */
  readonly task: string | number;
  /** What its failure does to the dependent. @default 'fail' */
  readonly onFailure?: OnFailure;
}

/** A dependency: a task of the same flow by its name, or a stored task by id (rule `'fail'`), or either with its rule. */
export type Dependency = string | number | DependencyRule;

/** What the function of an in-memory flow's task receives: a task's context, its id and its dependencies. */
export interface FlowContext extends TaskContext {
  /** The flow task's id (the same on every run of it, retries included). */
  readonly id: number;
  /**
   * The tasks this one depends on, in the order of its \`after\`, each with
   * its id, name, state, \`result\` and \`error\`; a failed one only if its
   * rule is \`'continue'\`. As \`ctx.dependencies()\` of a durable handler.
   */
  dependencies(): Promise<DependencyInfo[]>;
}

/** The function of an in-memory flow's task (a scheduler without a store): given its context and its payload. */
// biome-ignore lint/suspicious/noExplicitAny: a function given without a payload type accepts any payload
export type FlowFunction<P = any> = (ctx: FlowContext, payload: P) => unknown;

/** One task of a flow: a handler, when it may run at the earliest, what it depends on, and a durable task's options. */
export interface FlowTask extends RunOptions, LimitOptions {
  /** JSON-serialisable data handed to the handler (in memory: any value). */
  payload?: unknown;
  /**
   * With a store: the handler name given to \`define()\`. Without one (in
   * memory): the function to run, given \`(ctx, payload)\`.
   */
  handler: string | FlowFunction;
  /** Not before this time (it also waits for its dependencies). @default now */
  when?: When;
  /**
   * What it waits for: names of tasks of the same flow, ids of stored tasks,
   * or `{ task, onFailure }` to choose what a failure does (default `'fail'`).
   * @default []
   * @example after: ['render', { task: 'thumbnail', onFailure: 'continue' }]
   */
  after?: readonly Dependency[];
}

/** A flow: named tasks (a name is local to the flow) and the caller's transaction, if any. */
export interface FlowSpec {
  /** The tasks by name, in the order they are stored (their ids increase in this order). */
  tasks: Readonly<Record<string, FlowTask>>;
  /** A `pg` client inside the caller's transaction: the flow commits or rolls back with it (PostgreSQL). */
  client?: unknown;
}

/** How a task of a flow is born, from `birth()`. */
export interface Birth {
  /** `blocked` while dependencies are unfinished; `failed`/`cancelled`: a `'fail'` dependency already did not succeed. */
  readonly state: 'blocked' | 'waiting' | 'failed' | 'cancelled';
  /** Dependencies not yet counted done. */
  readonly pending: number;
  /** Whether a task depends on it. */
  readonly hasDependents: boolean;
  /** Born failed or cancelled: the task whose failure did it (an index into the flow or a stored id), and the error text. */
  readonly sunk?: { readonly dep: { readonly index: number } | { readonly id: number }; readonly error: string };
}

const RULES: ReadonlySet<string> = new Set(['fail', 'continue', 'ignore']);

/** A flow task's options: its handler, time and dependencies, its payload, a run's options and its limits. */
const FLOW_TASK_KEYS: ReadonlySet<string> = new Set([
  ...keysOf<Omit<FlowTask, keyof RunOptions | keyof LimitOptions>>({ handler: true, when: true, after: true, payload: true }),
  ...RUN_KEYS,
  ...LIMIT_KEYS,
]);

/** Checks that a flow's task names only options a flow task takes (in memory and with a store). @internal */
export function assertFlowTaskKeys(task: object): void {
  for (const key of Object.keys(task)) {
    if (!FLOW_TASK_KEYS.has(key)) {
      const why = key === 'key' || key === 'dedupe' || key === 'client' ? ' (a flow task takes no key, dedupe or client of its own)' : '';
      throw new TypeError(`Unknown flow task option \`${key}\`${why}; expected one of: ${[...FLOW_TASK_KEYS].join(', ')}`);
    }
  }
}

/**
 * Checks the graph of `spec.tasks` (names, references, rules, cycles) and
 * returns, for every task in the order given, its edges; `toTask` builds
 * each task's row (checking its handler and options; its errors are
 * prefixed with the task's name).
 */
export function toNewFlow<T = NewTask>(spec: FlowSpec, toTask: (name: string, task: FlowTask) => T): NewFlow<T> {
  if (typeof spec !== 'object' || spec === null)
    throw new TypeError(`Expected a flow like { tasks: { name: { handler } } }, got ${describe(spec)}`);
  for (const key of Object.keys(spec))
    if (key !== 'tasks' && key !== 'client') throw new TypeError(`Unknown flow option \`${key}\`; expected tasks, client`);
  const given = spec.tasks;
  if (typeof given !== 'object' || given === null)
    throw new TypeError(`Expected \`tasks\` to be an object of named tasks, got ${describe(given)}`);
  const names = Object.keys(given);
  if (names.length === 0) throw new RangeError('Expected a flow with at least one task, got none');
  const index = new Map(names.map((name, i) => [name, i]));
  const tasks: T[] = [];
  const edges: NewEdge[] = [];
  const external = new Set<number>();
  for (const [i, name] of names.entries()) {
    const task = given[name]!;
    try {
      if (typeof task !== 'object' || task === null) throw new TypeError(`Expected a task like { handler: 'name' }, got ${describe(task)}`);
      const after = task.after ?? [];
      if (!Array.isArray(after)) throw new TypeError(`Expected \`after\` to be an array of task names or ids, got ${describe(after)}`);
      const seen = new Set<string | number>();
      for (const [ord, dependency] of after.entries()) {
        const ref = typeof dependency === 'object' && dependency !== null ? dependency.task : dependency;
        const onFailure = typeof dependency === 'object' && dependency !== null ? (dependency.onFailure ?? 'fail') : 'fail';
        if (!RULES.has(onFailure as string))
          throw new RangeError(`Expected \`onFailure\` to be 'fail', 'continue' or 'ignore', got ${describe(onFailure)}`);
        if (seen.has(ref)) throw new FlowError(`It depends on ${describe(ref)} twice`);
        seen.add(ref);
        if (typeof ref === 'string') {
          const dep = index.get(ref);
          if (dep === undefined) throw new FlowError(`It depends on ${describe(ref)}, which is not a task of this flow`);
          if (dep === i) throw new FlowError('It depends on itself');
          edges.push({ task: i, dep: { index: dep }, onFailure, ord });
        } else if (typeof ref === 'number' && Number.isSafeInteger(ref) && ref > 0) {
          external.add(ref);
          edges.push({ task: i, dep: { id: ref }, onFailure, ord });
        } else {
          throw new TypeError(`Expected a dependency to be a task name of this flow or a stored task's id, got ${describe(ref)}`);
        }
      }
      tasks.push(toTask(name, task));
    } catch (error) {
      if (error instanceof Error) error.message = `flow task ${JSON.stringify(name)}: ${error.message}`;
      throw error;
    }
  }
  const cycle = findCycle(names.length, edges);
  if (cycle !== undefined) throw new FlowError(`The flow has a cycle: ${cycle.map((i) => names[i]).join(' -> ')}`);
  return { tasks, edges, external: [...external] };
}

/** A cycle among the flow's own edges (as task indexes, first repeated last), if there is one. */
function findCycle(n: number, edges: readonly NewEdge[]): number[] | undefined {
  const deps: number[][] = Array.from({ length: n }, () => []);
  for (const edge of edges) if ('index' in edge.dep) deps[edge.task]!.push(edge.dep.index);
  const mark = new Uint8Array(n); // 0 new, 1 on the path, 2 done
  const path: number[] = [];
  // Iterative depth-first search: a flow may be a chain of many thousands.
  for (let start = 0; start < n; start++) {
    if (mark[start] !== 0) continue;
    const stack: [number, number][] = [[start, 0]];
    mark[start] = 1;
    path.push(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const next = deps[top[0]]![top[1]++];
      if (next === undefined) {
        mark[top[0]] = 2;
        stack.pop();
        path.pop();
      } else if (mark[next] === 1) {
        return [...path.slice(path.indexOf(next)), next];
      } else if (mark[next] === 0) {
        mark[next] = 1;
        path.push(next);
        stack.push([next, 0]);
      }
    }
  }
  return undefined;
}

/** The error a task sunk by a `'fail'` dependency records (the stores' triggers write the same text). */
export function sunkText(dep: number | string, cancelled: boolean): string {
  return `DependencyError: dependency ${dep} ${cancelled ? 'was cancelled' : 'failed'}`;
}

/**
 * The state each task of `flow` is stored in, given the states of the
 * stored tasks it depends on (`external`: every id of `flow.external`).
 * Tasks are visited dependencies first; a task is sunk (`failed`, or
 * `cancelled` after a cancelled dependency) when a `'fail'` dependency did
 * not succeed, and counts as done every dependency that is final and not
 * sinking it. `ids`: the ids the tasks get (for the error text).
 */
export function birth(flow: NewFlow<unknown>, external: ReadonlyMap<number, StoredState>, ids: readonly number[]): Birth[] {
  const n = flow.tasks.length;
  const incoming: NewEdge[][] = Array.from({ length: n }, () => []);
  const dependents = new Uint8Array(n);
  for (const edge of flow.edges) {
    incoming[edge.task]!.push(edge);
    if ('index' in edge.dep) dependents[edge.dep.index] = 1;
  }
  const births: (Birth | undefined)[] = new Array(n);
  const stateOf = (dep: NewEdge['dep']): string => ('index' in dep ? births[dep.index]!.state : external.get(dep.id)!);
  // Kahn's order over the flow's own edges (acyclic: checked by toNewFlow).
  const waiting = incoming.map((edges) => edges.filter((edge) => 'index' in edge.dep).length);
  const out: number[][] = Array.from({ length: n }, () => []);
  for (const edge of flow.edges) if ('index' in edge.dep) out[edge.dep.index]!.push(edge.task);
  const ready = [...Array(n).keys()].filter((i) => waiting[i] === 0);
  while (ready.length > 0) {
    const i = ready.pop()!;
    let pending = 0;
    let sunk: Birth['sunk'];
    for (const edge of incoming[i]!) {
      const state = stateOf(edge.dep);
      if (!FINAL_STATES.has(state as StoredState)) pending++;
      else if (state !== 'succeeded' && edge.onFailure === 'fail' && sunk === undefined) {
        const cancelled = state === 'cancelled';
        const root = 'index' in edge.dep ? births[edge.dep.index]!.sunk?.dep : undefined;
        const dep = root ?? edge.dep;
        sunk = { dep, error: sunkText('index' in dep ? ids[dep.index]! : dep.id, cancelled) };
      }
    }
    const cancelled = sunk !== undefined && /was cancelled$/.test(sunk.error);
    const state = sunk !== undefined ? (cancelled ? 'cancelled' : 'failed') : pending > 0 ? 'blocked' : 'waiting';
    births[i] = { state, pending, hasDependents: dependents[i] === 1, ...(sunk === undefined ? {} : { sunk }) };
    for (const next of out[i]!) if (--waiting[next]! === 0) ready.push(next);
  }
  return births as Birth[];
}

/** Whether edge `edge` counts as done at birth (its dependency is final and it does not sink the dependent). */
export function countedAtBirth(edge: NewEdge, births: readonly Birth[], external: ReadonlyMap<number, StoredState>): boolean {
  const state = 'index' in edge.dep ? births[edge.dep.index]!.state : external.get(edge.dep.id)!;
  return FINAL_STATES.has(state as StoredState) && (state === 'succeeded' || edge.onFailure !== 'fail');
}

/** A dependency as both stores read it. */
export interface DependencyRow {
  id: number | string;
  name: string;
  state: StoredState;
  result: string | null;
  last_error: string | null;
  on_failure: OnFailure;
}

/** A dependency row as `ctx.dependencies()` shows it. */
export function toDependency(row: DependencyRow): DependencyInfo {
  return {
    id: Number(row.id),
    name: row.name,
    state: row.state,
    result: row.result === null ? undefined : (JSON.parse(row.result) as unknown),
    error: row.last_error,
    onFailure: row.on_failure,
  };
}
