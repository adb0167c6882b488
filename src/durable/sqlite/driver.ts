// The SQLite store talks to the database through this small interface, so
// the same store runs on Node's built-in `node:sqlite` (no native build) or
// on the `better-sqlite3` package. Both are synchronous and nearly the same
// shape; the differences (no `.transaction()` or `.pragma()` helper in
// node:sqlite, stricter named parameters) are absorbed here, once. The role
// files run their statements through `Prepare`, the store's cache. Bun and
// Deno have `node:sqlite` too (so `bun:sqlite` is not needed), and load
// better-sqlite3 from version 13 on (a Node-API addon; 12 is not one).

import { loadPeer } from '../../core/peer.js';
import { nonNodeRuntime } from '../../core/runtime.js';

/** Which SQLite binding the store uses. */
export type SqliteDriver = 'node:sqlite' | 'better-sqlite3';

/** The drivers, in the order `sqliteStore()` tries them by default. */
export const SQLITE_DRIVERS: readonly SqliteDriver[] = ['node:sqlite', 'better-sqlite3'];

/** What a write returns (numbers: neither driver is asked for BigInts). */
interface RunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

/** A prepared statement: positional parameters, or one object of named ones (`@name` in the SQL, `{ name }` here). */
export interface Statement {
  run(...params: unknown[]): RunResult;
  /** The first row, or undefined. */
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The store's prepared statement for an SQL text (compiled once per open database). @internal */
export type Prepare = (sql: string) => Statement;

/** An open database, whichever driver is underneath. */
export interface Database {
  readonly driver: SqliteDriver;
  /** Runs one or more statements that return nothing. */
  exec(sql: string): void;
  prepare(sql: string): Statement;
  /**
   * Wraps `fn` in a write transaction (`BEGIN IMMEDIATE`), committed when it
   * returns and rolled back when it throws; a nested call becomes a savepoint.
   * Like better-sqlite3's helper, it returns a function to call.
   */
  transaction<A extends unknown[], T>(fn: (...args: A) => T): (...args: A) => T;
  close(): void;
}

/** The parts of both bindings this file uses. */
interface NativeStatement extends Statement {}
interface NativeDatabase {
  exec(sql: string): unknown;
  prepare(sql: string): NativeStatement;
  close(): unknown;
}
type NodeSqlite = { DatabaseSync: new (path: string) => NativeDatabase };
type BetterSqlite3 = new (path: string) => NativeDatabase;

/**
 * Opens `path` with `driver`, or, when none is named, with node:sqlite if
 * this Node has it and better-sqlite3 otherwise. Throws an Error that says
 * what to install when no driver loads.
 */
export async function openDatabase(path: string, driver?: SqliteDriver): Promise<Database> {
  if (driver === 'node:sqlite') return wrap(new (nodeSqlite().DatabaseSync)(path), driver);
  if (driver === 'better-sqlite3') return wrap(openBetter(await betterSqlite3("sqliteStore() with driver 'better-sqlite3'"), path), driver);
  const builtin = loadNodeSqlite();
  if (builtin !== undefined) return wrap(new builtin.DatabaseSync(path), 'node:sqlite');
  const feature = `sqliteStore() on Node ${process.versions.node}, which has no node:sqlite (Node >= 22.13 has it),`;
  return wrap(openBetter(await betterSqlite3(feature), path), 'better-sqlite3');
}

/** better-sqlite3 loads its native binary on first open: say what to do when it was built for another Node, or this is not Node. */
function openBetter(Better: BetterSqlite3, path: string): NativeDatabase {
  try {
    return new Better(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const runtime = nonNodeRuntime();
    // Bun (ERR_DLOPEN_FAILED) and Deno (an error without a code) load Node-API addons only: better-sqlite3's is one
    // from version 13 on; an older one no rebuild fixes.
    if (runtime !== undefined && (code === 'ERR_DLOPEN_FAILED' || String((error as Error).message).includes('addon'))) {
      throw new TypeError(
        `driver 'better-sqlite3' does not load on ${runtime}: its native addon is not a Node-API one (better-sqlite3 before 13). Install better-sqlite3@13 or later, or use driver 'node:sqlite', the default there`,
        { cause: error },
      );
    }
    if (code !== 'ERR_DLOPEN_FAILED') throw error;
    throw new Error(
      `better-sqlite3's native binary does not load in Node ${process.versions.node} (built for another Node version?): run npm rebuild better-sqlite3, or use driver 'node:sqlite' on Node >= 22.13`,
      { cause: error },
    );
  }
}

/** node:sqlite, or undefined where this Node does not have it (20, or 22 before 22.13 without --experimental-sqlite). */
function loadNodeSqlite(): NodeSqlite | undefined {
  // Some Node versions (22.x) print an ExperimentalWarning when node:sqlite
  // loads. The user did not ask for node:sqlite, we chose it, so that one
  // warning is filtered out, for this one synchronous call; every other
  // warning passes through untouched.
  const emitWarning = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const text = typeof warning === 'string' ? warning : warning.message;
    if (type === 'ExperimentalWarning' && text.includes('SQLite')) return;
    return (emitWarning as (...args: unknown[]) => void).call(this, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return process.getBuiltinModule?.('node:sqlite') as NodeSqlite | undefined;
  } finally {
    process.emitWarning = emitWarning;
  }
}

function nodeSqlite(): NodeSqlite {
  const module = loadNodeSqlite();
  if (module === undefined) {
    throw new Error(
      `driver 'node:sqlite' needs Node >= 22.13 (or 22.5 with --experimental-sqlite); this is Node ${process.versions.node}. Use driver 'better-sqlite3' instead`,
    );
  }
  return module;
}

/** The better-sqlite3 package; a `MissingPeerError` (ERR_MISSING_PEER) naming the install command when it is not installed. */
async function betterSqlite3(feature: string): Promise<BetterSqlite3> {
  return (await loadPeer<{ default: BetterSqlite3 }>('better-sqlite3', feature)).default;
}

/** Named parameters in `sql` (`@name`, `:name`, `$name`), outside string literals. */
function namedParameters(sql: string): string[] {
  const names = sql.replace(/'(?:[^']|'')*'/g, "''").match(/[@:$][A-Za-z_]\w*/g) ?? [];
  return [...new Set(names.map((name) => name.slice(1)))];
}

/** node:sqlite refuses object keys the SQL does not name; better-sqlite3 ignores them. Keep only the named ones. */
function namedOnly(statement: NativeStatement, names: readonly string[]): Statement {
  const pick = (params: unknown[]): unknown[] => {
    const [first] = params;
    if (params.length !== 1 || typeof first !== 'object' || first === null || Array.isArray(first)) return params;
    const picked: Record<string, unknown> = {};
    for (const name of names) if (name in first) picked[name] = (first as Record<string, unknown>)[name];
    return [picked];
  };
  return {
    run: (...params) => statement.run(...pick(params)),
    get: (...params) => statement.get(...pick(params)),
    all: (...params) => statement.all(...pick(params)),
  };
}

function wrap(native: NativeDatabase, driver: SqliteDriver): Database {
  let depth = 0;
  const control = new Map<string, NativeStatement>();
  const run = (sql: string): void => {
    let statement = control.get(sql);
    if (statement === undefined) control.set(sql, (statement = native.prepare(sql)));
    statement.run();
  };
  return {
    driver,
    exec: (sql) => void native.exec(sql),
    prepare(sql) {
      const statement = native.prepare(sql);
      if (driver !== 'node:sqlite') return statement;
      const names = namedParameters(sql);
      return names.length === 0 ? statement : namedOnly(statement, names);
    },
    transaction<A extends unknown[], T>(fn: (...args: A) => T) {
      return (...args: A): T => {
        // A nested transaction is a savepoint, so an inner failure the outer
        // code catches undoes only the inner part (better-sqlite3's rule too).
        const savepoint = depth === 0 ? undefined : `taskheap_${depth}`;
        run(savepoint === undefined ? 'BEGIN IMMEDIATE' : `SAVEPOINT ${savepoint}`);
        depth++;
        try {
          const result = fn(...args);
          if (typeof (result as { then?: unknown } | null)?.then === 'function') {
            throw new TypeError('A SQLite transaction function must be synchronous (it returned a promise)');
          }
          run(savepoint === undefined ? 'COMMIT' : `RELEASE ${savepoint}`);
          return result;
        } catch (error) {
          if (savepoint === undefined) rollback(run);
          else {
            run(`ROLLBACK TO ${savepoint}`);
            run(`RELEASE ${savepoint}`);
          }
          throw error;
        } finally {
          depth--;
        }
      };
    },
    close() {
      control.clear();
      native.close();
    },
  };
}

/** Rolls back, unless SQLite already did (it does on some errors, and then ROLLBACK itself fails). */
function rollback(run: (sql: string) => void): void {
  try {
    run('ROLLBACK');
  } catch {
    // no transaction was open any more: nothing to undo
  }
}
