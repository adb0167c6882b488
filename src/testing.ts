/**
 * Test helpers: `import { ManualClock } from 'taskheap/testing'`.
 * @module
 */
export { ManualClock } from './testing/manual-clock.js';
