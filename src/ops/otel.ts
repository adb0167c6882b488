// `otel()`: the OpenTelemetry adapter (metrics and a span per run), loading
// `@opentelemetry/api` only when used.
import type { Attributes, Counter, Histogram, Meter, MeterProvider, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import { loadPeer } from '../core/peer.js';
import type { Task } from '../core/task.js';
import type { SkipInfo } from '../jobs/job.js';
import type { Scheduler } from '../scheduler.js';
import type { SchedulerEvents } from '../scheduler-options.js';
import { keysOf } from '../core/validate.js';

type Api = typeof import('@opentelemetry/api');

/** Options of `otel()`. */
export interface OtelOptions {
  /** Where instruments come from. @default the global MeterProvider of `@opentelemetry/api` */
  meterProvider?: MeterProvider;
  /** Where spans go. @default the global TracerProvider of `@opentelemetry/api` */
  tracerProvider?: TracerProvider;
  /**
   * One span per run (`taskheap.run <name>`), from start to outcome.
   * @default true
   */
  spans?: boolean;
}

/** What `otel()` returns: call `close()` to stop reporting. */
export interface OtelInstrumentation {
  /** Stops reporting: removes its listeners and its gauges' callback, and ends the spans of runs in flight. */
  close(): void;
}

const OTEL_KEYS: ReadonlySet<string> = new Set(keysOf<OtelOptions>({ meterProvider: true, tracerProvider: true, spans: true }));

/**
 * Reports a scheduler's runs to OpenTelemetry: counters of runs, outcomes
 * and skips, histograms of lateness and duration (ms), gauges of the pool
 * and queue, and a span per run. `@opentelemetry/api` is an optional peer
 * dependency, loaded by this call; without it the call rejects with a
 * `MissingPeerError` (`ERR_MISSING_PEER`) that names the install command.
 *
 * Instruments (attributes `taskheap.task.name`, and `outcome` or `reason`):
 * `taskheap.task.runs`, `taskheap.task.outcomes`, `taskheap.job.skips`,
 * `taskheap.task.lateness`, `taskheap.task.duration`, `taskheap.tasks.waiting`,
 * `taskheap.tasks.due`, `taskheap.tasks.running` and `taskheap.workers`.
 *
 * @example
 * import { otel } from 'taskheap/otel';
 * const instrumentation = await otel(scheduler); // global providers set up by your OpenTelemetry SDK
 */
export async function otel(scheduler: Scheduler, options: OtelOptions = {}): Promise<OtelInstrumentation> {
  for (const key in options) {
    if (!OTEL_KEYS.has(key)) throw new TypeError(`Unknown otel option \`${key}\`; expected one of: ${[...OTEL_KEYS].join(', ')}`);
  }
  const api = await loadPeer<Api>('@opentelemetry/api', 'otel() from taskheap/otel');
  const meter = (options.meterProvider ?? api.metrics.getMeterProvider()).getMeter('taskheap');
  const tracer = options.spans === false ? undefined : (options.tracerProvider ?? api.trace.getTracerProvider()).getTracer('taskheap');
  return new Instrumentation(api, scheduler, meter, tracer);
}

type Listeners = { [K in keyof SchedulerEvents]?: (...args: SchedulerEvents[K]) => void };

class Instrumentation implements OtelInstrumentation {
  readonly #scheduler: Scheduler;
  readonly #api: Api;
  readonly #tracer: Tracer | undefined;
  readonly #runs: Counter;
  readonly #outcomes: Counter;
  readonly #skips: Counter;
  readonly #lateness: Histogram;
  readonly #duration: Histogram;
  /** Start time and span of each run in progress. */
  readonly #inFlight = new Map<Task, { startedAt: number; span: Span | undefined }>();
  readonly #listeners: Listeners;
  /** Removes the gauges' callback. */
  readonly #unobserve: () => void;

  constructor(api: Api, scheduler: Scheduler, meter: Meter, tracer: Tracer | undefined) {
    this.#api = api;
    this.#scheduler = scheduler;
    this.#tracer = tracer;
    this.#runs = meter.createCounter('taskheap.task.runs', { description: 'Runs started, retries included' });
    this.#outcomes = meter.createCounter('taskheap.task.outcomes', {
      description: 'How runs ended: succeeded, failed, timed-out, cancelled or retried',
    });
    this.#skips = meter.createCounter('taskheap.job.skips', { description: 'Job occurrences skipped by the overlap or misfire policy' });
    this.#lateness = meter.createHistogram('taskheap.task.lateness', { description: 'How late runs started', unit: 'ms' });
    this.#duration = meter.createHistogram('taskheap.task.duration', { description: 'How long runs took', unit: 'ms' });
    const gauge = (name: string, description: string) => meter.createObservableGauge(name, { description });
    const waiting = gauge('taskheap.tasks.waiting', 'Tasks waiting for their time or for a worker');
    const due = gauge('taskheap.tasks.due', 'Waiting tasks already due, waiting for a free worker');
    const running = gauge('taskheap.tasks.running', 'Runs in progress');
    const workers = gauge('taskheap.workers', 'The size of the worker pool');
    const gauges = [waiting, due, running, workers];
    const callback = (result: { observe(gauge: unknown, value: number): void }) => {
      const stats = scheduler.stats();
      result.observe(waiting, stats.waiting);
      result.observe(due, stats.due);
      result.observe(running, stats.running);
      result.observe(workers, stats.workers === Infinity ? Number.MAX_SAFE_INTEGER : stats.workers);
    };
    meter.addBatchObservableCallback(callback, gauges);
    this.#unobserve = () => meter.removeBatchObservableCallback(callback, gauges);
    this.#listeners = {
      start: (task) => this.#start(task),
      success: (task) => this.#end(task, 'succeeded', undefined),
      failure: (task, error) => this.#end(task, task.state === 'timed-out' ? 'timed-out' : 'failed', error),
      retry: (task, error) => this.#end(task, 'retried', error),
      cancel: (task, reason) => this.#end(task, 'cancelled', reason),
      skip: (info: SkipInfo) => this.#skips.add(1, { 'taskheap.task.name': info.name ?? '', reason: info.reason }),
    };
    for (const [event, listener] of Object.entries(this.#listeners)) scheduler.on(event as keyof SchedulerEvents, listener as never);
  }

  #start(task: Task): void {
    const now = this.#scheduler.clock.now();
    const attributes: Attributes = { 'taskheap.task.name': task.name ?? '' };
    this.#runs.add(1, attributes);
    const late = Math.max(0, now - task._time);
    this.#lateness.record(late, attributes);
    const span = this.#tracer?.startSpan(`taskheap.run ${task.name ?? 'anonymous'}`, {
      startTime: now,
      attributes: { ...attributes, 'taskheap.task.id': task.id, 'taskheap.task.attempt': task.attempts, 'taskheap.task.lateness_ms': late },
    });
    this.#inFlight.set(task, { startedAt: now, span });
  }

  #end(task: Task, outcome: string, error: unknown): void {
    const attributes: Attributes = { 'taskheap.task.name': task.name ?? '' };
    this.#outcomes.add(1, { ...attributes, outcome });
    const run = this.#inFlight.get(task);
    if (run === undefined) return; // cancelled before it ran
    this.#inFlight.delete(task);
    const now = this.#scheduler.clock.now();
    this.#duration.record(Math.max(0, now - run.startedAt), { ...attributes, outcome });
    const span = run.span;
    if (span === undefined) return;
    span.setAttribute('taskheap.task.outcome', outcome);
    if (outcome === 'succeeded') span.setStatus({ code: this.#api.SpanStatusCode.OK });
    else {
      if (error instanceof Error) span.recordException(error, now);
      span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    span.end(now);
  }

  close(): void {
    for (const [event, listener] of Object.entries(this.#listeners)) this.#scheduler.off(event as keyof SchedulerEvents, listener as never);
    this.#unobserve();
    for (const { span } of this.#inFlight.values()) span?.end();
    this.#inFlight.clear();
  }
}
