/**
 * A bot that delivers many reminders under a chat platform's send limits,
 * modelled on Telegram's: about 30 messages a second overall, one a second
 * per chat, 20 a minute per group.
 *
 *   npx tsx examples/rate-limited-bot.ts                      # one process, in memory
 *   npx tsx examples/rate-limited-bot.ts postgres://localhost/bot  # a replica; run several
 *
 * - the scheduler-wide `rate: { limit: 30, interval: '1s' }` is the overall limit;
 * - each message names its chat's bucket with the task option `rate`:
 *   `{ group: 'chat:42', limit: 1, interval: '1s' }` for a private chat,
 *   `{ group: 'chat:-7', limit: 20, interval: '1m' }` for a group (a task names
 *   one bucket; a group's, 20 a minute, is the one that binds there);
 * - `serial: 'chat:42'` delivers one message at a time per chat, in due-time
 *   order, and keeps that order through retries (a failed send is retried
 *   before the chat's next message goes);
 * - replies to users carry `priority: 10`, so when the overall limit is the
 *   bottleneck they pass routine reminders that are already due.
 *
 * Nothing polls: waiting messages cost no timer of their own, and a chat with
 * nothing to send keeps no state.
 *
 * As replicas (`createReplica()`: give it a PostgreSQL URL, run it in as
 * many processes as you like), the messages are durable tasks of the
 * handler 'send' and every limit above holds across all the replicas
 * together, by the database's clock: the overall 30 a second is one bucket
 * shared by every replica that sets it, a chat's bucket and serial group are
 * the chat's wherever its messages run, and no replica takes a message it
 * cannot send now (an idle replica sends what another could not);
 * test/examples/rate-limited-bot-replicas.test.ts runs two of them. The logic is `createDelivery()`, which
 * test/examples/rate-limited-bot.test.ts drives on a ManualClock; `main()`
 * sends a small burst on the real clock and prints when each message went.
 */
import { pathToFileURL } from 'node:url';
import { Scheduler, type StoredTask, type Task } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';

/** What the platform's API needs: send one message to one chat. */
export type Send = (chat: number, text: string, signal: AbortSignal) => Promise<void>;

export interface Delivery {
  /** A reminder: `text` to `chat` at `when` (a Date or epoch ms). Groups have negative ids, as on Telegram. */
  remind(chat: number, text: string, when: Date | number): Task<void>;
  /** A reply to a user's message: due now, ahead of routine work. */
  reply(chat: number, text: string): Task<void>;
}

/** Telegram's documented limits. */
export const LIMITS = {
  overall: { limit: 30, interval: 1_000 },
  chat: { limit: 1, interval: 1_000 },
  group: { limit: 20, interval: 60_000 },
} as const;

/** Whether a chat id is a group's (negative on Telegram). */
export const isGroup = (chat: number): boolean => chat < 0;

/** The options every message to `chat` carries: its bucket and its serial group. */
function chatOptions(chat: number, priority: number) {
  const key = `chat:${chat}`;
  return {
    name: key,
    serial: key,
    rate: { group: key, ...(isGroup(chat) ? LIMITS.group : LIMITS.chat) },
    priority,
    // A failed send (a 429 or a network error) is retried; the chat's next message waits for it.
    retry: { attempts: 3, delay: 1_000 },
    timeout: 10_000,
  };
}

/** Sets the scheduler's overall limit and returns the bot's two ways of sending. */
export function createDelivery(scheduler: Scheduler, send: Send): Delivery {
  scheduler.rate = LIMITS.overall;
  return {
    remind(chat, text, when) {
      return scheduler.schedule(when, (ctx) => send(chat, text, ctx.signal), chatOptions(chat, 0));
    },
    reply(chat, text) {
      return scheduler.after(0, (ctx) => send(chat, text, ctx.signal), chatOptions(chat, 10));
    },
  };
}

/** The durable twin of `Delivery`: the same messages, stored, sent by whichever replica is free. */
export interface DurableDelivery {
  remind(chat: number, text: string, when: Date | number): Promise<StoredTask>;
  reply(chat: number, text: string): Promise<StoredTask>;
}

/**
 * A replica of the bot on a shared PostgreSQL: defines the handler 'send',
 * sets the store-wide overall limit, and returns its scheduler (call
 * `start()` to send) and the bot's two ways of sending (any replica, or a
 * process that only adds work, may call them).
 */
export function createReplica(connectionString: string, send: Send): { scheduler: Scheduler; delivery: DurableDelivery } {
  const scheduler = new Scheduler({ store: postgresStore({ connectionString }), workers: 16, rate: LIMITS.overall });
  scheduler.define('send', (ctx, { chat, text }: { chat: number; text: string }) => send(chat, text, ctx.signal));
  const stored = (chat: number, text: string, when: Date | number, priority: number) => {
    const { name: _name, ...options } = chatOptions(chat, priority);
    return scheduler.schedule(when, 'send', { ...options, payload: { chat, text } });
  };
  return {
    scheduler,
    delivery: { remind: (chat, text, when) => stored(chat, text, when, 0), reply: (chat, text) => stored(chat, text, Date.now(), 10) },
  };
}

/** A replica: sends until interrupted; the first argument after the URL, `--burst`, also adds the demo's burst. */
async function replica(url: string, burst: boolean): Promise<void> {
  const started = Date.now();
  const { scheduler, delivery } = createReplica(url, async (chat, text) => {
    await new Promise((resolve) => setTimeout(resolve, 5)); // the API call
    console.log(`+${String(Date.now() - started).padStart(5)} ms  pid ${process.pid}  chat ${String(chat).padStart(3)}  ${text}`);
  });
  await scheduler.start();
  if (burst) {
    for (let chat = 1; chat <= 40; chat++) {
      await delivery.remind(chat, 'reminder 1 of 2', started);
      await delivery.remind(chat, 'reminder 2 of 2', started);
    }
    for (let i = 1; i <= 5; i++) await delivery.remind(-7, `group reminder ${i}`, started);
  }
  process.once('SIGINT', () => void scheduler.close());
}

async function main(): Promise<void> {
  const [url, flag] = process.argv.slice(2);
  if (url?.startsWith('postgres')) return replica(url, flag === '--burst');
  const scheduler = new Scheduler({ workers: 16 });
  const started = Date.now();
  const at = () => `+${String(Date.now() - started).padStart(4)} ms`;
  const delivery = createDelivery(scheduler, async (chat, text) => {
    await new Promise((resolve) => setTimeout(resolve, 5)); // the API call
    console.log(`${at()}  chat ${String(chat).padStart(3)}  ${text}`);
  });
  // 40 private chats with 2 reminders each, and a group with 5: all due now.
  for (let chat = 1; chat <= 40; chat++) {
    delivery.remind(chat, `reminder 1 of 2`, started);
    delivery.remind(chat, `reminder 2 of 2`, started);
  }
  for (let i = 1; i <= 5; i++) delivery.remind(-7, `group reminder ${i}`, started);
  // A user writes in while the burst is held by the overall limit: the reply
  // is the first message out when the window frees.
  setTimeout(() => delivery.reply(77, 'reply: got it!'), 200);
  await scheduler.onIdle();
  const { succeeded, lateness } = scheduler.stats();
  console.log(`${succeeded} messages in ${Date.now() - started} ms; latest start ${Math.round(lateness.max)} ms after its due time`);
  await scheduler.close();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
