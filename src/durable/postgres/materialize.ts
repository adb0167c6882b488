// A claim's first step when recurring jobs are due: their occurrences become
// tasks (one row per job and time, whichever process gets there first, by
// the unique key) and the jobs move on, in the claim's transaction, decided
// by the server's clock under each job's misfire and overlap policies.
import type { DueJob, JobAdvance } from '../store.js';
import { toDueJob, type DueJobRow } from '../rows.js';
import type { PgPoolClient } from './pg.js';
import type { Statements } from './sql.js';

type Advance = (job: DueJob, now: number, running: boolean) => JobAdvance;

/** Turns due recurring jobs into occurrence tasks; part of the claim's transaction. @internal */
export async function materialize(client: PgPoolClient, sql: Statements, advance: Advance): Promise<void> {
  const { rows: due } = await client.query<DueJobRow & { now: number }>(sql.dueJobs);
  if (due.length === 0) return;
  // The server's now: which occurrences were missed is decided by the one shared clock.
  const now = Number(due[0]!.now);
  const { rows: busy } = await client.query<{ job_key: string }>(sql.runningJobs, [due.map((job) => job.key)]);
  const running = new Set(busy.map((row) => row.job_key));
  const occurrences = {
    name: [] as string[],
    payload: [] as string[],
    at: [] as number[],
    maxAttempts: [] as number[],
    options: [] as string[],
    jobKey: [] as string[],
  };
  const updates = {
    key: [] as string[],
    next: [] as (number | null)[],
    remaining: [] as (number | null)[],
    state: [] as string[],
    added: [] as number[],
  };
  for (const row of due) {
    const job = toDueJob(row);
    const plan = advance(job, now, running.has(job.key));
    const maxAttempts = (JSON.parse(job.options) as { retry?: { attempts: number } }).retry?.attempts ?? 1;
    for (const at of plan.occurrences) {
      occurrences.name.push(job.name);
      occurrences.payload.push(job.payload);
      occurrences.at.push(at);
      occurrences.maxAttempts.push(maxAttempts);
      occurrences.options.push(job.options);
      occurrences.jobKey.push(job.key);
    }
    updates.key.push(job.key);
    updates.next.push(plan.nextRunAt);
    updates.remaining.push(plan.remaining);
    updates.state.push(plan.nextRunAt === null ? 'done' : 'scheduled');
    updates.added.push(plan.occurrences.length);
  }
  if (occurrences.at.length > 0) {
    await client.query(sql.insertOccurrences, [
      occurrences.name,
      occurrences.payload,
      occurrences.at,
      occurrences.maxAttempts,
      occurrences.options,
      occurrences.jobKey,
    ]);
  }
  await client.query(sql.advanceJobs, [updates.key, updates.next, updates.remaining, updates.state, updates.added]);
}
