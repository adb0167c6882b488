// taskheap/postgres declares the part of `pg` it uses structurally (so its
// .d.ts files need no @types/pg): these lines only compile if the real
// `pg` types fit them. tsc checks them (npm run typecheck); the test itself
// only makes sure the file is loaded.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { PgModule, PgPoolLike } from '../../../src/durable/postgres/pg.js';
import { postgresStore } from '../../../src/postgres.js';

describe('pg types', () => {
  it('a pg.Pool is a PgPoolLike, and the pg module a PgModule', () => {
    const pool: PgPoolLike = new pg.Pool({ max: 1 });
    const module: PgModule = pg;
    expect(typeof postgresStore(pool).migrate).toBe('function');
    expect(typeof postgresStore({ pool: new pg.Pool({ max: 1 }), schema: 'typed' }).close).toBe('function');
    // @ts-expect-error an object without connect() and query() is no pool
    expect(() => postgresStore({ pool: { query() {} } })).toThrow(/pool/);
    expect(module.Pool).toBe(pg.Pool);
  });
});
