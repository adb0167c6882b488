// Who owns a SQLite file: the owner file beside the database that names the
// owning process for the `StoreInUseError` (errors.ts) a second store gets,
// and the driver errors that mean the file is locked.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { StoreInUseError } from './errors.js';

/** The owner file of the database at `path`. */
function ownerFile(path: string): string {
  return `${path}-taskheap-owner`;
}

/** Names this process as the owner of the database at `path`. @internal */
export function writeOwner(path: string): void {
  try {
    writeFileSync(ownerFile(path), JSON.stringify({ pid: process.pid, hostname: hostname(), since: new Date().toISOString() }));
  } catch {
    // A read-only directory: the lock still holds; only the error message is poorer.
  }
}

/** Removes the owner file of the database at `path` if it names this process. @internal */
export function dropOwner(path: string): void {
  if (readOwner(path)?.pid === process.pid) rmSync(ownerFile(path), { force: true });
}

/** The owner file's contents for the database at `path`, if there is one and it parses. @internal */
export function readOwner(path: string): StoreInUseError['owner'] {
  try {
    const owner = JSON.parse(readFileSync(ownerFile(path), 'utf8')) as { pid?: unknown; hostname?: unknown; since?: unknown };
    if (typeof owner.pid !== 'number' || typeof owner.hostname !== 'string' || typeof owner.since !== 'string') return undefined;
    return { pid: owner.pid, hostname: owner.hostname, since: owner.since };
  } catch {
    return undefined;
  }
}

/**
 * SQLITE_BUSY or SQLITE_LOCKED, as better-sqlite3 (`code`) or node:sqlite (`errcode` 5 or 6) reports it.
 * Deno's node:sqlite gives an error of `exec()` no `errcode`: there only SQLite's own text for either tells.
 * @internal
 */
export function isBusy(error: unknown): boolean {
  const { code, errcode, message } = (error ?? {}) as { code?: unknown; errcode?: unknown; message?: unknown };
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || errcode === 5 || errcode === 6) return true;
  return code === 'ERR_SQLITE_ERROR' && errcode === undefined && /database (table )?is locked/.test(String(message));
}
