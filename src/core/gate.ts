// Where due tasks wait once rate limits, concurrency and serial groups,
// priorities or named queues are in use (`Gate`): which may start now, and
// when to look again; plain tasks never enter it.
import TinyQueue from 'tinyqueue';
import { DedupeKeys } from './dedupe-keys.js';
import { DEFAULT_QUEUE, type Rate } from './limit-options.js';
import { byPriority, HeldQueue } from './held-queue.js';
import { afterStart, FairEntry, FairLane, KeyLane, LaneEntry, QueueEntry, QueueLane, RateLane, rejoined } from './lanes.js';
import { RateWindow } from './rate-window.js';
import { Run, State, type Task } from './task.js';

/** What waits in a ready heap for a worker: a task, or the head of a rate group's line. */
type Ready = Task | LaneEntry;
/** What a ready heap holds: a ready item, or the head of a fair share's group standing for it. */
type Placed = Ready | FairEntry;

/** A blocked rate lane's head, or a queue blocked by its rate, may go at `at` (elapsed time). */
interface Wake {
  at: number;
  lane: RateLane | QueueLane;
}

/** A queue's settings as `configure()` takes them (validated); absent ones stay as they are. */
export interface QueueSettings {
  concurrency?: number | undefined;
  globalConcurrency?: number | undefined;
  /** A rate limit, or null to remove it. */
  rate?: Rate | null | undefined;
  paused?: boolean | undefined;
}

/**
 * Where due tasks wait once rate limits, concurrency (or serial) keys,
 * priorities or queues are in use (the loop's `#pumpGate`). A due task leaves
 * the loop's time heap and passes, in order:
 *
 * 1. its concurrency group (KeyLane): while the key has a free place, its
 *    earliest due task goes on (one at a time); the others park;
 * 2. its rate group (RateLane): it joins the key's line, earliest due first;
 *    the line's head stands in a ready heap (a LaneEntry) while the
 *    bucket has room;
 * 3. its queue, if the queue is gated (QueueLane): the queue's own ready
 *    heap, whose best item stands in the scheduler's ready heap (a
 *    QueueEntry) while the queue is open (not paused, below its concurrency,
 *    room in its rate);
 * 4. the ready heap: highest priority, then earliest due, then first
 *    scheduled; the scheduler-wide bucket is checked as a task is taken.
 *    Once a task names a fair share, every ready item waits in its group's
 *    FairLane (kept by its queue; no share: the group '') and the group's head
 *    stands in the ready heap placed by the group's pass, not its due time.
 *
 * Only the priority order needs every due task in one place: that is why
 * due tasks leave the time heap at once (when a worker is free), and why a
 * scheduler that never uses these options never makes a Gate.
 *
 * Tasks here are in state `Held`; cancelling one leaves a tombstone, as in
 * the time heap. Blocked lanes and queues sit in one wake heap, so the loop
 * arms its one timer for the earliest of its time heap, this heap and the
 * scheduler-wide window: no timer per key, no polling.
 * @internal
 */
export class Gate {
  /** Tasks that may start as far as their keys go, heads of rate groups with room, and open queues' best items. */
  readonly #ready = new HeldQueue<Placed | QueueEntry>(byPriority);
  readonly #keys = new Map<string, KeyLane>();
  readonly #rate = new Map<string, RateLane>();
  readonly #queues = new Map<string, QueueLane>();
  readonly #default: QueueLane;
  /** How many queues are gated: while none is, the ready heap holds every ready task. */
  #gated = 0;
  readonly #wakes = new TinyQueue<Wake>([], (a, b) => a.at - b.at);
  /** Rate lanes with no unfinished task, to drop when their window expires (at the first pump after). */
  readonly #expiries = new TinyQueue<Wake>([], (a, b) => a.at - b.at);
  /** Gated queues a run of which ended: let go again at the next pump. */
  readonly #reopen = new Set<QueueLane>();
  /** Counts every start; enforced while `#limited`. */
  readonly #global: RateWindow;
  #limited = false;
  #size = 0;
  /** The dedupe keys of tasks with a `key`. */
  readonly dedupe = new DedupeKeys();
  /** Whether a task has named a fair share: from then on ready items wait in their queue's FairLanes. */
  #fair = false;
  /** The pass of the latest start from a fair lane: where a group that had nothing ready comes back. */
  #virtual = 0;
  /** Empty fair lanes ahead of `#virtual` (they took a turn lately), kept until it reaches them. */
  readonly #ahead = new TinyQueue<FairLane>([], (a, b) => a.pass - b.pass);

  /**
   * @param running tasks running when the gate is made (all of the default queue)
   * @param starts starts made before, and `lastStart` the newest (elapsed time), which a first limit counts
   */
  constructor(running = 0, starts = 0, lastStart = -Infinity) {
    this.#global = new RateWindow(0, 0, starts, lastStart);
    this.#default = new QueueLane(DEFAULT_QUEUE, running, starts, lastStart);
    this.#queues.set(DEFAULT_QUEUE, this.#default);
  }

  /** Held tasks (live). */
  get size(): number {
    return this.#size;
  }

  /**
   * Sets or removes the scheduler-wide limit. The window keeps counting
   * starts without a limit, so a new limit counts the starts already made
   * in its window (see RateWindow.resize).
   */
  setRate(rate: Rate | undefined, now: number): void {
    this.#limited = rate !== undefined;
    if (rate !== undefined) this.#global.resize(rate.limit, rate.interval, now);
  }

  /**
   * A task with limit options was scheduled. Its rate group's lane lives while
   * tasks naming the key are unfinished (it counts them), and its limit is
   * the one of the most recently scheduled of them: this one. The same goes
   * for its concurrency group. Its queue exists from then on.
   */
  scheduled(task: Task, now: number): void {
    const limits = task._settings.limits!;
    const rate = limits.rate;
    if (rate !== undefined) {
      let lane = this.#rate.get(rate.group);
      if (lane === undefined) {
        this.#rate.set(rate.group, (lane = new RateLane(rate.group, rate.limit, rate.interval)));
      } else if (lane.window.limit !== rate.limit || lane.window.interval !== rate.interval) {
        lane.window.resize(rate.limit, rate.interval, now);
        lane.blockedAt = Infinity;
        this.#releaseRate(lane, now);
      }
      lane.unfinished++;
    }
    const concurrency = limits.concurrency;
    if (concurrency !== undefined) {
      let lane = this.#keys.get(concurrency.group);
      if (lane === undefined) {
        this.#keys.set(concurrency.group, (lane = new KeyLane(concurrency.group, concurrency.limit)));
      } else if (lane.limit !== concurrency.limit) {
        lane.limit = concurrency.limit;
        this.#releaseKey(lane, now);
      }
      lane.unfinished++;
    }
    if (limits.queue !== undefined) this.queue(limits.queue);
    if (limits.fair !== undefined && !this.#fair) this.#startFair(now);
  }

  /** A due task from the loop's time heap. */
  admit(task: Task, now: number): void {
    task._state = State.Held;
    this.#size++;
    const limits = task._settings.limits;
    if (limits === undefined) return this.#toReady(task, now);
    // A 'rerun' task whose key's run has not ended waits for it (settled() lets it go on).
    if (limits.dedupe !== undefined && this.dedupe.hold(task)) return;
    this.#toKey(task, now);
  }

  /** A due task, past its dedupe key: its concurrency group, then its rate group and queue. */
  #toKey(task: Task, now: number): void {
    const limits = task._settings.limits!;
    const concurrency = limits.concurrency;
    // A task that started before holds its place (back from a retry wait): it goes on.
    if (concurrency !== undefined && !(task._run instanceof Run)) {
      const lane = this.#keys.get(concurrency.group)!;
      lane.parked.push(task);
      return this.#releaseKey(lane, now);
    }
    this.#toBucket(task, now);
  }

  /** Whether a task is ready (its keys and queue allow it), so `take()` may find one. */
  hasReady(): boolean {
    return this.#ready.live > 0;
  }

  /**
   * The task to start now, counted against its buckets, key and queue;
   * undefined if none is ready or the scheduler-wide bucket is full.
   */
  take(now: number): Task | undefined {
    if (this.#limited && !this.#global.hasRoom(now)) return undefined;
    for (;;) {
      const top = this.#ready.peek();
      if (top === undefined) return undefined;
      this.#ready.pop();
      let queue: QueueLane | undefined;
      let item: Placed | undefined;
      if (top instanceof QueueEntry) {
        queue = top.queue;
        queue.entry = undefined;
        item = queue.ready.peek();
        // Closed since its entry went in (a pause, a lower limit): it stays, or blocks until its rate frees.
        if (item === undefined || !this.#open(queue, now)) {
          this.#releaseQueue(queue, now);
          continue;
        }
        queue.ready.pop();
      } else {
        item = top;
      }
      if (item instanceof FairEntry) item = this.#takeFair(item, now);
      if (!(item instanceof LaneEntry)) {
        this.#started(item, queue, now);
        return item;
      }
      const lane = item.lane;
      lane.entry = undefined;
      if (!lane.window.hasRoom(now)) {
        // The key's limit was lowered after its head went to a ready heap.
        this.#block(lane, lane.window.freeAt());
        if (queue !== undefined) this.#releaseQueue(queue, now);
        continue;
      }
      const task = lane.parked.peek()!;
      lane.parked.pop();
      lane.window.record(now);
      this.#started(task, queue, now);
      this.#releaseRate(lane, now);
      return task;
    }
  }

  /** `task` starts: counted by the scheduler-wide window, its queue and its concurrency group. */
  #started(task: Task, queue: QueueLane | undefined, now: number): void {
    this.#size--;
    this.#global.record(now);
    const limits = task._settings.limits;
    const mine = queue ?? this.#queueOf(task);
    mine.running++;
    mine.window.record(now);
    if (queue !== undefined) this.#releaseQueue(queue, now);
    const concurrency = limits?.concurrency;
    if (concurrency === undefined) return;
    const lane = this.#keys.get(concurrency.group)!;
    if (lane.next !== task) return;
    lane.next = undefined;
    lane.active++;
    this.#releaseKey(lane, now);
  }

  /**
   * A run of `task` ended (it settled, failed into a retry wait, timed out):
   * its queue runs one task fewer, and a gated queue may let the next go at
   * the next pump.
   */
  ended(task: Task): void {
    const queue = this.#queueOf(task);
    queue.running--;
    if (queue.gated) this.#reopen.add(queue);
  }

  /** Lets out what a freed window or an ended run allows, and drops idle rate lanes whose window expired. */
  wake(now: number): void {
    this.dedupe.sweep(now);
    const expiries = this.#expiries;
    for (let top = expiries.peek(); top !== undefined && top.at <= now; top = expiries.peek()) {
      expiries.pop();
      const lane = top.lane as RateLane;
      if (!lane.dropped && lane.idle(now)) this.#drop(lane);
    }
    if (this.#reopen.size > 0) {
      for (const queue of this.#reopen) this.#releaseQueue(queue, now);
      this.#reopen.clear();
    }
    const wakes = this.#wakes;
    for (let top = wakes.peek(); top !== undefined && top.at <= now; top = wakes.peek()) {
      wakes.pop();
      const lane = top.lane;
      if (lane.dropped || lane.blockedAt !== top.at) continue;
      lane.blockedAt = Infinity;
      if (lane instanceof RateLane) this.#releaseRate(lane, now);
      else this.#releaseQueue(lane, now);
    }
  }

  /**
   * The earliest elapsed time at which a held task may start without any
   * other event (a blocked head's or queue's window, or the scheduler-wide
   * one with tasks ready); Infinity if only a settling task can unblock them.
   */
  wakeAt(now: number): number {
    const wakes = this.#wakes;
    let top = wakes.peek();
    while (top !== undefined && (top.lane.dropped || top.lane.blockedAt !== top.at)) {
      wakes.pop();
      top = wakes.peek();
    }
    let at = top === undefined ? Infinity : top.at;
    // Tasks ready but held by the scheduler-wide window: wake when it frees, or at once if it has
    // freed since the pump found it full (a later read of the clock; a preempted process sees
    // milliseconds pass between two reads): ignored, nothing would have woken them.
    if (this.#limited && this.#ready.live > 0) at = Math.min(at, this.#global.hasRoom(now) ? now : this.#global.freeAt());
    return at;
  }

  /**
   * A task with limit options reached its final state: its rate group counts
   * one task fewer, and its concurrency group a place fewer if it had started
   * (the next task of the key may go).
   */
  settled(task: Task, now: number): void {
    const limits = task._settings.limits!;
    if (limits.dedupe !== undefined) {
      const follower = this.dedupe.settled(task, limits.dedupe.key, now);
      if (follower !== undefined) this.#toKey(follower, now);
    }
    const lane = limits.rate === undefined ? undefined : this.#rate.get(limits.rate.group);
    if (lane !== undefined && --lane.unfinished === 0) {
      // Its last starts still count for a while: the lane goes when they stop counting.
      if (lane.window.expired(now)) this.#drop(lane);
      else this.#expiries.push({ at: lane.window.expiresAt(), lane });
    }
    const concurrency = limits.concurrency;
    const key = concurrency === undefined ? undefined : this.#keys.get(concurrency.group);
    if (key === undefined) return;
    if (task._run instanceof Run) key.active--;
    if (--key.unfinished === 0) this.#keys.delete(key.key);
    else this.#releaseKey(key, now);
  }

  /** A held task was cancelled (its state already changed): it leaves where it waits. */
  discard(task: Task, now: number): void {
    this.#size--;
    const limits = task._settings.limits;
    if (limits?.dedupe !== undefined && this.dedupe.unhold(task)) return;
    const concurrency = limits?.concurrency;
    const key = concurrency === undefined ? undefined : this.#keys.get(concurrency.group)!;
    if (key !== undefined) {
      if (key.next === task) key.next = undefined;
      else if (!(task._run instanceof Run)) return key.parked.discard();
    }
    if (limits?.rate !== undefined) {
      const lane = this.#rate.get(limits.rate.group)!;
      lane.parked.discard();
      // If it was the head, its entry goes and the next head gets one.
      this.#releaseRate(lane, now);
    } else {
      this.#discardReady(task, now);
    }
    if (key !== undefined) this.#releaseKey(key, now);
  }

  /** Every held task, in no particular order. */
  forEach(fn: (task: Task) => void): void {
    const tasks = (item: Placed | QueueEntry) => {
      if (!(item instanceof LaneEntry) && !(item instanceof QueueEntry) && !(item instanceof FairEntry)) fn(item);
    };
    this.#ready.forEach(tasks);
    for (const queue of this.#queues.values()) queue.ready.forEach(tasks);
    if (this.#fair) for (const queue of this.#queues.values()) for (const lane of queue.fair.values()) lane.items.forEach(tasks);
    for (const lane of this.#keys.values()) lane.parked.forEach(fn);
    for (const lane of this.#rate.values()) lane.parked.forEach(fn);
    this.dedupe.forEachHeld(fn);
  }

  /** Empties the gate (the scheduler closing), returning the held tasks; bucket history goes too. */
  clear(): Task[] {
    const held: Task[] = [];
    this.forEach((task) => held.push(task));
    this.#ready.clear();
    for (const queue of this.#queues.values()) {
      queue.ready.clear();
      queue.entry = undefined;
      queue.blockedAt = Infinity;
    }
    for (const lane of this.#rate.values()) lane.dropped = true;
    this.#keys.clear();
    this.#rate.clear();
    this.#reopen.clear();
    this.dedupe.clear();
    for (const queue of this.#queues.values()) queue.fair.clear();
    this.#ahead.data.length = this.#ahead.length = 0;
    this.#wakes.data.length = this.#wakes.length = 0;
    this.#expiries.data.length = this.#expiries.length = 0;
    this.#size = 0;
    return held;
  }

  /** The queue named `name`, made (with no limits) on first use. */
  queue(name: string): QueueLane {
    let queue = this.#queues.get(name);
    if (queue === undefined) this.#queues.set(name, (queue = new QueueLane(name)));
    return queue;
  }

  /** The queue named `name` if it exists. */
  findQueue(name: string): QueueLane | undefined {
    return this.#queues.get(name);
  }

  /** Every queue, the default one first, then in order of first use. */
  queues(): IterableIterator<QueueLane> {
    return this.#queues.values();
  }

  /**
   * Changes a queue's settings (validated). A queue given a limit or a
   * pause is gated from then on: its ready tasks move to its own heap. The
   * loop pumps afterwards, so what the change allows starts at once.
   */
  configure(name: string, settings: QueueSettings, now: number): void {
    const queue = this.queue(name);
    if (settings.concurrency !== undefined) queue.concurrency = settings.concurrency;
    if (settings.globalConcurrency !== undefined) queue.globalConcurrency = settings.globalConcurrency;
    if (settings.paused !== undefined) queue.paused = settings.paused;
    if (settings.rate === null) queue.rate = undefined;
    else if (settings.rate !== undefined) {
      queue.rate = settings.rate;
      queue.window.resize(settings.rate.limit, settings.rate.interval, now);
      queue.blockedAt = Infinity;
    }
    if (!queue.gated && (queue.paused || queue.limit !== Infinity || queue.rate !== undefined)) this.#gateQueue(queue);
    if (!queue.gated) return;
    const entry = queue.entry;
    if (entry !== undefined) {
      entry._state = State.Cancelled;
      queue.entry = undefined;
      this.#ready.discard();
    }
    this.#releaseQueue(queue, now);
  }

  /** Counts and moves the queue's ready items out of the scheduler's ready heap into its own: O(n), once per queue. */
  #gateQueue(queue: QueueLane): void {
    queue.gated = true;
    this.#gated++;
    const moved = this.#ready.extract((item) => !(item instanceof QueueEntry) && this.#queueOf(item as Ready) === queue);
    for (const item of moved) queue.ready.push(item as Ready);
  }

  #queueOf(item: Placed): QueueLane {
    const name = item._settings.limits?.queue;
    return name === undefined ? this.#default : this.#queues.get(name)!;
  }

  /** Whether a gated queue may start a task now. */
  #open(queue: QueueLane, now: number): boolean {
    return !queue.paused && queue.running < queue.limit && (queue.rate === undefined || queue.window.hasRoom(now));
  }

  /** Lets the earliest parked task of a concurrency group go on, if the key has a free place. */
  #releaseKey(lane: KeyLane, now: number): void {
    if (!lane.open) return;
    const head = lane.parked.peek();
    if (head === undefined) return;
    lane.parked.pop();
    lane.next = head;
    this.#toBucket(head, now);
  }

  /** Into the task's rate lane, or on to a ready heap without one. */
  #toBucket(task: Task, now: number): void {
    const rate = task._settings.limits?.rate;
    if (rate === undefined) return this.#toReady(task, now);
    // Made when the task was scheduled, and kept while it is unfinished.
    const lane = this.#rate.get(rate.group)!;
    lane.parked.push(task);
    this.#releaseRate(lane, now);
  }

  /** Into its fair share's group once shares are in use, else into a ready heap. */
  #toReady(item: Ready, now: number): void {
    if (this.#fair) return this.#toFair(item, now);
    this.#toHeap(item, now);
  }

  /** An item left a ready heap or its fair share's group (it became a tombstone there). */
  #discardReady(item: Ready, now: number): void {
    if (!this.#fair) return this.#discardFromHeap(item, now);
    const lane = this.#queueOf(item).fair.get(item._settings.limits?.fair?.group ?? '')!;
    lane.items.discard();
    this.#releaseFair(lane, now);
  }

  /** Into its gated queue's heap, or the scheduler's ready heap. */
  #toHeap(item: Placed, now: number): void {
    if (this.#gated > 0) {
      const queue = this.#queueOf(item);
      if (queue.gated) {
        queue.ready.push(item);
        return this.#releaseQueue(queue, now);
      }
    }
    this.#ready.push(item);
  }

  /** An item left a ready heap (it became a tombstone there). */
  #discardFromHeap(item: Placed, now: number): void {
    if (this.#gated > 0) {
      const queue = this.#queueOf(item);
      if (queue.gated) {
        queue.ready.discard();
        return this.#releaseQueue(queue, now);
      }
    }
    this.#ready.discard();
  }

  /**
   * Keeps the lane's head in a ready heap while the bucket has room (a new
   * entry if the head changed), else blocks the lane until it has.
   */
  #releaseRate(lane: RateLane, now: number): void {
    const head = lane.parked.peek();
    const entry = lane.entry;
    if (entry !== undefined) {
      if (head !== undefined && entry.id === head.id) return;
      entry._state = State.Cancelled;
      lane.entry = undefined;
      this.#discardReady(entry, now);
    }
    if (head === undefined) return;
    if (!lane.window.hasRoom(now)) return this.#block(lane, lane.window.freeAt());
    lane.blockedAt = Infinity;
    this.#toReady((lane.entry = new LaneEntry(head, lane)), now);
  }

  /**
   * Keeps a gated queue's best item in the scheduler's ready heap while the
   * queue is open (a new entry if the best changed); blocks it until its
   * window frees when only its rate holds it back.
   */
  #releaseQueue(queue: QueueLane, now: number): void {
    const top = queue.ready.peek();
    const entry = queue.entry;
    if (entry !== undefined) {
      if (entry.item === top) return;
      entry._state = State.Cancelled;
      queue.entry = undefined;
      this.#ready.discard();
    }
    if (top === undefined || queue.paused || queue.running >= queue.limit) return;
    if (queue.rate !== undefined && !queue.window.hasRoom(now)) return this.#block(queue, queue.window.freeAt());
    queue.blockedAt = Infinity;
    this.#ready.push((queue.entry = new QueueEntry(top, queue)));
  }

  /**
   * Shares come into use: every ready item moves into its group's lane (O(n),
   * once), and from then on ready items go there (see FairLane).
   */
  #startFair(now: number): void {
    this.#fair = true;
    const moved = this.#ready.extract((item) => !(item instanceof QueueEntry)) as Ready[];
    for (const queue of this.#queues.values()) {
      if (queue.entry !== undefined) {
        queue.entry._state = State.Cancelled;
        queue.entry = undefined;
        this.#ready.discard();
      }
      moved.push(...(queue.ready.clear() as Ready[]));
    }
    for (const item of moved) this.#toFair(item, now);
  }

  /** Into its group's lane; a group that had nothing ready comes back no earlier than the latest start's pass. */
  #toFair(item: Ready, now: number): void {
    const share = item._settings.limits?.fair;
    const group = share?.group ?? '';
    const queue = this.#queueOf(item);
    let lane = queue.fair.get(group);
    if (lane === undefined) queue.fair.set(group, (lane = new FairLane(group, queue, share?.weight ?? 1)));
    else if (share !== undefined) lane.weight = share.weight;
    if (lane.items.live === 0) lane.pass = rejoined(lane.pass, this.#virtual);
    lane.items.push(item);
    this.#releaseFair(lane, now);
  }

  /** Keeps the lane's head in its ready heap at the lane's pass (a new entry if either changed). */
  #releaseFair(lane: FairLane, now: number): void {
    const head = lane.items.peek();
    const entry = lane.entry;
    if (entry !== undefined) {
      if (entry.item === head && entry._time === lane.pass) return;
      entry._state = State.Cancelled;
      lane.entry = undefined;
      this.#discardFromHeap(entry, now);
    }
    if (head !== undefined) return this.#toHeap((lane.entry = new FairEntry(head, lane)), now);
    // Empty: it goes, unless it is ahead of the others (its turns taken lately count until they catch up).
    if (lane.pass <= this.#virtual) lane.queue.fair.delete(lane.group);
    else this.#ahead.push(lane);
  }

  /** A group's turn: its head is taken, and its pass moves on by 1 / weight. */
  #takeFair(entry: FairEntry, now: number): Ready {
    const lane = entry.lane;
    lane.entry = undefined;
    const head = lane.items.peek()!;
    lane.items.pop();
    if (lane.pass > this.#virtual) this.#virtual = lane.pass;
    lane.pass = afterStart(lane.pass, lane.weight);
    const ahead = this.#ahead;
    for (let top = ahead.peek(); top !== undefined && top.pass <= this.#virtual; top = ahead.peek()) {
      ahead.pop();
      if (top.items.live === 0 && top.queue.fair.get(top.group) === top) top.queue.fair.delete(top.group);
    }
    this.#releaseFair(lane, now);
    return head;
  }

  #block(lane: RateLane | QueueLane, at: number): void {
    if (lane.blockedAt === at) return;
    lane.blockedAt = at;
    this.#wakes.push({ at, lane });
  }

  #drop(lane: RateLane): void {
    lane.dropped = true;
    this.#rate.delete(lane.key);
  }
}
