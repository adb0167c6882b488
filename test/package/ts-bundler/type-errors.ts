// Each marked line must be a type error. If `When` degraded to `any` (as it
// would if taskheap's .d.ts needed @types/luxon and skipLibCheck hid it), the
// expect-error directives would be unused, which is itself an error.
import { Scheduler } from 'taskheap';
import { postgresStore, type PgPoolLike } from 'taskheap/postgres';

const scheduler = new Scheduler();
// @ts-expect-error a string is not a point in time
scheduler.schedule('tomorrow', () => {});
// @ts-expect-error an object without toMillis() is not a DateTime
scheduler.schedule({ isValid: true }, () => {});
void scheduler.close();

// A pool of one's own (a pg.Pool) type-checks by its shape, with no
// @types/pg installed; were the pool option `any` (taskheap/postgres's types
// needing @types/pg, hidden by skipLibCheck), the directives below would be
// unused, which is itself an error.
declare const pool: PgPoolLike;
postgresStore({ pool, schema: 'jobs' });
postgresStore(pool);
// @ts-expect-error a pool needs connect() and query()
postgresStore({ pool: { on() {} } });
// @ts-expect-error a number is neither a pool, a connection string nor options
postgresStore(5432);
