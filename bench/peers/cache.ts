import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The repository root; the bench's children run a transpiled copy of this
// file from under node_modules/.cache, whose root is the same.
const HERE = fileURLToPath(new URL('../../', import.meta.url));
const ROOT = HERE.includes('/node_modules/') ? HERE.slice(0, HERE.indexOf('/node_modules/') + 1) : HERE;

/** Where the peer bench keeps Node 24 and the peers (git never sees node_modules/). */
export const CACHE = join(ROOT, 'node_modules/.cache/taskheap-peers');
