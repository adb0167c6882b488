// Progress and log lines of the stored tasks this process runs, on their way
// to the store: kept in memory and written in one batch at most every
// FLUSH_EVERY ms (only the latest progress of a task is written), and when a
// task's run ends (before its outcome is recorded), so a handler that calls
// ctx.progress() in a tight loop costs no write per call.
import { MAX_LOG_LINES, type TaskLogLine } from '../core/journal.js';
import type { RunnerContext } from './runner-context.js';

/** ms between batched writes of progress and log lines. */
const FLUSH_EVERY = 500;

interface Pending {
  /** The latest progress as JSON, or null if none came since the last write. */
  progress: string | null;
  lines: TaskLogLine[];
}

/** @internal */
export class JournalWriter {
  readonly #ctx: RunnerContext;
  #pending = new Map<number, Pending>();
  #timer: ReturnType<typeof setTimeout> | undefined = undefined;
  /** The write under way (writes go one after another, in order). */
  #writing: Promise<void> = Promise.resolve();

  constructor(ctx: RunnerContext) {
    this.#ctx = ctx;
  }

  progress(id: number, value: unknown): void {
    this.#entry(id).progress = JSON.stringify(value);
  }

  log(id: number, line: TaskLogLine): void {
    const lines = this.#entry(id).lines;
    lines.push(line);
    if (lines.length > MAX_LOG_LINES) lines.splice(0, lines.length - MAX_LOG_LINES);
  }

  /** Whether task `id` has something not written yet. */
  has(id: number): boolean {
    return this.#pending.has(id);
  }

  /** Writes everything pending now; resolves once written (a failed write is reported to `onError`, not thrown). */
  flush(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#pending;
    if (batch.size === 0) return this.#writing;
    this.#pending = new Map();
    const store = this.#ctx.store;
    const writes = [...batch].map(([id, entry]) => ({ id, progress: entry.progress, lines: entry.lines }));
    this.#writing = this.#writing.then(async () => {
      if (store.journal === undefined || this.#ctx.finished) return;
      try {
        await store.journal(this.#ctx.owner, writes);
      } catch (error) {
        this.#ctx.report(error);
      }
    });
    return this.#writing;
  }

  #entry(id: number): Pending {
    let entry = this.#pending.get(id);
    if (entry === undefined) {
      entry = { progress: null, lines: [] };
      this.#pending.set(id, entry);
    }
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => void this.flush(), FLUSH_EVERY);
      this.#timer.unref?.();
    }
    return entry;
  }
}
