// The PostgreSQL schema, one block of SQL per version: what a database at
// version N - 1 runs to reach version N. A fresh database runs them all, in
// order; an older one runs those past its version (migrate(), at the end).
// Released blocks are never edited: a change is a new version at the end
// (so their SQL comments name the files of their release: sql.ts's
// statements are now in the role files, claim-sql.ts's in claim.ts).
// test/durable/schema.test.ts compares the schema they build with a reviewed
// snapshot, and test/durable/upgrade.test.ts upgrades every earlier version.
//
// The tables may live in a schema of the user's choice: every table and
// index name is written `:SCHEMA.name`, which `inSchema()` turns into
// `"the schema".name`, or a bare `name` (the connection's search_path).

import { SchemaVersionError } from '../errors.js';
import { SCHEMA_VERSION } from '../store.js';
import type { Listener } from './listener.js';
import type { PgPoolClient } from './pg.js';
import { quote, tables } from './tables.js';

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
    // Serial groups and priorities (docs/limits.md). The waiting index leads with
    // priority, walked one priority level at a time (until version 12);
    // a partial index finds the head of a serial group; a key row exists only
    // while a task holds the key (see taskheap_serial_keys in docs/stores.md, "Schema").
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
  {
    // Named queues (docs/queues.md). Every task is in one (the constant default
    // costs no table rewrite). The claim walks the waiting tasks queue by
    // queue (the queue-leading index), so a paused or full queue's tasks are
    // never read; a queue row holds the settings shared by every process
    // and, for a queue with a global concurrency, how many of its tasks run
    // (updated under the row's lock by claims and outcomes).
    version: 5,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN queue text NOT NULL DEFAULT 'default';
      CREATE INDEX taskheap_tasks_queue_waiting ON :SCHEMA.taskheap_tasks (queue, priority, run_at, id) WHERE state = 'waiting';
      CREATE TABLE :SCHEMA.taskheap_queues (
        name text PRIMARY KEY,
        paused boolean NOT NULL DEFAULT false,
        global_concurrency integer CHECK (global_concurrency > 0),
        running integer NOT NULL DEFAULT 0,
        granted integer NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT now()
      );`,
  },
  {
    // Limits that hold across every process (docs/limits.md). One row per limit:
    // a concurrency group (`serial` is the key with lim 1; `holders` are the
    // tasks holding its slots, from their first start to their final state)
    // or a rate bucket (`interval_ms`; `starts`/`counts`: how many tasks
    // started at each claim's time within the window; key '' is the
    // scheduler-wide bucket). Rows are made when a task names the limit, so
    // a claim only locks and updates them. The claim walks these rows, not
    // the tasks behind them: keyed tasks leave the plain waiting index, and
    // each kind has its own (see claimSql in claim.ts). `started_at`: the
    // database's time of the task's last start. A queue's rate is a bucket on
    // its row (`rate_limit` per `rate_interval_ms`; `rate_starts`/`rate_counts`
    // as a limit row's starts), taken by the claim that locks the row.
    //
    // Flows (docs/flows.md): a task may depend on others. A task
    // with unfinished dependencies is `blocked`, a state no claim reads, so
    // claims cost what they did. `taskheap_deps` holds the edges (the
    // dependent, the dependency, its failure rule, whether the dependent counted
    // it done); the task row holds `pending_deps` (edges not counted),
    // `has_dependents` (whether the trigger has anything to do), `flow_id`
    // (the id of its flow's first task) and `failed_dep` (the task whose
    // failure sank it, so that retrying that task revives it).
    //
    // The trigger below fires only for a task with dependents that enters or
    // leaves a final state, whatever statement does it (settle, complete,
    // cancel, the claim that fails an expired lease, requeue), in that
    // statement: the last dependency's outcome makes the dependent `waiting`
    // and wakes the workers (as a freed serial group does), with no polling.
    // Sinking a dependent (`'fail'` rule) sinks its closure in one statement,
    // so a long chain does not nest triggers. Its NOTIFY payloads name the
    // tables' schema (`<schema>:<ms>`), which a store without a `schema`
    // option also accepts (listener.ts); the function's text names no schema
    // but its tables' (a store without the option migrates with its
    // current_schema() spelled out), so every schema's function reads alike.
    version: 6,
    sql: `
      CREATE TABLE :SCHEMA.taskheap_limits (
        kind text NOT NULL CHECK (kind IN ('concurrency', 'rate')),
        key text NOT NULL,
        lim integer NOT NULL CHECK (lim >= 1),
        interval_ms float8,
        holders bigint[] NOT NULL DEFAULT '{}',
        starts timestamptz[] NOT NULL DEFAULT '{}',
        counts integer[] NOT NULL DEFAULT '{}',
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (kind, key)
      );
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN rate_key text, ADD COLUMN started_at timestamptz;
      UPDATE :SCHEMA.taskheap_tasks SET rate_key = options::jsonb #>> '{rate,key}'
        WHERE state IN ('waiting', 'running') AND options::jsonb ? 'rate';
      INSERT INTO :SCHEMA.taskheap_limits (kind, key, lim, holders)
        SELECT 'concurrency', key, 1, ARRAY[held_by] FROM :SCHEMA.taskheap_serial_keys;
      INSERT INTO :SCHEMA.taskheap_limits (kind, key, lim)
        SELECT DISTINCT 'concurrency', serial, 1 FROM :SCHEMA.taskheap_tasks WHERE serial IS NOT NULL AND state IN ('waiting', 'running')
        ON CONFLICT DO NOTHING;
      INSERT INTO :SCHEMA.taskheap_limits (kind, key, lim, interval_ms)
        SELECT DISTINCT ON (rate_key) 'rate', rate_key, (options::jsonb #>> '{rate,limit}')::int, (options::jsonb #>> '{rate,interval}')::float8
        FROM :SCHEMA.taskheap_tasks WHERE rate_key IS NOT NULL ORDER BY rate_key, id DESC;
      DROP TABLE :SCHEMA.taskheap_serial_keys;
      -- What version 4's table showed: which task holds a slot of which key (read only).
      CREATE VIEW :SCHEMA.taskheap_serial_keys AS
        SELECT key, unnest(holders) AS held_by FROM :SCHEMA.taskheap_limits WHERE kind = 'concurrency';
      DROP INDEX :SCHEMA.taskheap_tasks_waiting;
      CREATE INDEX taskheap_tasks_waiting ON :SCHEMA.taskheap_tasks (priority, run_at, id)
        WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL;
      DROP INDEX :SCHEMA.taskheap_tasks_queue_waiting;
      CREATE INDEX taskheap_tasks_queue_waiting ON :SCHEMA.taskheap_tasks (queue, priority, run_at, id)
        WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL;
      CREATE INDEX taskheap_tasks_rate ON :SCHEMA.taskheap_tasks (rate_key, priority DESC, run_at, id)
        WHERE state = 'waiting' AND rate_key IS NOT NULL AND serial IS NULL;
      -- Whether a bucket is in use (retention of limit rows: sql.ts pruneLimits).
      CREATE INDEX taskheap_tasks_rated ON :SCHEMA.taskheap_tasks (rate_key)
        WHERE state IN ('waiting', 'running') AND rate_key IS NOT NULL;
      -- Claimed beyond the free workers and not started yet: a lease that runs out does not count against it.
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN prefetched boolean NOT NULL DEFAULT false;
      ALTER TABLE :SCHEMA.taskheap_queues ADD COLUMN rate_limit integer CHECK (rate_limit >= 1), ADD COLUMN rate_interval_ms float8,
        ADD COLUMN rate_starts timestamptz[], ADD COLUMN rate_counts integer[];
      -- ctx.progress() (JSON) and the latest ctx.log() lines (a JSON array), written in batches.
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN progress text, ADD COLUMN logs text;
      -- Listings page by due time cut to ms, then id (sql.ts listTasks).
      CREATE INDEX taskheap_tasks_listing ON :SCHEMA.taskheap_tasks (date_trunc('milliseconds', run_at AT TIME ZONE 'UTC'), id);
      -- The server the stores reach, and since when (claim-sql.ts serverUp): a promoted standby's start time predates its promotion.
      ALTER TABLE :SCHEMA.taskheap_meta ADD COLUMN server_started timestamptz, ADD COLUMN server_seen timestamptz;

      CREATE TABLE :SCHEMA.taskheap_deps (
        task_id bigint NOT NULL REFERENCES :SCHEMA.taskheap_tasks (id) ON DELETE CASCADE,
        dep_id bigint NOT NULL REFERENCES :SCHEMA.taskheap_tasks (id) ON DELETE CASCADE,
        ord integer NOT NULL,
        on_failure text NOT NULL DEFAULT 'fail' CHECK (on_failure IN ('fail', 'continue', 'ignore')),
        counted boolean NOT NULL DEFAULT false,
        PRIMARY KEY (task_id, dep_id)
      );
      CREATE INDEX taskheap_deps_dep ON :SCHEMA.taskheap_deps (dep_id);
      ALTER TABLE :SCHEMA.taskheap_tasks DROP CONSTRAINT taskheap_tasks_state_check,
        ADD CONSTRAINT taskheap_tasks_state_check
          CHECK (state IN ('blocked', 'waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled')) NOT VALID,
        ADD COLUMN flow_id bigint, ADD COLUMN pending_deps integer NOT NULL DEFAULT 0,
        ADD COLUMN has_dependents boolean NOT NULL DEFAULT false, ADD COLUMN failed_dep bigint;
      CREATE INDEX taskheap_tasks_flow ON :SCHEMA.taskheap_tasks (flow_id) WHERE flow_id IS NOT NULL;
      CREATE INDEX taskheap_tasks_failed_dep ON :SCHEMA.taskheap_tasks (failed_dep) WHERE failed_dep IS NOT NULL;
      CREATE FUNCTION :SCHEMA.taskheap_deps_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        woken timestamptz;
        ended text;
        back bigint[];
      BEGIN
        IF NEW.state IN ('succeeded', 'failed', 'timed-out', 'cancelled') THEN
          -- Dependents this outcome lets through count it; the one counting its last becomes waiting.
          WITH edges AS (UPDATE :SCHEMA.taskheap_deps SET counted = true
              WHERE dep_id = NEW.id AND NOT counted AND (NEW.state = 'succeeded' OR on_failure <> 'fail') RETURNING task_id),
            released AS (UPDATE :SCHEMA.taskheap_tasks AS t SET pending_deps = t.pending_deps - 1,
                state = CASE WHEN t.pending_deps = 1 AND t.state = 'blocked' THEN 'waiting' ELSE t.state END, updated_at = now()
              FROM edges WHERE t.id = edges.task_id
              RETURNING t.run_at, t.pending_deps = 0 AND t.state = 'waiting' AS now_waiting)
          SELECT min(run_at) INTO woken FROM released WHERE now_waiting;
          IF woken IS NOT NULL THEN
            PERFORM pg_notify('taskheap_wake', TG_TABLE_SCHEMA || ':' || (extract(epoch from woken) * 1000)::bigint::text);
          END IF;
          IF NEW.state <> 'succeeded' THEN
            -- Blocked dependents by the 'fail' rule, and theirs in turn, are sunk at once.
            WITH RECURSIVE doomed(id) AS (
                SELECT d.task_id FROM :SCHEMA.taskheap_deps AS d JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.dep_id = NEW.id AND d.on_failure = 'fail' AND t.state = 'blocked'
                UNION
                SELECT d.task_id FROM doomed JOIN :SCHEMA.taskheap_deps AS d ON d.dep_id = doomed.id
                  JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.on_failure = 'fail' AND t.state = 'blocked'),
              sunk AS (UPDATE :SCHEMA.taskheap_tasks AS t
                SET state = CASE WHEN NEW.state = 'cancelled' THEN 'cancelled' ELSE 'failed' END,
                  failed_dep = COALESCE(NEW.failed_dep, NEW.id),
                  last_error = 'DependencyError: dependency ' || COALESCE(NEW.failed_dep, NEW.id)
                    || CASE WHEN NEW.state = 'cancelled' THEN ' was cancelled' ELSE ' failed' END,
                  updated_at = now()
                FROM doomed WHERE t.id = doomed.id AND t.state = 'blocked' RETURNING t.id)
            SELECT string_agg(id::text, ',') INTO ended FROM sunk;
            IF ended IS NOT NULL THEN
              PERFORM pg_notify('taskheap_done', TG_TABLE_SCHEMA || ':' || ended);
            END IF;
          END IF;
        ELSE
          -- Back from a final state (retry): what it let through and has not started counts it again,
          -- and what it sank is blocked again (its edge from the sinking task was never counted).
          -- (A task it sank, or that is being revived with it, counts it again too: it has not started either.)
          UPDATE :SCHEMA.taskheap_tasks AS t SET pending_deps = t.pending_deps + 1,
              state = CASE WHEN t.state = 'waiting' THEN 'blocked' ELSE t.state END, updated_at = now()
            FROM :SCHEMA.taskheap_deps AS d
            WHERE d.dep_id = NEW.id AND d.counted AND t.id = d.task_id AND t.attempts = 0 AND t.state <> 'running';
          UPDATE :SCHEMA.taskheap_deps AS d SET counted = false FROM :SCHEMA.taskheap_tasks AS t
            WHERE d.dep_id = NEW.id AND d.counted AND t.id = d.task_id AND t.attempts = 0 AND t.state <> 'running';
          WITH revived AS (UPDATE :SCHEMA.taskheap_tasks SET state = 'blocked', failed_dep = NULL, last_error = NULL, updated_at = now()
              WHERE failed_dep = NEW.id AND state IN ('failed', 'cancelled') AND attempts = 0 RETURNING id)
          SELECT array_agg(id) INTO back FROM revived;
          IF back IS NOT NULL THEN
            -- A revived task that another failed 'fail' dependency still sinks is sunk again (the first in its order), with
            -- its blocked dependents by that rule: nothing is left blocked on a task that will not run.
            WITH RECURSIVE doomed(id, root, cancelled) AS (
                SELECT b.id, s.root, s.cancelled FROM unnest(back) AS b(id)
                  CROSS JOIN LATERAL (SELECT COALESCE(f.failed_dep, f.id) AS root, f.state = 'cancelled' AS cancelled
                    FROM :SCHEMA.taskheap_deps AS d JOIN :SCHEMA.taskheap_tasks AS f ON f.id = d.dep_id
                    WHERE d.task_id = b.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled') ORDER BY d.ord LIMIT 1) AS s
                UNION
                SELECT d.task_id, doomed.root, doomed.cancelled FROM doomed JOIN :SCHEMA.taskheap_deps AS d ON d.dep_id = doomed.id
                  JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.on_failure = 'fail' AND t.state = 'blocked'),
              one AS (SELECT DISTINCT ON (id) id, root, cancelled FROM doomed ORDER BY id)
            UPDATE :SCHEMA.taskheap_tasks AS t SET state = CASE WHEN one.cancelled THEN 'cancelled' ELSE 'failed' END, failed_dep = one.root,
              last_error = 'DependencyError: dependency ' || one.root || CASE WHEN one.cancelled THEN ' was cancelled' ELSE ' failed' END,
              updated_at = now()
            FROM one WHERE t.id = one.id AND t.state = 'blocked';
          END IF;
        END IF;
        RETURN NULL;
      END $fn$;
      CREATE TRIGGER taskheap_deps_changed AFTER UPDATE OF state ON :SCHEMA.taskheap_tasks FOR EACH ROW
        WHEN (NEW.has_dependents AND (OLD.state IN ('succeeded', 'failed', 'timed-out', 'cancelled'))
          IS DISTINCT FROM (NEW.state IN ('succeeded', 'failed', 'timed-out', 'cancelled')))
        EXECUTE FUNCTION :SCHEMA.taskheap_deps_changed();`,
  },
  {
    // No caller's transaction holds a row a worker writes. A flow
    // added in a caller's transaction used to lock the stored tasks it depends
    // on until that transaction ended (so that their outcome could not slip
    // between its read and its new edges), and a worker renewing or settling a
    // running one waited for it, with every other task of its batch. Now the
    // edge to a task outside the flow is marked `external` and the add takes
    // no lock that a worker's write waits for (the edge's foreign key takes a
    // key-share lock, which no update of a task conflicts with); at the commit
    // of the transaction that added it, a deferred trigger locks the dependency
    // for that instant, reads it as it is then, and applies to its dependents
    // what its state means (taskheap_dep_moved: the trigger's work, idempotent,
    // so an outcome the other side already applied changes nothing). Whichever
    // of the two commits second sees the other: an outcome committed before
    // the add's commit is applied by the commit trigger, one committed after it
    // by the state trigger, which then sees the new edges.
    version: 7,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_deps ADD COLUMN external boolean NOT NULL DEFAULT false;
      CREATE FUNCTION :SCHEMA.taskheap_dep_moved(moved_id bigint, moved_state text, moved_failed bigint, tables text)
      RETURNS void LANGUAGE plpgsql AS $fn$
      DECLARE
        woken timestamptz;
        ended text;
        back bigint[];
      BEGIN
        IF moved_state IN ('succeeded', 'failed', 'timed-out', 'cancelled') THEN
          -- Dependents this outcome lets through count it; the one counting its last becomes waiting.
          WITH edges AS (UPDATE :SCHEMA.taskheap_deps SET counted = true
              WHERE dep_id = moved_id AND NOT counted AND (moved_state = 'succeeded' OR on_failure <> 'fail') RETURNING task_id),
            released AS (UPDATE :SCHEMA.taskheap_tasks AS t SET pending_deps = t.pending_deps - 1,
                state = CASE WHEN t.pending_deps = 1 AND t.state = 'blocked' THEN 'waiting' ELSE t.state END, updated_at = now()
              FROM edges WHERE t.id = edges.task_id
              RETURNING t.run_at, t.pending_deps = 0 AND t.state = 'waiting' AS now_waiting)
          SELECT min(run_at) INTO woken FROM released WHERE now_waiting;
          IF woken IS NOT NULL THEN
            PERFORM pg_notify('taskheap_wake', tables || ':' || (extract(epoch from woken) * 1000)::bigint::text);
          END IF;
          IF moved_state <> 'succeeded' THEN
            -- Blocked dependents by the 'fail' rule, and theirs in turn, are sunk at once.
            WITH RECURSIVE doomed(id) AS (
                SELECT d.task_id FROM :SCHEMA.taskheap_deps AS d JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.dep_id = moved_id AND d.on_failure = 'fail' AND t.state = 'blocked'
                UNION
                SELECT d.task_id FROM doomed JOIN :SCHEMA.taskheap_deps AS d ON d.dep_id = doomed.id
                  JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.on_failure = 'fail' AND t.state = 'blocked'),
              sunk AS (UPDATE :SCHEMA.taskheap_tasks AS t
                SET state = CASE WHEN moved_state = 'cancelled' THEN 'cancelled' ELSE 'failed' END,
                  failed_dep = COALESCE(moved_failed, moved_id),
                  last_error = 'DependencyError: dependency ' || COALESCE(moved_failed, moved_id)
                    || CASE WHEN moved_state = 'cancelled' THEN ' was cancelled' ELSE ' failed' END,
                  updated_at = now()
                FROM doomed WHERE t.id = doomed.id AND t.state = 'blocked' RETURNING t.id)
            SELECT string_agg(id::text, ',') INTO ended FROM sunk;
            IF ended IS NOT NULL THEN
              PERFORM pg_notify('taskheap_done', tables || ':' || ended);
            END IF;
          END IF;
        ELSE
          -- Back from a final state (retry): what it let through and has not started counts it again,
          -- and what it sank is blocked again (its edge from the sinking task was never counted).
          -- (A task it sank, or that is being revived with it, counts it again too: it has not started either.)
          UPDATE :SCHEMA.taskheap_tasks AS t SET pending_deps = t.pending_deps + 1,
              state = CASE WHEN t.state = 'waiting' THEN 'blocked' ELSE t.state END, updated_at = now()
            FROM :SCHEMA.taskheap_deps AS d
            WHERE d.dep_id = moved_id AND d.counted AND t.id = d.task_id AND t.attempts = 0 AND t.state <> 'running';
          UPDATE :SCHEMA.taskheap_deps AS d SET counted = false FROM :SCHEMA.taskheap_tasks AS t
            WHERE d.dep_id = moved_id AND d.counted AND t.id = d.task_id AND t.attempts = 0 AND t.state <> 'running';
          WITH revived AS (UPDATE :SCHEMA.taskheap_tasks SET state = 'blocked', failed_dep = NULL, last_error = NULL, updated_at = now()
              WHERE failed_dep = moved_id AND state IN ('failed', 'cancelled') AND attempts = 0 RETURNING id)
          SELECT array_agg(id) INTO back FROM revived;
          IF back IS NOT NULL THEN
            -- A revived task that another failed 'fail' dependency still sinks is sunk again (the first in its order), with
            -- its blocked dependents by that rule: nothing is left blocked on a task that will not run.
            WITH RECURSIVE doomed(id, root, cancelled) AS (
                SELECT b.id, s.root, s.cancelled FROM unnest(back) AS b(id)
                  CROSS JOIN LATERAL (SELECT COALESCE(f.failed_dep, f.id) AS root, f.state = 'cancelled' AS cancelled
                    FROM :SCHEMA.taskheap_deps AS d JOIN :SCHEMA.taskheap_tasks AS f ON f.id = d.dep_id
                    WHERE d.task_id = b.id AND d.on_failure = 'fail' AND f.state IN ('failed', 'timed-out', 'cancelled') ORDER BY d.ord LIMIT 1) AS s
                UNION
                SELECT d.task_id, doomed.root, doomed.cancelled FROM doomed JOIN :SCHEMA.taskheap_deps AS d ON d.dep_id = doomed.id
                  JOIN :SCHEMA.taskheap_tasks AS t ON t.id = d.task_id
                WHERE d.on_failure = 'fail' AND t.state = 'blocked'),
              one AS (SELECT DISTINCT ON (id) id, root, cancelled FROM doomed ORDER BY id)
            UPDATE :SCHEMA.taskheap_tasks AS t SET state = CASE WHEN one.cancelled THEN 'cancelled' ELSE 'failed' END, failed_dep = one.root,
              last_error = 'DependencyError: dependency ' || one.root || CASE WHEN one.cancelled THEN ' was cancelled' ELSE ' failed' END,
              updated_at = now()
            FROM one WHERE t.id = one.id AND t.state = 'blocked';
          END IF;
        END IF;
      END $fn$;
      CREATE OR REPLACE FUNCTION :SCHEMA.taskheap_deps_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM :SCHEMA.taskheap_dep_moved(NEW.id, NEW.state, NEW.failed_dep, TG_TABLE_SCHEMA);
        RETURN NULL;
      END $fn$;
      CREATE FUNCTION :SCHEMA.taskheap_deps_committed() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        dep record;
        tries integer := 0;
      BEGIN
        -- Locked for the commit's instant only: a statement ending it now waits for this commit, then sees the edge.
        -- Without waiting while it holds the dependencies locked before it: a worker's outcome batch ending two of
        -- them in the other order would deadlock with it. A worker's statement is short; after 5 s, wait.
        LOOP
          BEGIN
            IF tries < 500 THEN
              SELECT id, state, failed_dep, has_dependents INTO dep FROM :SCHEMA.taskheap_tasks WHERE id = NEW.dep_id
                FOR NO KEY UPDATE NOWAIT;
            ELSE
              SELECT id, state, failed_dep, has_dependents INTO dep FROM :SCHEMA.taskheap_tasks WHERE id = NEW.dep_id
                FOR NO KEY UPDATE;
            END IF;
            EXIT;
          EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            PERFORM pg_sleep(0.01);
          END;
        END LOOP;
        IF NOT FOUND THEN
          RETURN NULL;
        END IF;
        IF NOT dep.has_dependents THEN
          UPDATE :SCHEMA.taskheap_tasks SET has_dependents = true WHERE id = dep.id;
        END IF;
        PERFORM :SCHEMA.taskheap_dep_moved(dep.id, dep.state, dep.failed_dep, TG_TABLE_SCHEMA);
        RETURN NULL;
      END $fn$;
      CREATE CONSTRAINT TRIGGER taskheap_deps_committed AFTER INSERT ON :SCHEMA.taskheap_deps
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.external)
        EXECUTE FUNCTION :SCHEMA.taskheap_deps_committed();`,
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
      UPDATE :SCHEMA.${table} SET options = jsonb_set(options::jsonb #- '{${limit},key}', '{${limit},group}', options::jsonb #> '{${limit},key}')::text
        WHERE options LIKE '%"key"%' AND options::jsonb #> '{${limit},key}' IS NOT NULL;`,
        ),
      )
      .join(''),
  },
  {
    // Version 9 changes SQLite only (fair shares: a task's group and weight in columns the claim
    // reads); this store refuses `fair` (its capabilities say so).
    version: 9,
    sql: `SELECT 1;`,
  },
  {
    // Fair shares (fair.ts): a task's group and weight, kept from its options by a trigger (so no
    // insert or replace names them), and its turn (fair_tag) once it is due; a group's next turn
    // and a queue's virtual time in tables of their own. The plain waiting indexes leave shared
    // tasks out: the claim reads them by turn. No task has a share yet (the store refused them).
    version: 10,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN fair_group text, ADD COLUMN fair_weight float8 NOT NULL DEFAULT 1,
        ADD COLUMN fair_tag float8;
      CREATE TABLE :SCHEMA.taskheap_fair_groups (
        queue text NOT NULL,
        grp text NOT NULL,
        next float8 NOT NULL,
        step float8 NOT NULL,
        PRIMARY KEY (queue, grp)
      );
      CREATE TABLE :SCHEMA.taskheap_fair_queues (queue text PRIMARY KEY, virtual float8 NOT NULL DEFAULT 0);
      DROP INDEX :SCHEMA.taskheap_tasks_waiting;
      CREATE INDEX taskheap_tasks_waiting ON :SCHEMA.taskheap_tasks (priority, run_at, id)
        WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL AND fair_group IS NULL AND fair_tag IS NULL;
      DROP INDEX :SCHEMA.taskheap_tasks_queue_waiting;
      CREATE INDEX taskheap_tasks_queue_waiting ON :SCHEMA.taskheap_tasks (queue, priority, run_at, id)
        WHERE state = 'waiting' AND serial IS NULL AND rate_key IS NULL AND fair_group IS NULL AND fair_tag IS NULL;
      CREATE INDEX taskheap_tasks_fair_due ON :SCHEMA.taskheap_tasks (run_at, id)
        WHERE state = 'waiting' AND fair_group IS NOT NULL AND fair_tag IS NULL AND serial IS NULL AND rate_key IS NULL;
      CREATE INDEX taskheap_tasks_fair_turns ON :SCHEMA.taskheap_tasks (queue, priority DESC, fair_tag, id)
        WHERE state = 'waiting' AND fair_tag IS NOT NULL;
      -- The share from the options, on insert and when a replace changes them; a turn is lost by any
      -- change of its task but the claim's (which clears it) and the tagging's (which sets it).
      CREATE FUNCTION :SCHEMA.taskheap_fair_columns() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF TG_OP = 'INSERT' OR NEW.options IS DISTINCT FROM OLD.options THEN
          NEW.fair_group := NEW.options::jsonb #>> '{fair,group}';
          NEW.fair_weight := COALESCE((NEW.options::jsonb #>> '{fair,weight}')::float8, 1);
        END IF;
        IF TG_OP = 'UPDATE' AND NEW.fair_tag IS NOT DISTINCT FROM OLD.fair_tag THEN
          NEW.fair_tag := NULL;
        END IF;
        RETURN NEW;
      END $fn$;
      CREATE TRIGGER taskheap_fair_insert BEFORE INSERT ON :SCHEMA.taskheap_tasks
        FOR EACH ROW WHEN (NEW.options LIKE '%"fair"%') EXECUTE FUNCTION :SCHEMA.taskheap_fair_columns();
      CREATE TRIGGER taskheap_fair_update BEFORE UPDATE ON :SCHEMA.taskheap_tasks
        FOR EACH ROW WHEN ((OLD.fair_tag IS NOT NULL AND NEW.fair_tag IS NOT DISTINCT FROM OLD.fair_tag)
          OR (NEW.options IS DISTINCT FROM OLD.options AND (NEW.options LIKE '%"fair"%' OR OLD.fair_group IS NOT NULL)))
        EXECUTE FUNCTION :SCHEMA.taskheap_fair_columns();`,
  },
  {
    // Version 11: steps (docs/steps.md), as on SQLite: a task's step record and the topic it waits
    // on; messages sent to tasks, each marked with the receive that took it. (No foreign key: a
    // cascade would add a trigger to every task deleted; the statements that delete tasks take
    // their messages, inspect.ts.)
    version: 11,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN steps text, ADD COLUMN waiting_on text;
      CREATE TABLE :SCHEMA.taskheap_messages (
        id bigserial PRIMARY KEY,
        task_id bigint NOT NULL,
        topic text NOT NULL,
        body text NOT NULL,
        sent_at timestamptz NOT NULL DEFAULT now(),
        taken_by integer
      );
      CREATE INDEX taskheap_messages_task ON :SCHEMA.taskheap_messages (task_id, topic, id);`,
  },
  {
    // Version 12: the plain waiting tasks in one index, the queue-leading one. The claims walk its
    // (queue, priority) pairs (waitingPairs in tables.ts): with a second index of the same rows, on
    // a table not analyzed yet, the planner read all of them on every claim to find each queue in
    // the priority-leading one. One index entry less per task added, too.
    version: 12,
    sql: `
      DROP INDEX :SCHEMA.taskheap_tasks_waiting;`,
  },
  {
    // Version 13: the flow edges without foreign keys. Each key's ON DELETE CASCADE was a trigger
    // run once per task deleted, flows or not, whose query cost more than the delete itself (the
    // retention sweep and deleteTasks: 44 ms of server CPU per 1,000 rows against 20 without,
    // bench/NOTES.md). The statements that delete tasks take their edges (inspect.ts), as they
    // take their messages (version 11). The lock the key's check took on insert, which kept a
    // flow's stored dependency from deletion until the flow committed, the flow's read of it now
    // takes (FOR KEY SHARE, flows.ts); the commit trigger checks that the dependency is still
    // there, and fails the flow with the key's error code if it is not.
    version: 13,
    sql: `
      ALTER TABLE :SCHEMA.taskheap_deps DROP CONSTRAINT taskheap_deps_task_id_fkey, DROP CONSTRAINT taskheap_deps_dep_id_fkey;
      CREATE OR REPLACE FUNCTION :SCHEMA.taskheap_deps_committed() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        dep record;
        tries integer := 0;
      BEGIN
        -- Locked for the commit's instant only: a statement ending it now waits for this commit, then sees the edge.
        -- Without waiting while it holds the dependencies locked before it: a worker's outcome batch ending two of
        -- them in the other order would deadlock with it. A worker's statement is short; after 5 s, wait.
        LOOP
          BEGIN
            IF tries < 500 THEN
              SELECT id, state, failed_dep, has_dependents INTO dep FROM :SCHEMA.taskheap_tasks WHERE id = NEW.dep_id
                FOR NO KEY UPDATE NOWAIT;
            ELSE
              SELECT id, state, failed_dep, has_dependents INTO dep FROM :SCHEMA.taskheap_tasks WHERE id = NEW.dep_id
                FOR NO KEY UPDATE;
            END IF;
            EXIT;
          EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            PERFORM pg_sleep(0.01);
          END;
        END LOOP;
        IF NOT FOUND THEN
          RAISE EXCEPTION 'taskheap: task % was deleted before the flow that depends on it was committed', NEW.dep_id
            USING ERRCODE = 'foreign_key_violation';
        END IF;
        IF NOT dep.has_dependents THEN
          UPDATE :SCHEMA.taskheap_tasks SET has_dependents = true WHERE id = dep.id;
        END IF;
        PERFORM :SCHEMA.taskheap_dep_moved(dep.id, dep.state, dep.failed_dep, TG_TABLE_SCHEMA);
        RETURN NULL;
      END $fn$;`,
  },
  {
    // Version 14: a task somebody waits for (waitFor() in any process marks it before it ends): the
    // settle of a worker whose retention for the state is 0 keeps it (settle.ts), so the waiter
    // reads how it ended. Not indexed: the mark is a HOT update.
    version: 14,
    sql: `ALTER TABLE :SCHEMA.taskheap_tasks ADD COLUMN awaited boolean NOT NULL DEFAULT false;`,
  },
];

/**
 * The version number in one row: created (if missing) before any migration
 * runs, so a database of any version, or none, can be read the same way.
 */
export const META = `CREATE TABLE IF NOT EXISTS :SCHEMA.taskheap_meta (version integer NOT NULL)`;

/** `sql` with its names in `schema` (undefined: unqualified, for the connection's search_path). */
export function inSchema(sql: string, schema: string | undefined): string {
  return sql.replaceAll(':SCHEMA.', schema === undefined ? '' : `${quote(schema)}.`);
}

/** The statements of migrate() for tables in `schema` (undefined: the search_path). */
export function migrationStatements(schema: string | undefined) {
  const { M } = tables(schema);
  return {
    /** Entry \`v\` upgrades version \`v\` to \`v + 1\` (see migrations.ts). */
    migrations: MIGRATIONS.map((migration) => inSchema(migration.sql, schema)),
    /** Processes starting together migrate one at a time. */
    migrationLock: `SELECT pg_advisory_xact_lock(hashtext('taskheap:' || $1::text))`,
    createSchema: schema === undefined ? undefined : `CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`,
    createMeta: inSchema(META, schema),
    readVersion: `SELECT version FROM ${M}`,
    insertVersion: `INSERT INTO ${M} (version) VALUES ($1)`,
    updateVersion: `UPDATE ${M} SET version = $1`,
  };
}

/**
 * The migrations a store runs (migrate(), in its transaction): with a
 * \`schema\` option its own; without one, with the connection's
 * current_schema() spelled out, so that the flows trigger's function names
 * its tables whatever the search_path of the statement that fires it (see
 * version 6). The listener learns that schema: the trigger's
 * payloads name it.
 */
async function migrationsIn(
  client: PgPoolClient,
  schema: string | undefined,
  own: readonly string[],
  listener: Listener,
): Promise<readonly string[]> {
  const current = (await client.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]!.s;
  listener.ownSchema(current);
  return schema === undefined ? MIGRATIONS.map((m) => inSchema(m.sql, current)) : own;
}

/** The statements of migrate(). */
type MigrationStatements = ReturnType<typeof migrationStatements>;

/**
 * Creates the schema, or upgrades it from the version it is at, in the
 * transaction of `client`; processes starting together take turns (an
 * advisory lock). A database of a newer version is refused
 * (SchemaVersionError).
 */
export async function migrate(
  client: PgPoolClient,
  sql: MigrationStatements,
  schema: string | undefined,
  listener: Listener,
): Promise<void> {
  await client.query(sql.migrationLock, [schema ?? '']);
  if (sql.createSchema !== undefined) await client.query(sql.createSchema);
  await client.query(sql.createMeta);
  const { rows } = await client.query<{ version: number }>(sql.readVersion);
  const found = rows[0] === undefined ? 0 : Number(rows[0].version);
  if (found > SCHEMA_VERSION) throw new SchemaVersionError(found);
  // Flows: without a schema option, the trigger's function names its tables in the current schema.
  const migrations = await migrationsIn(client, schema, sql.migrations, listener);
  for (let version = found; version < SCHEMA_VERSION; version++) {
    const migration = migrations[version];
    if (migration === undefined) throw new Error(`taskheap's PostgreSQL store has no migration to schema version ${version + 1}`);
    await client.query(migration);
  }
  if (rows[0] === undefined) await client.query(sql.insertVersion, [SCHEMA_VERSION]);
  else if (found !== SCHEMA_VERSION) await client.query(sql.updateVersion, [SCHEMA_VERSION]);
}
