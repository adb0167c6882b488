/**
 * Test helpers: `import { ManualClock } from 'taskheap/testing'`.
 * @module
 */
export { ManualClock } from './manual-clock.js';
