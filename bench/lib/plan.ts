/**
 * What to run: every contender × workload × size, in an order where the
 * smaller sizes of a contender come first (so a timeout or OOM there can
 * skip the larger ones).
 */
import { CONTENDERS, type Capability } from '../contenders/index.js';
import type { Outcome } from './spawn.js';

export type Workload = 'oneshot' | 'recurring' | 'drain' | 'precision' | 'next-run' | 'limits';

export interface Measurement {
  workload: Workload;
  contender: string;
  /** Row label in the tables. */
  label: string;
  /** Rows with the same group are compared with each other (same N or variant). */
  group: string;
  n?: number;
  /** taskheap's row of the group: every ratio is taken against it. */
  ref: boolean;
  /** The same contender and variant across growing N. */
  chain: string;
  /** What the contender must be able to do. */
  needs: Capability;
  params: Record<string, unknown>;
  outcome?: Outcome;
}

export interface Mode {
  quick: boolean;
  sizes: number[];
  precision: { count: number; spanMs: number }[];
  nextRunMs: number;
  limitMs: number;
  /** Wall time a child may spend repeating a measurement to beat noise (0: one round). */
  budgetMs: number;
}

export const FULL: Mode = {
  quick: false,
  sizes: [10_000, 100_000, 1_000_000],
  precision: [
    { count: 20_000, spanMs: 2_000 },
    { count: 10_000, spanMs: 1_000 }, // SPEC §3's target
  ],
  nextRunMs: 500,
  limitMs: 120_000,
  budgetMs: 1_500,
};

export const QUICK: Mode = {
  quick: true,
  sizes: [10_000],
  // Same density as SPEC's target (10,000 tasks per second), for a tenth of the time.
  precision: [{ count: 1_000, spanMs: 100 }],
  nextRunMs: 100,
  // Quick must finish in a minute: a peer that cannot do a workload at
  // N = 10,000 in this time shows as "timeout" (the full run has the figures).
  limitMs: 5_000,
  budgetMs: 0,
};

const fmt = (n: number): string => n.toLocaleString('en-US');

export function plan(mode: Mode): Measurement[] {
  const list = [...oneShot(mode), ...recurring(mode), ...drain(mode), ...precision(mode), ...nextRun(mode), ...limits(mode)];
  for (const m of list) m.params.budgetMs = mode.budgetMs;
  return list;
}

function oneShot(mode: Mode): Measurement[] {
  return mode.sizes.flatMap((n) =>
    CONTENDERS.map((c) => ({
      workload: 'oneshot' as const,
      contender: c.name,
      label: c.name,
      group: fmt(n),
      n,
      ref: c.name === 'taskheap',
      chain: `oneshot:${c.name}`,
      needs: 'schedule' as const,
      params: { contender: c.name, n, cancel: c.na.cancel === undefined },
    })),
  );
}

function recurring(mode: Mode): Measurement[] {
  return (['cron', 'interval'] as const).flatMap((kind) =>
    mode.sizes.flatMap((n) =>
      CONTENDERS.map((c) => ({
        workload: 'recurring' as const,
        contender: c.name,
        label: c.name,
        group: `${kind}, ${fmt(n)}`,
        n,
        ref: c.name === 'taskheap',
        chain: `recurring:${kind}:${c.name}`,
        needs: kind,
        params: { contender: c.name, n, kind },
      })),
    ),
  );
}

/** taskheap runs with three pool sizes; peers have no pool and run once. Ratios are against workers=∞. */
function drain(mode: Mode): Measurement[] {
  return mode.sizes.flatMap((n) =>
    CONTENDERS.flatMap((c) => {
      const pools: (number | null | undefined)[] = c.name === 'taskheap' ? [1, 16, null] : [undefined];
      return pools.map((workers) => ({
        workload: 'drain' as const,
        contender: c.name,
        group: fmt(n),
        n,
        label: workers === undefined ? c.name : `${c.name} (workers=${workers ?? '∞'})`,
        ref: c.name === 'taskheap' && workers === null,
        chain: `drain:${c.name}:${workers}`,
        needs: 'drain' as const,
        params: { contender: c.name, n, workers },
      }));
    }),
  );
}

function precision(mode: Mode): Measurement[] {
  return mode.precision.flatMap(({ count, spanMs }) =>
    [false, true].flatMap((busy) =>
      CONTENDERS.map((c) => ({
        workload: 'precision' as const,
        contender: c.name,
        label: c.name,
        group: `${fmt(count)} over ${spanMs / 1000} s, ${busy ? 'busy' : 'idle'} loop`,
        ref: c.name === 'taskheap',
        chain: `precision:${c.name}:${count}:${busy}`,
        needs: 'precision' as const,
        params: { contender: c.name, count, spanMs, busy },
      })),
    ),
  );
}

function nextRun(mode: Mode): Measurement[] {
  return CONTENDERS.map((c) => ({
    workload: 'next-run' as const,
    contender: c.name,
    label: c.name === 'node-schedule' ? 'node-schedule (cron-parser)' : c.name,
    group: 'all',
    ref: c.name === 'taskheap',
    chain: `next-run:${c.name}`,
    needs: 'nextRun' as const,
    params: { contender: c.name, durationMs: mode.nextRunMs },
  }));
}

/**
 * taskheap alone: scheduling and draining N tasks due now with no options, a
 * priority, a serial key or a rate-limit key on each (bench/workloads/limits.ts).
 * Ratios are against no options.
 */
function limits(mode: Mode): Measurement[] {
  const variants = ['none', 'priority', 'serial', 'rate'] as const;
  const labels = { none: 'no options', priority: 'priority', serial: 'serial (1,000 keys)', rate: 'rate (1,000 keys)' };
  return mode.sizes.flatMap((n) =>
    variants.map((variant) => ({
      workload: 'limits' as const,
      contender: 'taskheap',
      label: labels[variant],
      group: fmt(n),
      n,
      ref: variant === 'none',
      chain: `limits:${variant}`,
      needs: 'drain' as const,
      params: { n, variant },
    })),
  );
}
