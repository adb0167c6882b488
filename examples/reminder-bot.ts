/**
 * A reminder bot on one taskheap Scheduler, in the spirit of htask's
 * snooze-reminder bot. It reads commands line by line and answers on stdout.
 *
 *   npm start                                   # interactive, with a `> ` prompt
 *   printf 'remind 1s hi\nlist\n' | npm start   # piped
 *
 * Commands (type `help` for the full list):
 *
 *   remind 10s stretch                 one-shot; durations: 500ms 10s 5m 2h 1d 1h30m
 *   every day at 09:00 standup         recurring, via scheduler.every()
 *   every monday at 08:30 planning
 *   every weekday at 18:00 go home
 *   every 15m water                    fixed rate (also: every 2 hours stretch)
 *   cron 0,30 9-17 * * 1-5 check mail  5 cron fields (or @daily, or "6 fields" quoted)
 *   snooze 3 5m                        one-shot: fire again 5m from now (same id/text);
 *                                      recurring: an extra one-shot in 5m
 *   pause 3 / resume 3 / cancel 3      ids may be written 3 or #3
 *   list / help / quit
 *
 * Times are shown in the scheduler's time zone (the system zone; set TZ to
 * change it). Each reminder owns an AbortController whose signal is passed to
 * every task and job it creates, so `cancel` is one `abort()`; `snooze` and
 * `pause` cancel single tasks with `task.cancel()`.
 *
 * When input ends (Ctrl-D, or the end of a pipe) the bot keeps running until
 * every scheduled one-shot reminder, snoozes included, has fired; then it
 * closes the scheduler and exits 0. Recurring jobs and paused reminders do not
 * keep it alive. `quit`, Ctrl-C and SIGTERM close it at once (pending
 * reminders are dropped). So `printf 'remind 200ms hi\n' | npm start` prints
 * the reminder after 200 ms and exits.
 *
 * The logic lives in `createBot()`, which tests drive with a ManualClock; the
 * stdin wiring is the small `main()` at the bottom.
 */
import * as readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import { DateTime } from 'luxon';
import { Scheduler } from '../src/index.js';
import type { Job, Task } from '../src/index.js';
import { parseDuration as parseTaskheapDuration } from '../src/index.js';

export interface BotOptions {
  /** The scheduler reminders go to; `quit` closes it. */
  scheduler: Scheduler;
  /** Where the bot's lines go (console.log in main; an array in tests). */
  output: (line: string) => void;
}

export interface Bot {
  /** Runs one command line. Resolves once it is handled (for `quit`: once the scheduler closed). */
  handle(line: string): Promise<void>;
  /** Scheduled (not paused) one-shot reminders and snoozes that have not fired yet. */
  readonly pendingOneShots: number;
  /** Resolves when `pendingOneShots` is 0. */
  oneShotsDone(): Promise<void>;
  /** Whether `quit` ran. */
  readonly closed: boolean;
}

type Kind = 'once' | 'every' | 'cron';

/** A one-shot timer of a reminder: the reminder itself (kind once) or a snooze. */
interface Timer {
  /** Due time (epoch ms) while armed. */
  due: number;
  /** The scheduled task; undefined while paused. */
  task: Task | undefined;
  /** Time left, kept while paused. */
  remaining: number;
  snoozed: boolean;
}

interface Reminder {
  id: number;
  kind: Kind;
  text: string;
  /** How it repeats, as typed: `every day at 09:00`, `cron 0 9 * * 1-5`. */
  rule: string;
  /** Aborting it cancels every task and job of this reminder at once. */
  controller: AbortController;
  job: Job | undefined;
  timers: Set<Timer>;
  paused: boolean;
}

/** A user mistake: printed as `error: ...`, nothing changes. */
class UsageError extends Error {}

const HELP = [
  'commands:',
  '  remind <duration> <text>          e.g. remind 10s stretch, remind 1h30m call mom',
  '  every <rule> [at HH:MM] <text>    e.g. every day at 09:00 standup, every monday at 08:30 planning,',
  '                                         every weekday at 18:00 go home, every 15m water, every 2 hours stretch',
  '  cron <5 fields> <text>            e.g. cron */5 * * * * check mail (or @daily, or "0 */5 * * * *" quoted)',
  '  snooze <id> [duration]            remind again in <duration> (default 5m)',
  '  pause <id> | resume <id> | cancel <id>',
  '  list | help | quit',
  'durations: 500ms 10s 5m 2h 1d, or combined: 1h30m',
];

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const MAX_DURATION = 3650 * UNIT_MS.d!;

/** `1h30m` → 5_400_000 (taskheap's `parseDuration`); undefined if it is not a duration. */
export function parseDuration(text: string): number | undefined {
  try {
    return parseTaskheapDuration(text);
  } catch {
    return undefined;
  }
}

/** 5_400_000 → `1h30m`. */
export function formatDuration(ms: number): string {
  let rest = Math.max(0, Math.round(ms));
  let out = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms']) {
    const size = UNIT_MS[unit]!;
    const amount = Math.floor(rest / size);
    if (amount > 0) out += `${amount}${unit}`;
    rest -= amount * size;
  }
  return out === '' ? '0s' : out;
}

const WEEKDAYS: Record<string, 'monday' | 'tuesday' | 'wednesday' | 'thursday' | 'friday' | 'saturday' | 'sunday'> = {
  monday: 'monday', mon: 'monday',
  tuesday: 'tuesday', tue: 'tuesday',
  wednesday: 'wednesday', wed: 'wednesday',
  thursday: 'thursday', thu: 'thursday',
  friday: 'friday', fri: 'friday',
  saturday: 'saturday', sat: 'saturday',
  sunday: 'sunday', sun: 'sunday',
};
const UNITS: Record<string, 'seconds' | 'minutes' | 'hours' | 'days' | 'weeks'> = {
  second: 'seconds', seconds: 'seconds',
  minute: 'minutes', minutes: 'minutes',
  hour: 'hours', hours: 'hours',
  day: 'days', days: 'days',
  week: 'weeks', weeks: 'weeks',
};

export function createBot({ scheduler, output }: BotOptions): Bot {
  const reminders = new Map<number, Reminder>();
  let nextId = 1;
  let closed = false;
  let waiters: (() => void)[] = [];

  const now = () => scheduler.clock.now();
  const zone = scheduler.timezone;

  function formatTime(ms: number): string {
    return DateTime.fromMillis(ms, { zone, locale: 'en-US' }).toFormat('ccc yyyy-MM-dd HH:mm:ss');
  }

  function pendingOneShots(): number {
    let count = 0;
    for (const reminder of reminders.values()) {
      for (const timer of reminder.timers) if (timer.task !== undefined) count++;
    }
    return count;
  }

  function notify(): void {
    if (waiters.length === 0 || pendingOneShots() > 0) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  }

  /** Schedules a timer's task; it cancels with the reminder's signal. */
  function arm(reminder: Reminder, timer: Timer): void {
    timer.task = scheduler.schedule(timer.due, () => {
      reminder.timers.delete(timer);
      output(`⏰ #${reminder.id} ${reminder.text}${timer.snoozed ? ' (snoozed)' : ''}`);
      notify();
    }, taskOptions(reminder));
  }

  function addTimer(reminder: Reminder, due: number, snoozed: boolean): Timer {
    const timer: Timer = { due, task: undefined, remaining: 0, snoozed };
    arm(reminder, timer);
    reminder.timers.add(timer);
    return timer;
  }

  function newReminder(kind: Kind, text: string, rule: string): Reminder {
    // The id is taken only once the reminder was created (see register), so a
    // command the library rejects does not use one up.
    return { id: nextId, kind, text, rule, controller: new AbortController(), job: undefined, timers: new Set(), paused: false };
  }

  function register(reminder: Reminder): void {
    nextId++;
    reminders.set(reminder.id, reminder);
  }

  function stateOf(reminder: Reminder): string {
    if (reminder.paused) return 'paused';
    if (reminder.job !== undefined) return reminder.job.state;
    return reminder.timers.size > 0 ? 'scheduled' : 'done';
  }

  /** The earliest upcoming run: the job's next occurrence or a pending snooze. */
  function nextRun(reminder: Reminder): number | undefined {
    let next = reminder.job?.nextRunAt?.getTime();
    for (const timer of reminder.timers) {
      if (timer.task !== undefined && (next === undefined || timer.due < next)) next = timer.due;
    }
    return next;
  }

  function find(arg: string | undefined, command: string): Reminder {
    if (arg === undefined) throw new UsageError(`usage: ${command} <id>, e.g. ${command} 1 (see list)`);
    const match = /^#?(\d+)$/.exec(arg);
    if (match === null) throw new UsageError(`"${arg}" is not a reminder id; ids look like 3 or #3`);
    const reminder = reminders.get(Number(match[1]));
    if (reminder === undefined) throw new UsageError(`no reminder #${match[1]} (see list)`);
    return reminder;
  }

  function needDuration(text: string): number {
    const ms = parseDuration(text);
    if (ms === undefined) throw new UsageError(`bad duration "${text}": use e.g. 500ms, 10s, 5m, 2h, 1d or 1h30m`);
    if (ms === 0) throw new UsageError('the duration must be more than 0');
    if (ms > MAX_DURATION) throw new UsageError(`the duration "${text}" is too long: at most 3650d`);
    return ms;
  }

  function needText(words: string[], usage: string): string {
    const text = words.join(' ').trim();
    if (text === '') throw new UsageError(`missing the reminder text; usage: ${usage}`);
    return text;
  }

  function remind(args: string[]): void {
    const usage = 'remind <duration> <text>, e.g. remind 10s stretch';
    if (args.length === 0) throw new UsageError(`usage: ${usage}`);
    const ms = needDuration(args[0]!);
    const text = needText(args.slice(1), usage);
    const reminder = newReminder('once', text, `in ${args[0]}`);
    const timer = addTimer(reminder, now() + ms, false);
    register(reminder);
    output(`#${reminder.id} scheduled for ${formatTime(timer.due)}`);
  }

  function every(args: string[]): void {
    const usage = 'every <rule> [at HH:MM] <text>, e.g. every day at 09:00 standup';
    const words = [...args];
    const first = words.shift()?.toLowerCase();
    if (first === undefined) throw new UsageError(`usage: ${usage}`);
    if (parseDuration(first) !== undefined) {
      // every 15m water: a fixed rate from now; whole days are calendar days (DST-safe).
      const interval = needDuration(first);
      const reminder = newReminder('every', needText(words, usage), `every ${first}`);
      const days = interval % UNIT_MS.d! === 0 ? interval / UNIT_MS.d! : undefined;
      return startJob(reminder, () => {
        const builder = days === undefined ? scheduler.every(interval).milliseconds() : scheduler.every(days).days();
        return builder.run(() => fireJob(reminder), taskOptions(reminder));
      });
    }
    // every [N] <unit|weekday|weekday-set> [at <time>] <text>
    let count = 1;
    let unitWord = first;
    if (/^\d+$/.test(first)) {
      count = Number(first);
      unitWord = words.shift()?.toLowerCase() ?? '';
    }
    const unit = UNITS[unitWord];
    const weekday = WEEKDAYS[unitWord];
    const days = unitWord === 'weekday' || unitWord === 'weekdays' ? 'weekday' : unitWord === 'weekend' || unitWord === 'weekends' ? 'weekend' : undefined;
    if (unit === undefined && weekday === undefined && days === undefined) {
      throw new UsageError(`unknown schedule "every ${args.slice(0, 2).join(' ')}": use a duration (15m), a unit (day, 2 hours), a weekday (monday), weekday or weekend`);
    }
    let at: string | undefined;
    if (words[0]?.toLowerCase() === 'at') {
      words.shift();
      at = words.shift();
      if (at === undefined) throw new UsageError(`missing the time after "at"; usage: ${usage}`);
    }
    const text = needText(words, usage);
    const rule = `every ${count === 1 ? '' : `${count} `}${unitWord}${at === undefined ? '' : ` at ${at}`}`;
    const reminder = newReminder('every', text, rule);
    startJob(reminder, () => {
      // The builder validates: every(0), at('25:00'), every(2).weekday() throw clear errors.
      let builder = scheduler.every(count);
      if (unit !== undefined) builder = builder[unit]();
      else if (weekday !== undefined) builder = builder[weekday]();
      else builder = days === 'weekday' ? builder.weekday() : builder.weekend();
      if (at !== undefined) builder = builder.at(at);
      return builder.run(() => fireJob(reminder), taskOptions(reminder));
    });
  }

  function cron(args: string[]): void {
    const usage = 'cron <5 fields> <text>, e.g. cron */5 * * * * check mail';
    if (args.length === 0) throw new UsageError(`usage: ${usage}`);
    let expression: string;
    let rest: string[];
    const joined = args.join(' ');
    const quoted = /^(["'])(.*?)\1\s*(.*)$/.exec(joined);
    if (quoted !== null) {
      expression = quoted[2]!;
      rest = quoted[3]!.split(/\s+/).filter(Boolean);
    } else if (args[0]!.startsWith('@')) {
      expression = args[0]!;
      rest = args.slice(1);
    } else {
      if (args.length < 5) throw new UsageError(`a cron rule needs 5 fields, got ${args.length}; usage: ${usage}`);
      expression = args.slice(0, 5).join(' ');
      rest = args.slice(5);
    }
    const text = needText(rest, usage);
    const reminder = newReminder('cron', text, `cron ${expression}`);
    startJob(reminder, () => scheduler.cron(expression).run(() => fireJob(reminder), taskOptions(reminder)));
  }

  function taskOptions(reminder: Reminder) {
    return { signal: reminder.controller.signal, name: `reminder #${reminder.id}` };
  }

  function fireJob(reminder: Reminder): void {
    output(`⏰ #${reminder.id} ${reminder.text}`);
  }

  /** Builds the job (which may throw a library error: then nothing was created) and announces it. */
  function startJob(reminder: Reminder, build: () => Job): void {
    reminder.job = build();
    register(reminder);
    const next = reminder.job.nextRunAt;
    output(`#${reminder.id} ${reminder.rule}: next run ${next === undefined ? 'never' : formatTime(next.getTime())}`);
  }

  function snooze(args: string[]): void {
    const reminder = find(args[0], 'snooze');
    const ms = needDuration(args[1] ?? '5m');
    if (args.length > 2) throw new UsageError('usage: snooze <id> [duration], e.g. snooze 3 5m');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is paused; resume it first`);
    if (reminder.job === undefined) {
      // A one-shot: move it (or, once it fired, bring it back) to now + ms.
      for (const timer of reminder.timers) timer.task?.cancel();
      reminder.timers.clear();
    }
    const timer = addTimer(reminder, now() + ms, reminder.job !== undefined);
    output(`#${reminder.id} snoozed until ${formatTime(timer.due)}`);
    notify();
  }

  function pause(args: string[]): void {
    const reminder = find(args[0], 'pause');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is already paused`);
    if (stateOf(reminder) === 'done') throw new UsageError(`#${reminder.id} has already fired (snooze it to be reminded again)`);
    const at = now();
    for (const timer of reminder.timers) {
      timer.task?.cancel();
      timer.task = undefined;
      timer.remaining = timer.due - at;
    }
    reminder.job?.pause();
    reminder.paused = true;
    output(`#${reminder.id} paused`);
    notify();
  }

  function resume(args: string[]): void {
    const reminder = find(args[0], 'resume');
    if (!reminder.paused) throw new UsageError(`#${reminder.id} is not paused`);
    const at = now();
    for (const timer of reminder.timers) {
      timer.due = at + timer.remaining;
      arm(reminder, timer);
    }
    reminder.job?.resume();
    reminder.paused = false;
    const next = nextRun(reminder);
    output(`#${reminder.id} resumed; next run ${next === undefined ? 'never' : formatTime(next)}`);
  }

  function cancel(args: string[]): void {
    const reminder = find(args[0], 'cancel');
    // One abort cancels the job and every pending task that shares the signal.
    reminder.controller.abort();
    for (const timer of reminder.timers) timer.task?.cancel(); // paused timers have no task; this is a no-op for the rest
    reminders.delete(reminder.id);
    output(`#${reminder.id} cancelled`);
    notify();
  }

  function list(): void {
    if (reminders.size === 0) return output('no reminders');
    for (const reminder of reminders.values()) {
      const state = stateOf(reminder);
      let next: string;
      if (reminder.paused) {
        const left = [...reminder.timers].map((timer) => timer.remaining);
        next = left.length === 0 ? 'next -' : `${formatDuration(Math.min(...left))} left`;
      } else {
        const at = nextRun(reminder);
        next = at === undefined ? 'next -' : `next ${formatTime(at)}`;
      }
      const rule = reminder.kind === 'once' ? '' : `  (${reminder.rule})`;
      output(`#${reminder.id}  ${reminder.kind.padEnd(5)}  ${state.padEnd(9)}  ${next}  ${reminder.text}${rule}`);
    }
  }

  async function handle(line: string): Promise<void> {
    const words = line.trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) return;
    if (closed) return output('error: the bot is closed');
    const [command, ...args] = words;
    try {
      switch (command!.toLowerCase()) {
        case 'remind': return remind(args);
        case 'every': return every(args);
        case 'cron': return cron(args);
        case 'snooze': return snooze(args);
        case 'pause': return pause(args);
        case 'resume': return resume(args);
        case 'cancel': return cancel(args);
        case 'list': return list();
        case 'help': return HELP.forEach((text) => output(text));
        case 'quit':
        case 'exit':
          closed = true;
          await scheduler.close();
          for (const resolve of waiters) resolve();
          waiters = [];
          return output('bye');
        default:
          throw new UsageError(`unknown command "${command}" (type help)`);
      }
    } catch (error) {
      // Usage mistakes and the library's own validation errors (bad cron
      // expression, at('25:00')...) are reported; nothing was changed.
      output(`error: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  return {
    handle,
    get pendingOneShots() {
      return pendingOneShots();
    },
    oneShotsDone() {
      if (closed || pendingOneShots() === 0) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    get closed() {
      return closed;
    },
  };
}

/** stdin/stdout wiring: a prompt when interactive, plain lines when piped. */
async function main(): Promise<void> {
  const scheduler = new Scheduler({ workers: 4 });
  const interactive = process.stdin.isTTY === true && process.stdout.isTTY === true;
  let prompting = interactive;
  const rl = readline.createInterface({ input: process.stdin, output: interactive ? process.stdout : undefined, terminal: interactive });
  rl.setPrompt('> ');
  const print = interactive
    ? (line: string) => {
      // Reminders arrive while the user types: clear the prompt line, print, redraw it.
      // (Not once input has ended: prompt() would resume stdin and keep the process alive.)
      process.stdout.write(`\r\x1b[K${line}\n`);
      if (prompting) rl.prompt(true);
    }
    : (line: string) => console.log(line);
  const bot = createBot({ scheduler, output: print });

  let interrupt!: () => void;
  const interrupted = new Promise<void>((resolve) => (interrupt = resolve));
  let stopping = false;
  const stop = () => {
    stopping = true;
    interrupt();
    rl.close();
  };
  rl.on('SIGINT', stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  if (interactive) {
    console.log(`taskheap reminder bot; times are in ${scheduler.timezone}. Type help for commands.`);
    rl.prompt();
  }
  for await (const line of rl) {
    await bot.handle(line);
    if (bot.closed) break;
    if (interactive) rl.prompt();
  }
  prompting = false;
  if (!bot.closed) {
    const pending = bot.pendingOneShots;
    if (!stopping && pending > 0) {
      // On stderr, so piped stdout carries only the bot's own lines.
      console.error(`(end of input: waiting for ${pending} reminder${pending === 1 ? '' : 's'} to fire)`);
      await Promise.race([bot.oneShotsDone(), interrupted]);
    }
    await bot.handle('quit');
  }
  rl.close();
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
