// One vocabulary (docs/design.md "One vocabulary"): the in-memory and the
// stored side say the same words, the names taskheap 0.1 used for them are
// gone, and each name has one meaning.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QueueFullError, Scheduler, type StoredState, type TaskState } from '../src/index.js';
import { metrics } from '../src/metrics.js';
import { sqliteStore } from '../src/sqlite.js';
import { ManualClock } from '../src/testing.js';
import { START } from './helpers.js';

function stored(): Scheduler {
  return new Scheduler({ store: sqliteStore(join(mkdtempSync(join(tmpdir(), 'taskheap-words-')), 'store.db')), onError: () => {} });
}

describe('one word for a task not started yet: waiting', () => {
  it('an in-memory task and a stored task are both `waiting`, then in the same final states', async () => {
    const clock = new ManualClock(START);
    const memory = new Scheduler({ clock });
    const task = memory.schedule(START + 1_000, () => 'done');
    const word: TaskState = task.state;
    expect(word).toBe('waiting');

    const scheduler = stored();
    scheduler.define('work', () => 'done');
    const row = await scheduler.schedule(START + 1_000, 'work');
    const storedWord: StoredState = row.state;
    expect(storedWord).toBe(word);
    expect((await scheduler.countTasks()).waiting).toBe(1);

    expect(task.cancel()).toBe(true);
    expect(await scheduler.cancelTask(row.id)).toBe(true);
    expect(task.state).toBe('cancelled');
    expect((await scheduler.getTask(row.id))?.state).toBe(task.state);
    await memory.close();
    await scheduler.close();
  });

  it('counts: waiting is every task not started (as countTasks() counts it), due the waiting ones already due', async () => {
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, workers: 1 });
    let release = () => {};
    scheduler.after(0, () => new Promise<void>((resolve) => (release = resolve)), { name: 'busy' });
    scheduler.after(10, () => {}, { name: 'send', queue: 'emails' });
    scheduler.after(60_000, () => {}, { name: 'send', queue: 'emails' });
    await clock.advance(100);
    const stats = scheduler.stats();
    expect(stats).toMatchObject({ waiting: 2, due: 1, running: 1 });
    expect('pending' in stats).toBe(false);
    const counts = await scheduler.queue('emails').counts();
    expect(counts).toMatchObject({ waiting: 2, due: 1, running: 0 });
    expect('pending' in counts).toBe(false);
    const send = metrics(scheduler).get('send');
    expect(send).toMatchObject({ waiting: 2, due: 1 });
    expect('pending' in send).toBe(false);
    expect(scheduler.size).toBe(stats.waiting);
    release();
    await scheduler.close();
  });
});

describe("taskheap 0.1's names are gone", () => {
  it('the scheduler has no pendingTasks, cancel, retry or maxPending; the option maxPending is refused', () => {
    const scheduler = new Scheduler({ clock: new ManualClock(START) });
    for (const name of ['pendingTasks', 'cancel', 'retry', 'maxPending']) expect(name in scheduler).toBe(false);
    expect(() => new Scheduler({ maxPending: 1 } as never)).toThrow(/Unknown Scheduler option `maxPending`/);
  });

  it('maxWaiting bounds the waiting tasks', () => {
    const clock = new ManualClock(START);
    const bounded = new Scheduler({ clock, maxWaiting: 2 });
    expect(bounded.maxWaiting).toBe(2);
    bounded.after(10, () => {});
    bounded.after(10, () => {});
    expect(() => bounded.after(10, () => {})).toThrow(QueueFullError);
    expect(() => bounded.after(10, () => {})).toThrow(/2 tasks are already waiting \(maxWaiting\)/);
    expect(new Scheduler({ clock }).maxWaiting).toBe(Infinity);
    expect(() => new Scheduler({ clock, maxWaiting: 0 })).toThrow(/`maxWaiting`.*got 0/);
  });

  it('cancelTask(id) and retryTask(id) act on stored tasks', async () => {
    const scheduler = stored();
    scheduler.define('work', () => {});
    const task = await scheduler.schedule(Date.now() + 3_600_000, 'work');
    expect(await scheduler.cancelTask(task.id)).toBe(true);
    expect(await scheduler.cancelTask(task.id)).toBe(false);
    expect((await scheduler.retryTask(task.id)).state).toBe('waiting');
    await expect(scheduler.retryTask(task.id)).rejects.toMatchObject({ code: 'ERR_TASK_NOT_FINISHED' });
    await scheduler.close();
  });

  it('nothing in src/ is @deprecated', () => {
    const files = (readdirSync(new URL('../src/', import.meta.url), { recursive: true }) as string[]).filter((file) =>
      file.endsWith('.ts'),
    );
    const deprecated = files.filter((file) => readFileSync(new URL(`../src/${file}`, import.meta.url), 'utf8').includes('@deprecated'));
    expect(deprecated).toEqual([]);
  });
});

describe('one meaning per name', () => {
  /** The source of every file in src/<folder>/ (not its subfolders). */
  function sources(folder: string): [string, string][] {
    const dir = new URL(`../src/${folder}/`, import.meta.url);
    return readdirSync(dir)
      .filter((file) => file.endsWith('.ts'))
      .map((file) => [`src/${folder}/${file}`, readFileSync(new URL(file, dir), 'utf8')]);
  }

  it('the core says waiting: never pending', () => {
    const saying = sources('core')
      .filter(([, text]) => /pending/i.test(text))
      .map(([file]) => file);
    expect(saying).toEqual([]);
  });

  it('flow names only tasks that wait for others: the core, where the limits gate lives, never says flow', () => {
    const saying = sources('core')
      .filter(([, text]) => /\bflow/i.test(text))
      .map(([file]) => file);
    expect(saying).toEqual([]);
  });

  it('key identifies (a dedupe key, a stored job); group is what shares a limit, in memory and stored alike', async () => {
    const clock = new ManualClock(START);
    const memory = new Scheduler({ clock });
    const limited = { rate: { group: 'chat:1', limit: 1, interval: '1s' }, concurrency: { group: 'tenant:1', limit: 2 } } as const;
    const task = memory.after(10, () => {}, { key: 'digest:1', ...limited });
    expect(task.key).toBe('digest:1');
    // The limits' word was `key` once: it is refused, naming the word to use.
    expect(() => memory.after(10, () => {}, { rate: { key: 'chat:1', limit: 1, interval: '1s' } as never })).toThrow(
      /Unknown `rate` option "key".*expected `group`/,
    );
    expect(() => memory.after(10, () => {}, { concurrency: { key: 'tenant:1', limit: 2 } as never })).toThrow(
      /Unknown `concurrency` option "key".*expected `group`/,
    );
    await memory.close();

    const scheduler = stored();
    scheduler.define('work', () => {});
    const row = await scheduler.schedule(START + 3_600_000, 'work', { key: 'digest:1', ...limited });
    expect(row).toMatchObject({
      key: 'digest:1',
      rate: { group: 'chat:1', limit: 1, interval: 1_000 },
      concurrency: { group: 'tenant:1', limit: 2 },
    });
    await scheduler
      .every(1)
      .day()
      .run('work', { key: 'daily', ...limited });
    expect(await scheduler.getJob('daily')).toMatchObject({ key: 'daily' });
    await scheduler.close();
  });

  it('once is only the event method: a one-shot job is at(when)', async () => {
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock });
    const job = scheduler.at(START + 1_000).run(() => 'done');
    expect(job.nextRunAt).toEqual(new Date(START + 1_000));
    expect(() => (scheduler.once as (when: unknown) => unknown)(START + 1_000)).toThrow(/Unknown event/);
    let idle = 0;
    scheduler.once('idle', () => void idle++);
    await clock.advance(1_000);
    expect(job.state).toBe('done');
    expect(idle).toBe(1);
    await scheduler.close();
  });

  it('the task verbs act on the tasks of in-memory flows; flows has no cancel, retry or waitFor of its own', async () => {
    const clock = new ManualClock(START);
    const scheduler = new Scheduler({ clock, onError: () => {} });
    let up = false;
    const flow = await scheduler.flows.add({
      tasks: {
        fetch: {
          handler: () => {
            if (!up) throw new Error('down');
            return 'rows';
          },
        },
        parse: { handler: () => 'parsed', after: ['fetch'] },
        later: { handler: () => 'never', when: START + 60_000 },
      },
    });
    expect(await scheduler.cancelTask(flow.tasks.later!.id)).toBe(true);
    expect((await scheduler.waitFor(flow.tasks.parse!.id)).state).toBe('failed');
    up = true;
    expect((await scheduler.retryTask(flow.tasks.parse!.id)).state).toBe('blocked');
    expect(await scheduler.waitFor(flow.tasks.parse!.id)).toMatchObject({ state: 'succeeded', result: 'parsed' });
    for (const verb of ['cancel', 'retry', 'waitFor']) expect(verb in scheduler.flows).toBe(false);
    await scheduler.close();
  });
});
