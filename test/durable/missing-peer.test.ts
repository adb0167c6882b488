import { describe, expect, it } from 'vitest';
import { runWithout } from '../fixtures/without-package.js';

interface Caught {
  name: string;
  code: string;
  package: string;
  message: string;
}

/** The error the first call that needs the package throws, as JSON. */
function firstCallWithout(name: string, call: string): Caught {
  const line = runWithout(
    name,
    `
    try { ${call}; console.log('{"name":"none"}'); }
    catch (error) { console.log(JSON.stringify({ name: error.name, code: error.code, package: error.package, message: error.message })); }`,
  );
  return JSON.parse(line) as Caught;
}

describe('a missing optional peer is a clear error at the first call that needs it', () => {
  it('better-sqlite3, with the driver named', () => {
    const caught = firstCallWithout(
      'better-sqlite3',
      `
      const { sqliteStore } = await import('./src/sqlite.ts');
      await sqliteStore('/tmp/taskheap-missing-peer.db', { driver: 'better-sqlite3' }).migrate()`,
    );
    expect(caught).toMatchObject({ name: 'MissingPeerError', code: 'ERR_MISSING_PEER', package: 'better-sqlite3' });
    expect(caught.message).toContain('npm install better-sqlite3');
  });

  it('pg', () => {
    const caught = firstCallWithout(
      'pg',
      `
      const { postgresStore } = await import('./src/postgres.ts');
      await postgresStore('postgres://127.0.0.1:1/none').migrate()`,
    );
    expect(caught).toMatchObject({ name: 'MissingPeerError', code: 'ERR_MISSING_PEER', package: 'pg' });
    expect(caught.message).toMatch(/^postgresStore\(\) needs the optional peer dependency "pg", which is not installed: npm install pg$/);
  });

  it('creating a store costs nothing and needs nothing: the error waits for the first call', () => {
    const caught = firstCallWithout(
      'pg',
      `
      const { postgresStore } = await import('./src/postgres.ts');
      postgresStore('postgres://127.0.0.1:1/none')`,
    );
    expect(caught.name).toBe('none');
  });
});
