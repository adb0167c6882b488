/**
 * `import { dashboard } from 'taskheap/dashboard'`: a page listing jobs and
 * tasks, with opt-in actions, mounted in your own server (`node:http`,
 * Express, Fastify, Hono). No build step, no framework, works offline.
 * @module
 */
export { dashboard, Dashboard } from './dashboard/handler.js';
export type { DashboardOptions } from './dashboard/handler.js';
export type { DashboardState, JobView, QueueView, StoredJobView, TaskView } from './dashboard/state.js';
