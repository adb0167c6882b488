// Which SQLite drivers the running Node can load: the SQLite test files run
// once per driver, and skip (saying why) the one that cannot load here
// (node:sqlite before Node 22.13, better-sqlite3 built for another ABI).
import { openDatabase, type SqliteDriver } from '../../src/durable/sqlite/driver.js';

/** Why `driver` cannot open a database in this Node, or undefined if it can. */
export async function unavailable(driver: SqliteDriver): Promise<string | undefined> {
  try {
    (await openDatabase(':memory:', driver)).close();
    return undefined;
  } catch (error) {
    const cause = (error as Error).cause as Error | undefined;
    return `${(error as Error).message}${cause === undefined ? '' : `: ${cause.message.split('\n')[0]}`}`;
  }
}
