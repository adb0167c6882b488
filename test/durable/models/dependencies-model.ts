// The reference model of flows (issue 28) the property tests check the
// stores against (dependencies.property.test.ts), written from the rules of
// docs/flows.md rather than from the implementation: a task that has not
// started is `blocked` while a dependency is not final, `waiting` once all
// are; a 'fail' dependency that ends failed, timed-out or cancelled sinks it
// (failed, or cancelled after a cancel), naming the task whose failure
// started the cascade (its root); retry() of a task requeues it and the
// failed 'fail' dependencies above it, and what their failure sank is
// unsunk (then blocked or waiting as its dependencies say).
import fc from 'fast-check';
import type { OnFailure } from '../../../src/index.js';

export type ModelState = 'blocked' | 'waiting' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** A random DAG: node i depends only on nodes before it. */
export interface Graph {
  n: number;
  /** deps[i]: [dependency index, rule] in the order given. */
  deps: [number, OnFailure][][];
}

export const graphArb = (maxNodes: number): fc.Arbitrary<Graph> =>
  fc.integer({ min: 1, max: maxNodes }).chain((n) =>
    fc
      .array(fc.array(fc.tuple(fc.nat(), fc.constantFrom<OnFailure>('fail', 'fail', 'continue', 'ignore')), { maxLength: 3 }), {
        minLength: n,
        maxLength: n,
      })
      .map((raw) => ({
        n,
        deps: raw.map((edges, i) => {
          if (i === 0) return [];
          const seen = new Set<number>();
          const out: [number, OnFailure][] = [];
          for (const [pick, rule] of edges) {
            const dep = pick % i;
            if (seen.has(dep)) continue;
            out.push([dep, rule]);
            seen.add(dep);
          }
          return out;
        }),
      })),
  );

/**
 * `reuse`: a task added with the key of task 0 (on a store, a task stored on
 * its own with a key, which the flow depends on by id), with dedupe 'keep'.
 * It changes nothing in the model: a waiting or running task 0 is answered
 * as it is, and a finished one that tasks depend on stays as it ended (the
 * key goes to a new task, which the model does not follow).
 */
export type Op =
  | { op: 'finish'; pick: number; ok: boolean }
  | { op: 'cancel'; pick: number }
  | { op: 'retry'; pick: number }
  | { op: 'reuse' };

export const opsArb: fc.Arbitrary<Op[]> = fc.array(
  fc.oneof(
    { weight: 6, arbitrary: fc.record({ op: fc.constant('finish' as const), pick: fc.nat(), ok: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('retry' as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('reuse' as const) }) },
  ),
  { maxLength: 60 },
);

const FINAL = new Set<ModelState>(['succeeded', 'failed', 'cancelled']);
const FAILURE = new Set<ModelState>(['failed', 'cancelled']);

export class Model {
  readonly state: ModelState[];
  /** The root of a sinking, for tasks a dependency sank. */
  readonly root: (number | undefined)[];
  /** Starts per task. */
  readonly runs: number[];
  /** Whether a task has started since it was (re)queued (a requeue resets it). */
  readonly started: boolean[];
  readonly graph: Graph;

  constructor(graph: Graph) {
    this.graph = graph;
    this.state = Array.from({ length: graph.n }, () => 'blocked');
    this.root = Array.from({ length: graph.n }, () => undefined);
    this.runs = Array.from({ length: graph.n }, () => 0);
    this.started = Array.from({ length: graph.n }, () => false);
    this.settle();
  }

  /** Unstarted tasks follow their dependencies: in index order (dependencies first), so one pass is a fixpoint. */
  settle(): void {
    for (let i = 0; i < this.graph.n; i++) {
      if (this.started[i] || (this.state[i] !== 'blocked' && this.state[i] !== 'waiting')) continue;
      const sinker = this.graph.deps[i]!.find(([d, rule]) => rule === 'fail' && FAILURE.has(this.state[d]!));
      if (sinker !== undefined) {
        const d = sinker[0];
        this.state[i] = this.state[d] === 'cancelled' ? 'cancelled' : 'failed';
        this.root[i] = this.root[d] ?? d;
      } else this.state[i] = this.graph.deps[i]!.every(([d]) => FINAL.has(this.state[d]!)) ? 'waiting' : 'blocked';
    }
  }

  claimable(): number[] {
    return this.state.flatMap((s, i) => (s === 'waiting' ? [i] : []));
  }

  start(i: number): void {
    this.state[i] = 'running';
    this.started[i] = true;
    this.runs[i]!++;
  }

  finish(i: number, ok: boolean): void {
    this.state[i] = ok ? 'succeeded' : 'failed';
    this.settle();
  }

  /** A cancel of a blocked, waiting or running task; false if it was final. */
  cancel(i: number): boolean {
    if (FINAL.has(this.state[i]!)) return false;
    this.state[i] = 'cancelled';
    this.settle();
    return true;
  }

  /** retry(i): false if it is not failed or cancelled. */
  retry(i: number): boolean {
    if (!FAILURE.has(this.state[i]!)) return false;
    const up = new Set<number>([i]);
    const stack = [i];
    while (stack.length > 0) {
      const t = stack.pop()!;
      for (const [d, rule] of this.graph.deps[t]!) {
        if (rule !== 'fail' || !FAILURE.has(this.state[d]!) || up.has(d)) continue;
        up.add(d);
        stack.push(d);
      }
    }
    for (const t of up) {
      this.state[t] = 'blocked';
      this.started[t] = false;
      this.root[t] = undefined;
    }
    // What their failure sank comes back (never started: it was blocked when sunk).
    for (let t = 0; t < this.graph.n; t++) {
      const root = this.root[t];
      if (root !== undefined && up.has(root)) {
        this.state[t] = 'blocked';
        this.root[t] = undefined;
      }
    }
    // A task that had not started and counted a dependency now requeued waits for it again: settle() says so.
    this.settle();
    return true;
  }
}
