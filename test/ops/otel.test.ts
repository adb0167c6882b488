import { SpanStatusCode } from '@opentelemetry/api';
import { MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { otel } from '../../src/ops/otel.js';
import { runWithout } from '../fixtures/without-package.js';
import { setup } from '../helpers.js';

/** A reader we collect from on demand (the SDK's own base class). */
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

async function points(reader: MetricReader) {
  const { resourceMetrics } = await reader.collect();
  const byName = new Map<string, DataPoint<unknown>[]>();
  for (const scope of resourceMetrics.scopeMetrics)
    for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric.dataPoints as DataPoint<unknown>[]);
  return byName;
}

describe('otel()', () => {
  it('reports runs, outcomes, lateness, duration and pool gauges through a real OpenTelemetry SDK', async () => {
    const { clock, scheduler } = setup({ workers: 2 });
    const { reader, meterProvider, exporter, tracerProvider } = providers();
    const instrumentation = await otel(scheduler, { meterProvider, tracerProvider });
    scheduler.after(100, async () => 'sent', { name: 'send' });
    scheduler.after(
      200,
      () => {
        throw new Error('boom');
      },
      { name: 'send' },
    );
    scheduler.after(60_000, () => {}, { name: 'later' });
    await clock.advance(1_000);

    const metrics = await points(reader);
    const runs = metrics.get('taskheap.task.runs')!;
    expect(runs.find((p) => p.attributes['taskheap.task.name'] === 'send')?.value).toBe(2);
    const outcomes = metrics.get('taskheap.task.outcomes')!;
    expect(outcomes.map((p) => [p.attributes.outcome, p.value]).sort()).toEqual([
      ['failed', 1],
      ['succeeded', 1],
    ]);
    const lateness = metrics.get('taskheap.task.lateness')!;
    expect((lateness[0]!.value as Histogram).count).toBe(2);
    expect(metrics.get('taskheap.tasks.waiting')![0]!.value).toBe(1);
    expect(metrics.get('taskheap.tasks.due')![0]!.value).toBe(0);
    expect(metrics.has('taskheap.tasks.pending')).toBe(false); // taskheap 0.1's name of taskheap.tasks.waiting is gone
    expect(metrics.get('taskheap.workers')![0]!.value).toBe(2);

    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => span.name)).toEqual(['taskheap.run send', 'taskheap.run send']);
    expect(spans.map((span) => span.status.code)).toEqual([SpanStatusCode.OK, SpanStatusCode.ERROR]);
    expect(spans[1]!.status.message).toBe('boom');
    expect(spans[1]!.events.some((event) => event.name === 'exception')).toBe(true);

    instrumentation.close();
    scheduler.after(0, () => {}, { name: 'send' });
    await clock.advance(10);
    expect((await points(reader)).get('taskheap.task.runs')!.find((p) => p.attributes['taskheap.task.name'] === 'send')?.value).toBe(2);
    await scheduler.close();
  });

  it('rejects with ERR_MISSING_PEER, naming the install command, when @opentelemetry/api is not installed', () => {
    const line = runWithout(
      '@opentelemetry/api',
      `
      const { Scheduler } = await import('./src/index.ts');
      const { otel } = await import('./src/otel.ts');
      try { await otel(new Scheduler()); console.log('{}'); }
      catch (error) { console.log(JSON.stringify({ code: error.code, message: error.message, package: error.package })); }`,
    );
    const answer = JSON.parse(line) as { code: string; message: string; package: string };
    expect(answer.code).toBe('ERR_MISSING_PEER');
    expect(answer.package).toBe('@opentelemetry/api');
    expect(answer.message).toContain('npm install @opentelemetry/api');
  });
});
