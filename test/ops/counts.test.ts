// What metrics(), otel() and stats() count when runs are retried by a store
// or skipped by a job's policy: a stored task that fails twice and then
// succeeds (a real SQLite file), and job occurrences skipped by `overlap`
// and `misfire`. Retried runs are `retries`, not failures; skipped
// occurrences are skips, not runs; nothing keeps the task objects.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { MeterProvider, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type Task } from '../../src/index.js';
import { metrics } from '../../src/ops/metrics.js';
import { otel } from '../../src/ops/otel.js';
import { sqliteStore } from '../../src/sqlite.js';
import { gate, setup } from '../helpers.js';

class OnDemandReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

function providers() {
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { reader, meterProvider, exporter, tracerProvider };
}

/** OpenTelemetry counter values by name, then by `outcome` (or '' without one). */
async function counters(reader: MetricReader, name: string): Promise<Map<string, Map<string, number>>> {
  const { resourceMetrics } = await reader.collect();
  const out = new Map<string, Map<string, number>>();
  for (const scope of resourceMetrics.scopeMetrics)
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== name) continue;
      for (const point of metric.dataPoints as DataPoint<number>[]) {
        const task = String(point.attributes['taskheap.task.name']);
        const byOutcome = out.get(task) ?? new Map<string, number>();
        byOutcome.set(String(point.attributes.outcome ?? point.attributes.reason ?? ''), point.value);
        out.set(task, byOutcome);
      }
    }
  return out;
}

let gc: (() => void) | undefined;
/** Full collections, so a WeakRef to what nothing holds any more reads undefined. */
function collect(): void {
  if (gc === undefined) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
  gc();
}

let dir: string;
afterEach(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('retried stored tasks', () => {
  it('count 2 retries and 1 success, leave nothing running and keep no task object (metrics, otel, stats)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'taskheap-counts-'));
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'counts.db')), onError: () => {} });
    let calls = 0;
    scheduler.define('flaky', () => {
      calls++;
      if (calls < 3) throw new Error(`boom ${calls}`);
      return 'done';
    });
    const m = metrics(scheduler);
    const { reader, meterProvider, exporter, tracerProvider } = providers();
    const instrumentation = await otel(scheduler, { meterProvider, tracerProvider });
    const runs: WeakRef<Task>[] = [];
    const retries: number[] = [];
    scheduler.on('start', (task) => runs.push(new WeakRef(task)));
    scheduler.on('retry', (_task, _error, delay) => retries.push(delay));
    await scheduler.start();
    try {
      const task = await scheduler.schedule(Date.now(), 'flaky', { retry: { attempts: 3, delay: 1, backoff: 'fixed' } });
      expect(await scheduler.waitFor(task.id, { timeout: '20s' })).toMatchObject({ state: 'succeeded', attempts: 3 });
      await scheduler.onIdle();

      expect(m.get('flaky')).toMatchObject({ runs: 3, succeeded: 1, failed: 0, retries: 2, running: 0 });
      expect(m.prometheus()).toContain('taskheap_retries_total{name="flaky"} 2');
      expect(m.prometheus()).toContain('taskheap_running{name="flaky"} 0');
      expect(retries).toEqual([1, 1]);
      expect(scheduler.stats()).toMatchObject({ succeeded: 1, failed: 0, retried: 2, timedOut: 0, running: 0 });

      expect((await counters(reader, 'taskheap.task.runs')).get('flaky')?.get('')).toBe(3);
      const outcomes = await counters(reader, 'taskheap.task.outcomes');
      expect(Object.fromEntries(outcomes.get('flaky')!)).toEqual({ retried: 2, succeeded: 1 });
      const spans = exporter.getFinishedSpans();
      expect(spans.map((span) => span.attributes['taskheap.task.outcome'])).toEqual(['retried', 'retried', 'succeeded']);
      expect(spans.map((span) => span.attributes['taskheap.task.attempt'])).toEqual([1, 2, 3]);

      // Neither the exporter nor the instrumentation (both still open) holds the runs' task objects.
      await scheduler.close();
      await new Promise((resolve) => setTimeout(resolve, 50)); // what the closing turn still held is let go
      expect(runs).toHaveLength(3);
      collect();
      expect(runs.map((ref) => ref.deref() !== undefined)).toEqual([false, false, false]);
      // Nothing in flight either: closing ends no further span.
      instrumentation.close();
      expect(exporter.getFinishedSpans()).toHaveLength(3);
    } finally {
      m.close();
      instrumentation.close();
      await scheduler.close();
    }
  }, 30_000);

  it('a stored task failing for good counts once as failed, its earlier attempts as retries', async () => {
    dir = mkdtempSync(join(tmpdir(), 'taskheap-counts-'));
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'counts.db')), onError: () => {} });
    scheduler.define('fail', () => {
      throw new Error('always');
    });
    const m = metrics(scheduler);
    await scheduler.start();
    try {
      const task = await scheduler.schedule(Date.now(), 'fail', { retry: { attempts: 3, delay: 1, backoff: 'fixed' } });
      expect(await scheduler.waitFor(task.id, { timeout: '20s' })).toMatchObject({ state: 'failed', attempts: 3 });
      await scheduler.onIdle();
      expect(m.get('fail')).toMatchObject({ runs: 3, succeeded: 0, failed: 1, retries: 2, running: 0 });
      expect(scheduler.stats()).toMatchObject({ failed: 1, retried: 2 });
    } finally {
      m.close();
      await scheduler.close();
    }
  }, 30_000);
});

describe('skipped job occurrences', () => {
  it('overlap skip: 5 runs and 4 skipped occurrences count 5 runs, 5 successes and 4 skips (metrics, otel, stats)', async () => {
    const { clock, scheduler } = setup();
    const m = metrics(scheduler);
    const { reader, meterProvider, exporter, tracerProvider } = providers();
    const instrumentation = await otel(scheduler, { meterProvider, tracerProvider });
    // Each run takes 1.5 s of a job due every second: every other occurrence finds it running
    // (runs at 1, 3, 5, 7 and 9 s; `times` counts runs).
    scheduler
      .every(1)
      .seconds()
      .times(5)
      .run(() => new Promise<void>((resolve) => clock.setTimer(() => resolve(), 1_500)), { name: 'tick' });
    await clock.advance(20_000);
    expect(m.get('tick')).toMatchObject({ runs: 5, succeeded: 5, skipped: 4, running: 0 });
    expect(m.prometheus()).toContain('taskheap_runs_total{name="tick"} 5');
    expect(m.prometheus()).toContain('taskheap_succeeded_total{name="tick"} 5');
    expect(scheduler.stats()).toMatchObject({ succeeded: 5 });
    expect((await counters(reader, 'taskheap.task.runs')).get('tick')?.get('')).toBe(5);
    expect(Object.fromEntries((await counters(reader, 'taskheap.task.outcomes')).get('tick')!)).toEqual({ succeeded: 5 });
    expect(Object.fromEntries((await counters(reader, 'taskheap.job.skips')).get('tick')!)).toEqual({ overlap: 4 });
    expect(exporter.getFinishedSpans()).toHaveLength(5);
    instrumentation.close();
    m.close();
    await scheduler.close();
  });

  it('misfire skip: an occurrence found missed (whole periods went by) is a skip, not a run', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const m = metrics(scheduler);
    const { reader, meterProvider, exporter, tracerProvider } = providers();
    const instrumentation = await otel(scheduler, { meterProvider, tracerProvider });
    const hold = gate();
    scheduler.after(0, () => hold.promise, { name: 'blocker' }); // holds the only worker
    const starts: number[] = [];
    scheduler
      .every(1)
      .minute()
      .run(() => void starts.push(clock.now()), { name: 'tick', misfire: 'skip' });
    await clock.advance(5 * 60_000 + 30_000);
    hold.open();
    await clock.advance(0);
    expect(starts).toEqual([]);
    expect(m.get('tick')).toMatchObject({ runs: 0, succeeded: 0, skipped: 1 });
    await clock.advance(60_000);
    expect(starts).toHaveLength(1);
    expect(m.get('tick')).toMatchObject({ runs: 1, succeeded: 1, skipped: 1, running: 0 });
    expect(scheduler.stats()).toMatchObject({ succeeded: 2 }); // the blocker and one run
    expect((await counters(reader, 'taskheap.task.runs')).get('tick')?.get('')).toBe(1);
    expect(Object.fromEntries((await counters(reader, 'taskheap.job.skips')).get('tick')!)).toEqual({ misfire: 1 });
    expect(exporter.getFinishedSpans().filter((span) => span.name === 'taskheap.run tick')).toHaveLength(1);
    instrumentation.close();
    m.close();
    await scheduler.close();
  });

  it('overlap queue: a queued occurrence is one run, when it runs', async () => {
    const { clock, scheduler } = setup();
    const m = metrics(scheduler);
    let runs = 0;
    scheduler
      .every(1)
      .seconds()
      .times(4)
      .run(
        () => {
          runs++;
          return new Promise<void>((resolve) => clock.setTimer(() => resolve(), 1_500));
        },
        { name: 'tick', overlap: 'queue' },
      );
    await clock.advance(30_000);
    expect(runs).toBe(4);
    expect(m.get('tick')).toMatchObject({ runs: 4, succeeded: 4, skipped: 0, running: 0 });
    m.close();
    await scheduler.close();
  });
});
