// The store conformance suite: every scenario of store behaviour, written
// once, run against each backend by a small test file per backend
// (test/durable/conformance/store-sqlite.test.ts, store-postgres.test.ts, and
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

export function storeConformance(backend: Backend): void {
  if (backend.unavailable !== undefined) {
    describe.skip(`store conformance on ${backend.name} (skipped: ${backend.unavailable.split('\n')[0]})`, () => {
      it('every store conformance scenario', () => {});
    });
    return;
  }
  describe(`store conformance on ${backend.name}`, () => {
    const setup = envFor(backend);
    taskScenarios(backend, setup);
    batchingScenarios(backend, setup);
    claimScenarios(backend, setup);
    serialScenarios(backend, setup);
    limitScenarios(backend, setup);
    queueScenarios(backend, setup);
    queueRateScenarios(backend, setup);
    dedupeScenarios(backend, setup);
    dependencyScenarios(backend, setup);
  });
}
