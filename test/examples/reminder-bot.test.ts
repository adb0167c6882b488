import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createBot, createStoredBot, formatDuration, parseDuration } from '../../examples/reminder-bot.js';
import { Scheduler } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { ManualClock } from '../../src/testing.js';
import { lines, program, ROOT, runExample } from './child.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

// Thursday 2026-01-01 12:00:00 UTC.
const START = Date.UTC(2026, 0, 1, 12, 0, 0);

let scheduler: Scheduler | undefined;

afterEach(async () => {
  await scheduler?.close();
  scheduler = undefined;
});

function setup() {
  const clock = new ManualClock(START);
  scheduler = new Scheduler({
    clock,
    timezone: 'UTC',
    onError: (error) => {
      throw error;
    },
  });
  const out: string[] = [];
  const bot = createBot({ scheduler, output: (line) => out.push(line) });
  /** Runs commands and returns what they printed. */
  const send = async (...commands: string[]) => {
    const from = out.length;
    for (const command of commands) await bot.handle(command);
    return out.slice(from);
  };
  /** Advances the clock and returns what fired. */
  const advance = async (ms: number) => {
    const from = out.length;
    await clock.advance(ms);
    return out.slice(from);
  };
  return { clock, scheduler, bot, out, send, advance };
}

describe('durations', () => {
  it('parses single and combined units', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('10s')).toBe(10_000);
    expect(parseDuration('5m')).toBe(5 * MINUTE);
    expect(parseDuration('2h')).toBe(2 * HOUR);
    expect(parseDuration('1d')).toBe(24 * HOUR);
    expect(parseDuration('1h30m')).toBe(90 * MINUTE);
    expect(parseDuration('1m500ms')).toBe(MINUTE + 500);
    expect(parseDuration('1.5h')).toBe(90 * MINUTE);
    for (const bad of ['', '10', 'm', '10x', '-5s', '30m1h', '1h  30m']) expect(parseDuration(bad)).toBeUndefined();
  });

  it('formats compactly', () => {
    expect(formatDuration(90 * MINUTE)).toBe('1h30m');
    expect(formatDuration(6 * MINUTE)).toBe('6m');
    expect(formatDuration(0)).toBe('0s');
  });
});

describe('reminder bot, in-process with a ManualClock', () => {
  it('fires a one-shot reminder at its time, and lists it', async () => {
    const { send, advance } = setup();
    expect(await send('remind 10s stretch')).toEqual(['#1 scheduled for Thu 2026-01-01 12:00:10']);
    expect(await send('list')).toEqual(['#1  once   scheduled  next Thu 2026-01-01 12:00:10  stretch']);
    expect(await advance(9_999)).toEqual([]);
    expect(await advance(1)).toEqual(['⏰ #1 stretch']);
    expect(await send('list')).toEqual(['#1  once   done       next -  stretch']);
  });

  it('accepts combined durations and keeps ids increasing', async () => {
    const { send, advance } = setup();
    expect(await send('remind 1h30m call mom', 'remind 500ms blink')).toEqual([
      '#1 scheduled for Thu 2026-01-01 13:30:00',
      '#2 scheduled for Thu 2026-01-01 12:00:00',
    ]);
    expect(await advance(90 * MINUTE)).toEqual(['⏰ #2 blink', '⏰ #1 call mom']);
  });

  it('schedules recurring jobs with every() and cron(), printing the next run', async () => {
    const { send, advance, scheduler } = setup();
    expect(
      await send(
        'every day at 09:00 standup',
        'every monday at 08:30 planning',
        'every 15m water',
        'every weekday at 18:00 go home',
        'cron */5 * * * * check mail',
        'every 2 hours stretch',
        'cron @daily backup',
      ),
    ).toEqual([
      '#1 every day at 09:00: next run Fri 2026-01-02 09:00:00',
      '#2 every monday at 08:30: next run Mon 2026-01-05 08:30:00',
      '#3 every 15m: next run Thu 2026-01-01 12:15:00',
      '#4 every weekday at 18:00: next run Thu 2026-01-01 18:00:00',
      '#5 cron */5 * * * *: next run Thu 2026-01-01 12:05:00',
      '#6 every 2 hours: next run Thu 2026-01-01 14:00:00',
      '#7 cron @daily: next run Fri 2026-01-02 00:00:00',
    ]);
    expect(scheduler.jobs()).toHaveLength(7);

    const fired = await advance(24 * HOUR);
    const count = (text: string) => fired.filter((line) => line === text).length;
    expect(count('⏰ #1 standup')).toBe(1);
    expect(count('⏰ #2 planning')).toBe(0);
    expect(count('⏰ #3 water')).toBe(96);
    expect(count('⏰ #4 go home')).toBe(1);
    expect(count('⏰ #5 check mail')).toBe(288);
    expect(count('⏰ #6 stretch')).toBe(12);
    expect(count('⏰ #7 backup')).toBe(1);

    // Friday 12:00 → the weekend: "go home" skips Saturday and Sunday.
    const weekend = await advance(3 * 24 * HOUR);
    expect(weekend.filter((line) => line === '⏰ #4 go home')).toHaveLength(1); // Friday only; Monday 18:00 is later
    expect(weekend.filter((line) => line === '⏰ #2 planning')).toHaveLength(1); // Monday 08:30
  });

  it('snoozes a one-shot: moves it, keeping its id and text; a fired one comes back', async () => {
    const { send, advance } = setup();
    await send('remind 1m tea');
    expect(await send('snooze 1 5m')).toEqual(['#1 snoozed until Thu 2026-01-01 12:05:00']);
    expect(await advance(MINUTE)).toEqual([]); // the original time no longer fires
    expect(await advance(4 * MINUTE)).toEqual(['⏰ #1 tea']);
    expect(await send('snooze #1 10s')).toEqual(['#1 snoozed until Thu 2026-01-01 12:05:10']);
    expect(await send('list')).toEqual(['#1  once   scheduled  next Thu 2026-01-01 12:05:10  tea']);
    expect(await advance(10_000)).toEqual(['⏰ #1 tea']);
    // The default snooze is 5 minutes.
    expect(await send('snooze 1')).toEqual(['#1 snoozed until Thu 2026-01-01 12:10:10']);
  });

  it('snoozes a recurring job with an extra one-shot; snoozing again moves it', async () => {
    const { send, advance, scheduler } = setup();
    await send('every day at 09:00 standup');
    expect(await send('snooze 1 1m')).toEqual(['#1 snoozed until Thu 2026-01-01 12:01:00']);
    expect(await send('snooze 1 5m')).toEqual(['#1 snoozed until Thu 2026-01-01 12:05:00']);
    expect(scheduler.waitingTasks({ keyPrefix: 'reminder:1' }).map((task) => task.key)).toEqual(['reminder:1:snooze']);
    expect(await send('list')).toEqual(['#1  every  scheduled  next Thu 2026-01-01 12:05:00  standup  (every day at 09:00)']);
    expect(await advance(MINUTE)).toEqual([]);
    expect(await advance(4 * MINUTE)).toEqual(['⏰ #1 standup (snoozed)']);
    expect(await send('list')).toEqual(['#1  every  scheduled  next Fri 2026-01-02 09:00:00  standup  (every day at 09:00)']);
    expect(await advance(21 * HOUR)).toEqual(['⏰ #1 standup']);
  });

  it('pauses and resumes a one-shot, keeping the time it had left', async () => {
    const { send, advance } = setup();
    await send('remind 10m stretch');
    await advance(4 * MINUTE);
    expect(await send('pause 1')).toEqual(['#1 paused']);
    expect(await send('list')).toEqual(['#1  once   paused     6m left  stretch']);
    expect(await advance(HOUR)).toEqual([]);
    expect(await send('resume 1')).toEqual(['#1 resumed; next run Thu 2026-01-01 13:10:00']);
    expect(await advance(6 * MINUTE - 1)).toEqual([]);
    expect(await advance(1)).toEqual(['⏰ #1 stretch']);
  });

  it('pauses and resumes a recurring job', async () => {
    const { send, advance } = setup();
    await send('every 15m water');
    expect(await advance(15 * MINUTE)).toEqual(['⏰ #1 water']);
    expect(await send('pause 1')).toEqual(['#1 paused']);
    expect(await send('list')).toEqual(['#1  every  paused     next -  water  (every 15m)']);
    expect(await advance(HOUR)).toEqual([]);
    expect(await send('resume 1')).toEqual(['#1 resumed; next run Thu 2026-01-01 13:30:00']);
    expect(await advance(15 * MINUTE)).toEqual(['⏰ #1 water']);
  });

  it('cancels a reminder and its snoozes with one abort', async () => {
    const { send, advance, scheduler } = setup();
    await send('every day at 09:00 standup', 'snooze 1 1m', 'remind 1m tea');
    expect(scheduler.size).toBe(3);
    expect(await send('cancel #1')).toEqual(['#1 cancelled']);
    expect(scheduler.size).toBe(1);
    expect(scheduler.jobs()).toHaveLength(0);
    expect(await advance(2 * 24 * HOUR)).toEqual(['⏰ #2 tea']);
    expect(await send('cancel 2', 'list')).toEqual(['#2 cancelled', 'no reminders']);
  });

  it('reports mistakes clearly and changes nothing', async () => {
    const { send, scheduler } = setup();
    await send('remind 1h keep me');
    const errors = await send(
      'frobnicate',
      'remind',
      'remind 10x hi',
      'remind 10s',
      'remind 0s now',
      'remind 99999d forever',
      'every',
      'every fortnight party',
      'every 0m spin',
      'every day at 25:00 late',
      'every day at',
      'every 2 weekday at 10:00 x',
      'cron */5 * * *',
      'cron 61 * * * * bad minute',
      'cron "0 0 0 * * * * *" too many',
      'snooze',
      'snooze 99 5m',
      'snooze 1 soon',
      'pause abc',
      'resume 1',
    );
    expect(errors).toEqual([
      'error: unknown command "frobnicate" (type help)',
      'error: usage: remind <duration> <text>, e.g. remind 10s stretch',
      'error: bad duration "10x": use e.g. 500ms, 10s, 5m, 2h, 1d or 1h30m',
      'error: missing the reminder text; usage: remind <duration> <text>, e.g. remind 10s stretch',
      'error: the duration must be more than 0',
      'error: the duration "99999d" is too long: at most 3650d',
      'error: usage: every <rule> [at HH:MM] <text>, e.g. every day at 09:00 standup',
      'error: unknown schedule "every fortnight party": use a duration (15m), a unit (day, 2 hours), a weekday (monday), weekday or weekend',
      'error: the duration must be more than 0',
      // The library's own messages come through unchanged.
      'error: Invalid time "25:00" for at() with days: hour 25 is out of range 0-23',
      'error: missing the time after "at"; usage: every <rule> [at HH:MM] <text>, e.g. every day at 09:00 standup',
      'error: every(2).weekday() is ambiguous; use every().weekday()',
      'error: a cron rule needs 5 fields, got 4; usage: cron <5 fields> <text>, e.g. cron */5 * * * * check mail',
      expect.stringMatching(/^error: Invalid cron expression "61 \* \* \* \*": .*minute/),
      expect.stringMatching(/^error: Invalid cron expression "0 0 0 \* \* \* \* \*": wrong number of fields \(8\)/),
      'error: usage: snooze <id>, e.g. snooze 1 (see list)',
      'error: no reminder #99 (see list)',
      'error: bad duration "soon": use e.g. 500ms, 10s, 5m, 2h, 1d or 1h30m',
      'error: "abc" is not a reminder id; ids look like 3 or #3',
      'error: #1 is not paused',
    ]);
    // Nothing was scheduled, and no id was used up.
    expect(scheduler.size).toBe(1);
    expect(scheduler.jobs()).toHaveLength(0);
    expect(await send('list')).toEqual(['#1  once   scheduled  next Thu 2026-01-01 13:00:00  keep me']);
    expect(await send('remind 1s next')).toEqual(['#2 scheduled for Thu 2026-01-01 12:00:01']);
  });

  it('prints help, ignores blank lines, and accepts any case', async () => {
    const { send } = setup();
    const help = await send('help');
    expect(help[0]).toBe('commands:');
    expect(help.some((line) => line.includes('snooze <id> [duration]'))).toBe(true);
    expect(await send('', '   ')).toEqual([]);
    expect(await send('REMIND 1s Hi There')).toEqual(['#1 scheduled for Thu 2026-01-01 12:00:01']);
  });

  it('waits only for one-shot reminders; quit closes the scheduler', async () => {
    const { send, advance, bot, scheduler } = setup();
    await send('every 1m tick', 'remind 2m a', 'every day at 09:00 standup');
    const snoozed = await send('snooze 3 3m');
    expect(snoozed).toEqual(['#3 snoozed until Thu 2026-01-01 12:03:00']);
    expect(bot.waitingOneShots).toBe(2);
    let done = false;
    void bot.oneShotsDone().then(() => (done = true));
    await advance(2 * MINUTE);
    expect(done).toBe(false);
    await advance(MINUTE);
    expect(done).toBe(true); // the recurring jobs are still scheduled
    expect(bot.waitingOneShots).toBe(0);
    expect(scheduler.jobs()).toHaveLength(2);

    expect(await send('quit')).toEqual(['bye']);
    expect(bot.closed).toBe(true);
    expect(scheduler.closed).toBe(true);
    expect(scheduler.size).toBe(0);
    expect(await send('list')).toEqual(['error: the bot is closed']);
  });

  it('a paused one-shot does not keep the bot waiting', async () => {
    const { send, bot } = setup();
    await send('remind 1m a', 'pause 1');
    expect(bot.waitingOneShots).toBe(0);
    await expect(bot.oneShotsDone()).resolves.toBeUndefined();
  });
});

describe('reminder bot, through a real pipe', () => {
  it('runs piped commands, fires the reminder, then exits 0 on its own', async () => {
    const result = await runExample('examples/reminder-bot.ts', {
      args: ['--memory'],
      // 3 s: the four lines are read long before it fires, however loaded the machine.
      input: 'remind 3s hi\nlist\nevery 1h water\nbogus\n',
      env: { TZ: 'UTC' },
    });
    expect(result.stderr).toContain('(end of input: waiting for 1 reminder to fire)');
    expect(result.code).toBe(0);
    const out = lines(result.stdout);
    const time = String.raw`\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d`;
    expect(out).toHaveLength(6);
    expect(out[0]).toMatch(new RegExp(`^#1 scheduled for ${time}$`));
    expect(out[1]).toMatch(new RegExp(`^#1  once   scheduled  next ${time}  hi$`));
    expect(out[2]).toMatch(new RegExp(`^#2 every 1h: next run ${time}$`));
    expect(out[3]).toBe('error: unknown command "bogus" (type help)');
    expect(out[4]).toBe('⏰ #1 hi');
    expect(out[5]).toBe('bye');
  }, 60_000);

  it('quit exits at once, dropping waiting reminders', async () => {
    const result = await runExample('examples/reminder-bot.ts', {
      args: ['--memory'],
      input: 'remind 1h later\nquit\nlist\n',
      env: { TZ: 'UTC' },
    });
    expect(result.code).toBe(0);
    const out = lines(result.stdout);
    expect(out).toHaveLength(2);
    expect(out[0]).toMatch(/^#1 scheduled for /);
    expect(out[1]).toBe('bye');
    expect(result.stderr).toBe('');
  }, 60_000);
});

/** The bot as a child process with its stdin left open, so a test can talk to it and kill it. */
function startBot(db: string) {
  const child = spawn(process.execPath, [...program('examples/reminder-bot.ts'), '--db', db], {
    cwd: ROOT,
    env: { ...process.env, TZ: 'UTC' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let changed = () => {};
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    changed();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    changed();
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      changed();
      resolve(code);
    }),
  );
  return {
    child,
    exited,
    get out() {
      return lines(stdout);
    },
    get err() {
      return stderr;
    },
    send(text: string) {
      child.stdin.write(`${text}\n`);
    },
    /**
     * Resolves once stdout has `count` lines matching `pattern`; fails after 20 s (bounded), showing
     * the output. The first wait includes the bot's start, seconds on a loaded machine.
     */
    until(pattern: RegExp, count = 1): Promise<string[]> {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no ${count} line(s) matching ${pattern} within 20 s\nstdout:\n${stdout}\nstderr:\n${stderr}`)),
          20_000,
        );
        changed = () => {
          const found = lines(stdout).filter((line) => pattern.test(line));
          if (found.length < count) return;
          clearTimeout(timer);
          changed = () => {};
          resolve(found);
        };
        changed();
      });
    },
  };
}

describe('reminder bot, kept in a SQLite file', () => {
  it('survives being killed: a restart lists every reminder and they still fire', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-bot-'));
    const db = join(dir, 'reminders.db');
    try {
      const first = startBot(db);
      first.send('remind 3s soon');
      first.send('every 1s tick');
      first.send('remind 1h later');
      first.send('pause 3');
      first.send('cron 0 9 * * * standup');
      first.send('cancel 4');
      await first.until(/^#4 cancelled$/);
      expect(first.out.slice(0, 6)).toEqual([
        expect.stringMatching(/^#1 scheduled for /),
        expect.stringMatching(/^#2 every 1s: next run /),
        expect.stringMatching(/^#3 scheduled for /),
        '#3 paused',
        expect.stringMatching(/^#4 cron 0 9 \* \* \*: next run .* 09:00:00$/),
        '#4 cancelled',
      ]);
      first.child.kill('SIGKILL'); // no close(), no goodbye: only what the store has committed survives
      expect(await first.exited).toBe(null);

      const second = startBot(db);
      second.send('list');
      // The one-shot fires (now, or when due if the restart was quick), the job keeps running, the paused one stays paused.
      await second.until(/^⏰ #1 soon$/);
      await second.until(/^⏰ #2 tick$/);
      // By next run: #1 and #2 in either order (it depends on how quick the restart was), the paused #3 last.
      // (On a loaded machine the list may come after the first reminders fire: wait for its lines.)
      const listed = await second.until(/^#\d+  /, 3);
      expect(listed).toHaveLength(3);
      expect(listed).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^#1  once   (scheduled  next \w{3} [\d-]+ [\d:]+|done       next - +)  soon$/),
          expect.stringMatching(/^#2  every  scheduled  next \w{3} [\d-]+ [\d:]+  tick  \(every 1s\)$/),
        ]),
      );
      expect(listed[2]).toMatch(/^#3  once   paused     (59m\S*|1h) left +later$/);
      expect(second.err).toContain('(3 reminders restored from');
      // Ids go on after the stored ones (the cancelled #4 included), and quit keeps what is waiting.
      second.send('remind 1h next');
      await second.until(/^#5 scheduled for /);
      second.send('quit');
      expect(await second.exited).toBe(0);

      const third = startBot(db);
      third.send('list');
      third.send('quit');
      expect(await third.exited).toBe(0);
      expect(third.out.filter((line) => /^#\d+  /.test(line))).toEqual([
        expect.stringMatching(/^#2  every  scheduled  next .*  tick  \(every 1s\)$/),
        expect.stringMatching(/^#5  once   scheduled  next .*  next$/),
        expect.stringMatching(/^#3  once   paused     \S+ left +later$/),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('a second bot on the same file exits 1 with the one-line StoreInUseError message', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-bot-'));
    const db = join(dir, 'reminders.db');
    try {
      const first = startBot(db);
      first.send('remind 1h hold the file');
      await first.until(/^#1 scheduled for /);
      const second = startBot(db);
      expect(await second.exited).toBe(1);
      expect(second.err.trim().split('\n')).toEqual([expect.stringMatching(/^error: .*reminders\.db/)]);
      first.send('quit');
      expect(await first.exited).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('says how many reminders it restored before an overdue one fires', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-bot-'));
    const file = join(dir, 'reminders.db');
    try {
      const lines: string[] = [];
      const output = (line: string) => lines.push(line);
      const before = new Scheduler({ clock: new ManualClock(START), timezone: 'UTC', store: sqliteStore(file) });
      const first = await createStoredBot({ scheduler: before, output });
      await first.handle('remind 10s overdue');
      await first.handle('quit');
      // A minute later the reminder is overdue: it fires at start(), after the notice.
      const clock = new ManualClock(START + MINUTE);
      const after = new Scheduler({ clock, timezone: 'UTC', store: sqliteStore(file) });
      const second = await createStoredBot({ scheduler: after, output, onRestore: (count) => output(`restored ${count}`) });
      await clock.advance(0);
      await after.onIdle();
      expect(lines.slice(2)).toEqual(['restored 1', '⏰ #1 overdue']);
      await second.handle('quit');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('reminder bot, list', () => {
  it('lists by next run, paused and done last, in aligned columns', async () => {
    const { send, advance } = setup();
    await send('remind 2h later', 'remind 10s soon', 'every 1h water', 'remind 5s gone', 'remind 1h paused', 'pause 5');
    await advance(5_000);
    for (let i = 6; i <= 10; i++) await send(`remind ${i}h filler ${i}`);
    expect(await send('list')).toEqual([
      '#2   once   scheduled  next Thu 2026-01-01 12:00:10  soon',
      '#3   every  scheduled  next Thu 2026-01-01 13:00:00  water  (every 1h)',
      '#1   once   scheduled  next Thu 2026-01-01 14:00:00  later',
      '#6   once   scheduled  next Thu 2026-01-01 18:00:05  filler 6',
      '#7   once   scheduled  next Thu 2026-01-01 19:00:05  filler 7',
      '#8   once   scheduled  next Thu 2026-01-01 20:00:05  filler 8',
      '#9   once   scheduled  next Thu 2026-01-01 21:00:05  filler 9',
      '#10  once   scheduled  next Thu 2026-01-01 22:00:05  filler 10',
      '#4   once   done       next -                        gone',
      '#5   once   paused     1h left                       paused',
    ]);
  });
});

describe('reminder bot, a conversation (ctx.step, ctx.receive)', () => {
  it('asks, takes the answer sent while it waits, and ends; unanswered, it nudges once and gives up', async () => {
    const { send, advance, bot, out } = setup();
    /** What a command and the runs it makes due print (a run may print after the command returned). */
    const run = async (command: string) => {
      const from = out.length;
      await send(command);
      await advance(0);
      return out.slice(from);
    };
    // Asked at once (due now), then waiting for the answer.
    expect(await run('ask 10m what time suits you?')).toEqual(['❓ #1 what time suits you? (answer 1 <text>)']);
    expect(bot.waitingOneShots).toBe(1);
    // The answer makes it due at once, well before its 10 minutes.
    expect(await run('answer 1 10:30')).toEqual(['💬 #1 10:30']);
    expect(await send('answer 1 again')).toEqual(['error: no question #1 waits for an answer']);
    expect(await run('ask 5m lunch?')).toEqual(['❓ #2 lunch? (answer 2 <text>)']);
    expect(await advance(5 * MINUTE)).toEqual(['❓ #2 still there? lunch?']);
    expect(await advance(5 * MINUTE)).toEqual(['#2 no answer: lunch?']);
    expect(bot.waitingOneShots).toBe(0);
    expect(await send('ask', 'ask 5m', 'answer x hi')).toEqual([
      'error: usage: ask <duration> <question>, e.g. ask 10m what time suits you?',
      'error: missing the reminder text; usage: ask <duration> <question>, e.g. ask 10m what time suits you?',
      'error: usage: answer <id> <text>, e.g. answer 4 10:30',
    ]);
  });

  it('with a store, a conversation outlives a restart: the nudge and the answer come after it, nothing printed twice', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'taskheap-bot-'));
    const file = join(dir, 'reminders.db');
    try {
      const lines: string[] = [];
      const output = (line: string) => lines.push(line);
      const clock = new ManualClock(START);
      const before = new Scheduler({ clock, timezone: 'UTC', store: sqliteStore(file) });
      const first = await createStoredBot({ scheduler: before, output });
      await first.handle('ask 10m what time suits you?');
      await clock.advance(0);
      await until(() => lines.length === 1);
      await first.handle('quit');
      const after = new Scheduler({ clock, timezone: 'UTC', store: sqliteStore(file) });
      const second = await createStoredBot({ scheduler: after, output });
      expect(second.waitingOneShots).toBe(1);
      await clock.advance(10 * MINUTE);
      await until(() => lines.length === 3);
      await second.handle('answer 1 10:30');
      await clock.advance(0);
      await until(() => lines.length === 4);
      expect(lines).toEqual([
        '❓ #1 what time suits you? (answer 1 <text>)',
        'bye',
        '❓ #1 still there? what time suits you?',
        '💬 #1 10:30',
      ]);
      await second.oneShotsDone();
      await second.handle('quit');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; !condition(); i++) {
    if (i > 1_000) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
