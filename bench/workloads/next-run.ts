/**
 * Workload 6: next-occurrence computation. For each cron pattern, computes
 * the next run after instants spread over 2025-2030 for `durationMs` and
 * reports ops/s, plus a sample of answers so the parent can compare
 * libraries (a fast wrong answer is not a win).
 *
 * argv[2]: {"contender": "croner", "durationMs": 500}
 */
import { loadContender } from '../contenders/index.js';
import { NotAvailable, now, random, runChild } from '../lib/child-runtime.js';

interface Params {
  contender: string;
  durationMs: number;
}

const PATTERNS: readonly { pattern: string; zone: string }[] = [
  { pattern: '*/5 * * * *', zone: 'UTC' },
  { pattern: '0 9 * * MON-FRI', zone: 'UTC' },
  { pattern: '0 0 1 * *', zone: 'UTC' },
  { pattern: '30 2 * * *', zone: 'America/New_York' },
  { pattern: '0 0 29 2 *', zone: 'UTC' },
];

const FROM = Date.UTC(2025, 0, 1);
const TO = Date.UTC(2030, 0, 1);
const STARTS = 1024;
const SAMPLE = 32;

/** Instants to start from; the same for every contender. A few sit on DST transition days in New York. */
function starts(): Float64Array {
  const rand = random(7);
  const out = new Float64Array(STARTS);
  for (let i = 0; i < STARTS; i++) out[i] = FROM + Math.floor(rand() * (TO - FROM));
  // 2025-03-09 and 2025-11-02 (the New York transitions), just after midnight local time.
  out[0] = Date.UTC(2025, 2, 9, 5, 10);
  out[1] = Date.UTC(2025, 10, 2, 4, 10);
  return out;
}

runChild<Params>(async ({ contender: name, durationMs }) => {
  const contender = await loadContender(name);
  if (contender.nextRun === undefined) throw new NotAvailable('no next-run API');
  const from = starts();
  const results: Record<string, { opsPerSec?: number; sample?: (number | null)[]; error?: string }> = {};

  for (const { pattern, zone } of PATTERNS) {
    const key = `${pattern} (${zone})`;
    try {
      const next = await contender.nextRun(pattern, zone);
      if (next === undefined) throw new NotAvailable('not built');
      const sample = Array.from(from.subarray(0, SAMPLE), (t) => next(t) ?? null);
      results[key] = { opsPerSec: measure(next, from, durationMs), sample };
    } catch (error) {
      if (error instanceof NotAvailable) throw error;
      results[key] = { error: error instanceof Error ? error.message : String(error) };
    }
  }
  return { patterns: results };
});

/**
 * Calls `next` over the start instants, cycling, until `durationMs` has
 * passed; ops per second. The clock is read every 16 calls, so a library
 * that takes milliseconds per call cannot overshoot by a whole pass.
 */
function measure(next: (after: number) => number | undefined, from: Float64Array, durationMs: number): number {
  const CHUNK = 16;
  let ops = 0;
  let sink = 0;
  const t0 = now();
  let elapsed = 0;
  while (elapsed < durationMs) {
    const offset = ops % from.length; // from.length is a multiple of CHUNK
    for (let i = offset; i < offset + CHUNK; i++) sink += next(from[i]!) ?? 0;
    ops += CHUNK;
    elapsed = now() - t0;
  }
  if (sink === 42) console.log(''); // keeps `sink` observable so the calls cannot be optimised away
  return (ops / elapsed) * 1000;
}
