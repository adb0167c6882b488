// Fair shares in the SQLite claim (docs/limits.md): the stride scheduling of
// the in-memory gate (core/gate.ts, core/lanes.ts FairLane), its state kept
// by the store (one process owns the file; a restart starts every group
// even). Per queue, each group (tasks without a share: the group '') has a
// pass; a start moves its group's pass on by 1 / weight and the queue's
// virtual time up to the pass it started at. At each claim the groups with
// due tasks line up as memory's lanes do: one that had none due at the last
// claim (an empty lane) comes back at the virtual time if it is behind it,
// so it saved no turns; then, priority first, the lowest pass goes next (ties
// to the head added first). `rank()` numbers the candidates so (decide() takes them in
// that order, a group whose task its limits refuse passing its turn), and
// `started()` moves the state for those the claim took.
import { afterStart, rejoined } from '../../core/lanes.js';
import type { Candidate } from './limits.js';

/** One queue's groups: their passes, those with due tasks left at the last claim, and its virtual time. */
interface QueueShares {
  virtual: number;
  readonly passes: Map<string, number>;
  present: Set<string>;
}

/** A group's due candidates in one claim, in due order, and its pass as it lines up. */
interface Line {
  readonly tasks: Candidate[];
  next: number;
  pass: number;
}

/** @internal */
export class FairShares {
  readonly #queues = new Map<string, QueueShares>();
  /** The groups of each queue with a share in play in the claim being made (rank() to started()). */
  #lines = new Map<string, Map<string, Line>>();

  /**
   * Sets each candidate's `rank`: 0 for all where none names a share;
   * otherwise its turn in its queue (by pass within a priority where a
   * share is in play, whose candidates are marked `fair`; by due order
   * where none is), so that decide()'s order interleaves the groups.
   */
  rank(candidates: Candidate[]): void {
    this.#lines = new Map();
    if (!candidates.some((c) => c.fair_group !== null)) {
      for (const c of candidates) c.rank = 0;
      return;
    }
    const buckets = new Map<string, Candidate[]>();
    for (const c of candidates) {
      const id = `${c.queue}\u0000${c.effective}`;
      const bucket = buckets.get(id);
      if (bucket === undefined) buckets.set(id, [c]);
      else bucket.push(c);
    }
    // Priority first: a queue's higher levels take their turns before its lower ones, from the same passes.
    const ordered = [...buckets.values()].sort((a, b) => b[0]!.effective - a[0]!.effective);
    for (const bucket of ordered) {
      bucket.sort(byDue);
      if (bucket.some((c) => c.fair_group !== null)) this.#turns(bucket);
      else for (let i = 0; i < bucket.length; i++) bucket[i]!.rank = i;
    }
  }

  /** Ranks one queue and priority's candidates (in due order) by their groups' passes. */
  #turns(bucket: Candidate[]): void {
    const queue = bucket[0]!.queue;
    let lines = this.#lines.get(queue);
    if (lines === undefined) this.#lines.set(queue, (lines = new Map()));
    const shares = this.#queues.get(queue);
    const here = new Map<string, Line>();
    for (const c of bucket) {
      c.fair = true;
      const name = c.fair_group ?? '';
      let line = lines.get(name);
      if (line === undefined) {
        line = { tasks: [], next: 0, pass: lineUp(shares, name) };
        lines.set(name, line);
      }
      if (!here.has(name)) here.set(name, { tasks: [], next: 0, pass: line.pass });
      here.get(name)!.tasks.push(c);
      line.tasks.push(c);
    }
    for (let rank = 0; rank < bucket.length; rank++) {
      let turn: [string, Line] | undefined;
      for (const entry of here) {
        const line = entry[1];
        if (line.next === line.tasks.length) continue;
        if (
          turn === undefined ||
          line.pass < turn[1].pass ||
          // Ties go to the head added first, as in memory.
          (line.pass === turn[1].pass && line.tasks[line.next]!.id < turn[1].tasks[turn[1].next]!.id)
        )
          turn = entry;
      }
      const [name, line] = turn!;
      const task = line.tasks[line.next++]!;
      task.rank = rank;
      line.pass = afterStart(line.pass, task.fair_weight);
      // The queue's lower levels go on from where this one leaves the group.
      lines.get(name)!.pass = line.pass;
    }
  }

  /** Moves the passes and the virtual time for the candidates the claim took, in the order it took them. */
  started(chosen: readonly Candidate[]): void {
    // Every group with due tasks lines up before the first start, as memory's lanes fill before it starts one.
    const lined = new Map<string, { shares: QueueShares; passes: Map<string, number> }>();
    for (const [queue, lines] of this.#lines) {
      let shares = this.#queues.get(queue);
      if (shares === undefined) this.#queues.set(queue, (shares = { virtual: 0, passes: new Map(), present: new Set() }));
      const passes = new Map<string, number>();
      for (const name of lines.keys()) passes.set(name, lineUp(shares, name));
      lined.set(queue, { shares, passes });
    }
    const taken = new Set<Candidate>();
    for (const c of chosen) {
      if (c.fair !== true) continue;
      taken.add(c);
      const { shares, passes } = lined.get(c.queue)!;
      const name = c.fair_group ?? '';
      const pass = passes.get(name)!;
      if (pass > shares.virtual) shares.virtual = pass;
      passes.set(name, afterStart(pass, c.fair_weight));
    }
    for (const [queue, { shares, passes }] of lined) {
      for (const [name, pass] of passes) shares.passes.set(name, pass);
      // A group with due tasks left keeps its place; one without is an empty lane, gone once the virtual time reaches it.
      const lines = this.#lines.get(queue)!;
      shares.present = new Set([...lines].filter(([, line]) => line.tasks.some((task) => !taken.has(task))).map(([name]) => name));
      for (const [name, pass] of shares.passes) if (!shares.present.has(name) && pass <= shares.virtual) shares.passes.delete(name);
    }
    this.#lines = new Map();
  }
}

/** A group's pass as it lines up: its own if it had due tasks left, else no earlier than the virtual time. */
function lineUp(shares: QueueShares | undefined, name: string): number {
  if (shares === undefined) return 0;
  const pass = shares.passes.get(name) ?? 0;
  return shares.present.has(name) ? pass : rejoined(pass, shares.virtual);
}

function byDue(a: Candidate, b: Candidate): number {
  return a.run_at - b.run_at || a.id - b.id;
}
