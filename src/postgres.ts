/**
 * `import { postgresStore } from 'taskheap/postgres'`: durable schedules that
 * many processes share through one PostgreSQL database. Needs the optional
 * peer dependency `pg` (loaded on first use).
 * @module
 */
export { postgresStore } from './durable/postgres/store.js';
export type { PostgresStoreOptions } from './durable/postgres/options.js';
export type { PgPoolLike, PgPoolClient, PgQuery, PgResult } from './durable/postgres/pg.js';
