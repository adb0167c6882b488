// Fair shares in the SQLite claim (docs/limits.md): the stride scheduling of
// the in-memory gate (core/lanes.ts, FairLane), its passes kept by the store
// (one process owns the file; a restart starts every group even). Among a
// claim's candidates of one queue and priority, once one of them names a
// share, the groups (no share: the group '') take turns by pass, lowest
// first, each start adding 1 / weight, in due order within a group; a group
// that had nothing due comes back at its queue's virtual time (the pass of
// the queue's latest start) if it is behind it, so it saved no turns.
// `rank()` numbers the candidates in that order; `started()` moves the passes
// for those the claim took (a group whose task was refused by its limits
// passed its turn).
import type { Candidate } from './limits.js';

/** The passes of one queue's groups, and its virtual time. */
interface QueueShares {
  virtual: number;
  readonly passes: Map<string, number>;
}

/** @internal */
export class FairShares {
  readonly #queues = new Map<string, QueueShares>();

  /**
   * Sets each candidate's `rank`: 0 for all where none names a share;
   * otherwise its turn within its queue and priority (by pass in a bucket
   * with a share, whose candidates are marked `fair`; by due order in one
   * without), so that decide()'s order interleaves the groups.
   */
  rank(candidates: Candidate[]): void {
    if (!candidates.some((c) => c.fair_group !== null)) {
      for (const c of candidates) c.rank = 0;
      return;
    }
    const buckets = new Map<string, Candidate[]>();
    for (const c of candidates) {
      const id = `${c.effective}\u0000${c.queue}`;
      const bucket = buckets.get(id);
      if (bucket === undefined) buckets.set(id, [c]);
      else bucket.push(c);
    }
    for (const bucket of buckets.values()) {
      bucket.sort(byDue);
      if (bucket.some((c) => c.fair_group !== null)) this.#turns(bucket);
      else for (let i = 0; i < bucket.length; i++) bucket[i]!.rank = i;
    }
  }

  /** Ranks one queue and priority's candidates (in due order) by their groups' passes. */
  #turns(bucket: Candidate[]): void {
    const shares = this.#queues.get(bucket[0]!.queue);
    const virtual = shares?.virtual ?? 0;
    const groups = new Map<string, { tasks: Candidate[]; next: number; pass: number }>();
    for (const c of bucket) {
      c.fair = true;
      const name = c.fair_group ?? '';
      let group = groups.get(name);
      if (group === undefined) {
        group = { tasks: [], next: 0, pass: Math.max(shares?.passes.get(name) ?? 0, virtual) };
        groups.set(name, group);
      }
      group.tasks.push(c);
    }
    for (let rank = 0; rank < bucket.length; rank++) {
      let turn: { tasks: Candidate[]; next: number; pass: number } | undefined;
      for (const group of groups.values()) {
        if (group.next === group.tasks.length) continue;
        if (
          turn === undefined ||
          group.pass < turn.pass ||
          (group.pass === turn.pass && byDue(group.tasks[group.next]!, turn.tasks[turn.next]!) < 0)
        )
          turn = group;
      }
      const task = turn!.tasks[turn!.next++]!;
      task.rank = rank;
      turn!.pass += 1 / task.fair_weight;
    }
  }

  /** Moves the passes for the candidates the claim took, in the order it took them. */
  started(chosen: readonly Candidate[]): void {
    const touched = new Set<QueueShares>();
    for (const c of chosen) {
      if (c.fair !== true) continue;
      let shares = this.#queues.get(c.queue);
      if (shares === undefined) this.#queues.set(c.queue, (shares = { virtual: 0, passes: new Map() }));
      const name = c.fair_group ?? '';
      const pass = Math.max(shares.passes.get(name) ?? 0, shares.virtual);
      shares.virtual = pass;
      shares.passes.set(name, pass + 1 / c.fair_weight);
      touched.add(shares);
    }
    // A group at or behind the virtual time would come back there anyway: nothing to keep for it.
    for (const shares of touched) for (const [name, pass] of shares.passes) if (pass <= shares.virtual) shares.passes.delete(name);
  }
}

function byDue(a: Candidate, b: Candidate): number {
  return a.run_at - b.run_at || a.id - b.id;
}
