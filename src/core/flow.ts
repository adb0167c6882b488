import TinyQueue from 'tinyqueue';
import type { KeyedRate, Rate } from './flow-options.js';
import { byPriority, HeldQueue } from './held-queue.js';
import { LaneEntry, RateLane, SerialLane } from './lanes.js';
import { RateWindow } from './rate-window.js';
import { State, type Task } from './task.js';

/** A blocked rate lane's head may go at `at` (elapsed time). */
interface Wake {
  at: number;
  lane: RateLane;
}

/**
 * Where due tasks wait once rate limits, serial keys or priorities are in
 * use (the loop's `#pumpFlow`). A due task leaves the loop's time heap and
 * passes, in order:
 *
 * 1. its serial key (SerialLane): it gets the key or parks behind the holder;
 * 2. its rate key (RateLane): it joins the key's line, earliest due first;
 *    the line's head stands in the ready heap (a LaneEntry) while the
 *    bucket has room;
 * 3. the ready heap: highest priority, then earliest due, then first
 *    scheduled; the scheduler-wide bucket is checked as a task is taken.
 *
 * Only the priority order needs every due task in one place: that is why
 * due tasks leave the time heap at once (when a worker is free), and why a
 * scheduler that never uses these options never makes a Flow.
 *
 * Tasks here are in state `Held`; cancelling one leaves a tombstone, as in
 * the time heap. Blocked lanes sit in one wake heap, so the loop arms its one
 * timer for the earliest of its time heap, this heap and the scheduler-wide
 * window: no timer per key, no polling.
 * @internal
 */
export class Flow {
  /** Tasks that may start as far as their keys go, and the heads of rate keys with room. */
  readonly #ready = new HeldQueue<Task | LaneEntry>(byPriority);
  readonly #serial = new Map<string, SerialLane>();
  readonly #rate = new Map<string, RateLane>();
  readonly #wakes = new TinyQueue<Wake>([], (a, b) => a.at - b.at);
  /** Rate lanes with no unfinished task, to drop when their window expires (at the first pump after). */
  readonly #expiries = new TinyQueue<Wake>([], (a, b) => a.at - b.at);
  #global: RateWindow | undefined = undefined;
  #size = 0;

  /** Held tasks (live). */
  get size(): number {
    return this.#size;
  }

  /** Sets or removes the scheduler-wide limit; starts already counted still count. */
  setRate(rate: Rate | undefined): void {
    if (rate === undefined) this.#global = undefined;
    else if (this.#global === undefined) this.#global = new RateWindow(rate.limit, rate.interval);
    else this.#global.resize(rate.limit, rate.interval);
  }

  /**
   * A task with flow options was scheduled. Its rate key's lane lives while
   * tasks naming the key are unfinished (it counts them), and its limit is
   * the one of the most recently scheduled of them: this one.
   */
  scheduled(task: Task, now: number): void {
    const rate = task._settings.flow!.rate;
    if (rate === undefined) return;
    let lane = this.#rate.get(rate.key);
    if (lane === undefined) {
      this.#rate.set(rate.key, (lane = new RateLane(rate.key, rate.limit, rate.interval)));
    } else if (lane.window.limit !== rate.limit || lane.window.interval !== rate.interval) {
      lane.window.resize(rate.limit, rate.interval);
      lane.blockedAt = Infinity;
      this.#release(lane, now);
    }
    lane.unfinished++;
  }

  /** A due task from the loop's time heap. */
  admit(task: Task, now: number): void {
    task._state = State.Held;
    this.#size++;
    const flow = task._settings.flow;
    if (flow === undefined) return this.#ready.push(task);
    const key = flow.serial;
    if (key !== undefined) {
      let lane = this.#serial.get(key);
      if (lane === undefined) this.#serial.set(key, (lane = new SerialLane()));
      // The holder coming back from a retry wait goes on; anyone else waits.
      if (lane.holder === undefined) lane.holder = task;
      else if (lane.holder !== task) return lane.parked.push(task);
    }
    this.#toBucket(task, flow.rate, now);
  }

  /** Whether a task is ready (its keys allow it), so `take()` may find one. */
  hasReady(): boolean {
    return this.#ready.live > 0;
  }

  /**
   * The task to start now, counted against its buckets; undefined if none is
   * ready or the scheduler-wide bucket is full.
   */
  take(now: number): Task | undefined {
    const global = this.#global;
    if (global !== undefined && !global.hasRoom(now)) return undefined;
    for (;;) {
      const top = this.#ready.peek();
      if (top === undefined) return undefined;
      this.#ready.pop();
      if (!(top instanceof LaneEntry)) {
        this.#size--;
        global?.record(now);
        return top;
      }
      const lane = top.lane;
      lane.entry = undefined;
      if (!lane.window.hasRoom(now)) {
        // The key's limit was lowered after its head went to the ready heap.
        this.#block(lane);
        continue;
      }
      const task = lane.parked.peek()!;
      lane.parked.pop();
      this.#size--;
      global?.record(now);
      lane.window.record(now);
      this.#release(lane, now);
      return task;
    }
  }

  /** Lets out the heads of blocked lanes whose window has freed by `now`, and drops idle lanes whose window expired. */
  wake(now: number): void {
    const expiries = this.#expiries;
    for (let top = expiries.peek(); top !== undefined && top.at <= now; top = expiries.peek()) {
      expiries.pop();
      if (!top.lane.dropped && top.lane.idle(now)) this.#drop(top.lane);
    }
    const wakes = this.#wakes;
    for (let top = wakes.peek(); top !== undefined && top.at <= now; top = wakes.peek()) {
      wakes.pop();
      const lane = top.lane;
      if (lane.dropped || lane.blockedAt !== top.at) continue;
      lane.blockedAt = Infinity;
      this.#release(lane, now);
    }
  }

  /**
   * The earliest elapsed time at which a held task may start without any
   * other event (a blocked head's window, or the scheduler-wide one with
   * tasks ready); Infinity if only a settling task can unblock them.
   */
  wakeAt(now: number): number {
    const wakes = this.#wakes;
    let top = wakes.peek();
    while (top !== undefined && (top.lane.dropped || top.lane.blockedAt !== top.at)) {
      wakes.pop();
      top = wakes.peek();
    }
    let at = top === undefined ? Infinity : top.at;
    const global = this.#global;
    if (global !== undefined && this.#ready.live > 0 && !global.hasRoom(now)) at = Math.min(at, global.freeAt());
    return at;
  }

  /**
   * A task with flow options reached its final state: its rate key counts
   * one task fewer, and its serial key goes to the next task.
   */
  settled(task: Task, now: number): void {
    const flow = task._settings.flow!;
    const lane = flow.rate === undefined ? undefined : this.#rate.get(flow.rate.key);
    if (lane !== undefined && --lane.unfinished === 0) {
      // Its last starts still count for a while: the lane goes when they stop counting.
      if (lane.window.expired(now)) this.#drop(lane);
      else this.#expiries.push({ at: lane.window.expiresAt(), lane });
    }
    this.#handOn(flow.serial, task, now);
  }

  /** The serial key `key` goes from `task` (which ended) to the next task of the key. */
  #handOn(key: string | undefined, task: Task, now: number): void {
    if (key === undefined) return;
    const lane = this.#serial.get(key);
    if (lane === undefined || lane.holder !== task) return;
    const next = lane.parked.peek();
    if (next === undefined) {
      this.#serial.delete(key);
      return;
    }
    lane.parked.pop();
    lane.holder = next;
    this.#toBucket(next, next._settings.flow!.rate, now);
  }

  /** A held task was cancelled (its state already changed): it leaves where it waits. */
  discard(task: Task, now: number): void {
    this.#size--;
    const flow = task._settings.flow;
    if (flow?.serial !== undefined && this.#serial.get(flow.serial)!.holder !== task) {
      this.#serial.get(flow.serial)!.parked.discard();
      return;
    }
    if (flow?.rate === undefined) {
      this.#ready.discard();
      return;
    }
    const lane = this.#rate.get(flow.rate.key)!;
    lane.parked.discard();
    // If it was the head, its entry goes and the next head gets one.
    this.#release(lane, now);
  }

  /** Every held task, in no particular order. */
  forEach(fn: (task: Task) => void): void {
    this.#ready.forEach((item) => {
      if (!(item instanceof LaneEntry)) fn(item);
    });
    for (const lane of this.#serial.values()) lane.parked.forEach(fn);
    for (const lane of this.#rate.values()) lane.parked.forEach(fn);
  }

  /** Empties the flow (the scheduler closing), returning the held tasks; bucket history goes too. */
  clear(): Task[] {
    const held: Task[] = [];
    this.forEach((task) => held.push(task));
    this.#ready.clear();
    for (const lane of this.#rate.values()) lane.dropped = true;
    this.#serial.clear();
    this.#rate.clear();
    this.#wakes.data.length = this.#wakes.length = 0;
    this.#expiries.data.length = this.#expiries.length = 0;
    this.#size = 0;
    return held;
  }

  /** Into the task's rate lane, or straight to the ready heap without one. */
  #toBucket(task: Task, rate: KeyedRate | undefined, now: number): void {
    if (rate === undefined) return this.#ready.push(task);
    // Made when the task was scheduled, and kept while it is unfinished.
    const lane = this.#rate.get(rate.key)!;
    lane.parked.push(task);
    this.#release(lane, now);
  }

  /**
   * Keeps the lane's head in the ready heap while the bucket has room (a new
   * entry if the head changed), else blocks the lane until it has.
   */
  #release(lane: RateLane, now: number): void {
    const head = lane.parked.peek();
    const entry = lane.entry;
    if (entry !== undefined) {
      if (head !== undefined && entry.id === head.id) return;
      entry._state = State.Cancelled;
      this.#ready.discard();
      lane.entry = undefined;
    }
    if (head === undefined) return;
    if (!lane.window.hasRoom(now)) return this.#block(lane);
    lane.blockedAt = Infinity;
    this.#ready.push((lane.entry = new LaneEntry(head, lane)));
  }

  #block(lane: RateLane): void {
    const at = lane.window.freeAt();
    if (lane.blockedAt === at) return;
    lane.blockedAt = at;
    this.#wakes.push({ at, lane });
  }

  #drop(lane: RateLane): void {
    lane.dropped = true;
    this.#rate.delete(lane.key);
  }

}
