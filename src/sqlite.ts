/**
 * `import { sqliteStore } from 'taskheap/sqlite'`: durable schedules for one
 * process. Needs the optional peer dependency `better-sqlite3`.
 * @module
 */
export { sqliteStore, StoreInUseError } from './durable/sqlite/store.js';
export type { SqliteStoreOptions } from './durable/sqlite/store.js';
