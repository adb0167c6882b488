import { afterEach, describe, expect, it } from 'vitest';
import { createDelivery, isGroup, LIMITS } from '../../examples/rate-limited-bot.js';
import { Scheduler } from '../../src/index.js';
import { ManualClock } from '../../src/testing.js';
import { runExample } from './child.js';

const START = Date.UTC(2026, 0, 1, 12, 0, 0);

let scheduler: Scheduler | undefined;

afterEach(async () => {
  await scheduler?.close();
  scheduler = undefined;
});

interface Sent {
  chat: number;
  text: string;
  /** When the send started (ms after START). */
  at: number;
}

/** At most `limit` of the sorted times `at` in any window of `interval`. */
function respects(times: number[], { limit, interval }: { limit: number; interval: number }): boolean {
  return times.every((at, k) => k < limit || times[k - limit]! + interval <= at);
}

function setup(options: { failFirst?: Set<string>; sendMs?: number } = {}) {
  const clock = new ManualClock(START);
  scheduler = new Scheduler({ clock, workers: 64, onError: () => {} });
  const sent: Sent[] = [];
  const attempts: Sent[] = [];
  const delivery = createDelivery(scheduler, (chat, text) => {
    const at = clock.now() - START;
    attempts.push({ chat, text, at });
    return new Promise<void>((resolve, reject) =>
      clock.setTimer(() => {
        if (options.failFirst?.delete(text)) return reject(new Error('429 Too Many Requests'));
        sent.push({ chat, text, at });
        resolve();
      }, options.sendMs ?? 50),
    );
  });
  return { clock, scheduler, delivery, sent, attempts };
}

describe('rate-limited-bot example', () => {
  it('delivers 1,500 reminders within 30/s overall, 1/s per chat and 20/min per group, in order per chat', async () => {
    const { clock, scheduler, delivery, sent, attempts } = setup();
    const chats = [...Array.from({ length: 100 }, (_, i) => i + 1), -1, -2];
    // 10 reminders per private chat, 250 per group, due over the first 5 seconds, scheduled out of order.
    const expected = new Map<number, string[]>();
    for (const chat of chats) {
      const count = isGroup(chat) ? 250 : 10;
      const texts = Array.from({ length: count }, (_, n) => `${chat}#${n}`);
      expected.set(chat, texts);
      for (let n = count - 1; n >= 0; n--) delivery.remind(chat, texts[n]!, START + Math.floor((n * 5_000) / count));
    }
    await clock.advance(20 * 60_000);
    expect(scheduler.stats()).toMatchObject({ waiting: 0, running: 0, succeeded: 1_500, failed: 0 });
    expect(
      respects(
        attempts.map((s) => s.at),
        LIMITS.overall,
      ),
    ).toBe(true);
    for (const chat of chats) {
      const mine = sent.filter((s) => s.chat === chat);
      // Order per chat, and each message after the previous one finished (serial).
      expect(mine.map((s) => s.text)).toEqual(expected.get(chat));
      expect(
        respects(
          mine.map((s) => s.at),
          isGroup(chat) ? LIMITS.group : LIMITS.chat,
        ),
      ).toBe(true);
    }
    // The limits bind: 1,000 private messages need at least 1000/30 s; a group's 250 need 12 whole minutes.
    expect(Math.max(...sent.filter((s) => s.chat > 0).map((s) => s.at))).toBeGreaterThanOrEqual(33_000);
    expect(Math.max(...sent.filter((s) => s.chat === -1).map((s) => s.at))).toBeGreaterThanOrEqual(12 * 60_000);
    // Not slower than the limits: the last private message went within 40 s, the last group one within 13 min.
    expect(Math.max(...sent.filter((s) => s.chat > 0).map((s) => s.at))).toBeLessThan(40_000);
    expect(Math.max(...sent.filter((s) => s.chat === -1).map((s) => s.at))).toBeLessThan(13 * 60_000);
  });

  it("a failed send is retried before the chat's next message; other chats go on", async () => {
    const { clock, delivery, sent, attempts } = setup({ failFirst: new Set(['1#0']) });
    delivery.remind(1, '1#0', START);
    delivery.remind(1, '1#1', START);
    delivery.remind(2, '2#0', START);
    await clock.advance(10_000);
    expect(sent.filter((s) => s.chat === 1).map((s) => `${s.text}@${s.at}`)).toEqual(['1#0@1050', '1#1@2050']);
    expect(attempts.map((s) => `${s.text}@${s.at}`)).toEqual(['1#0@0', '2#0@0', '1#0@1050', '1#1@2050']);
  });

  it('a reply passes routine reminders held by the overall limit', async () => {
    const { clock, delivery, sent } = setup();
    for (let chat = 1; chat <= 60; chat++) delivery.remind(chat, `reminder ${chat}`, START);
    await clock.advance(100);
    delivery.reply(500, 'reply');
    await clock.advance(5_000);
    const order = sent.map((s) => s.text);
    // 30 reminders at 0, then the reply first when the window frees at 1000.
    expect(sent.find((s) => s.text === 'reply')!.at).toBe(1_000);
    expect(order.indexOf('reply')).toBe(30);
  });

  it('runs on its own', async () => {
    const { code, stdout } = await runExample('examples/rate-limited-bot.ts');
    expect(code).toBe(0);
    expect(stdout).toMatch(/86 messages in \d+ ms/);
    expect(stdout).toMatch(/chat\s+77\s+reply: got it!/);
  }, 60_000);
});
