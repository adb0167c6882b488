// examples/rate-limited-bot.ts as replicas (issue 22): two real processes of
// the example itself on one PostgreSQL, one of them adding the demo's burst
// (40 chats with 2 reminders each, a group with 5). Every message is sent
// once, and Telegram's limits hold across both processes by the database's
// clock: at most 1 a second per chat, 20 a minute in the group, 30 a second
// overall. Start times are the claims' (the tasks' started_at).
import { spawn } from 'node:child_process';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { LIMITS } from '../../examples/rate-limited-bot.js';
import { postgresStore } from '../../src/postgres.js';
import type { PgServer } from '../durable/pg-server.js';
import { usePostgres } from '../durable/use-postgres.js';
import { program, ROOT } from './child.js';

let server: PgServer;
let admin: pg.Pool;
usePostgres((started, pool) => {
  server = started;
  admin = pool;
});

const replicas: { child: ReturnType<typeof spawn>; exited: Promise<unknown> }[] = [];
afterEach(async () => {
  for (const { child, exited } of replicas.splice(0)) {
    child.kill('SIGKILL');
    await exited;
  }
});

/** Starts `npx tsx examples/rate-limited-bot.ts <url> [--burst]` as a child process (bundled: program()); resolves its stdout once it exits. */
function replica(burst: boolean): { stop: () => Promise<string> } {
  const child = spawn(process.execPath, [...program('examples/rate-limited-bot.ts'), server.url, ...(burst ? ['--burst'] : [])], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  replicas.push({ child, exited });
  return {
    stop: async () => {
      child.kill('SIGINT');
      await exited;
      return out;
    },
  };
}

/**
 * Diagnostics (an overall window was exceeded on a loaded CI machine, twice, never here): each
 * transaction that starts tasks, writes the overall bucket or moves a task other than from running
 * to succeeded (a lost claim handed back, say), by the server's clock.
 */
const AUDIT = `CREATE TABLE audit (xid xid8 DEFAULT pg_current_xact_id(), pid int DEFAULT pg_backend_pid(),
    at timestamptz DEFAULT clock_timestamp(), what text);
  CREATE FUNCTION audit_bucket() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO audit (what) VALUES (format('bucket %s spent %s -> %s', TG_OP,
      (SELECT COALESCE(sum(c), 0) FROM unnest(OLD.starts, OLD.counts) AS x(s, c) WHERE s > now() - interval '1 second'),
      (SELECT COALESCE(sum(c), 0) FROM unnest(NEW.starts, NEW.counts) AS x(s, c) WHERE s > now() - interval '1 second')));
    RETURN NEW; END $$;
  CREATE TRIGGER audit_bucket AFTER UPDATE ON taskheap_limits FOR EACH ROW WHEN (NEW.kind = 'rate' AND NEW.key = '') EXECUTE FUNCTION audit_bucket();
  CREATE FUNCTION audit_start() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    INSERT INTO audit (what) VALUES (CASE WHEN OLD.state = 'waiting' AND NEW.state = 'running'
      THEN format('start %s', NEW.payload::jsonb ->> 'chat')
      ELSE format('chat %s %s -> %s', NEW.payload::jsonb ->> 'chat', OLD.state, NEW.state) END); RETURN NEW; END $$;
  CREATE TRIGGER audit_start AFTER UPDATE ON taskheap_tasks FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state AND NOT (OLD.state = 'running' AND NEW.state = 'succeeded'))
    EXECUTE FUNCTION audit_start();`;
/** The audit, a line per transaction: its first entry's ms after the first start, its backend, what it did. */
const AUDITED = `SELECT format('%s ms pid %s xid %s: %s', round((extract(epoch from min(at)) * 1000
    - (SELECT extract(epoch from min(started_at)) * 1000 FROM taskheap_tasks))::numeric, 1), min(pid), xid,
    string_agg(what, ', ' ORDER BY at)) AS line
  FROM audit GROUP BY xid ORDER BY min(at)`;

/** At most `limit` of the sorted times in any window of `interval` ms. */
function windowsHold(times: number[], { limit, interval }: { limit: number; interval: number }): boolean {
  return times.every((at, k) => k < limit || times[k - limit]! + interval <= at);
}

describe('examples/rate-limited-bot.ts as replicas', () => {
  it("two processes of the example send every message once, within Telegram's limits across both", async () => {
    // For a failure's message: which transaction started each task and wrote the overall bucket.
    const store = postgresStore({ connectionString: server.url });
    await store.migrate();
    await store.close();
    await admin.query(AUDIT);
    const first = replica(false);
    const second = replica(true);
    const deadline = Date.now() + 60_000;
    let sent = 0;
    for (;;) {
      const { rows } = await admin
        .query<{ n: number }>(`SELECT count(*)::int AS n FROM taskheap_tasks WHERE state = 'succeeded'`)
        .catch(() => ({ rows: [{ n: 0 }] }));
      sent = rows[0]!.n;
      if (sent >= 85 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const out = (await first.stop()) + (await second.stop());
    expect(sent, out).toBe(85);
    const { rows } = await admin.query<{ chat: number; at: number }>(
      `SELECT (payload::jsonb ->> 'chat')::int AS chat, extract(epoch from started_at) * 1000 AS at
       FROM taskheap_tasks ORDER BY started_at`,
    );
    const starts = rows.map((row) => Number(row.at));
    if (!windowsHold(starts, LIMITS.overall)) {
      // What the database holds of the overall bucket and of each start, for the failure's message
      // (short enough for CI's report): each start's ms after the first, its attempts (and expiries).
      const bucket = await admin.query(`SELECT lim, interval_ms, starts, counts FROM taskheap_limits WHERE kind = 'rate' AND key = ''`);
      const tasks = await admin.query<{ attempts: number; expiries: number; at: number }>(
        `SELECT attempts, expiries, extract(epoch from started_at) * 1000 AS at FROM taskheap_tasks ORDER BY started_at`,
      );
      const audit = await admin.query<{ line: string }>(AUDITED);
      const each = tasks.rows.map((t) => `${(Number(t.at) - starts[0]!).toFixed(1)}:${t.attempts}${t.expiries ? `e${t.expiries}` : ''}`);
      expect.fail(
        `overall window exceeded; by transaction:\n${audit.rows.map((row) => row.line).join('\n')}\n` +
          `starts (ms:attempts): ${each.join(' ')}\nbucket: ${JSON.stringify(bucket.rows)}\n${out}`,
      );
    }
    const byChat = new Map<number, number[]>();
    for (const row of rows) byChat.set(row.chat, [...(byChat.get(row.chat) ?? []), Number(row.at)]);
    expect(byChat.size).toBe(41);
    for (const [chat, times] of byChat) {
      expect(windowsHold(times, chat < 0 ? LIMITS.group : LIMITS.chat), `chat ${chat}: ${times.join(', ')}`).toBe(true);
    }
    // Each message was sent once, by whichever replica sent it. (Not `attempts === 1`: on a machine
    // loaded enough for a claim to outlast its timeout, a claim whose answer was lost is taken over
    // after its lease and counted as an attempt it was not: docs/delivery.md.)
    const sends = out.match(/chat +-?\d+ +(reminder [12] of 2|group reminder \d)/g) ?? [];
    const once = new Set(sends.map((line) => line.replace(/ +/g, ' ')));
    expect({ sends: sends.length, distinct: once.size }, out).toEqual({ sends: 85, distinct: 85 });
  }, 90_000);
});
