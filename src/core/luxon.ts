// luxon, loaded by the first call that needs it: parsing an ISO-8601 time,
// or aligning `every(n).minutes().at(':ss')` in a zone. The rules read zones
// from Intl, so most schedulers never load it; imported with the root entry,
// it cost about as much as the rest of taskheap.
import { createRequire } from 'node:module';
import type * as Luxon from 'luxon';

let loaded: typeof Luxon | undefined;

/**
 * The luxon module, required synchronously (its CommonJS build) on first use.
 * @internal
 */
export function luxon(): typeof Luxon {
  loaded ??= createRequire(import.meta.url)('luxon') as typeof Luxon;
  return loaded;
}
