// What differs on Bun and Deno (issue 38), run by scripts/ci/runtimes.sh under
// each of them and by the suite on Node: the Node-only thread options refused
// at `new Scheduler()` naming the runtime (on Node they are taken), SQLite's
// default driver, better-sqlite3 by its version, and a second store on a
// file in use refused with StoreInUseError (Deno's node:sqlite reports the
// lock differently). The rest of taskheap on these runtimes is proven by
// the suite's own files run there: the examples, the store conformance,
// jobs and threads.
import { mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { Store } from '../../src/store.js';

const runtime = process.versions.bun !== undefined ? 'Bun' : process.versions.deno !== undefined ? 'Deno' : 'Node';

const closing: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const thing of closing.splice(0).reverse()) await thing.close();
});

function tempFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskheap-runtimes-')), 'store.db');
}

describe(`on ${runtime}`, () => {
  const limits = { resourceLimits: { maxOldGenerationSizeMb: 64 } };
  const flags = { execArgv: ['--no-warnings'] };

  it.runIf(runtime !== 'Node')('threadOptions.resourceLimits and execArgv throw a TypeError naming the runtime', () => {
    const version = `${runtime} ${process.versions[runtime.toLowerCase()]}`;
    for (const threadOptions of [limits, flags]) {
      const option = Object.keys(threadOptions)[0];
      expect(() => new Scheduler({ threads: 1, threadOptions })).toThrow(
        new TypeError(`\`threadOptions.${option}\` is Node-only: the worker threads of ${version} do not honour it (leave it out there)`),
      );
    }
    // The option every runtime honours is taken.
    closing.push(new Scheduler({ threads: 1, threadOptions: { grace: '2s' } }));
  });

  it.runIf(runtime === 'Node')('threadOptions.resourceLimits and execArgv are taken', () => {
    closing.push(new Scheduler({ threads: 1, threadOptions: { ...limits, ...flags } }));
  });

  it("SQLite's default driver is node:sqlite where there is one; better-sqlite3 loads from version 13 on, else says what to do", async () => {
    const store = sqliteStore(tempFile());
    const scheduler = new Scheduler({ store });
    closing.push(scheduler);
    scheduler.define('double', (_ctx, n: number) => n * 2);
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), 'double', { payload: 21 });
    expect((await scheduler.waitFor(task.id)).result).toBe(42);

    const pinned = sqliteStore(tempFile(), { driver: 'better-sqlite3' });
    const version = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('better-sqlite3/package.json'), 'utf8')).version;
    if (runtime === 'Node' || Number(version.split('.')[0]) >= 13) {
      await pinned.migrate();
      await pinned.close();
    } else {
      await expect(pinned.migrate()).rejects.toThrow(
        new RegExp(`^SQLite store .*: driver 'better-sqlite3' does not load on ${runtime} .*Install better-sqlite3@13 or later`),
      );
    }
  });

  it('a second store on a file in use is refused with StoreInUseError', async () => {
    const path = tempFile();
    const first: Store = sqliteStore(path);
    await first.migrate();
    closing.push(first);
    await expect(sqliteStore(path).migrate()).rejects.toMatchObject({ name: 'StoreInUseError', code: 'ERR_STORE_IN_USE' });
  });
});
