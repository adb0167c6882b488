import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { TimeoutError } from '../../src/index.js';
import { metrics } from '../../src/ops/metrics.js';
import { gate, setup } from '../helpers.js';
import { checkExposition } from './exposition.js';

/** What is wrong with an exposition, as `promtool check metrics` would say it ('' when clean): see ./exposition.ts. */
function lint(text: string): string {
  return checkExposition(text).join('\n');
}

/** Samples by `name{label="value",...}` (labels sorted, values unescaped), for reading figures back. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) throw new Error(`not a sample line: ${line}`);
    const labels: [string, string][] = [];
    for (const [, key, raw] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels.push([key!, raw!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))]);
    }
    labels.sort(([a], [b]) => a.localeCompare(b));
    out.set(`${match[1]}{${labels.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`, Number(match[3]));
  }
  return out;
}

const key = (name: string, labels: Record<string, string> = {}) =>
  `${name}{${Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(',')}}`;

describe('metrics()', () => {
  it('counts runs, outcomes, retries and timeouts per name', async () => {
    const { clock, scheduler } = setup({ workers: 4 });
    const m = metrics(scheduler);
    scheduler.after(1_000, () => 'ok', { name: 'send' });
    scheduler.after(1_000, () => 'ok', { name: 'send' });
    let calls = 0;
    scheduler.after(
      2_000,
      () => {
        calls++;
        if (calls < 3) throw new Error('flaky');
      },
      { name: 'flaky', retry: { attempts: 3, delay: 100 } },
    );
    scheduler.after(
      3_000,
      () => {
        throw new Error('broken');
      },
      { name: 'broken' },
    );
    scheduler.after(4_000, ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
      name: 'slow',
      timeout: 50,
    });
    scheduler.after(5_000, () => {}).cancel();
    await clock.advance(10_000);

    expect(m.get('send')).toMatchObject({ runs: 2, succeeded: 2, failed: 0, running: 0 });
    expect(m.get('flaky')).toMatchObject({ runs: 3, succeeded: 1, retries: 2, failed: 0 });
    expect(m.get('broken')).toMatchObject({ runs: 1, failed: 1 });
    expect(m.get('slow')).toMatchObject({ runs: 1, failed: 1, timeouts: 1 });
    expect(m.get('')).toMatchObject({ runs: 0, cancelled: 1 });
    expect(m.get('slow').duration.max).toBe(50);
    await scheduler.close();
  });

  it('tracks runs in flight, lateness and duration on the clock', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const m = metrics(scheduler);
    const first = gate();
    scheduler.after(100, () => first.promise, { name: 'job' });
    scheduler.after(100, () => {}, { name: 'job' });
    await clock.advance(100);
    expect(m.get('job').running).toBe(1);
    await clock.advance(250);
    first.open();
    await clock.advance(0);
    const job = m.get('job');
    expect(job.running).toBe(0);
    expect(job.runs).toBe(2);
    // The second run waited for the only worker: 250 ms late. The first took 250 ms.
    expect(job.lateness.max).toBe(250);
    expect(job.duration.max).toBe(250);
    await scheduler.close();
  });

  it('counts waiting tasks per name, and of them the due ones', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const m = metrics(scheduler);
    const hold = gate();
    scheduler.after(0, () => hold.promise, { name: 'busy' });
    scheduler.after(10, () => {}, { name: 'send' });
    scheduler.after(20, () => {}, { name: 'send' });
    scheduler.after(60_000, () => {}, { name: 'send' });
    await clock.advance(100);
    expect(m.get('send')).toMatchObject({ waiting: 3, due: 2, running: 0 });
    expect(m.get('busy')).toMatchObject({ waiting: 0, running: 1 });
    expect(m.snapshot().names.send).toMatchObject({ waiting: 3, due: 2 });
    hold.open();
    await scheduler.close();
  });

  it('counts skipped job occurrences under the job name', async () => {
    const { clock, scheduler } = setup();
    const m = metrics(scheduler);
    const hold = gate();
    scheduler
      .every(1)
      .seconds()
      .run(() => hold.promise, { name: 'tick' });
    await clock.advance(3_000);
    expect(m.get('tick').skipped).toBe(2);
    expect(m.get('tick').running).toBe(1);
    hold.open();
    await scheduler.close();
  });

  it('renders the Prometheus text format, which a Prometheus parser reads back', async () => {
    const { clock, scheduler } = setup();
    const m = metrics(scheduler);
    scheduler.after(10, () => {}, { name: 'a "quoted"\nname\\' });
    scheduler.after(
      20,
      () => {
        throw new TimeoutError(1, 'x');
      },
      { name: 'b' },
    );
    scheduler.after(60_000, () => {});
    await clock.advance(100);
    const text = m.prometheus();
    expect(lint(text)).toBe('');
    const values = samples(text);
    expect(values.get(key('taskheap_runs_total', { name: 'a "quoted"\nname\\' }))).toBe(1);
    expect(values.get(key('taskheap_failed_total', { name: 'b' }))).toBe(1);
    expect(values.get(key('taskheap_waiting', { name: '' }))).toBe(1);
    expect(values.get(key('taskheap_waiting', { name: 'b' }))).toBe(0);
    expect(values.get(key('taskheap_due', { name: '' }))).toBe(0);
    // taskheap 0.1's name of taskheap_waiting is gone.
    expect(values.has(key('taskheap_pending', { name: '' }))).toBe(false);
    expect(values.get(key('taskheap_workers'))).toBe(10);
    expect(values.get(key('taskheap_lateness_seconds_count', { name: 'b' }))).toBe(1);
    expect(values.has(key('taskheap_lateness_seconds', { name: 'b', quantile: '0.99' }))).toBe(true);
    expect(text).toContain('# TYPE taskheap_lateness_seconds summary');
    // The checker is not a rubber stamp: a broken exposition is reported.
    expect(lint('# TYPE x counter\nx{name="a} 1\n')).not.toBe('');
    await scheduler.close();
  });

  it('serves /metrics from a real HTTP server', async () => {
    const { scheduler } = setup();
    const m = metrics(scheduler, { prefix: 'bot' });
    const server = createServer((request, response) => m.handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/plain; version=0.0.4');
      const text = await response.text();
      expect(lint(text)).toBe('');
      expect(samples(text).get(key('bot_workers'))).toBe(10);
    } finally {
      server.close();
      await scheduler.close();
    }
  });

  it('costs nothing once closed: every listener it added is gone', async () => {
    const { clock, scheduler } = setup();
    const m = metrics(scheduler);
    m.close();
    scheduler.after(10, () => {}, { name: 'late' });
    await clock.advance(100);
    expect(m.names()).toEqual([]);
    expect(() => metrics(scheduler, { prefix: 'bad prefix' })).toThrow(/prefix/);
    await scheduler.close();
  });
});
