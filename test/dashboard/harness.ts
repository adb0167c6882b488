// What the dashboard's browser tests on stores share: one headless Chromium
// per file, a temp directory for SQLite files, a database on the run's shared
// PostgreSQL server, the stores to run each test on, and screenshots into
// test/artifacts/ (docs/images/ too, for SQLite, with UPDATE_SCREENSHOTS=1).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Locator } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import type { Store } from '../../src/durable/store.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { chromiumLaunchOptions } from '../binaries.js';
import type { PgServer } from '../durable/pg-server.js';
import { schemaNamer, usePostgres } from '../durable/use-postgres.js';

const ARTIFACTS = new URL('../artifacts/', import.meta.url);
const IMAGES = new URL('../../docs/images/', import.meta.url);

export interface BrowserHarness {
  /** The file's Chromium (launched before its tests). */
  readonly browser: Browser;
  /** [label, a new store] per backend: SQLite, PostgreSQL in a schema of its own, and (`withoutSchema`) PostgreSQL on its search_path. */
  backends(options?: { withoutSchema?: boolean }): [string, () => Store][];
}

/** Registers the file's hooks; `name` prefixes its temp directory and schemas. */
export function browserHarness(name: string): BrowserHarness {
  let browser: Browser | undefined;
  let dir = '';
  let pgServer: PgServer | undefined;
  const schema = schemaNamer(name);
  usePostgres((started) => {
    pgServer = started;
  });
  beforeAll(async () => {
    browser = await chromium.launch(await chromiumLaunchOptions());
    dir = mkdtempSync(join(tmpdir(), `taskheap-${name}-`));
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    get browser() {
      return browser!;
    },
    backends: ({ withoutSchema = false } = {}) => [
      ['SQLite', () => sqliteStore(join(dir, `${Math.random().toString(36).slice(2)}.db`))],
      ['PostgreSQL', () => postgresStore({ connectionString: pgServer!.url, schema: schema() })],
      ...(withoutSchema
        ? [['PostgreSQL without a schema option', () => postgresStore({ connectionString: pgServer!.url })] as [string, () => Store]]
        : []),
    ],
  };
}

/** Saves a panel as test/artifacts/<name>-<backend>.png and, with UPDATE_SCREENSHOTS=1, the SQLite one as docs/images/<name>.png. */
export async function shoot(target: Locator, name: string, backend: string): Promise<void> {
  const image = await target.screenshot({ path: new URL(`${name}-${backend.split(' ')[0]}.png`, ARTIFACTS).pathname });
  if (process.env.UPDATE_SCREENSHOTS === '1' && backend === 'SQLite') writeFileSync(new URL(`${name}.png`, IMAGES), image);
}
