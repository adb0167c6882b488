// Deduplication across processes on PostgreSQL (issue 22): ten producer
// processes (test/fixtures/pg-dedupe-adder.ts) add a task with the same key
// and mode at the same moment, for each mode, on a new key and on a key
// whose task is finished, running or waiting. However their statements
// interleave, the key ends with exactly the task the mode promises, and the
// ten results say so: one insert at most, the rest replaced or existing.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres.js';
import type { PgServer } from '../pg-server.js';
import { schemaNamer, usePostgres } from '../use-postgres.js';
import { compiled } from '../../compiled-fixture.js';

let server: PgServer;
let admin: pg.Pool;

usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

const freshSchema = schemaNamer('dd');

interface Result {
  id: number;
  enqueued: 'inserted' | 'replaced' | 'existing';
  payload: number;
  state: string;
  error?: string;
}

/** One producer process: `add(line)` sends it a key and mode, and resolves with what its schedule() returned. */
function adder(schema: string) {
  // Bundled once for the file (compiled-fixture.ts): plain node starts ten of these in a fraction of tsx's CPU.
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [compiled('test/fixtures/pg-dedupe-adder.ts'), server.url, schema]);
  let out = '';
  let waiting: ((line: string) => void)[] = [];
  const lines: string[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    let end: number;
    while ((end = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, end);
      out = out.slice(end + 1);
      const next = waiting.shift();
      if (next === undefined) lines.push(line);
      else next(line);
    }
  });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  const read = () => (lines.length > 0 ? Promise.resolve(lines.shift()!) : new Promise<string>((resolve) => waiting.push(resolve)));
  const timed = <T>(promise: Promise<T>, what: string) =>
    Promise.race([
      promise,
      sleep(60_000).then(() => {
        throw new Error(`producer ${child.pid} did not ${what}: ${errors}`);
      }),
    ]);
  return {
    pid: child.pid!,
    ready: timed(read(), 'start'),
    send(line: string) {
      child.stdin.write(`${line}\n`);
    },
    async result(): Promise<Result> {
      const parsed = JSON.parse(await timed(read(), 'answer')) as Result;
      if (parsed.error !== undefined) throw new Error(`producer ${child.pid}: ${parsed.error}`);
      return parsed;
    },
    close() {
      waiting = [];
      child.stdin.end();
      child.kill();
    },
  };
}

describe('postgresStore: ten processes adding one key at once', () => {
  let schema: string;
  let adders: ReturnType<typeof adder>[] = [];
  const t = (sql: string) => sql.replaceAll('{t}', `"${schema}".taskheap_tasks`);

  beforeAll(async () => {
    schema = freshSchema();
    const store = postgresStore({ connectionString: server.url, schema });
    await store.migrate();
    await store.close();
    adders = Array.from({ length: 10 }, () => adder(schema));
    await Promise.all(adders.map((a) => a.ready));
  }, 120_000);

  afterAll(() => {
    for (const a of adders) a.close();
  });

  /** The same add from all ten at once (one write each, back to back); their results, and the key's rows after. */
  async function race(key: string, dedupe: unknown) {
    const line = `${key} ${JSON.stringify(dedupe)}`;
    for (const a of adders) a.send(line);
    const results = await Promise.all(adders.map((a) => a.result()));
    const { rows } = await admin.query<{ id: string; payload: string; state: string; created_at: Date; run_at: Date; now: Date }>(
      t(`SELECT id, payload, state, created_at, run_at, now() FROM {t} WHERE key = $1`),
      [key],
    );
    const count = (what: Result['enqueued']) => results.filter((r) => r.enqueued === what).length;
    return { results, rows, counts: [count('inserted'), count('replaced'), count('existing')] };
  }

  /** Task `id`'s state and key. */
  async function stateOf(id: number): Promise<[string, string | null]> {
    const { rows } = await admin.query<{ state: string; key: string | null }>(t(`SELECT state, key FROM {t} WHERE id = $1`), [id]);
    return [rows[0]!.state, rows[0]!.key];
  }

  /** A task with `key` already stored in `state`, created `age` ms ago; its id. */
  async function stored(key: string, state: string, age: number): Promise<number> {
    const { rows } = await admin.query<{ id: string }>(
      t(`INSERT INTO {t} (name, key, payload, state, run_at, created_at, locked_by, locked_until)
      VALUES ('work', $1, '"before"', $2, now() + interval '1 hour', now() - $3 * interval '1 millisecond',
        CASE WHEN $2 = 'running' THEN 'elsewhere' END, CASE WHEN $2 = 'running' THEN now() + interval '1 hour' END) RETURNING id`),
      [key, state, age],
    );
    return Number(rows[0]!.id);
  }

  const pids = () => adders.map((a) => a.pid);

  it("'replace' on a new key: one insert, nine replacements, one row: the last writer's", async () => {
    const { results, rows, counts } = await race('new-replace', 'replace');
    expect(counts).toEqual([1, 9, 0]);
    expect(rows).toHaveLength(1);
    expect(new Set(results.map((r) => r.id))).toEqual(new Set([Number(rows[0]!.id)]));
    expect(pids()).toContain(JSON.parse(rows[0]!.payload));
  }, 60_000);

  it("'keep' on a new key: one insert, nine get it back unchanged", async () => {
    const { results, rows, counts } = await race('new-keep', 'keep');
    expect(counts).toEqual([1, 0, 9]);
    expect(rows).toHaveLength(1);
    const inserted = results.find((r) => r.enqueued === 'inserted')!;
    expect(JSON.parse(rows[0]!.payload)).toBe(inserted.payload);
    expect(results.every((r) => r.id === inserted.id && r.payload === inserted.payload && r.state === 'waiting')).toBe(true);
  }, 60_000);

  it('throttle on a new key and on a finished task older than the period: one insert, nine get it back', async () => {
    const fresh = await race('new-throttle', { throttle: '1m' });
    expect(fresh.counts).toEqual([1, 0, 9]);
    expect(fresh.rows).toHaveLength(1);
    const old = await stored('old-throttle', 'succeeded', 120_000);
    const { results, rows, counts } = await race('old-throttle', { throttle: '1m' });
    expect(counts).toEqual([1, 0, 9]);
    // A new task takes the key; the finished one stays as it ended.
    expect(rows.map((row) => row.state)).toEqual(['waiting']);
    expect(Number(rows[0]!.id)).not.toBe(old);
    expect(await stateOf(old)).toEqual(['succeeded', null]);
    const inserted = results.find((r) => r.enqueued === 'inserted')!;
    expect(JSON.parse(rows[0]!.payload)).toBe(inserted.payload);
    // Its period starts at the add that wrote it (the database's clock).
    expect(rows[0]!.now.getTime() - rows[0]!.created_at.getTime()).toBeLessThan(30_000);
    // Within the period, finished or not, it comes back: ten more adds write nothing.
    await admin.query(t(`UPDATE {t} SET state = 'succeeded' WHERE key = 'old-throttle'`));
    const again = await race('old-throttle', { throttle: '1m' });
    expect(again.counts).toEqual([0, 0, 10]);
    expect(again.rows.map((row) => [row.state, JSON.parse(row.payload)])).toEqual([['succeeded', inserted.payload]]);
  }, 60_000);

  it("'keep' on a finished task: one insert beside it, nine get it back; on a running task: all ten get it back, untouched", async () => {
    const finished = await stored('done-keep', 'failed', 0);
    const added = await race('done-keep', 'keep');
    expect(added.counts).toEqual([1, 0, 9]);
    expect(added.rows.map((row) => row.state)).toEqual(['waiting']);
    expect(Number(added.rows[0]!.id)).not.toBe(finished);
    expect(await stateOf(finished)).toEqual(['failed', null]);
    const busy = await stored('busy-keep', 'running', 0);
    for (const dedupe of ['keep', 'replace', { debounce: '1m' }, { throttle: 1 }]) {
      const { rows, counts } = await race('busy-keep', dedupe);
      expect(counts, JSON.stringify(dedupe)).toEqual([0, 0, 10]);
      expect(rows.map((row) => [Number(row.id), row.state, row.payload])).toEqual([[busy, 'running', '"before"']]);
    }
  }, 60_000);

  it('debounce on a new key and on a waiting task: every add replaces it, and it is due a period after the last', async () => {
    const fresh = await race('new-debounce', { debounce: '1m' });
    expect(fresh.counts).toEqual([1, 9, 0]);
    const waiting = await stored('wait-debounce', 'waiting', 0);
    const { rows, counts } = await race('wait-debounce', { debounce: '1m' });
    expect(counts).toEqual([0, 10, 0]);
    expect(rows.map((row) => [Number(row.id), row.state])).toEqual([[waiting, 'waiting']]);
    // Due a minute after the last add, on the database's clock (read just after).
    const after = rows[0]!.now.getTime();
    expect(rows[0]!.run_at.getTime()).toBeLessThanOrEqual(after + 60_000);
    expect(rows[0]!.run_at.getTime()).toBeGreaterThan(after + 60_000 - 30_000);
  }, 60_000);
});
