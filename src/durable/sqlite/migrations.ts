// The SQLite schema, one block of SQL per version: what a file at version
// N - 1 runs to reach version N. A fresh file runs them all, in order; an
// older one runs those past its version (migrate(), at the end), in one
// transaction. Released blocks are never edited, not even their spacing:
// SQLite keeps each CREATE statement's text as written (sqlite_master), so a
// file's schema text is the text of the release that created it. A change
// is a new version at the end. test/durable/schema.test.ts compares the
// schema they build with a reviewed snapshot, and
// test/durable/upgrade.test.ts upgrades every earlier version.

import { SchemaVersionError } from '../errors.js';
import { SCHEMA_VERSION } from '../store.js';
import type { Database, Prepare } from './driver.js';

/** One version of the schema. */
export interface Migration {
  /** The version the SQL upgrades to (the one before it is `version - 1`). */
  readonly version: number;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `CREATE TABLE taskheap_tasks (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     name TEXT NOT NULL,
     key TEXT UNIQUE,
     payload TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'waiting',
     run_at INTEGER NOT NULL,
     attempts INTEGER NOT NULL DEFAULT 0,
     max_attempts INTEGER NOT NULL DEFAULT 1,
     options TEXT NOT NULL DEFAULT '{}',
     locked_by TEXT,
     locked_until INTEGER,
     last_error TEXT,
     job_key TEXT,
     scheduled_at INTEGER,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL,
     UNIQUE (job_key, scheduled_at)
   );
   CREATE INDEX taskheap_tasks_due ON taskheap_tasks (state, run_at);
   CREATE TABLE taskheap_jobs (
     key TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     payload TEXT NOT NULL,
     rule TEXT NOT NULL,
     state TEXT NOT NULL DEFAULT 'scheduled',
     next_run_at INTEGER,
     remaining INTEGER,
     until INTEGER,
     options TEXT NOT NULL,
     runs INTEGER NOT NULL DEFAULT 0,
     created_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   );
   CREATE INDEX taskheap_jobs_due ON taskheap_jobs (state, next_run_at);`,
  },
  {
    // How many times a task's lease expired (its process died or stalled), to bound re-claims.
    version: 2,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN expiries INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    // The handler's return value (JSON), and the errors of the last attempts
    // (a JSON array). Finished rows by age, for retention.
    version: 3,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN result TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN errors TEXT;
   CREATE INDEX taskheap_tasks_finished ON taskheap_tasks (updated_at) WHERE state IN ('succeeded', 'failed', 'timed-out', 'cancelled');`,
  },
  {
    // Serial groups and priorities (docs/limits.md). The due index gains the priority,
    // walked one level at a time (see claim in store.ts); a partial index
    // finds the head of a serial group; a key row exists only while a task
    // holds the key.
    version: 4,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN serial TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
   DROP INDEX taskheap_tasks_due;
   CREATE INDEX taskheap_tasks_due ON taskheap_tasks (state, priority, run_at, id);
   CREATE INDEX taskheap_tasks_serial ON taskheap_tasks (serial, run_at, id) WHERE state = 'waiting' AND serial IS NOT NULL;
   CREATE TABLE taskheap_serial_keys (key TEXT PRIMARY KEY, held_by INTEGER NOT NULL UNIQUE);`,
  },
  {
    // Named queues (docs/queues.md). Every task is in one; the claim walks the due
    // tasks queue by queue (the queue-leading index), so a paused or full
    // queue's tasks are never read; a queue row holds its settings.
    version: 5,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
   CREATE INDEX taskheap_tasks_queue_due ON taskheap_tasks (state, queue, priority, run_at, id);
   CREATE TABLE taskheap_queues (
     name TEXT PRIMARY KEY,
     paused INTEGER NOT NULL DEFAULT 0,
     global_concurrency INTEGER,
     updated_at INTEGER NOT NULL
   );`,
  },
  {
    // The limits of PostgreSQL's version 6 (docs/limits.md), in the same model (one
    // process owns the file, so they hold by construction): one row per
    // concurrency group (its holders, a JSON array) or rate bucket (its recent
    // starts, a JSON array of [ms, count]); keyed tasks leave the plain due
    // index. `started_at`: when the task last started. A queue's rate is a
    // bucket on its row (`rate_limit` per `rate_interval_ms`; `rate_starts`
    // as a limit row's starts).
    //
    // Flows (docs/flows.md): PostgreSQL's model (see version 6 in
    // postgres/migrations.ts): `blocked` tasks, the `taskheap_deps` edges, and
    // triggers that count a dependency down, sink (`'fail'` rule) and revive
    // dependents in the statement that ends or retries it. Sinking (`'fail'`
    // rule) takes the whole closure at once, as PostgreSQL does, but SQLite
    // fires a row's AFTER trigger as soon as that row is updated, before the
    // rest of the statement's rows: so the closure is first marked
    // (`failed_dep` = the ending task, no state change, nothing fires), then
    // sunk in one statement, and the firing of each sunk task finds its
    // dependents marked and leaves them alone. Two trigger levels however deep
    // the chain (the store turns recursive_triggers on for that second level);
    // recursing one level per task, a chain of 300 took 5 s to sink and SQLite
    // stopped at 1,000. Revived tasks name the root of their sinking
    // (`failed_dep`), so reviving takes one level too. Edges of deleted tasks go with them (foreign keys are off).
    version: 6,
    sql: `CREATE TABLE taskheap_limits (
     kind TEXT NOT NULL,
     key TEXT NOT NULL,
     lim INTEGER NOT NULL,
     interval_ms REAL,
     holders TEXT NOT NULL DEFAULT '[]',
     starts TEXT NOT NULL DEFAULT '[]',
     PRIMARY KEY (kind, key)
   );
   ALTER TABLE taskheap_tasks ADD COLUMN rate_key TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN started_at INTEGER;
   UPDATE taskheap_tasks SET rate_key = json_extract(options, '$.rate.key') WHERE state IN ('waiting', 'running');
   INSERT INTO taskheap_limits (kind, key, lim, holders) SELECT 'concurrency', key, 1, json_array(held_by) FROM taskheap_serial_keys;
   INSERT OR IGNORE INTO taskheap_limits (kind, key, lim) SELECT DISTINCT 'concurrency', serial, 1 FROM taskheap_tasks
     WHERE serial IS NOT NULL AND state IN ('waiting', 'running');
   INSERT OR REPLACE INTO taskheap_limits (kind, key, lim, interval_ms)
     SELECT 'rate', rate_key, json_extract(options, '$.rate.limit'), json_extract(options, '$.rate.interval') FROM taskheap_tasks
     WHERE rate_key IS NOT NULL ORDER BY id;
   DROP TABLE taskheap_serial_keys;
   CREATE VIEW taskheap_serial_keys AS SELECT l.key AS key, h.value AS held_by FROM taskheap_limits AS l, json_each(l.holders) AS h
     WHERE l.kind = 'concurrency';
   CREATE INDEX taskheap_tasks_plain ON taskheap_tasks (queue, priority, run_at, id) WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL;
   CREATE INDEX taskheap_tasks_rate ON taskheap_tasks (rate_key, priority DESC, run_at, id)
     WHERE state = 'waiting' AND rate_key IS NOT NULL AND serial IS NULL;
   CREATE INDEX taskheap_tasks_rated ON taskheap_tasks (rate_key) WHERE state IN ('waiting', 'running') AND rate_key IS NOT NULL;
   ALTER TABLE taskheap_tasks ADD COLUMN prefetched INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE taskheap_queues ADD COLUMN rate_limit INTEGER;
   ALTER TABLE taskheap_queues ADD COLUMN rate_interval_ms REAL;
   ALTER TABLE taskheap_queues ADD COLUMN rate_starts TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN progress TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN logs TEXT;
   CREATE INDEX taskheap_tasks_listing ON taskheap_tasks (run_at, id);
CREATE TABLE taskheap_deps (
     task_id INTEGER NOT NULL,
     dep_id INTEGER NOT NULL,
     ord INTEGER NOT NULL,
     on_failure TEXT NOT NULL DEFAULT 'fail',
     counted INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (task_id, dep_id)
   ) WITHOUT ROWID;
   CREATE INDEX taskheap_deps_dep ON taskheap_deps (dep_id);
   ALTER TABLE taskheap_tasks ADD COLUMN flow_id INTEGER;
   ALTER TABLE taskheap_tasks ADD COLUMN pending_deps INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE taskheap_tasks ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE taskheap_tasks ADD COLUMN failed_dep INTEGER;
   CREATE INDEX taskheap_tasks_flow ON taskheap_tasks (flow_id) WHERE flow_id IS NOT NULL;
   CREATE INDEX taskheap_tasks_failed_dep ON taskheap_tasks (failed_dep) WHERE failed_dep IS NOT NULL;
   CREATE TRIGGER taskheap_deps_ended AFTER UPDATE OF state ON taskheap_tasks
     WHEN NEW.has_dependents AND NEW.state IN ('succeeded', 'failed', 'timed-out', 'cancelled')
       AND OLD.state NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled')
   BEGIN
     UPDATE taskheap_tasks SET pending_deps = pending_deps - 1,
       state = CASE WHEN pending_deps = 1 AND state = 'blocked' THEN 'waiting' ELSE state END, updated_at = NEW.updated_at
       WHERE id IN (SELECT task_id FROM taskheap_deps WHERE dep_id = NEW.id AND NOT counted AND (NEW.state = 'succeeded' OR on_failure <> 'fail'));
     UPDATE taskheap_deps SET counted = 1 WHERE dep_id = NEW.id AND NOT counted AND (NEW.state = 'succeeded' OR on_failure <> 'fail');
     UPDATE taskheap_tasks SET failed_dep = NEW.id
       WHERE NEW.state <> 'succeeded' AND id IN (WITH RECURSIVE doomed(id) AS (
           SELECT d.task_id FROM taskheap_deps AS d JOIN taskheap_tasks AS t ON t.id = d.task_id
           WHERE d.dep_id = NEW.id AND d.on_failure = 'fail' AND t.state = 'blocked' AND (t.failed_dep IS NULL OR t.failed_dep < 0)
           UNION
           SELECT d.task_id FROM doomed JOIN taskheap_deps AS d ON d.dep_id = doomed.id JOIN taskheap_tasks AS t ON t.id = d.task_id
           WHERE d.on_failure = 'fail' AND t.state = 'blocked' AND (t.failed_dep IS NULL OR t.failed_dep < 0))
         SELECT id FROM doomed);
     UPDATE taskheap_tasks SET state = CASE WHEN NEW.state = 'cancelled' THEN 'cancelled' ELSE 'failed' END,
       failed_dep = COALESCE(NEW.failed_dep, NEW.id),
       last_error = 'DependencyError: dependency ' || COALESCE(NEW.failed_dep, NEW.id) || CASE WHEN NEW.state = 'cancelled' THEN ' was cancelled' ELSE ' failed' END,
       updated_at = NEW.updated_at
       WHERE NEW.state <> 'succeeded' AND failed_dep = NEW.id AND +state = 'blocked';
   END;
   CREATE TRIGGER taskheap_deps_revived AFTER UPDATE OF state ON taskheap_tasks
     WHEN NEW.has_dependents AND OLD.state IN ('succeeded', 'failed', 'timed-out', 'cancelled')
       AND NEW.state NOT IN ('succeeded', 'failed', 'timed-out', 'cancelled')
   BEGIN
     UPDATE taskheap_tasks SET pending_deps = pending_deps + 1, state = CASE WHEN state = 'waiting' THEN 'blocked' ELSE state END,
       updated_at = NEW.updated_at
       WHERE attempts = 0 AND state <> 'running' AND id IN (SELECT task_id FROM taskheap_deps WHERE dep_id = NEW.id AND counted);
     UPDATE taskheap_deps SET counted = 0 WHERE dep_id = NEW.id AND counted
       AND (SELECT attempts = 0 AND state <> 'running' FROM taskheap_tasks WHERE id = task_id);
     UPDATE taskheap_tasks SET state = 'blocked', failed_dep = -NEW.id, last_error = NULL, updated_at = NEW.updated_at
       WHERE failed_dep = NEW.id AND state IN ('failed', 'cancelled') AND attempts = 0;
     UPDATE taskheap_tasks SET
       state = CASE WHEN (SELECT f.state FROM taskheap_deps AS d JOIN taskheap_tasks AS f ON f.id = d.dep_id
           WHERE d.task_id = taskheap_tasks.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled') ORDER BY d.ord LIMIT 1)
         = 'cancelled' THEN 'cancelled' ELSE 'failed' END,
       failed_dep = (SELECT COALESCE(f.failed_dep, f.id) FROM taskheap_deps AS d JOIN taskheap_tasks AS f ON f.id = d.dep_id
         WHERE d.task_id = taskheap_tasks.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled') ORDER BY d.ord LIMIT 1),
       last_error = 'DependencyError: dependency ' || (SELECT COALESCE(f.failed_dep, f.id) || CASE f.state WHEN 'cancelled' THEN ' was cancelled' ELSE ' failed' END
         FROM taskheap_deps AS d JOIN taskheap_tasks AS f ON f.id = d.dep_id
         WHERE d.task_id = taskheap_tasks.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled') ORDER BY d.ord LIMIT 1),
       updated_at = NEW.updated_at
       WHERE failed_dep = -NEW.id AND state = 'blocked' AND EXISTS (SELECT 1 FROM taskheap_deps AS d JOIN taskheap_tasks AS f ON f.id = d.dep_id
         WHERE d.task_id = taskheap_tasks.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled'));
     UPDATE taskheap_tasks SET failed_dep = NULL WHERE failed_dep = -NEW.id;
   END;
   CREATE TRIGGER taskheap_deps_deleted AFTER DELETE ON taskheap_tasks WHEN OLD.flow_id IS NOT NULL OR OLD.has_dependents
   BEGIN
     DELETE FROM taskheap_deps WHERE task_id = OLD.id;
     DELETE FROM taskheap_deps WHERE dep_id = OLD.id;
   END;`,
  },
  {
    // Version 7 changes PostgreSQL only (a flow's edges to tasks outside it, checked at its
    // commit): one SQLite store writes at a time, so nothing here can hold a row a worker waits for.
    version: 7,
    sql: `SELECT 1;`,
  },
  {
    // Version 8: the stored options name a rate or concurrency limit's group
    // `group` (the option's name; it was `key`). The text test first, so rows
    // without one are not parsed.
    version: 8,
    sql: ['taskheap_tasks', 'taskheap_jobs']
      .flatMap((table) =>
        ['rate', 'concurrency'].map(
          (limit) => `
   UPDATE ${table} SET options = json_set(json_remove(options, '$.${limit}.key'), '$.${limit}.group', json_extract(options, '$.${limit}.key'))
     WHERE options LIKE '%"key"%' AND json_extract(options, '$.${limit}.key') IS NOT NULL;`,
        ),
      )
      .join(''),
  },
  {
    // Version 9: fair shares (docs/limits.md). A task's group and weight, in columns the claim
    // reads; its plain due tasks of a group, in due order, from an index of their own (the tasks
    // without a share keep taskheap_tasks_plain).
    version: 9,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN fair_group TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN fair_weight INTEGER NOT NULL DEFAULT 1;
   CREATE INDEX taskheap_tasks_fair ON taskheap_tasks (queue, priority, fair_group, run_at, id)
     WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL AND fair_group IS NOT NULL;`,
  },
  {
    // Fair shares by turns kept with the tasks (fair.ts), as on PostgreSQL: a task's turn once it is
    // due, a group's next turn and a queue's virtual time in tables of their own; the plain index
    // leaves shared tasks out (the claim reads them by turn). A turn is lost by any change of its
    // task but the claim's (which clears it) and the tagging's (which sets it).
    version: 10,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN fair_tag REAL;
   DROP INDEX taskheap_tasks_fair;
   DROP INDEX taskheap_tasks_plain;
   CREATE INDEX taskheap_tasks_plain ON taskheap_tasks (queue, priority, run_at, id)
     WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL AND fair_group IS NULL AND fair_tag IS NULL;
   CREATE INDEX taskheap_tasks_fair_due ON taskheap_tasks (run_at, id)
     WHERE state = 'waiting' AND fair_group IS NOT NULL AND fair_tag IS NULL AND serial IS NULL AND rate_key IS NULL;
   CREATE INDEX taskheap_tasks_fair_turns ON taskheap_tasks (queue, priority DESC, fair_tag, id) WHERE state = 'waiting' AND fair_tag IS NOT NULL;
   CREATE TABLE taskheap_fair_groups (queue TEXT NOT NULL, grp TEXT NOT NULL, next REAL NOT NULL, PRIMARY KEY (queue, grp));
   CREATE TABLE taskheap_fair_queues (queue TEXT PRIMARY KEY, virtual REAL NOT NULL DEFAULT 0);
   CREATE TRIGGER taskheap_fair_turn AFTER UPDATE ON taskheap_tasks WHEN OLD.fair_tag IS NOT NULL AND NEW.fair_tag IS OLD.fair_tag
   BEGIN UPDATE taskheap_tasks SET fair_tag = NULL WHERE id = NEW.id; END;`,
  },
  {
    // Version 11: steps (docs/steps.md). A task's step record and the topic it waits on; messages
    // sent to tasks, each marked with the receive that took it (its place among the run's step
    // calls), and gone with their task.
    version: 11,
    sql: `ALTER TABLE taskheap_tasks ADD COLUMN steps TEXT;
   ALTER TABLE taskheap_tasks ADD COLUMN waiting_on TEXT;
   CREATE TABLE taskheap_messages (id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL, topic TEXT NOT NULL, body TEXT NOT NULL,
     sent_at INTEGER NOT NULL, taken_by INTEGER);
   CREATE INDEX taskheap_messages_task ON taskheap_messages (task_id, topic, id);
   CREATE TRIGGER taskheap_messages_gone AFTER DELETE ON taskheap_tasks
   BEGIN DELETE FROM taskheap_messages WHERE task_id = OLD.id; END;`,
  },
  {
    // Version 12: a change of the PostgreSQL schema only (one index of plain waiting tasks); one
    // version number for both stores.
    version: 12,
    sql: `SELECT 1;`,
  },
  {
    // Version 13: a change of the PostgreSQL schema only (flow edges without foreign keys: this
    // file's edges never had any, a trigger deletes them with their tasks).
    version: 13,
    sql: `SELECT 1;`,
  },
  {
    // Version 14: a change of the PostgreSQL schema only (the mark of a task another process waits
    // for: here one process owns the file, and its worker knows its own waiters).
    version: 14,
    sql: `SELECT 1;`,
  },
];

/**
 * The version number in one row: created (if missing) before any migration
 * runs, so a file of any version, or none, can be read the same way.
 */
export const META = `CREATE TABLE IF NOT EXISTS taskheap_meta (version INTEGER NOT NULL)`;

/** The schema's SQL, one entry per version: entry N-1 migrates version N-1 to N. */
export const MIGRATION_SQL: readonly string[] = MIGRATIONS.map((migration) => migration.sql);

/** The statements of the version row. */
export const VERSION_SQL = {
  createMeta: META,
  readVersion: `SELECT version FROM taskheap_meta`,
  insertVersion: `INSERT INTO taskheap_meta (version) VALUES (?)`,
  updateVersion: `UPDATE taskheap_meta SET version = ?`,
} as const;

/**
 * Brings the open file to SCHEMA_VERSION: the version row made if missing,
 * then the versions past the file's, in one transaction. A file of a newer
 * version is refused (SchemaVersionError).
 */
export function migrate(db: Database, prepare: Prepare): void {
  db.exec(VERSION_SQL.createMeta);
  const row = prepare(VERSION_SQL.readVersion).get() as { version: number } | undefined;
  const found = row?.version ?? 0;
  if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
  db.transaction(() => {
    for (let version = found; version < SCHEMA_VERSION; version++) db.exec(MIGRATION_SQL[version]!);
    if (row === undefined) prepare(VERSION_SQL.insertVersion).run(SCHEMA_VERSION);
    else prepare(VERSION_SQL.updateVersion).run(SCHEMA_VERSION);
  })();
}
