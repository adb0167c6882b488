// The reference model of fair shares (test/core/fair.property.test.ts states
// its rule): what a pool of workers starts, given the tasks added, those
// ended and the time, and the random steps both checks take. The in-memory
// engine is checked against its stride rule (a group's turn counted when it
// starts); the stores' claim against its turns rule (`turns`: a task's turn
// fixed when it comes due, docs/limits.md), on SQLite
// (test/durable/models/fair-sqlite.property.test.ts).

import fc from 'fast-check';

/** A step of a fair-shares run: a task of group number `group` added due `at` ms from now, a run ended, time passing, the pool resized. */
export type Op =
  | { op: 'add'; group: number; at: number; priority: number }
  | { op: 'end'; pick: number }
  | { op: 'tick'; by: number }
  | { op: 'resize'; workers: number };

/** Random steps over `groups` groups (numbered 0 to groups - 1). */
export function fairOps(groups: number): fc.Arbitrary<Op> {
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        op: fc.constant('add' as const),
        group: fc.integer({ min: 0, max: groups - 1 }),
        at: fc.integer({ min: 0, max: 4 }),
        priority: fc.integer({ min: 0, max: 1 }),
      }),
    },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('end' as const), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('tick' as const), by: fc.integer({ min: 1, max: 3 }) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('resize' as const), workers: fc.integer({ min: 1, max: 4 }) }) },
  );
}

export interface ModelTask {
  id: number;
  group: string;
  due: number;
  priority: number;
  state: 'waiting' | 'ready' | 'running' | 'done';
  /** Its turn, under the turns rule. */
  turn?: number;
}

export class Model {
  readonly tasks: ModelTask[] = [];
  readonly started: number[] = [];
  readonly #pass = new Map<string, number>();
  #virtual = 0;
  /** Whether a task has named a group. */
  on = false;
  /** The stores' rule: a task's turn is fixed when it comes due (its group's next turn, or the virtual time if later). */
  turns = false;
  /** Each group's next turn, under the turns rule. */
  readonly #next = new Map<string, number>();
  workers: number;

  constructor(
    workers: number,
    readonly weights: Record<string, number>,
  ) {
    this.workers = workers;
  }

  get running(): number {
    return this.tasks.filter((t) => t.state === 'running').length;
  }

  /** What the pool does at `now`: while a worker is free, the due tasks join their lines and the chosen head starts. */
  pump(now: number): void {
    if (this.turns) return this.#pumpTurns(now);
    while (this.running < this.workers) {
      for (const task of this.tasks.filter((t) => t.state === 'waiting' && t.due <= now).sort((x, y) => x.due - y.due || x.id - y.id)) {
        if (this.on && this.#line(task.group).length === 0)
          this.#pass.set(task.group, Math.max(this.#pass.get(task.group) ?? 0, this.#virtual));
        task.state = 'ready';
      }
      const heads = [...new Set(this.tasks.filter((t) => t.state === 'ready').map((t) => t.group))].map((group) => ({
        group,
        head: this.#line(group)[0]!,
        pass: this.on ? (this.#pass.get(group) ?? 0) : 0,
      }));
      if (heads.length === 0) return;
      heads.sort(
        (x, y) => y.head.priority - x.head.priority || x.pass - y.pass || (this.on ? 0 : x.head.due - y.head.due) || x.head.id - y.head.id,
      );
      const { group, head, pass } = heads[0]!;
      if (this.on) {
        if (pass > this.#virtual) this.#virtual = pass;
        this.#pass.set(group, pass + 1 / this.weights[group]!);
      }
      head.state = 'running';
      this.started.push(head.id);
    }
  }

  /** The turns rule: due tasks take their group's next turns (by priority, then due order); the highest priority, then lowest turn, starts. */
  #pumpTurns(now: number): void {
    while (this.running < this.workers) {
      const due = this.tasks.filter((t) => t.state === 'waiting' && t.due <= now);
      due.sort((x, y) => y.priority - x.priority || x.due - y.due || x.id - y.id);
      for (const task of due) {
        const turn = Math.max(this.#next.get(task.group) ?? 0, this.#virtual);
        task.turn = turn;
        this.#next.set(task.group, turn + 1 / this.weights[task.group]!);
        task.state = 'ready';
      }
      const ready = this.tasks.filter((t) => t.state === 'ready');
      if (ready.length === 0) return;
      ready.sort((x, y) => y.priority - x.priority || x.turn! - y.turn! || x.id - y.id);
      const head = ready[0]!;
      if (head.turn! > this.#virtual) this.#virtual = head.turn!;
      head.state = 'running';
      this.started.push(head.id);
    }
  }

  #line(group: string): ModelTask[] {
    return this.tasks
      .filter((t) => t.state === 'ready' && t.group === group)
      .sort((x, y) => y.priority - x.priority || x.due - y.due || x.id - y.id);
  }
}
