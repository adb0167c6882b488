// How the loop keeps time: elapsed time against the wall clock (a jump of
// the wall clock is noticed and reported), the slices of work between two
// yields to the event loop, and the loop's one timer: armed for the earliest
// due time (a sleep capped at MAX_SLEEP), or an immediate while a burst of
// due tasks yields. It knows nothing of tasks: the loop says when, and is told.
import { systemClock, type Clock } from './clock.js';

// A sleep never lasts longer than this, so a wall clock that jumps or a
// machine that sleeps is noticed within this time (and setTimeout's 2^31-1 ms
// limit is never reached).
const MAX_SLEEP = 30_000;
// A burst of due tasks stops starting tasks after this many ms of elapsed time
// and yields to the event loop. The budget spans every pump of one event-loop
// turn (pumps called back from settling async tasks included), and is half of
// the ~10 ms the loop aims for: the tasks it started settle after it, in the
// same turn. So timers and I/O run about every 10 ms whatever the tasks do.
const PUMP_BUDGET = 5;
// A change of the wall clock against elapsed time larger than this is a jump
// (someone set the clock, NTP stepped it); smaller ones are drift and ignored.
const JUMP = 1_000;

/**
 * The time half of `TaskLoop`, which extends it. A base class rather than a
 * member object: every `schedule()` compares its task's time with `timerAt`
 * and every pump reads elapsed time, and as fields of the loop itself they
 * cost no extra hop.
 * @internal
 */
export abstract class LoopClock {
  /** Where time comes from. */
  readonly clock: Clock;
  /** When true, the loop's timers do not keep the process alive. */
  readonly unref: boolean;
  /** Reads elapsed time: the clock's monotonic(), or its now() if it has none. */
  protected readonly readElapsed: () => number;
  /** The due time the timer is armed for: Infinity when none is, -Infinity while a yield is under way. */
  protected timerAt = Infinity;
  /** The timer's handle, or the yield's immediate. */
  #timer: unknown = undefined;
  /** Wall minus elapsed time, as the waiting elapsed-time tasks were placed. */
  #offset: number;
  /** Elapsed time the current slice (the pumps of this event-loop turn) began; NaN when none is open. */
  #sliceStart = NaN;
  /**
   * Whether a slice spans every pump of an event-loop turn: with the system
   * clock. Another clock (a ManualClock) has its own notion of time, which a
   * test moves between steps that may share a turn; there the budget counts
   * per pump on that clock, so a test never sees a yield it did not cause.
   */
  readonly #spanSlices: boolean;

  constructor(clock: Clock, unref: boolean) {
    this.clock = clock;
    this.unref = unref;
    this.readElapsed = clock.monotonic === undefined ? () => clock.now() : () => clock.monotonic!();
    this.#offset = clock.now() - this.readElapsed();
    this.#spanSlices = clock === systemClock;
  }

  /** The timer fired, or the yield's immediate ran. */
  protected abstract wake(): void;

  /** The wall clock jumped `delta` ms against elapsed time (elapsed-time tasks move with it). */
  protected abstract jumped(delta: number): void;

  /** Elapsed time, ms (the clock's monotonic reading). */
  monotonic(): number {
    return this.readElapsed();
  }

  /**
   * The wall time to give an elapsed-time task (settings.elapsed) due at the
   * elapsed time `elapsed`: on the same footing as the waiting ones, so a
   * clock jump noticed later moves them all alike.
   */
  wallOf(elapsed: number): number {
    return elapsed + this.#offset;
  }

  /**
   * The elapsed time by which the pump that starts at `elapsed` must yield.
   * Async tasks settle in microtasks and pump from there, never returning to
   * the event loop; so the budget runs from the first pump of this turn, and
   * only an immediate (which runs once the turn is over) resets it.
   */
  protected sliceEnd(elapsed: number): number {
    if (!this.#spanSlices) {
      this.#sliceStart = elapsed;
    } else if (Number.isNaN(this.#sliceStart)) {
      this.#sliceStart = elapsed;
      const immediate = setImmediate(this.#closeSlice);
      immediate.unref();
    }
    return this.#sliceStart + PUMP_BUDGET;
  }

  /** Wall minus elapsed time, `elapsed` just read; a jump since the last pump is told to `jumped()` first. */
  protected wallOffset(elapsed: number): number {
    const offset = this.clock.now() - elapsed;
    const delta = offset - this.#offset;
    if (delta > JUMP || -delta > JUMP) {
      this.#offset = offset;
      this.jumped(delta);
    }
    return offset;
  }

  /** Runs once the event loop turns: the next pump begins a fresh slice. */
  #closeSlice = (): void => {
    this.#sliceStart = NaN;
  };

  #ring = (): void => {
    this.#timer = undefined;
    this.timerAt = Infinity;
    // A timer or the yield's immediate: a new event-loop turn, a new slice.
    this.#sliceStart = NaN;
    this.wake();
  };

  /** Arms the timer for the wall time `at` (Infinity: none); armed for it already, nothing changes. */
  protected armAt(at: number): void {
    if (at === this.timerAt) return;
    this.disarm();
    if (at === Infinity) return;
    const delay = Math.min(Math.max(at - this.clock.now(), 0), MAX_SLEEP);
    this.timerAt = at;
    this.#timer = this.clock.setTimer(this.#ring, delay, this.unref);
  }

  /** Lets I/O and other timers run in the middle of a long burst of due tasks: wakes from an immediate. */
  protected yieldTurn(): void {
    this.disarm();
    this.timerAt = -Infinity;
    const immediate = setImmediate(this.#ring);
    if (this.unref) immediate.unref();
    this.#timer = immediate;
  }

  /** Clears the timer, or the yield's immediate under way. */
  protected disarm(): void {
    if (this.#timer === undefined) return;
    if (this.timerAt === -Infinity) clearImmediate(this.#timer as NodeJS.Immediate);
    else this.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.timerAt = Infinity;
  }
}
