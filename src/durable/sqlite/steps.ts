// Steps on SQLite (docs/steps.md), each in the caller's transaction: a task's
// step record written while its owner holds it, a message taken for a
// `ctx.receive()` (the same one again for the same receive, should the run
// have stopped before its record was written), and a message sent, which
// makes a task waiting on its topic due at once.
import { UNFINISHED_SQL as UNFINISHED, type RecordStepsParams, type SendParams, type TakeMessageParams } from '../store.js';
import type { Prepare } from './driver.js';

/** The statements of steps and messages. */
const STEPS_SQL = {
  record: `UPDATE taskheap_tasks SET steps = @steps, updated_at = @at WHERE id = @id AND locked_by = @owner AND state = 'running'`,
  /** The message receive @position took before, else the oldest untaken one on the topic; marked taken by it. */
  take: `UPDATE taskheap_messages SET taken_by = @position WHERE id = (
      SELECT m.id FROM taskheap_messages AS m JOIN taskheap_tasks AS t ON t.id = m.task_id
      WHERE m.task_id = @id AND m.topic = @topic AND (m.taken_by IS NULL OR m.taken_by = @position)
        AND t.locked_by = @owner AND t.state = 'running'
      ORDER BY m.taken_by IS NULL, m.id LIMIT 1)
    RETURNING body`,
  byId: `SELECT id FROM taskheap_tasks WHERE id = ? AND state IN ${UNFINISHED}`,
  byKey: `SELECT id FROM taskheap_tasks WHERE key = ? AND state IN ${UNFINISHED}`,
  keep: `INSERT INTO taskheap_messages (task_id, topic, body, sent_at) VALUES (?, ?, ?, ?)`,
  /** A task suspended waiting on the topic: due now. */
  wake: `UPDATE taskheap_tasks SET run_at = @now, waiting_on = NULL, updated_at = @at
    WHERE id = @id AND state = 'waiting' AND waiting_on = @topic AND run_at > @now`,
} as const;

/** Writes the step record of task `id` while `owner` holds it; false if it does not. */
export function recordSteps(prepare: Prepare, { owner, id, steps }: RecordStepsParams, at: number): boolean {
  return Number(prepare(STEPS_SQL.record).run({ steps, at, id, owner }).changes) > 0;
}

/** The message for `position`'s receive (JSON), marked taken; undefined if none. */
export function takeMessage(prepare: Prepare, { owner, id, topic, position }: TakeMessageParams): string | undefined {
  const row = prepare(STEPS_SQL.take).get({ owner, id, topic, position }) as { body: string } | undefined;
  return row?.body;
}

/** Keeps a message for an unfinished task; whether there was one, and whether it is due now (the caller wakes the claimer). */
export function send(prepare: Prepare, { to, topic, message, now }: SendParams, at: number): { sent: boolean; woke: boolean } {
  const row = (typeof to === 'number' ? prepare(STEPS_SQL.byId).get(to) : prepare(STEPS_SQL.byKey).get(to.key)) as
    | { id: number }
    | undefined;
  if (row === undefined) return { sent: false, woke: false };
  prepare(STEPS_SQL.keep).run(row.id, topic, message, now);
  const woke = Number(prepare(STEPS_SQL.wake).run({ now, at, id: row.id, topic }).changes) > 0;
  return { sent: true, woke };
}
