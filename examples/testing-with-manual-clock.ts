/**
 * Testing your own scheduling code with ManualClock: a virtual week in a
 * fraction of a second.
 *
 *   npx tsx examples/testing-with-manual-clock.ts
 *
 * `scheduleDailyDigest()` is "application code": it sends a digest every day
 * at 09:00 in the team's zone. The check below hands it a Scheduler on a
 * ManualClock, advances a week (across the US spring-forward night, to show
 * that 09:00 stays 09:00 on the wall clock), and asserts on what was sent. In
 * a vitest file the same lines go in an `it()`; `clock.advance()` never waits
 * for real time.
 */
import assert from 'node:assert/strict';
import { DateTime } from 'luxon';
import { Scheduler } from '../src/index.js';
import type { Job } from '../src/index.js';
import { ManualClock } from '../src/testing.js';

// ---- application code -------------------------------------------------------

/** Sends a digest of yesterday's activity every day at 09:00 in `zone`. */
export function scheduleDailyDigest(scheduler: Scheduler, zone: string, send: (day: string) => Promise<void>): Job {
  return scheduler
    .every()
    .day()
    .at('09:00', zone)
    .run(
      async (ctx) => {
        const yesterday = DateTime.fromJSDate(ctx.scheduledAt, { zone }).minus({ days: 1 }).toISODate()!;
        await send(yesterday);
      },
      { name: 'daily-digest', retry: { attempts: 3, delay: 60_000 } },
    );
}

// ---- the test -----------------------------------------------------------------

const zone = 'America/New_York';
// Thursday 2026-03-05 07:00 in New York; clocks spring forward on Sunday 2026-03-08.
const clock = new ManualClock(DateTime.fromISO('2026-03-05T07:00', { zone }).toJSDate());
const scheduler = new Scheduler({ clock, timezone: zone });

const sent: { day: string; at: number }[] = [];
const job = scheduleDailyDigest(scheduler, zone, async (day) => {
  sent.push({ day, at: clock.now() });
});

const realStart = performance.now();
await clock.advance(7 * 24 * 3_600_000); // one virtual week
const realMs = performance.now() - realStart;

for (const { day, at } of sent) {
  const local = DateTime.fromMillis(at, { zone });
  console.log(`digest for ${day} sent ${local.toFormat('ccc yyyy-MM-dd HH:mm ZZZZ')} (${new Date(at).toISOString()})`);
}

assert.equal(sent.length, 7, 'one digest a day');
for (const { at } of sent) assert.equal(DateTime.fromMillis(at, { zone }).toFormat('HH:mm'), '09:00');
assert.equal(job.runs, 7);
assert.equal(job.nextRunAt?.getTime(), DateTime.fromISO('2026-03-12T09:00', { zone }).toMillis());
console.log(`✓ 7 digests, each at 09:00 New York time across the DST change; a virtual week took ${realMs.toFixed(0)} ms`);

await scheduler.close();
