// `metrics()`: counters and gauges per task, job or handler name, and their
// Prometheus text exposition.
import type { SchedulerStats } from '../core/loop-types.js';
import { LatenessRecorder, type Lateness } from '../core/lateness.js';
import type { Task } from '../core/task.js';
import type { SkipInfo } from '../jobs/job.js';
import type { Scheduler } from '../scheduler.js';
import type { SchedulerEvents } from '../scheduler-options.js';

/** What `metrics()` counts for one task, job or handler name. */
export interface NameMetrics {
  /** Runs started (each retry counts). */
  runs: number;
  /** Tasks that succeeded. */
  succeeded: number;
  /** Tasks that failed for good, after their retries (timed-out ones included). */
  failed: number;
  /** Failed or timed-out runs that were retried. */
  retries: number;
  /** Runs that timed out (retried or not). */
  timeouts: number;
  /** Tasks cancelled, waiting or running. */
  cancelled: number;
  /** Job occurrences skipped by the overlap or misfire policy. */
  skipped: number;
  /** Runs in progress now. */
  running: number;
  /** Tasks of this name waiting: for their time, or due and waiting for a worker. */
  waiting: number;
  /** Waiting tasks of this name already due, waiting for a free worker. */
  due: number;
  /** How late runs started, ms (last 1,024 runs; `max` over all). */
  lateness: Lateness;
  /** How long runs took, ms (last 1,024 runs; `max` over all). */
  duration: Lateness;
}

/** Options of `metrics()`. */
export interface MetricsOptions {
  /**
   * Prefix of every Prometheus metric name.
   * @default 'taskheap'
   */
  prefix?: string;
}

/** Counters of one name, with their own percentile windows. */
class Series {
  runs = 0;
  succeeded = 0;
  failed = 0;
  retries = 0;
  timeouts = 0;
  cancelled = 0;
  skipped = 0;
  running = 0;
  readonly lateness = new LatenessRecorder();
  readonly duration = new LatenessRecorder();
  latenessSum = 0;
  durationSum = 0;
  durations = 0;
}

type Listeners = { [K in keyof SchedulerEvents]?: (...args: SchedulerEvents[K]) => void };

/**
 * Counters and gauges per task, job or handler name, fed by the scheduler's
 * events: nothing is listened to, and nothing costs anything, until
 * `metrics()` is called. Unnamed tasks are counted under the name `""`.
 *
 * @example
 * import { metrics } from 'taskheap/metrics';
 * const m = metrics(scheduler);
 * http.createServer((req, res) => (req.url === '/metrics' ? m.handler(req, res) : app(req, res)));
 */
export class SchedulerMetrics {
  readonly #scheduler: Scheduler;
  readonly #prefix: string;
  readonly #series = new Map<string, Series>();
  /** Start time of each run in progress, for its duration. */
  readonly #started = new Map<Task, number>();
  readonly #listeners: Listeners;
  #closed = false;

  /** @internal use `metrics(scheduler)` */
  constructor(scheduler: Scheduler, options: MetricsOptions = {}) {
    const prefix = options.prefix ?? 'taskheap';
    if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
      throw new TypeError(`Expected \`prefix\` to be a Prometheus metric name prefix such as "taskheap", got ${JSON.stringify(prefix)}`);
    }
    this.#scheduler = scheduler;
    this.#prefix = prefix;
    const now = () => scheduler.clock.now();
    this.#listeners = {
      start: (task) => {
        const at = now();
        const series = this.#of(task.name);
        series.runs++;
        series.running++;
        // `_time` is the due time `runAt` would wrap in a Date: no allocation per run.
        const late = Math.max(0, at - task._time);
        series.lateness.record(late);
        series.latenessSum += late;
        this.#started.set(task, at);
      },
      success: (task) => {
        this.#ended(task).succeeded++;
      },
      failure: (task) => {
        const series = this.#ended(task);
        series.failed++;
        if (task.state === 'timed-out') series.timeouts++;
      },
      retry: (task, error) => {
        const series = this.#ended(task);
        series.retries++;
        if ((error as { code?: unknown } | null)?.code === 'ERR_TASK_TIMEOUT') series.timeouts++;
      },
      cancel: (task) => {
        if (this.#started.has(task)) this.#ended(task).cancelled++;
        else this.#of(task.name).cancelled++;
      },
      skip: (info: SkipInfo) => {
        this.#of(info.name).skipped++;
      },
    };
    for (const [event, listener] of Object.entries(this.#listeners)) scheduler.on(event as keyof SchedulerEvents, listener as never);
  }

  #of(name: string | undefined): Series {
    const key = name ?? '';
    let series = this.#series.get(key);
    if (series === undefined) {
      series = new Series();
      this.#series.set(key, series);
    }
    return series;
  }

  /** A run ended (or will be retried): its slot and its duration. */
  #ended(task: Task): Series {
    const series = this.#of(task.name);
    const startedAt = this.#started.get(task);
    if (startedAt !== undefined) {
      this.#started.delete(task);
      series.running--;
      const took = Math.max(0, this.#scheduler.clock.now() - startedAt);
      series.duration.record(took);
      series.durationSum += took;
      series.durations++;
    }
    return series;
  }

  /** The names seen so far: of runs, skips, and waiting tasks. */
  names(): string[] {
    return [...new Set([...this.#series.keys(), ...this.#scheduler.waitingByName().keys()])];
  }

  /** The counters of one name (zeros if it was never seen). Counting its waiting tasks walks the queue: O(waiting). */
  get(name: string): NameMetrics {
    return this.#view(name, this.#scheduler.waitingByName());
  }

  #view(name: string, waiting: ReturnType<Scheduler['waitingByName']>): NameMetrics {
    const s = this.#series.get(name) ?? new Series();
    const queued = waiting.get(name);
    return {
      runs: s.runs,
      succeeded: s.succeeded,
      failed: s.failed,
      retries: s.retries,
      timeouts: s.timeouts,
      cancelled: s.cancelled,
      skipped: s.skipped,
      running: s.running,
      waiting: queued?.waiting ?? 0,
      due: queued?.due ?? 0,
      lateness: s.lateness.summary(),
      duration: s.duration.summary(),
    };
  }

  /** Every name's counters, and the scheduler's own `stats()`. */
  snapshot(): {
    /** The scheduler's `stats()`. */
    scheduler: SchedulerStats;
    /** The counters of each task, job or handler name. */
    names: Record<string, NameMetrics>;
  } {
    const waiting = this.#scheduler.waitingByName();
    return {
      scheduler: this.#scheduler.stats(),
      names: Object.fromEntries(this.names().map((name) => [name, this.#view(name, waiting)])),
    };
  }

  /**
   * Everything in Prometheus' text exposition format (version 0.0.4):
   * counters and gauges per name, lateness and duration as summaries in
   * seconds, and the scheduler's pool gauges. Walks the waiting tasks once.
   */
  prometheus(): string {
    const p = this.#prefix;
    const out: string[] = [];
    const waiting = this.#scheduler.waitingByName();
    for (const name of waiting.keys()) this.#of(name);
    const names = [...this.#series.keys()];
    const family = (name: string, type: string, help: string, value: (s: Series, key: string) => number) => {
      out.push(`# HELP ${p}_${name} ${help}`, `# TYPE ${p}_${name} ${type}`);
      for (const key of names) out.push(`${p}_${name}{name="${escapeLabel(key)}"} ${value(this.#series.get(key)!, key)}`);
    };
    family('runs_total', 'counter', 'Runs started, retries included.', (s) => s.runs);
    family('succeeded_total', 'counter', 'Tasks that succeeded.', (s) => s.succeeded);
    family('failed_total', 'counter', 'Tasks that failed for good, after their retries.', (s) => s.failed);
    family('retries_total', 'counter', 'Failed or timed-out runs that were retried.', (s) => s.retries);
    family('timeouts_total', 'counter', 'Runs that timed out.', (s) => s.timeouts);
    family('cancelled_total', 'counter', 'Tasks cancelled, waiting or running.', (s) => s.cancelled);
    family('skipped_total', 'counter', 'Job occurrences skipped by the overlap or misfire policy.', (s) => s.skipped);
    family('running', 'gauge', 'Runs in progress.', (s) => s.running);
    family('waiting', 'gauge', 'Tasks waiting for their time or for a worker.', (_s, key) => waiting.get(key)?.waiting ?? 0);
    family('due', 'gauge', 'Waiting tasks already due, waiting for a free worker.', (_s, key) => waiting.get(key)?.due ?? 0);
    const summary = (
      name: string,
      help: string,
      window: (s: Series) => LatenessRecorder,
      sum: (s: Series) => number,
      count: (s: Series) => number,
    ) => {
      out.push(`# HELP ${p}_${name} ${help}`, `# TYPE ${p}_${name} summary`);
      for (const key of names) {
        const s = this.#series.get(key)!;
        const label = `name="${escapeLabel(key)}"`;
        const { p50, p99 } = window(s).summary();
        out.push(
          `${p}_${name}{${label},quantile="0.5"} ${p50 / 1000}`,
          `${p}_${name}{${label},quantile="0.99"} ${p99 / 1000}`,
          `${p}_${name}_sum{${label}} ${sum(s) / 1000}`,
          `${p}_${name}_count{${label}} ${count(s)}`,
        );
      }
    };
    summary(
      'lateness_seconds',
      'How late runs started (quantiles over the last 1,024 runs).',
      (s) => s.lateness,
      (s) => s.latenessSum,
      (s) => s.runs,
    );
    summary(
      'duration_seconds',
      'How long runs took (quantiles over the last 1,024 runs).',
      (s) => s.duration,
      (s) => s.durationSum,
      (s) => s.durations,
    );
    const stats = this.#scheduler.stats();
    const gauge = (name: string, help: string, value: number) =>
      out.push(`# HELP ${p}_${name} ${help}`, `# TYPE ${p}_${name} gauge`, `${p}_${name} ${value}`);
    gauge('workers', 'The size of the worker pool.', stats.workers === Infinity ? Number.MAX_SAFE_INTEGER : stats.workers);
    gauge('jobs', 'Recurring jobs scheduled or paused.', this.#scheduler.jobs().length);
    return `${out.join('\n')}\n`;
  }

  /**
   * A request handler for `node:http` (and Express, Fastify's raw
   * handlers...) that answers with `prometheus()`.
   * @example
   * app.get('/metrics', (req, res) => m.handler(req, res));
   */
  handler = (
    _request: unknown,
    response: { writeHead(status: number, headers: Record<string, string>): unknown; end(body: string): unknown },
  ): void => {
    response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'cache-control': 'no-store' });
    response.end(this.prometheus());
  };

  /** Stops counting: removes every listener this added. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const [event, listener] of Object.entries(this.#listeners)) this.#scheduler.off(event as keyof SchedulerEvents, listener as never);
    this.#started.clear();
  }

  /** `using m = metrics(scheduler)` closes it at the end of the scope. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/** Prometheus label values escape backslash, double quote and line feed. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/**
 * Starts counting a scheduler's runs per name.
 * @example
 * const m = metrics(scheduler);
 * m.get('remind').failed;
 * m.prometheus();
 */
export function metrics(scheduler: Scheduler, options?: MetricsOptions): SchedulerMetrics {
  return new SchedulerMetrics(scheduler, options);
}
