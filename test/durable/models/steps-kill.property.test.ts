// Steps against SIGKILL, on SQLite and PostgreSQL: random handlers of steps,
// sleeps and waits for a message (fast-check, seeded), some tasks sent a
// message before they start; the worker process is killed with SIGKILL at
// random moments three times and started again, then left to finish. Every
// task ends, succeeded, with what the model says (each step's place, the
// message its first wait took or null); every step finished at least once,
// and a step ran more than once only where a process died (at most the
// workers' count of steps per kill).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { compiled } from '../../compiled-fixture.js';
import type { PgServer } from '../pg-server.js';
import { closedAfterEach, schemaNamer, usePostgres } from '../use-postgres.js';

let server: PgServer;
usePostgres((started) => {
  server = started;
});
const opened = closedAfterEach<Scheduler>((scheduler) => scheduler.close());
const schemaName = schemaNamer('steps_kill_');

const KILLS = 3;
const WORKERS = 4;
type Call = 'step' | 'sleep' | 'receive';
// Each plan ends with a sleep, so every task outlives the first kill (500 ms against at most 400).
const PLANS = fc.array(
  fc.array(fc.constantFrom<Call>('step', 'sleep', 'receive'), { minLength: 1, maxLength: 5 }).map((plan) => [...plan, 'sleep' as const]),
  {
    minLength: 8,
    maxLength: 12,
  },
);

/** What a plan's task returns: each step its place; each receive the message (the first, if one was sent) or null. */
function model(plan: Call[], message: string | undefined): unknown[] {
  let first = true;
  return plan.flatMap<unknown>((call, place) => {
    if (call === 'step') return [place];
    if (call === 'sleep') return [];
    const got = first && message !== undefined ? message : null;
    first = false;
    return [got];
  });
}

function worker(args: string[]) {
  const child = spawn(process.execPath, [compiled('test/fixtures/steps-worker.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const started = async () => {
    for (let i = 0; !out.includes('started') && i < 3_000; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  };
  return { child, exited, started, output: () => out };
}

async function killedThrice(kind: 'sqlite' | 'postgres', seed: number) {
  const dir = mkdtempSync(join(tmpdir(), 'taskheap-steps-kill-'));
  const log = join(dir, 'steps.log');
  writeFileSync(log, '');
  const file = join(dir, 'store.db');
  const schema = schemaName();
  const where = kind === 'sqlite' ? file : server.url;
  const [plans] = fc.sample(PLANS, { numRuns: 1, seed });
  const [pauses] = fc.sample(fc.array(fc.integer({ min: 100, max: 400 }), { minLength: KILLS, maxLength: KILLS }), { numRuns: 1, seed });
  // Seeded by a producer that closes before the workers start (SQLite: one process owns the file at a time).
  const producer = new Scheduler({ store: kind === 'sqlite' ? sqliteStore(file) : postgresStore({ connectionString: where, schema }) });
  const ids: number[] = [];
  const messages = new Map<number, string>();
  for (const [i, plan] of plans!.entries()) {
    const { id } = await producer.schedule(Date.now(), 'plan', { payload: { plan }, key: `plan:${i}` });
    ids.push(id);
    if (i % 2 === 0) {
      messages.set(id, `hello ${id}`);
      await producer.send(id, 'm', `hello ${id}`);
    }
  }
  await producer.close();
  for (const pause of pauses!) {
    const w = worker([kind, where, schema, log]);
    await w.started();
    await new Promise((resolve) => setTimeout(resolve, pause));
    w.child.kill('SIGKILL');
    await w.exited;
  }
  // The kills came while the work was under way: each task ends with a sleep longer than any pause.
  const between = new Scheduler({ store: kind === 'sqlite' ? sqliteStore(file) : postgresStore({ connectionString: where, schema }) });
  const counts = await between.countTasks();
  await between.close();
  expect(counts.waiting + counts.running).toBeGreaterThan(0);
  const last = worker([kind, where, schema, log]);
  const code = await Promise.race([last.exited, new Promise((resolve) => setTimeout(() => resolve('timeout'), 60_000))]);
  if (code !== 0) last.child.kill('SIGKILL');
  expect(code, last.output()).toBe(0);

  const reader = new Scheduler({ store: kind === 'sqlite' ? sqliteStore(file) : postgresStore({ connectionString: where, schema }) });
  opened.push(reader);
  const tasks = await Promise.all(ids.map((id) => reader.getTask(id)));
  expect(
    tasks.map((t) => [t?.state, t?.result]),
    JSON.stringify(tasks.map((t) => t?.lastError)),
  ).toEqual(plans!.map((plan, i) => ['succeeded', model(plan, messages.get(ids[i]!))]));

  const lines = readFileSync(log, 'utf8').trim().split('\n');
  const starts = new Map<string, number>();
  const ends = new Map<string, number>();
  for (const line of lines) {
    const [place, what] = line.split(' ') as [string, string];
    const counts = what === 'start' ? starts : ends;
    counts.set(place, (counts.get(place) ?? 0) + 1);
  }
  const steps = plans!.flatMap((plan, i) => plan.flatMap((call, place) => (call === 'step' ? [`${ids[i]}:${place}`] : [])));
  expect(steps.filter((step) => (ends.get(step) ?? 0) < 1)).toEqual([]);
  const again = steps.filter((step) => (starts.get(step) ?? 0) > 1);
  expect(again.length).toBeLessThanOrEqual(KILLS * WORKERS);
  expect(steps.filter((step) => (starts.get(step) ?? 0) > KILLS + 1)).toEqual([]);
}

describe('steps against SIGKILL (random handlers, three kills)', () => {
  it('on SQLite: every task ends with the model result; a step runs again only where a process died', async () => {
    await killedThrice('sqlite', 20261207);
  }, 120_000);

  it('on PostgreSQL: the same', async () => {
    await killedThrice('postgres', 20261207);
  }, 120_000);
});
