// Progress and log lines of the stored tasks this process runs, on their way
// to the store: kept in memory and written in one batch at most every
// FLUSH_EVERY ms (only the latest progress of a task is written), and when a
// task's run ends (before its outcome is recorded), so a handler that calls
// ctx.progress() in a tight loop costs no write per call. A task whose entry
// the store refuses loses that entry alone (reported to onError, with its
// id); the others of the batch are written.
import { TaskheapError } from '../core/errors.js';
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
  /** Tasks whose entries a write under way holds, with that write. */
  readonly #inFlight = new Map<number, Promise<void>>();

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

  /**
   * Once what task `id` told so far is written: flushed now if it waits, the
   * write under way if that one holds it, undefined (nothing to wait for) if
   * neither. A run's outcome is recorded after this, or a write still on its
   * way would find the task no longer running and drop its lines.
   */
  written(id: number): Promise<void> | undefined {
    if (this.#pending.has(id)) return this.flush();
    return this.#inFlight.get(id);
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
    const writing = this.#writing.then(async () => {
      try {
        if (!this.#ctx.finished) await store.journal(this.#ctx.owner, writes, this.#lost);
      } catch (error) {
        this.#ctx.report(error);
      } finally {
        for (const id of batch.keys()) if (this.#inFlight.get(id) === writing) this.#inFlight.delete(id);
      }
    });
    for (const id of batch.keys()) this.#inFlight.set(id, writing);
    this.#writing = writing;
    return writing;
  }

  /** A task's entry the store refused: only it is lost, reported once with the task's id. */
  #lost = (id: number, error: unknown): void => {
    const why = error instanceof Error ? error.message : String(error);
    this.#ctx.report(
      new TaskheapError(
        `Task ${id}: the store refused its progress and log lines since the last write, which are lost (${why}); the task runs on`,
        'ERR_PROGRESS_NOT_STORED',
        { cause: error },
      ),
    );
  };

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
