// The store conformance suite: every scenario of store behaviour, written
// once, run against each backend by a small test file per backend
// (test/durable/conformance/store-sqlite.test.ts, store-postgres*.test.ts, and
// store-memory.test.ts: a Scheduler without a store). A scenario a backend
// cannot run is skipped through a declared capability, saying why in its
// name. A new store (or driver) passes the same suite, or says why not.
import { describe, it } from 'vitest';
import { envFor, type Backend } from './backend.js';
import { batchingScenarios } from './batching.js';
import { claimScenarios } from './claims.js';
import { dedupeScenarios } from './dedupe.js';
import { dependencyScenarios } from './dependencies.js';
import { serialScenarios } from './serial.js';
import { limitScenarios } from './limits.js';
import { queueRateScenarios } from './queue-rates.js';
import { queueScenarios } from './queues.js';
import { taskScenarios } from './tasks.js';

export type { Backend, Capabilities, Database } from './backend.js';

/** The scenario groups, in the order they run: a backend's file may run some of them (`storeConformance(backend, parts)`). */
const SCENARIOS = {
  tasks: taskScenarios,
  batching: batchingScenarios,
  claims: claimScenarios,
  serial: serialScenarios,
  limits: limitScenarios,
  queues: queueScenarios,
  queueRates: queueRateScenarios,
  dedupe: dedupeScenarios,
  dependencies: dependencyScenarios,
} satisfies Record<string, (backend: Backend, setup: ReturnType<typeof envFor>) => void>;

/** A group of scenarios, by name. */
export type ScenarioGroup = keyof typeof SCENARIOS;

/** Every group, in the order they run. */
export const ALL_SCENARIOS = Object.keys(SCENARIOS) as ScenarioGroup[];

/**
 * Runs the scenario groups `parts` (all of them by default) on `backend`. A
 * backend whose scenarios run in real time (PostgreSQL) splits them over
 * files, so that vitest runs the halves side by side.
 */
export function storeConformance(backend: Backend, parts: readonly ScenarioGroup[] = ALL_SCENARIOS): void {
  const title = parts === ALL_SCENARIOS ? backend.name : `${backend.name} (${parts.join(', ')})`;
  if (backend.unavailable !== undefined) {
    describe.skip(`store conformance on ${title} (skipped: ${backend.unavailable.split('\n')[0]})`, () => {
      it('every store conformance scenario', () => {});
    });
    return;
  }
  describe(`store conformance on ${title}`, () => {
    const setup = envFor(backend);
    for (const part of parts) SCENARIOS[part](backend, setup);
  });
}
