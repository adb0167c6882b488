// The PostgreSQL schema, one block of SQL per version: what a database at
// version N - 1 runs to reach version N. A fresh database runs them all, in
// order; an older one runs those past its version (store.ts, migrate()).
// Released blocks are never edited: a change is a new version at the end.
// test/durable/schema.test.ts compares the schema they build with a reviewed
// snapshot, and test/durable/upgrade.test.ts upgrades every earlier version.
//
// The tables may live in a schema of the user's choice: every table and
// index name is written `:SCHEMA.name`, which `inSchema()` turns into
// `"the schema".name`, or a bare `name` (the connection's search_path).

/** One version of the schema. */
export interface Migration {
  /** The version the SQL upgrades to (the one before it is `version - 1`). */
  readonly version: number;
  /** The SQL, with `:SCHEMA.` before every name the user's schema qualifies. */
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE :SCHEMA.taskheap_tasks (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name text NOT NULL,
        key text UNIQUE,
        payload text NOT NULL,
        state text NOT NULL DEFAULT 'waiting'
          CHECK (state IN ('waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled')),
        run_at timestamptz NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        max_attempts integer NOT NULL DEFAULT 1,
        options text NOT NULL DEFAULT '{}',
        locked_by text,
        locked_until timestamptz,
        last_error text,
        job_key text,
        scheduled_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT taskheap_tasks_occurrence UNIQUE (job_key, scheduled_at)
      );
      CREATE INDEX taskheap_tasks_waiting ON :SCHEMA.taskheap_tasks (run_at, id) WHERE state = 'waiting';
      CREATE INDEX taskheap_tasks_leased ON :SCHEMA.taskheap_tasks (locked_until) WHERE state = 'running';

      CREATE TABLE :SCHEMA.taskheap_jobs (
        key text PRIMARY KEY,
        name text NOT NULL,
        payload text NOT NULL,
        rule text NOT NULL,
        state text NOT NULL DEFAULT 'scheduled' CHECK (state IN ('scheduled', 'paused', 'done', 'cancelled')),
        next_run_at timestamptz,
        remaining integer,
        until timestamptz,
        options text NOT NULL,
        runs integer NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX taskheap_jobs_due ON :SCHEMA.taskheap_jobs (next_run_at) WHERE state = 'scheduled';`,
  },
  {
    // How many times a task's lease expired (its process died or stalled), to bound re-claims.
    version: 2,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN expiries integer NOT NULL DEFAULT 0;`,
  },
  {
    // The handler's return value (JSON), and the errors of the last attempts
    // (a JSON array). Finished rows by age, for retention.
    version: 3,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN result text, ADD COLUMN errors text;
      CREATE INDEX taskheap_tasks_finished ON :SCHEMA.taskheap_tasks (updated_at)
        WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled');`,
  },
  {
    // Issue 16: serial keys and priorities. The waiting index leads with
    // priority, walked one priority level at a time (see `levels` in sql.ts);
    // a partial index finds the head of a serial key; a key row exists only
    // while a task holds the key (see taskheap_serial_keys in the README).
    version: 4,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN serial text, ADD COLUMN priority integer NOT NULL DEFAULT 0;
      DROP INDEX :SCHEMA.taskheap_tasks_waiting;
      CREATE INDEX taskheap_tasks_waiting ON :SCHEMA.taskheap_tasks (priority, run_at, id) WHERE state = 'waiting';
      CREATE INDEX taskheap_tasks_serial ON :SCHEMA.taskheap_tasks (serial, run_at, id) WHERE state = 'waiting' AND serial IS NOT NULL;
      CREATE TABLE :SCHEMA.taskheap_serial_keys (key text PRIMARY KEY, held_by bigint NOT NULL UNIQUE);

      -- Most tasks have no key and are no job's occurrence: unique indexes that
      -- leave their NULLs out cost such a task nothing on insert and on every
      -- state change (measured: 1.26x throughput, 15% less database CPU).
      ALTER TABLE :SCHEMA.taskheap_tasks DROP CONSTRAINT taskheap_tasks_key_key, DROP CONSTRAINT taskheap_tasks_occurrence;
      CREATE UNIQUE INDEX taskheap_tasks_key ON :SCHEMA.taskheap_tasks (key) WHERE key IS NOT NULL;
      CREATE UNIQUE INDEX taskheap_tasks_occurrence ON :SCHEMA.taskheap_tasks (job_key, scheduled_at) WHERE job_key IS NOT NULL;`,
  },
];

/**
 * The version number in one row: created (if missing) before any migration
 * runs, so a database of any version, or none, can be read the same way.
 */
export const META = `CREATE TABLE IF NOT EXISTS :SCHEMA.taskheap_meta (version integer NOT NULL)`;

/** Quotes an identifier (a schema name). */
export function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/** `sql` with its names in `schema` (undefined: unqualified, for the connection's search_path). */
export function inSchema(sql: string, schema: string | undefined): string {
  return sql.replaceAll(':SCHEMA.', schema === undefined ? '' : `${quote(schema)}.`);
}
