/**
 * `import { metrics, health } from 'taskheap/metrics'`: counters and gauges
 * per task, job or handler name in Prometheus' text format, and a health
 * probe for liveness and readiness checks. Nothing here costs the scheduler
 * anything until it is called.
 * @module
 */
export { metrics, SchedulerMetrics } from './ops/metrics.js';
export type { MetricsOptions, NameMetrics } from './ops/metrics.js';
export { health, SchedulerHealth } from './ops/health.js';
export type { HealthOptions, HealthReport, HealthCheck } from './ops/health.js';
