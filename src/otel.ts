/**
 * `import { otel } from 'taskheap/otel'`: OpenTelemetry metrics and a span
 * per run. Needs the optional peer dependency `@opentelemetry/api`.
 * @module
 */
export { otel } from './ops/otel.js';
export type { OtelOptions, OtelInstrumentation } from './ops/otel.js';
