// The store conformance suite on PostgreSQL, its second half: limits, named
// queues, dedupe, flows and any group added later
// (postgres-backend.ts; the first half is store-postgres.test.ts).
import { postgresConformance } from './postgres-backend.js';

postgresConformance(2);
