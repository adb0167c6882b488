// A PostgreSQL restart and a failover to a promoted streaming replica, under
// load (issue 23): two real servers on loopback, a primary and a standby made
// with pg_basebackup -R; the primary stopped (pg_ctl stop -m fast, which
// sends the standby all it committed), kept down longer than the lease, the
// standby promoted (pg_ctl promote), and the address the workers know (a TCP
// forwarder, standing for the DNS name or virtual IP a deployment moves)
// pointed at it. Two schedulers reconnect by themselves; nothing committed is
// lost and no task starts twice, though every lease ran out during the outage;
// after the restart, each scheduler claims and runs new work again.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { startForwarder, startReplica, type Forwarder, type PgReplica } from './pg-replica.js';
import { startPgServer, type PgServer } from '../pg-server.js';
import { bothRunNewWork, GATE } from '../both-run.js';

const LEASE = 3_000;

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => {});
}, 60_000);

async function until(what: string, condition: () => boolean | Promise<boolean>, timeout = 40_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // the server is away: look again
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeout} ms waiting for: ${what}`);
    await sleep(50);
  }
}

async function query<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

const succeeded = async (url: string) =>
  Number((await query<{ n: string }>(url, `SELECT count(*) AS n FROM taskheap_tasks WHERE state = 'succeeded'`))[0]!.n);

/** How many GATE tasks (both-run.ts) are in each state. */
async function gateStates(url: string): Promise<Record<string, number>> {
  const rows = await query<{ state: string; n: string }>(
    url,
    `SELECT state, count(*) AS n FROM taskheap_tasks WHERE name = '${GATE}' GROUP BY state`,
  );
  return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
}

/** Two "processes" on `url`: 'work' counts its starts per task id. */
function open(url: string, starts: Map<number, number>) {
  return ['a', 'b'].map(() => {
    const errors: unknown[] = [];
    const scheduler = new Scheduler({
      store: postgresStore({ connectionString: url, lease: LEASE, poll: 200, timeout: 1_000 }),
      onError: (error) => errors.push(error),
      workers: 4,
    });
    scheduler.define('work', async (_ctx, payload: { ms: number }) => {
      starts.set(_ctx.id, (starts.get(_ctx.id) ?? 0) + 1);
      await sleep(payload.ms);
    });
    cleanup.push(() => scheduler.close({ abort: true }));
    return { scheduler, errors };
  });
}

/** Every task (but `except`) succeeded and started exactly once. */
async function once(url: string, starts: Map<number, number>, total: number, except: number[] = []): Promise<void> {
  const rows = (await query<{ id: string; state: string; attempts: number }>(url, 'SELECT id, state, attempts FROM taskheap_tasks')).filter(
    (row) => !except.includes(Number(row.id)),
  );
  expect(rows).toHaveLength(total);
  // With how often each ran here: a claim counted twice and run once is a lost claim answer taken over, not a second run.
  expect(
    rows.filter((row) => row.state !== 'succeeded' || row.attempts !== 1).map((row) => ({ ...row, ran: starts.get(Number(row.id)) ?? 0 })),
  ).toEqual([]);
  expect([...starts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  expect(starts.size).toBe(total);
}

describe('PostgreSQL restarted and failed over under load', () => {
  it('a restart (stop -m fast) longer than the lease under load: nothing lost, nothing started twice, workers reconnect', async () => {
    const server: PgServer = await startPgServer();
    cleanup.push(() => server.destroy());
    const starts = new Map<number, number>();
    const [a, b] = open(server.url, starts);
    await a!.scheduler.start();
    await b!.scheduler.start();
    await a!.scheduler.scheduleMany(Array.from({ length: 120 }, () => ({ when: Date.now(), name: 'work', payload: { ms: 300 } })));
    await until('some done', async () => (await succeeded(server.url)) >= 20);
    await server.stop();
    await sleep(LEASE + 1_500); // every lease runs out on the server's clock
    await server.start();
    await until('all done', async () => (await succeeded(server.url)) === 120);
    await once(server.url, starts, 120);
    // Both reconnected: each claims and runs new work again (by its poll, 200 ms; 30 s for a loaded machine).
    const gates = await bothRunNewWork(
      [a!.scheduler, b!.scheduler],
      (count) => b!.scheduler.scheduleMany(Array.from({ length: count }, () => ({ when: Date.now(), name: GATE }))),
      async () => (await gateStates(server.url)).waiting ?? 0,
    );
    await until('the gate tasks done', async () => {
      const { waiting = 0, running = 0 } = await gateStates(server.url);
      return waiting + running === 0;
    });
    expect(await gateStates(server.url)).toEqual({ succeeded: gates.starts.size });
    expect([...gates.starts.values()].filter((n) => n !== 1)).toEqual([]);
  }, 60_000);

  it('a failover to a promoted streaming replica, down longer than the lease: nothing committed lost, nothing started twice', async () => {
    const primary = await startPgServer();
    cleanup.push(() => primary.destroy());
    const replica: PgReplica = await startReplica(primary);
    cleanup.push(() => replica.destroy());
    const address: Forwarder = await startForwarder(primary.port);
    cleanup.push(() => address.close());
    const url = `postgres://postgres@127.0.0.1:${address.port}/${primary.database}`;
    const starts = new Map<number, number>();
    const [a, b] = open(url, starts);
    await a!.scheduler.start();
    await b!.scheduler.start();
    await a!.scheduler.scheduleMany(Array.from({ length: 120 }, () => ({ when: Date.now(), name: 'work', payload: { ms: 300 } })));
    await until('some done', async () => (await succeeded(primary.url)) >= 20);
    // A task whose owner stops renewing at the outage: taken over only once the new primary has been up for a lease.
    const [held] = await a!.scheduler.scheduleMany([{ when: Date.now() + 3_600_000, name: 'work', payload: { ms: 1 } }]);
    await query(
      primary.url,
      `UPDATE taskheap_tasks SET state = 'running', locked_by = 'gone', locked_until = clock_timestamp() + interval '500 ms', attempts = 1,
         run_at = now(), started_at = now() WHERE id = ${held!.id}`,
    );
    // What the primary committed up to its shutdown reaches the standby (a clean shutdown sends it all).
    await primary.stop();
    const committed = await succeeded(replica.url);
    await sleep(LEASE + 1_500); // every lease runs out
    const promotedAt = Date.now();
    await replica.promote();
    address.pointAt(replica.port);
    await until('all done on the new primary', async () => (await succeeded(replica.url)) === 121);
    expect(committed).toBeGreaterThanOrEqual(20);
    // The held task: taken over (its second attempt) a lease or more after the first claim on the new primary, itself after the promotion.
    const [row] = await query<{ seen: number; started: number; attempts: number }>(
      replica.url,
      `SELECT extract(epoch from m.server_seen) * 1000 AS seen, extract(epoch from t.started_at) * 1000 AS started, t.attempts
         FROM taskheap_tasks AS t, taskheap_meta AS m WHERE t.id = ${held!.id}`,
    );
    expect(row!.attempts).toBe(2);
    expect(Number(row!.seen)).toBeGreaterThanOrEqual(promotedAt - 50);
    expect(Number(row!.started) - Number(row!.seen)).toBeGreaterThanOrEqual(LEASE);
    starts.delete(held!.id);
    await once(replica.url, starts, 120, [held!.id]);
  }, 60_000);
});
