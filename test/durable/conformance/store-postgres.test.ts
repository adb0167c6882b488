// The store conformance suite on PostgreSQL, its first half: tasks, recurring
// jobs, batched outcomes, claims, serial groups and a queue's rate
// (postgres-backend.ts; the other half is store-postgres-limits.test.ts).
// PostgreSQL-only behaviour (NOTIFY, worker processes, the server stopped,
// frozen or restarted, query plans, its options) is in postgres.test.ts,
// postgres-delivery.test.ts, postgres-batching.test.ts and serial-postgres.test.ts.
import { postgresConformance } from './postgres-backend.js';

postgresConformance(1);
