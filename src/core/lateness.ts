/** Lateness percentiles reported by `scheduler.stats()`, in milliseconds. */
export interface Lateness {
  /** Median lateness of recent runs. */
  p50: number;
  /** 99th percentile lateness of recent runs. */
  p99: number;
  /** The latest any run has started. */
  max: number;
}

const WINDOW = 1024;

/**
 * Records how late each run started. Percentiles cover the last 1,024 runs
 * (a fixed ring, so recording never allocates); `max` covers every run.
 */
export class LatenessRecorder {
  #samples = new Float64Array(WINDOW);
  #count = 0;
  #max = 0;

  record(ms: number): void {
    this.#samples[this.#count++ % WINDOW] = ms;
    if (ms > this.#max) this.#max = ms;
  }

  summary(): Lateness {
    const n = Math.min(this.#count, WINDOW);
    if (n === 0) return { p50: 0, p99: 0, max: 0 };
    const sorted = this.#samples.slice(0, n).sort();
    return { p50: sorted[Math.ceil(n * 0.5) - 1]!, p99: sorted[Math.ceil(n * 0.99) - 1]!, max: this.#max };
  }
}
