// What taskheap loads with the first call that needs it, synchronously (a
// call that is synchronous stays so): luxon (an ISO-8601 time, `at(':ss')`
// in a zone; the rules read zones from Intl) and the durable runner, for a
// store that brings none of its own. Imported with the root entry, they
// would cost every scheduler their load (luxon alone about as much as the
// rest of taskheap).
import { createRequire } from 'node:module';
import type * as Luxon from 'luxon';

const require = createRequire(import.meta.url);

/**
 * The module at `path` under src/ (`'durable/runner.js'`). Run from src/,
 * this file sits in src/core/; in the built package (scripts/build.mjs,
 * which makes each such module an entry point) this code sits in dist/ or in
 * dist/chunks/: the module is looked for from each.
 * @internal
 */
export function loadOnUse<T>(path: string): T {
  for (const base of ['../', './']) {
    try {
      return require(base + path) as T;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'MODULE_NOT_FOUND' || !String((error as Error).message).includes(path)) throw error;
    }
  }
  throw new Error(`taskheap: ${path} is missing from the package`);
}

let luxonModule: typeof Luxon | undefined;

/**
 * The luxon module (its CommonJS build), required on first use.
 * @internal
 */
export function luxon(): typeof Luxon {
  luxonModule ??= require('luxon') as typeof Luxon;
  return luxonModule;
}
