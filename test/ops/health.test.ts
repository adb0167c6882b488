import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { health } from '../../src/ops/health.js';
import { sqliteStore } from '../../src/sqlite.js';
import { gate, setup } from '../helpers.js';

describe('health()', () => {
  it('is healthy while due tasks get started', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const probe = health(scheduler, { maxStall: 5_000 });
    scheduler.after(1_000, () => {});
    await clock.advance(10_000);
    const report = await probe.check();
    expect(report.healthy).toBe(true);
    expect(report.checks.dispatch).toMatchObject({ healthy: true, waiting: 0 });
    expect(report.checks.store).toBeUndefined();
    probe.close();
    await scheduler.close();
  });

  it('reports a stall: due tasks wait and no run has started for maxStall', async () => {
    const { clock, scheduler } = setup({ workers: 1 });
    const probe = health(scheduler, { maxStall: 5_000 });
    const stuck = gate();
    scheduler.after(0, () => stuck.promise); // never ends: holds the only worker
    scheduler.after(1_000, () => {});
    await clock.advance(4_000);
    expect((await probe.check()).healthy).toBe(true); // waiting, but not for long yet
    await clock.advance(2_000);
    const report = await probe.check();
    expect(report.healthy).toBe(false);
    expect(report.checks.dispatch.reason).toMatch(/1 due task\(s\) wait and no run started for 6000 ms/);
    stuck.open();
    await clock.advance(0);
    expect((await probe.check()).healthy).toBe(true);
    probe.close();
    await scheduler.close();
  });

  it('reports an event loop blocked longer than maxLoopDelay since the previous check', async () => {
    const { scheduler } = setup();
    const probe = health(scheduler, { maxLoopDelay: 100 });
    await new Promise((resolve) => setTimeout(resolve, 50)); // the delay monitor's timer is armed
    const until = performance.now() + 300;
    while (performance.now() < until) {
      /* a handler hogging the loop */
    }
    await new Promise((resolve) => setTimeout(resolve, 30));
    const blocked = await probe.check();
    expect(blocked.healthy).toBe(false);
    expect(blocked.checks.loop.maxDelayMs).toBeGreaterThan(100);
    // The histogram restarts at each check: the next one judges only what came after. Asked at
    // once, it has not seen the block (a loaded machine may add a few ms of its own in between).
    const next = await probe.check();
    expect(next.checks.loop.healthy).toBe(true);
    expect(next.checks.loop.maxDelayMs).toBeLessThan(100);
    probe.close();
    await scheduler.close();
  });

  it('notices a block that starts in the same tick as the previous check', async () => {
    const { scheduler } = setup();
    const probe = health(scheduler, { maxLoopDelay: 100 });
    await new Promise((resolve) => setTimeout(resolve, 50)); // the delay timer has ticked
    const first = probe.check(); // reads and restarts its window now, synchronously
    const until = performance.now() + 300;
    while (performance.now() < until) {
      /* a handler hogging the loop, begun right after the check */
    }
    await first;
    await new Promise((resolve) => setTimeout(resolve, 30));
    const next = await probe.check();
    expect(next.healthy).toBe(false);
    expect(next.checks.loop.maxDelayMs).toBeGreaterThanOrEqual(250);
    expect(next.checks.loop.reason).toMatch(/the event loop was blocked for \d+ ms/);
    probe.close();
    await scheduler.close();
  });

  it('notices a block that has just ended, before the delay timer ticks again', async () => {
    const { scheduler } = setup();
    const probe = health(scheduler, { maxLoopDelay: 100 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const until = performance.now() + 300;
    while (performance.now() < until) {
      /* blocked; the check runs in the same tick, right after */
    }
    const report = await probe.check();
    expect(report.checks.loop.healthy).toBe(false);
    expect(report.checks.loop.maxDelayMs).toBeGreaterThanOrEqual(250);
    probe.close();
    await scheduler.close();
  });

  it('checks that the store answers, and serves 200 or 503 over HTTP', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-health-'));
    const scheduler = new Scheduler({ store: sqliteStore(join(dir, 'h.db')), onError: () => {} });
    await scheduler.start();
    // This test is about the store: the loop check (tested above) must not turn a slow moment of a
    // loaded machine (loading fetch() can block the loop for a while) into a 503.
    const probe = health(scheduler, { maxLoopDelay: 60_000 });
    const server = createServer((request, response) => probe.handler(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
    try {
      const ok = await fetch(url);
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { checks: { store: { healthy: boolean } } }).checks.store.healthy).toBe(true);
      await scheduler.close(); // the store is closed now: it cannot answer
      const down = await fetch(url);
      expect(down.status).toBe(503);
      const body = (await down.json()) as { healthy: boolean; checks: { store: { reason: string } } };
      expect(body.healthy).toBe(false);
      expect(body.checks.store.reason).toMatch(/the store did not answer/);
    } finally {
      server.close();
      probe.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rejects bad options at the call', () => {
    const { scheduler } = setup();
    expect(() => health(scheduler, { maxStall: -1 })).toThrow(RangeError);
    expect(() => health(scheduler, { maxStal: 5 } as never)).toThrow(/Unknown health option `maxStal`/);
  });
});
