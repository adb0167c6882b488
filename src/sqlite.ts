/**
 * `import { sqliteStore } from 'taskheap/sqlite'`: durable schedules for one
 * process. Runs on Node's built-in `node:sqlite` (Node >= 22.13) or on the
 * optional peer dependency `better-sqlite3`.
 * @module
 */
export { sqliteStore } from './durable/sqlite/store.js';
export { StoreInUseError } from './durable/sqlite/errors.js';
export type { SqliteStoreOptions } from './durable/sqlite/store.js';
export type { SqliteDriver } from './durable/sqlite/driver.js';
