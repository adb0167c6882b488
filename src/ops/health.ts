// `health()`: a probe that reads a scheduler as a load balancer or an
// orchestrator would (a blocked event loop, a stuck pool, a store gone away).
import type { Scheduler } from '../scheduler.js';
import { keysOf } from '../core/validate.js';

/** Options of `health()`. */
export interface HealthOptions {
  /**
   * Unhealthy when due tasks wait and no run has started for this long (ms):
   * the pool is stuck on runs that never end, or the loop is not dispatching.
   * @default 30000
   */
  maxStall?: number;
  /**
   * Unhealthy when the event loop was blocked longer than this (ms) since the
   * previous check: a synchronous task or handler hogs the process.
   * @default 1000
   */
  maxLoopDelay?: number;
  /**
   * How long the store may take to answer a one-row query (ms) before it
   * counts as unreachable.
   * @default 2000
   */
  storeTimeout?: number;
}

/** One check's verdict. */
export interface HealthCheck {
  /** Whether this check passed. */
  healthy: boolean;
  /** Why not, when not. */
  reason?: string;
}

/** What `check()` returns; `healthy` is true when every check is. */
export interface HealthReport {
  /** Whether every check passed. */
  healthy: boolean;
  /** Each check's result. */
  checks: {
    /** Worst event-loop delay since the previous check. */
    loop: HealthCheck & {
      /** The worst delay, ms. */
      maxDelayMs: number;
    };
    /** Due tasks are being started. */
    dispatch: HealthCheck & {
      /** Due tasks waiting for a worker. */
      waiting: number;
      /** Since the last task started, ms. */
      sinceLastStartMs: number;
    };
    /** The store answers (absent without a store). */
    store?: HealthCheck & {
      /** How long the store took to answer, ms. */
      latencyMs: number;
    };
  };
}

const HEALTH_KEYS: ReadonlySet<string> = new Set(keysOf<HealthOptions>({ maxStall: true, maxLoopDelay: true, storeTimeout: true }));
/** How often the event loop's delay is sampled, ms. */
const RESOLUTION = 20;

/**
 * Liveness and readiness for probes: is the event loop responsive, are due
 * tasks being started, does the store answer. Costs nothing until created;
 * then one event listener and a 20 ms unref'd timer that measures the event loop's delay.
 *
 * @example
 * import { health } from 'taskheap/metrics';
 * const probe = health(scheduler);
 * app.get('/healthz', (req, res) => probe.handler(req, res)); // 200 or 503, JSON
 */
export class SchedulerHealth {
  readonly #scheduler: Scheduler;
  readonly #maxStall: number;
  readonly #maxLoopDelay: number;
  readonly #storeTimeout: number;
  /**
   * The event loop's delay, measured by a timer every RESOLUTION ms (unref'd):
   * the worst lateness of its ticks since the previous check. Node's
   * `monitorEventLoopDelay()` is not used: its `reset()` drops the next
   * sample, so a block that began right after a check went unseen.
   */
  readonly #timer: NodeJS.Timeout;
  #lastTick = performance.now();
  #worstDelay = 0;
  /** When a run last started, or when the probe was made (a fresh probe knows no history). */
  #lastStart: number;
  readonly #onStart = (): void => {
    this.#lastStart = this.#scheduler.clock.now();
  };

  /** @internal use `health(scheduler)` */
  constructor(scheduler: Scheduler, options: HealthOptions = {}) {
    for (const key in options) {
      if (!HEALTH_KEYS.has(key)) throw new TypeError(`Unknown health option \`${key}\`; expected one of: ${[...HEALTH_KEYS].join(', ')}`);
    }
    const { maxStall = 30_000, maxLoopDelay = 1_000, storeTimeout = 2_000 } = options;
    for (const [name, value] of [
      ['maxStall', maxStall],
      ['maxLoopDelay', maxLoopDelay],
      ['storeTimeout', storeTimeout],
    ] as const) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
        throw new RangeError(`Expected \`${name}\` to be a finite number of milliseconds > 0, got ${String(value)}`);
      }
    }
    this.#scheduler = scheduler;
    this.#maxStall = maxStall;
    this.#maxLoopDelay = maxLoopDelay;
    this.#storeTimeout = storeTimeout;
    this.#lastStart = scheduler.clock.now();
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#worstDelay = Math.max(this.#worstDelay, now - this.#lastTick - RESOLUTION);
      this.#lastTick = now;
    }, RESOLUTION);
    this.#timer.unref();
    scheduler.on('start', this.#onStart);
  }

  /** Runs every check; resolves within `storeTimeout` whatever the store does. */
  async check(): Promise<HealthReport> {
    const scheduler = this.#scheduler;
    // A block that just ended (its tick not run yet) counts too; the tick clock keeps running.
    const maxDelayMs = Math.max(0, this.#worstDelay, performance.now() - this.#lastTick - RESOLUTION);
    this.#worstDelay = 0;
    const loop =
      maxDelayMs > this.#maxLoopDelay
        ? { healthy: false, reason: `the event loop was blocked for ${Math.round(maxDelayMs)} ms`, maxDelayMs }
        : { healthy: true, maxDelayMs };
    const { waiting } = scheduler.stats();
    const sinceLastStartMs = scheduler.clock.now() - this.#lastStart;
    const dispatch =
      waiting > 0 && sinceLastStartMs > this.#maxStall
        ? {
            healthy: false,
            reason: `${waiting} due task(s) wait and no run started for ${Math.round(sinceLastStartMs)} ms`,
            waiting,
            sinceLastStartMs,
          }
        : { healthy: true, waiting, sinceLastStartMs };
    const report: HealthReport = { healthy: loop.healthy && dispatch.healthy, checks: { loop, dispatch } };
    const store = await this.#checkStore();
    if (store !== undefined) {
      report.checks.store = store;
      report.healthy &&= store.healthy;
    }
    return report;
  }

  async #checkStore(): Promise<(HealthCheck & { latencyMs: number }) | undefined> {
    let probe: Promise<unknown>;
    try {
      probe = this.#scheduler.listTasks({ limit: 1 });
    } catch {
      return undefined; // no store
    }
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.#storeTimeout} ms`)), this.#storeTimeout);
      timer.unref();
    });
    try {
      await Promise.race([probe, timeout]);
      return { healthy: true, latencyMs: performance.now() - started };
    } catch (error) {
      probe.catch(() => {});
      return {
        healthy: false,
        reason: `the store did not answer: ${error instanceof Error ? error.message : String(error)}`,
        latencyMs: performance.now() - started,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A request handler for `node:http` (and frameworks that hand over the raw
   * request and response): 200 when healthy, 503 when not, the report as JSON.
   */
  handler = (
    _request: unknown,
    response: { writeHead(status: number, headers: Record<string, string>): unknown; end(body: string): unknown },
  ): void => {
    void this.check().then((report) => {
      response.writeHead(report.healthy ? 200 : 503, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      response.end(JSON.stringify(report));
    });
  };

  /** Stops watching. Idempotent. */
  close(): void {
    clearInterval(this.#timer);
    this.#scheduler.off('start', this.#onStart);
  }
}

/** Creates a health probe for `scheduler` (see `SchedulerHealth`). */
export function health(scheduler: Scheduler, options?: HealthOptions): SchedulerHealth {
  return new SchedulerHealth(scheduler, options);
}
