// Steps on PostgreSQL (docs/steps.md): a task's step record written while
// its owner holds it, a message taken for a `ctx.receive()` (the same one
// again for the same receive, should the run have stopped before its record
// was written), a message sent (a task waiting on its topic due at once,
// announced on WAKE), and the settle of suspended runs: waiting until their
// wake-up time, the attempt given back, their queue slots freed, their
// serial places kept (as a retry's).
import { LeaseLostError } from '../errors.js';
import {
  UNFINISHED_SQL,
  type Outcome,
  type QueryClient,
  type RecordStepsParams,
  type SendParams,
  type TakeMessageParams,
} from '../store.js';
import type { Connection } from './connection.js';
import { WAKE } from './listener.js';
import { freeSlots } from './limits.js';
import { millis, ms, tables } from './tables.js';

/** The statements of steps and messages for tables in `schema` (undefined: the search_path). */
export function stepStatements(schema: string | undefined) {
  const { t, T, Q } = tables(schema);
  const S = t('taskheap_messages');
  /** SQL: the earliest of `cte`'s run_at announced on WAKE ($prefix) if it has rows. */
  const wake = (cte: string, prefix: string) =>
    `SELECT pg_notify('${WAKE}', ${prefix} || ${ms('MIN(run_at)')}::bigint::text) FROM ${cte} HAVING count(*) > 0`;
  return {
    /** Task $1's step record $3, while $2 holds it; a row if it wrote. */
    recordSteps: `UPDATE ${T} SET steps = $3, updated_at = now() WHERE id = $1 AND locked_by = $2 AND state = 'running' RETURNING 1`,
    /** The message receive $4 took before, else the oldest untaken one on topic $3 of task $1 (held by $2); marked taken by it. */
    takeMessage: `UPDATE ${S} AS m SET taken_by = $4 WHERE m.id = (
        SELECT n.id FROM ${S} AS n JOIN ${T} AS t ON t.id = n.task_id
        WHERE n.task_id = $1 AND n.topic = $3 AND (n.taken_by IS NULL OR n.taken_by = $4) AND t.locked_by = $2 AND t.state = 'running'
        ORDER BY n.taken_by IS NULL, n.id LIMIT 1 FOR UPDATE OF n)
      RETURNING m.body`,
    /** A message $4 on topic $3 for the unfinished task with id $1 or key $2; it is due now if it waits on the topic. */
    send: `WITH target AS (SELECT id FROM ${T}
          WHERE ($1::bigint IS NOT NULL AND id = $1 OR $1::bigint IS NULL AND key = $2) AND state IN ${UNFINISHED_SQL}),
        kept AS (INSERT INTO ${S} (task_id, topic, body) SELECT id, $3, $4 FROM target RETURNING task_id),
        woke AS (UPDATE ${T} AS t SET run_at = now(), waiting_on = NULL, updated_at = now() FROM kept
          WHERE t.id = kept.task_id AND t.state = 'waiting' AND t.waiting_on = $3 AND t.run_at > now() RETURNING t.run_at)
      SELECT (SELECT count(*) FROM kept) > 0 AS sent, (${wake('woke', '$5')}) AS woke`,
    /** Suspended runs of owner $5: ids $1, due $2 ms after now, records $3, topics waited on $4. */
    suspend: `WITH u AS (SELECT * FROM unnest($1::bigint[], $2::float8[], $3::text[], $4::text[]) AS u(id, delay, steps, waiting_on)),
        done AS (UPDATE ${T} AS t SET state = 'waiting', attempts = t.attempts - 1, steps = u.steps, waiting_on = u.waiting_on,
            run_at = now() + ${millis('u.delay')}, locked_by = NULL, locked_until = NULL, updated_at = now()
          FROM u WHERE t.id = u.id AND t.locked_by = $5 AND t.state = 'running'
          RETURNING t.id, t.queue, t.run_at),
        ${freeSlots(Q, 'done')}
      ${wake('done', '$6')}`,
    /**
     * After a suspension committed, with a snapshot that sees every message
     * sent before it: tasks $1 waiting on a topic whose message came while
     * they ran, due now. (A message sent after this finds them waiting.)
     */
    wakeSuspended: `WITH woke AS (UPDATE ${T} AS t SET run_at = now(), waiting_on = NULL, updated_at = now()
          WHERE t.id = ANY($1::bigint[]) AND t.state = 'waiting' AND t.waiting_on IS NOT NULL AND t.run_at > now()
            AND EXISTS (SELECT 1 FROM ${S} AS m WHERE m.task_id = t.id AND m.topic = t.waiting_on AND m.taken_by IS NULL)
          RETURNING t.run_at)
      ${wake('woke', '$2')}`,
  };
}

type StepStatements = ReturnType<typeof stepStatements>;

/** Writes the step record of task `id` while `owner` holds it; false if it does not. */
export async function recordSteps(db: Connection, sql: StepStatements, { owner, id, steps }: RecordStepsParams): Promise<boolean> {
  const { rows } = await db.query(sql.recordSteps, [id, owner, steps]);
  return rows.length > 0;
}

/**
 * ctx.transactionStep(): `body` in a transaction, then task `id`'s step
 * record (`steps()`, as `body` left it) written in it while `owner` holds the
 * task, so the step's writes and its record commit together; rolled back
 * with LeaseLostError if the task is no longer ours.
 */
export function recordStepsWithin(
  db: Connection,
  sql: StepStatements,
  owner: string,
  id: number,
  body: (client: QueryClient) => Promise<void>,
  steps: () => string,
): Promise<void> {
  return db.transaction(async (client) => {
    await body(client);
    const { rows } = await client.query(sql.recordSteps, [id, owner, steps()]);
    if (rows.length === 0) throw new LeaseLostError(id);
  });
}

/** The message for `position`'s receive (JSON), marked taken; undefined if none. */
export async function takeMessage(db: Connection, sql: StepStatements, params: TakeMessageParams): Promise<string | undefined> {
  const { owner, id, topic, position } = params;
  const { rows } = await db.query<{ body: string }>(sql.takeMessage, [id, owner, topic, position]);
  return rows[0]?.body;
}

/** Keeps a message for an unfinished task (announcing it on WAKE if that makes the task due); whether there was one. */
export async function send(db: Connection, sql: StepStatements, prefix: string, { to, topic, message }: SendParams): Promise<boolean> {
  const [id, key] = typeof to === 'number' ? [to, null] : [null, to.key];
  const { rows } = await db.query<{ sent: boolean }>(sql.send, [id, key, topic, message, prefix]);
  return rows[0]?.sent === true;
}

/** Settles the suspended runs of a batch (`kind: 'suspend'`), then wakes those whose message came while they ran. */
export async function suspend(
  db: Connection,
  sql: StepStatements,
  prefix: string,
  owner: string,
  outcomes: readonly Outcome[],
): Promise<void> {
  const suspended = outcomes.filter((outcome) => outcome.kind === 'suspend');
  if (suspended.length === 0) return;
  await db.query(sql.suspend, [
    suspended.map((o) => o.id),
    suspended.map((o) => o.delay),
    suspended.map((o) => o.steps),
    suspended.map((o) => o.waitingOn),
    owner,
    prefix,
  ]);
  const waiting = suspended.filter((o) => o.waitingOn !== null).map((o) => o.id);
  if (waiting.length > 0) await db.query(sql.wakeSuspended, [waiting, prefix]);
}
