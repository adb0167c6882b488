// test/binaries.ts: the npm-provided PostgreSQL and Chromium are found and
// preferred, Debian's PgBouncer is unpacked where the system's may not be used, and with TASKHEAP_NO_SYSTEM_BINARIES=1 (.ci/run's proof run,
// through scripts/without-system-binaries.sh) nothing else is accepted and the
// system's copies are out of reach.
import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chromiumBinary, noSystemBinaries, pgbouncerBinary, postgresBinaries, promtoolBinary } from './binaries.js';

const saved = { ...process.env };
afterEach(() => {
  for (const name of ['PG_BIN', 'CHROMIUM_PATH', 'PROMTOOL', 'PGBOUNCER', 'TASKHEAP_NO_SYSTEM_BINARIES']) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

/** Whether a path is an npm-provided copy: in node_modules, or prepared from it in the temp folder's cache. */
const fromNpm = (path: string) => path.includes('/node_modules/') || path.includes('/taskheap-test-binaries/');

describe('test/binaries.ts', () => {
  it('finds the npm PostgreSQL binaries first', () => {
    delete process.env.PG_BIN;
    const found = postgresBinaries();
    expect(found.source).toBe('npm');
    expect(fromNpm(found.path)).toBe(true);
    for (const tool of ['initdb', 'pg_ctl', 'postgres']) accessSync(join(found.path, tool), constants.X_OK);
  });

  it('finds the npm Chromium first, with its own libraries and fonts', async () => {
    delete process.env.CHROMIUM_PATH;
    const found = await chromiumBinary();
    expect(found.source).toBe('npm');
    expect(fromNpm(found.path)).toBe(true);
    accessSync(found.path, constants.X_OK);
    expect(found.env.LD_LIBRARY_PATH).toContain('taskheap-test-binaries');
    expect(existsSync(join(found.env.FONTCONFIG_PATH ?? '', 'fonts.conf'))).toBe(true);
  }, 120_000);

  it("unpacks Debian's PgBouncer, with the libraries the system lacks, when no system copy may be used", () => {
    process.env.TASKHEAP_NO_SYSTEM_BINARIES = '1';
    const found = pgbouncerBinary();
    expect(found.source).toBe('debian');
    expect(fromNpm(found.path)).toBe(true);
    const version = execFileSync(found.path, ['--version'], { encoding: 'utf8', env: { ...process.env, ...found.env } });
    expect(version).toMatch(/^PgBouncer \d+\.\d+/);
    process.env.TASKHEAP_NO_SYSTEM_BINARIES = '0';
    process.env.PGBOUNCER = found.path;
    expect(pgbouncerBinary()).toMatchObject({ path: found.path, source: 'override' });
  }, 120_000);

  it('honours PG_BIN and CHROMIUM_PATH, and ignores them when system binaries are forbidden', async () => {
    const npmPg = postgresBinaries().path;
    const npmChromium = (await chromiumBinary()).path;
    process.env.TASKHEAP_NO_SYSTEM_BINARIES = '0';
    process.env.PG_BIN = npmPg;
    process.env.CHROMIUM_PATH = npmChromium;
    expect(postgresBinaries().source).toBe('override');
    expect((await chromiumBinary()).source).toBe('override');
    process.env.PG_BIN = '/nonexistent';
    expect(() => postgresBinaries()).toThrow(/PG_BIN=\/nonexistent/);
    process.env.TASKHEAP_NO_SYSTEM_BINARIES = '1';
    expect(postgresBinaries().source).toBe('npm');
    expect((await chromiumBinary()).source).toBe('npm');
    expect(promtoolBinary()).toBeUndefined();
  }, 120_000);
});

describe.runIf(noSystemBinaries())('with TASKHEAP_NO_SYSTEM_BINARIES=1', () => {
  it('has no system promtool, and every binary found is an npm copy', async () => {
    expect(promtoolBinary()).toBeUndefined();
    expect(fromNpm(postgresBinaries().path)).toBe(true);
    expect(fromNpm((await chromiumBinary()).path)).toBe(true);
  }, 120_000);

  it.runIf(process.env.TASKHEAP_SYSTEM_BINARIES_MASKED === '1')('cannot run the system copies: they are covered', () => {
    for (const file of [
      '/usr/bin/chromium',
      '/usr/bin/promtool',
      '/usr/local/bin/pg_ctl',
      '/usr/local/bin/initdb',
      '/usr/sbin/pgbouncer',
    ]) {
      expect(() => accessSync(file, constants.X_OK), file).toThrow();
    }
    expect(existsSync('/usr/lib/postgresql/15/bin/initdb')).toBe(false);
  });
});
