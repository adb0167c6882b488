/**
 * Links user AbortSignals to the things they cancel, with ONE listener per
 * signal however many tasks share it: a million tasks on one
 * `AbortSignal.timeout()` must not pile a million listeners onto it (Node
 * warns past 10, and each listener would pin its task in memory). When the
 * last member leaves, the listener is removed, so nothing of the scheduler
 * stays attached to a signal the user keeps.
 */
export class SignalRegistry<T> {
  #groups = new Map<AbortSignal, Group<T>>();
  #onAbort: (member: T, reason: unknown) => void;

  /** `onAbort` is called for each member when its signal aborts. */
  constructor(onAbort: (member: T, reason: unknown) => void) {
    this.#onAbort = onAbort;
  }

  add(signal: AbortSignal, member: T): void {
    let group = this.#groups.get(signal);
    if (group === undefined) {
      group = new Group(signal, this);
      this.#groups.set(signal, group);
      signal.addEventListener('abort', group);
    }
    group.members.add(member);
  }

  delete(signal: AbortSignal, member: T): void {
    const group = this.#groups.get(signal);
    if (group === undefined || !group.members.delete(member)) return;
    if (group.members.size === 0) this.#drop(group);
  }

  /** Signals currently listened to (for tests and introspection). */
  get size(): number {
    return this.#groups.size;
  }

  /** @internal */
  _abort(group: Group<T>): void {
    this.#drop(group);
    const reason = group.signal.reason;
    for (const member of group.members) this.#onAbort(member, reason);
    // Node's EventTarget may hold the listener until the dispatch unwinds; let
    // the members go now rather than a tick later.
    group.members.clear();
  }

  #drop(group: Group<T>): void {
    group.signal.removeEventListener('abort', group);
    this.#groups.delete(group.signal);
  }
}

/** An EventListener object, so no closure is made per signal. */
class Group<T> {
  readonly members = new Set<T>();
  readonly signal: AbortSignal;
  readonly #registry: SignalRegistry<T>;

  constructor(signal: AbortSignal, registry: SignalRegistry<T>) {
    this.signal = signal;
    this.#registry = registry;
  }

  handleEvent(): void {
    this.#registry._abort(this);
  }
}
