// The errors of the SQLite store: `StoreInUseError`, what a second store of
// a file another one owns gets (the owner file it names is owner.ts's).
import { hostname } from 'node:os';
import { TaskheapError } from '../../core/errors.js';

/** Another taskheap store (in this process or another) has the SQLite file open. */
export class StoreInUseError extends TaskheapError {
  /** The file. */
  readonly path: string;
  /** Who has it, as its owner file says (pid, host, since), if known. */
  readonly owner: { pid: number; hostname: string; since: string } | undefined;

  constructor(path: string, owner: StoreInUseError['owner']) {
    const who =
      owner === undefined
        ? 'another taskheap store (in this process or another)'
        : `process ${owner.pid} on ${owner.hostname} (since ${owner.since})${owner.pid === process.pid && owner.hostname === hostname() ? ', this very process: another sqliteStore() of the same file' : ''}`;
    super(
      `The SQLite file ${path} is in use by ${who}; one store owns a file at a time. Close that scheduler first, or use postgresStore() to share work between processes`,
      'ERR_STORE_IN_USE',
    );
    this.path = path;
    this.owner = owner;
  }
}
