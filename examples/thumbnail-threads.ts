/**
 * A chat bot that renders thumbnails in worker threads, so its reminders
 * keep firing on time while the CPU works.
 *
 *   npx tsx examples/thumbnail-threads.ts [renders] [size]
 *
 * Each request is a module task: `scheduler.after(0, RENDER, { payload })`
 * runs the default export of thumbnail-render.js in a pool of `threads`
 * worker threads. The bot's own reminders (a 10 ms timer here) stay on the
 * main thread, which the renders never block; the lateness of those
 * reminders is printed at the end. A last, huge request is cancelled while
 * it renders: the signal reaches the thread and the render stops.
 */
import { Scheduler, type Task } from '../src/index.js';

/** What thumbnail-render.js returns: one byte per pixel, row by row, and the mean brightness. */
interface Thumbnail {
  chat: string;
  width: number;
  height: number;
  pixels: Uint8Array;
  mean: number;
}

const RENDER = new URL('./thumbnail-render.js', import.meta.url);

const [renders = 6, size = 240] = process.argv.slice(2).map(Number);
if (!Number.isInteger(renders) || renders < 1 || !Number.isInteger(size) || size < 8) {
  console.error('usage: npx tsx examples/thumbnail-threads.ts [renders >= 1] [size >= 8]');
  process.exit(1);
}

const scheduler = new Scheduler({ threads: 2, onError: () => {} });

// The bot's other duty: reminders every 10 ms, on the main thread.
let fired = 0;
let worst = 0;
const reminders = scheduler
  .every(10)
  .milliseconds()
  .run((ctx) => {
    fired++;
    worst = Math.max(worst, ctx.startedAt.getTime() - ctx.scheduledAt.getTime());
  });

const chats = Array.from({ length: renders }, (_, i) => `chat-${i + 1}`);
const requests: Task<Thumbnail>[] = chats.map((chat) =>
  scheduler.after(0, RENDER, { name: 'thumbnail', timeout: '1m', payload: { chat, width: size, height: (size * 3) / 4, detail: 400 } }),
);
// A request too big to wait for: the user gives up and it is cancelled mid-render.
const huge = scheduler.after<Thumbnail>(0, RENDER, {
  name: 'thumbnail',
  payload: { chat: 'chat-huge', width: 4_000, height: 3_000, detail: 5_000 },
});
scheduler.on('start', (task) => {
  if (task === huge) setTimeout(() => huge.cancel(), 50);
});

for (const request of requests) {
  const thumbnail = await request.result;
  console.log(
    `${thumbnail.chat}: sent a ${thumbnail.width}x${thumbnail.height} thumbnail (${thumbnail.pixels.length} bytes, mean ${thumbnail.mean})`,
  );
}
await huge.result.catch((error: Error) => console.log(`chat-huge: ${huge.state} (${error.name})`));

reminders.cancel();
console.log(`reminders: ${fired} fired while rendering, the latest ${worst} ms late`);
await scheduler.close();
console.log('closed: every thread terminated');
