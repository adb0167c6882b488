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
 *                                      recurring: an extra one-shot in 5m (again: moves it)
 *   pause 3 / resume 3 / cancel 3      ids may be written 3 or #3
 *   ask 10m what time suits you?       a conversation: asks, waits for `answer 4 <text>` up to
 *   answer 4 10:30                     10m, nudges once, then gives up (ctx.step, ctx.receive)
 *   list / help / quit
 *
 * Times are shown in the scheduler's time zone (the system zone; set TZ to
 * change it). Each reminder owns an AbortController whose signal is passed to
 * every task and job it creates, so `cancel` is one `abort()`; `pause`
 * cancels single tasks with `task.cancel()`, and `snooze` schedules the
 * reminder's key again (`reminder:<id>`, or `reminder:<id>:snooze` for a
 * recurring one): the waiting task gives way to the new one.
 *
 * When input ends (Ctrl-D, or the end of a pipe) the bot keeps running until
 * every scheduled one-shot reminder, snoozes included, has fired; then it
 * closes the scheduler and exits 0. Recurring jobs and paused reminders do not
 * keep it alive. `quit`, Ctrl-C and SIGTERM close it at once (waiting
 * reminders stay in the file for the next start; in memory they are dropped).
 * So `printf 'remind 200ms hi\n' | npm start` prints
 * the reminder after 200 ms and exits.
 *
 * Reminders are kept in a SQLite file (`./reminders.db`; `--db <file>` or
 * REMINDERS_DB=<file> for another) through taskheap's durable store, so a
 * restart, even after `kill -9`, lists and fires them all (`createStoredBot`).
 * `--memory` (or REMINDERS_DB=:memory:) keeps them in memory only
 * (`createBot`), where `quit` drops waiting ones.
 *
 * The logic lives in `createBot()`, which tests drive with a ManualClock, and
 * `createStoredBot()`, tested across real restarts; the stdin wiring is the
 * small `main()` at the bottom.
 */
import * as readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import { DateTime } from 'luxon';
import { Scheduler, TaskheapError } from '../src/index.js';
import { sqliteStore } from '../src/sqlite.js';
import type { Job, JobBuilder, Task, TaskContext } from '../src/index.js';
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
  readonly waitingOneShots: number;
  /** Resolves when `waitingOneShots` is 0. */
  oneShotsDone(): Promise<void>;
  /** Whether `quit` ran. */
  readonly closed: boolean;
}

type Kind = 'once' | 'every' | 'cron';

/** The one-shot timer of a reminder: the reminder itself (kind once) or its snooze. */
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
  /** The waiting one-shot (kind once) or snooze (recurring); undefined once it fired. */
  timer: Timer | undefined;
  paused: boolean;
}

/** A reminder's key: its stored job's, and its one-shot task's (kind once). */
const keyOf = (id: number) => `reminder:${id}`;
/** The key of a reminder's one-shot: the reminder itself (kind once), or its snooze. */
const timerKey = (reminder: { id: number; kind: Kind }) => (reminder.kind === 'once' ? keyOf(reminder.id) : `${keyOf(reminder.id)}:snooze`);

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
  '  ask <duration> <question>         asks, waits <duration> for "answer <id> <text>", nudges once',
  '  answer <id> <text>                answers a question the bot asked',
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
  monday: 'monday',
  mon: 'monday',
  tuesday: 'tuesday',
  tue: 'tuesday',
  wednesday: 'wednesday',
  wed: 'wednesday',
  thursday: 'thursday',
  thu: 'thursday',
  friday: 'friday',
  fri: 'friday',
  saturday: 'saturday',
  sat: 'saturday',
  sunday: 'sunday',
  sun: 'sunday',
};
const UNITS: Record<string, 'seconds' | 'minutes' | 'hours' | 'days' | 'weeks'> = {
  second: 'seconds',
  seconds: 'seconds',
  minute: 'minutes',
  minutes: 'minutes',
  hour: 'hours',
  hours: 'hours',
  day: 'days',
  days: 'days',
  week: 'weeks',
  weeks: 'weeks',
};

/** A recurring reminder as typed: how it is shown, its text, and its builder (built late: building validates). */
interface RecurringSpec {
  rule: string;
  text: string;
  build: () => JobBuilder;
}

/** `every 15m water`, `every monday at 08:30 planning`, `every 2 hours stretch`... */
function parseEvery(scheduler: Scheduler, args: string[]): RecurringSpec {
  const usage = 'every <rule> [at HH:MM] <text>, e.g. every day at 09:00 standup';
  const words = [...args];
  const first = words.shift()?.toLowerCase();
  if (first === undefined) throw new UsageError(`usage: ${usage}`);
  if (parseDuration(first) !== undefined) {
    // every 15m water: a fixed rate from now; whole days are calendar days (DST-safe).
    const interval = needDuration(first);
    const days = interval % UNIT_MS.d! === 0 ? interval / UNIT_MS.d! : undefined;
    return {
      rule: `every ${first}`,
      text: needText(words, usage),
      build: () => (days === undefined ? scheduler.every(interval).milliseconds() : scheduler.every(days).days()),
    };
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
  const days =
    unitWord === 'weekday' || unitWord === 'weekdays'
      ? 'weekday'
      : unitWord === 'weekend' || unitWord === 'weekends'
        ? 'weekend'
        : undefined;
  if (unit === undefined && weekday === undefined && days === undefined) {
    throw new UsageError(
      `unknown schedule "every ${args.slice(0, 2).join(' ')}": use a duration (15m), a unit (day, 2 hours), a weekday (monday), weekday or weekend`,
    );
  }
  let at: string | undefined;
  if (words[0]?.toLowerCase() === 'at') {
    words.shift();
    at = words.shift();
    if (at === undefined) throw new UsageError(`missing the time after "at"; usage: ${usage}`);
  }
  const text = needText(words, usage);
  const rule = `every ${count === 1 ? '' : `${count} `}${unitWord}${at === undefined ? '' : ` at ${at}`}`;
  return {
    rule,
    text,
    build: () => {
      // The builder validates: every(0), at('25:00'), every(2).weekday() throw clear errors.
      let builder = scheduler.every(count);
      if (unit !== undefined) builder = builder[unit]();
      else if (weekday !== undefined) builder = builder[weekday]();
      else builder = days === 'weekday' ? builder.weekday() : builder.weekend();
      return at === undefined ? builder : builder.at(at);
    },
  };
}

/** `cron 0,30 9-17 * * 1-5 check mail`, `cron @daily backup`, or a quoted 6-field expression. */
function parseCron(scheduler: Scheduler, args: string[]): RecurringSpec {
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
  return { rule: `cron ${expression}`, text: needText(rest, usage), build: () => scheduler.cron(expression) };
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

/** The commands a bot runs by name; `help` and `quit` are the shell's. */
type Commands = Record<
  'remind' | 'every' | 'cron' | 'snooze' | 'pause' | 'resume' | 'cancel' | 'list' | 'ask' | 'answer',
  (args: string[]) => unknown
>;

/** A question the bot asks (`ask`): the payload of its conversation task, keyed `ask:<id>`. */
interface Question {
  id: number;
  question: string;
  /** How long to wait for an answer, ms, before the nudge and again after it. */
  timeout: number;
}

const askKey = (id: number) => `ask:${id}`;

/**
 * A conversation, in steps: ask, wait for the answer (a message on `answer`,
 * which `answer <id> <text>` sends by the task's key), nudge once if none
 * came, then say how it ended. Each line is printed inside a step, so the
 * runs after a wait (and, with a store, after a restart) print nothing twice.
 */
async function converse(ctx: TaskContext, { id, question, timeout }: Question, output: (line: string) => void): Promise<void> {
  await ctx.step('ask', () => output(`❓ #${id} ${question} (answer ${id} <text>)`));
  let answer = await ctx.receive<string>('answer', { timeout });
  if (answer === undefined) {
    await ctx.step('nudge', () => output(`❓ #${id} still there? ${question}`));
    answer = await ctx.receive<string>('answer', { timeout });
  }
  await ctx.step('end', () => output(answer === undefined ? `#${id} no answer: ${question}` : `💬 #${id} ${answer}`));
}

/** `ask <duration> <question>`: the question, checked. */
function parseAsk(args: string[], id: number): Question {
  const usage = 'ask <duration> <question>, e.g. ask 10m what time suits you?';
  if (args.length === 0) throw new UsageError(`usage: ${usage}`);
  return { id, timeout: needDuration(args[0]!), question: needText(args.slice(1), usage) };
}

/** `answer <id> <text>`: sends the text to the question's conversation, by its key. */
async function answerQuestion(scheduler: Scheduler, args: string[]): Promise<void> {
  const usage = 'answer <id> <text>, e.g. answer 4 10:30';
  const match = /^#?(\d+)$/.exec(args[0] ?? '');
  if (match === null) throw new UsageError(`usage: ${usage}`);
  const text = needText(args.slice(1), usage);
  if (!(await scheduler.send({ key: askKey(Number(match[1])) }, 'answer', text))) {
    throw new UsageError(`no question #${match[1]} waits for an answer`);
  }
}

/** A reminder's time as the bot prints it, in the scheduler's zone. */
function formatTime(zone: string, ms: number): string {
  return DateTime.fromMillis(ms, { zone, locale: 'en-US' }).toFormat('ccc yyyy-MM-dd HH:mm:ss');
}

/** One reminder as `list` shows it: `at` is its next run (undefined: paused or done). */
interface ListRow {
  reminder: { id: number; kind: Kind; text: string; rule: string };
  state: string;
  at: number | undefined;
  next: string;
}

/** The `list` lines: soonest next run first (paused and done ones last, by id), in aligned columns. */
function listLines(rows: ListRow[]): string[] {
  rows.sort((a, b) => (a.at ?? Infinity) - (b.at ?? Infinity) || a.reminder.id - b.reminder.id);
  const idWidth = Math.max(...rows.map((row) => String(row.reminder.id).length)) + 1;
  const nextWidth = Math.max(...rows.map((row) => row.next.length));
  return rows.map(({ reminder, state, next }) => {
    const rule = reminder.kind === 'once' ? '' : `  (${reminder.rule})`;
    return `${`#${reminder.id}`.padEnd(idWidth)}  ${reminder.kind.padEnd(5)}  ${state.padEnd(9)}  ${next.padEnd(nextWidth)}  ${reminder.text}${rule}`;
  });
}

/**
 * What both bots share: reading a command line, running it, reporting usage
 * mistakes, `quit`, and telling `oneShotsDone()` waiters when no one-shot is
 * waiting any more (`notify`, which the bot calls when one fires or goes).
 */
function shell(scheduler: Scheduler, output: (line: string) => void, commands: Commands, waitingOneShots: () => number) {
  let closed = false;
  let waiters: (() => void)[] = [];

  function notify(): void {
    if (waiters.length === 0 || waitingOneShots() > 0) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  }

  async function handle(line: string): Promise<void> {
    const words = line.trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) return;
    if (closed) return output('error: the bot is closed');
    const [command, ...args] = words;
    const name = command!.toLowerCase();
    try {
      if (name === 'help') return HELP.forEach((text) => output(text));
      if (name === 'quit' || name === 'exit') {
        closed = true;
        await scheduler.close();
        for (const resolve of waiters) resolve();
        waiters = [];
        return output('bye');
      }
      if (!Object.hasOwn(commands, name)) throw new UsageError(`unknown command "${command}" (type help)`);
      await commands[name as keyof Commands](args);
    } catch (error) {
      // Usage mistakes and the library's own validation errors (bad cron
      // expression, at('25:00')...) are reported; nothing was changed.
      output(`error: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  const bot: Bot = {
    handle,
    get waitingOneShots() {
      return waitingOneShots();
    },
    oneShotsDone() {
      if (closed || waitingOneShots() === 0) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    get closed() {
      return closed;
    },
  };
  return { bot, notify };
}

export function createBot({ scheduler, output }: BotOptions): Bot {
  const reminders = new Map<number, Reminder>();
  let nextId = 1;

  const now = () => scheduler.clock.now();
  const time = (ms: number) => formatTime(scheduler.timezone, ms);
  /** Conversations under way. */
  const asking = new Set<Task>();
  const { bot, notify } = shell(
    scheduler,
    output,
    { remind, every, cron, snooze, pause, resume, cancel, list, ask, answer: (args) => answerQuestion(scheduler, args) },
    waitingOneShots,
  );

  function waitingOneShots(): number {
    let count = asking.size;
    for (const reminder of reminders.values()) if (reminder.timer?.task !== undefined) count++;
    return count;
  }

  function ask(args: string[]): void {
    const question = parseAsk(args, nextId);
    nextId++;
    const task = scheduler.after(0, (ctx) => converse(ctx, question, output), { key: askKey(question.id) });
    asking.add(task);
    task.result
      .catch(() => {})
      .finally(() => {
        asking.delete(task);
        notify();
      });
  }

  /**
   * Schedules a timer's task under the reminder's key: scheduling the key
   * again (a snooze) replaces the waiting task. It cancels with the
   * reminder's signal.
   */
  function arm(reminder: Reminder, timer: Timer): void {
    timer.task = scheduler.schedule(
      timer.due,
      () => {
        reminder.timer = undefined;
        output(`⏰ #${reminder.id} ${reminder.text}${timer.snoozed ? ' (snoozed)' : ''}`);
        notify();
      },
      { ...taskOptions(reminder), key: timerKey(reminder) },
    );
  }

  function setTimer(reminder: Reminder, due: number): Timer {
    const timer: Timer = { due, task: undefined, remaining: 0, snoozed: reminder.kind !== 'once' };
    arm(reminder, timer);
    reminder.timer = timer;
    return timer;
  }

  function newReminder(kind: Kind, text: string, rule: string): Reminder {
    // The id is taken only once the reminder was created (see register), so a
    // command the library rejects does not use one up.
    return { id: nextId, kind, text, rule, controller: new AbortController(), job: undefined, timer: undefined, paused: false };
  }

  function register(reminder: Reminder): void {
    nextId++;
    reminders.set(reminder.id, reminder);
  }

  function stateOf(reminder: Reminder): string {
    if (reminder.paused) return 'paused';
    if (reminder.job !== undefined) return reminder.job.state;
    return reminder.timer !== undefined ? 'scheduled' : 'done';
  }

  /** The earliest upcoming run: the job's next occurrence or a waiting snooze. */
  function nextRun(reminder: Reminder): number | undefined {
    const next = reminder.job?.nextRunAt?.getTime();
    const timer = reminder.timer;
    return timer?.task !== undefined && (next === undefined || timer.due < next) ? timer.due : next;
  }

  function find(arg: string | undefined, command: string): Reminder {
    if (arg === undefined) throw new UsageError(`usage: ${command} <id>, e.g. ${command} 1 (see list)`);
    const match = /^#?(\d+)$/.exec(arg);
    if (match === null) throw new UsageError(`"${arg}" is not a reminder id; ids look like 3 or #3`);
    const reminder = reminders.get(Number(match[1]));
    if (reminder === undefined) throw new UsageError(`no reminder #${match[1]} (see list)`);
    return reminder;
  }

  function remind(args: string[]): void {
    const usage = 'remind <duration> <text>, e.g. remind 10s stretch';
    if (args.length === 0) throw new UsageError(`usage: ${usage}`);
    const ms = needDuration(args[0]!);
    const text = needText(args.slice(1), usage);
    const reminder = newReminder('once', text, `in ${args[0]}`);
    const timer = setTimer(reminder, now() + ms);
    register(reminder);
    output(`#${reminder.id} scheduled for ${time(timer.due)}`);
  }

  function every(args: string[]): void {
    const { rule, text, build } = parseEvery(scheduler, args);
    const reminder = newReminder('every', text, rule);
    startJob(reminder, () => build().run(() => fireJob(reminder), taskOptions(reminder)));
  }

  function cron(args: string[]): void {
    const { rule, text, build } = parseCron(scheduler, args);
    const reminder = newReminder('cron', text, rule);
    startJob(reminder, () => build().run(() => fireJob(reminder), taskOptions(reminder)));
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
    output(`#${reminder.id} ${reminder.rule}: next run ${next === undefined ? 'never' : time(next.getTime())}`);
  }

  function snooze(args: string[]): void {
    const reminder = find(args[0], 'snooze');
    const ms = needDuration(args[1] ?? '5m');
    if (args.length > 2) throw new UsageError('usage: snooze <id> [duration], e.g. snooze 3 5m');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is paused; resume it first`);
    // The same key again: a one-shot moves (or, once it fired, comes back);
    // a recurring reminder's waiting snooze moves, or one is added.
    const timer = setTimer(reminder, now() + ms);
    output(`#${reminder.id} snoozed until ${time(timer.due)}`);
    notify();
  }

  function pause(args: string[]): void {
    const reminder = find(args[0], 'pause');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is already paused`);
    if (stateOf(reminder) === 'done') throw new UsageError(`#${reminder.id} has already fired (snooze it to be reminded again)`);
    const timer = reminder.timer;
    if (timer !== undefined) {
      timer.task?.cancel();
      timer.task = undefined;
      timer.remaining = timer.due - now();
    }
    reminder.job?.pause();
    reminder.paused = true;
    output(`#${reminder.id} paused`);
    notify();
  }

  function resume(args: string[]): void {
    const reminder = find(args[0], 'resume');
    if (!reminder.paused) throw new UsageError(`#${reminder.id} is not paused`);
    const timer = reminder.timer;
    if (timer !== undefined) {
      timer.due = now() + timer.remaining;
      arm(reminder, timer);
    }
    reminder.job?.resume();
    reminder.paused = false;
    const next = nextRun(reminder);
    output(`#${reminder.id} resumed; next run ${next === undefined ? 'never' : time(next)}`);
  }

  function cancel(args: string[]): void {
    const reminder = find(args[0], 'cancel');
    // One abort cancels the job and every waiting task that shares the signal.
    reminder.controller.abort();
    reminder.timer?.task?.cancel(); // a paused timer has no task; this is a no-op for the rest
    reminders.delete(reminder.id);
    output(`#${reminder.id} cancelled`);
    notify();
  }

  function list(): void {
    if (reminders.size === 0) return output('no reminders');
    const rows: ListRow[] = [];
    for (const reminder of reminders.values()) {
      let at: number | undefined;
      let next: string;
      if (reminder.paused) {
        const timer = reminder.timer;
        next = timer === undefined ? 'next -' : `${formatDuration(timer.remaining)} left`;
      } else {
        at = nextRun(reminder);
        next = at === undefined ? 'next -' : `next ${time(at)}`;
      }
      rows.push({ reminder, state: stateOf(reminder), at, next });
    }
    for (const line of listLines(rows)) output(line);
  }

  return bot;
}

/** What every stored task and job of a reminder carries: enough to list it and fire it after a restart. */
interface ReminderPayload {
  id: number;
  kind: Kind;
  text: string;
  rule: string;
  /** A snooze of a recurring reminder (an extra one-shot). */
  snoozed?: boolean;
  /** Set while paused: the time that was left. */
  left?: number;
}

/** A one-shot in the store: the reminder itself (kind once) or the snooze of a recurring one. */
interface StoredTimer {
  taskId: number;
  /** Due time (epoch ms) while armed. */
  due: number;
  /** Time left while paused. */
  left: number | undefined;
}

interface StoredReminder {
  id: number;
  kind: Kind;
  text: string;
  rule: string;
  /** The one-shot (kind once; undefined once it fired) or the waiting snooze (recurring). */
  timer: StoredTimer | undefined;
  paused: boolean;
}

/** Where a paused one-shot waits: the latest time a store accepts, so it never comes due. */
const PARKED = new Date('9999-12-31T00:00:00Z');

/**
 * The same bot on a scheduler with a store: each reminder is a stored task
 * (one-shots, snoozes) or a stored job (recurring), keyed `reminder:<id>`,
 * with everything needed to show it in its payload. `createStoredBot`
 * defines the `remind` handler, starts the scheduler and rebuilds the list
 * from the store, so a restart loses nothing: reminders that came due while
 * the bot was down fire at start (stored jobs by their `misfire` policy).
 *
 * A paused one-shot is kept as a task due at the end of time, with the time
 * it had left in its payload; resuming schedules it again under the same key
 * (which replaces it). A recurring reminder has at most one waiting snooze
 * (key `reminder:<id>:snooze`): snoozing again moves it. One-shots that have
 * fired are not listed after a restart.
 */
export async function createStoredBot({
  scheduler,
  output,
  onRestore,
}: BotOptions & {
  /** Told how many reminders the store held, before any of them fires (overdue ones fire at start). */
  onRestore?: (count: number) => void;
}): Promise<Bot & { readonly restored: number }> {
  const reminders = new Map<number, StoredReminder>();
  let nextId = 1;

  const now = () => scheduler.clock.now();
  const time = (ms: number) => formatTime(scheduler.timezone, ms);
  const { bot, notify } = shell(
    scheduler,
    output,
    {
      remind,
      every: (args) => recurring('every', parseEvery(scheduler, args)),
      cron: (args) => recurring('cron', parseCron(scheduler, args)),
      snooze,
      pause,
      resume,
      cancel,
      list,
      ask,
      answer: (args) => answerQuestion(scheduler, args),
    },
    waitingOneShots,
  );
  /** Ids of conversations under way (their tasks waiting or running). */
  const asking = new Set<number>();

  function waitingOneShots(): number {
    let count = asking.size;
    for (const reminder of reminders.values()) if (reminder.timer !== undefined && !reminder.paused) count++;
    return count;
  }

  // A conversation's task: it sleeps between its runs as a waiting row, so a restart resumes it.
  scheduler.define('ask', async (ctx, question: Question) => {
    await converse(ctx, question, output);
    asking.delete(question.id);
    notify();
  });

  async function ask(args: string[]): Promise<void> {
    const question = parseAsk(args, nextId);
    nextId++;
    asking.add(question.id);
    await scheduler.schedule(now(), 'ask', { key: askKey(question.id), payload: question });
  }

  scheduler.define('remind', (ctx, payload: ReminderPayload) => {
    output(`⏰ #${payload.id} ${payload.text}${payload.snoozed === true ? ' (snoozed)' : ''}`);
    const reminder = reminders.get(payload.id);
    if (reminder?.timer?.taskId === ctx.id) reminder.timer = undefined;
    notify();
  });

  function payloadOf(reminder: StoredReminder, left?: number): ReminderPayload {
    const payload: ReminderPayload = { id: reminder.id, kind: reminder.kind, text: reminder.text, rule: reminder.rule };
    if (left !== undefined) payload.left = left;
    return payload;
  }

  /** Stores (or replaces, by key) the reminder's one-shot, due at `due`, or parked with `left` while paused. */
  async function storeTimer(reminder: StoredReminder, due: number, left?: number): Promise<StoredTimer> {
    const task = await scheduler.schedule(left === undefined ? due : PARKED, 'remind', {
      key: timerKey(reminder),
      // A recurring reminder's one-shot is its snooze.
      payload: { ...payloadOf(reminder, left), ...(reminder.kind === 'once' ? {} : { snoozed: true }) },
    });
    return { taskId: task.id, due, left };
  }

  function find(arg: string | undefined, command: string): StoredReminder {
    if (arg === undefined) throw new UsageError(`usage: ${command} <id>, e.g. ${command} 1 (see list)`);
    const match = /^#?(\d+)$/.exec(arg);
    if (match === null) throw new UsageError(`"${arg}" is not a reminder id; ids look like 3 or #3`);
    const reminder = reminders.get(Number(match[1]));
    if (reminder === undefined) throw new UsageError(`no reminder #${match[1]} (see list)`);
    return reminder;
  }

  async function remind(args: string[]): Promise<void> {
    const usage = 'remind <duration> <text>, e.g. remind 10s stretch';
    if (args.length === 0) throw new UsageError(`usage: ${usage}`);
    const ms = needDuration(args[0]!);
    const text = needText(args.slice(1), usage);
    const reminder: StoredReminder = { id: nextId, kind: 'once', text, rule: `in ${args[0]}`, timer: undefined, paused: false };
    reminder.timer = await storeTimer(reminder, now() + ms);
    nextId++;
    reminders.set(reminder.id, reminder);
    output(`#${reminder.id} scheduled for ${time(reminder.timer.due)}`);
  }

  async function recurring(kind: 'every' | 'cron', spec: RecurringSpec): Promise<void> {
    const reminder: StoredReminder = { id: nextId, kind, text: spec.text, rule: spec.rule, timer: undefined, paused: false };
    const job = await spec.build().run('remind', { key: keyOf(reminder.id), payload: payloadOf(reminder) });
    nextId++;
    reminders.set(reminder.id, reminder);
    output(`#${reminder.id} ${reminder.rule}: next run ${job.nextRunAt === null ? 'never' : time(job.nextRunAt.getTime())}`);
  }

  async function snooze(args: string[]): Promise<void> {
    const reminder = find(args[0], 'snooze');
    const ms = needDuration(args[1] ?? '5m');
    if (args.length > 2) throw new UsageError('usage: snooze <id> [duration], e.g. snooze 3 5m');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is paused; resume it first`);
    reminder.timer = await storeTimer(reminder, now() + ms);
    output(`#${reminder.id} snoozed until ${time(reminder.timer.due)}`);
    notify();
  }

  async function pause(args: string[]): Promise<void> {
    const reminder = find(args[0], 'pause');
    if (reminder.paused) throw new UsageError(`#${reminder.id} is already paused`);
    if (reminder.kind === 'once' && reminder.timer === undefined)
      throw new UsageError(`#${reminder.id} has already fired (snooze it to be reminded again)`);
    if (reminder.kind !== 'once') await scheduler.pauseJob(keyOf(reminder.id));
    if (reminder.timer !== undefined)
      reminder.timer = await storeTimer(reminder, reminder.timer.due, Math.max(0, reminder.timer.due - now()));
    reminder.paused = true;
    output(`#${reminder.id} paused`);
    notify();
  }

  async function resume(args: string[]): Promise<void> {
    const reminder = find(args[0], 'resume');
    if (!reminder.paused) throw new UsageError(`#${reminder.id} is not paused`);
    if (reminder.timer !== undefined) reminder.timer = await storeTimer(reminder, now() + (reminder.timer.left ?? 0));
    if (reminder.kind !== 'once') await scheduler.resumeJob(keyOf(reminder.id));
    reminder.paused = false;
    const next = await nextRun(reminder);
    output(`#${reminder.id} resumed; next run ${next === undefined ? 'never' : time(next)}`);
  }

  async function cancel(args: string[]): Promise<void> {
    const reminder = find(args[0], 'cancel');
    if (reminder.timer !== undefined) await scheduler.cancelTask(reminder.timer.taskId);
    if (reminder.kind !== 'once') await scheduler.cancelJob(keyOf(reminder.id));
    reminders.delete(reminder.id);
    output(`#${reminder.id} cancelled`);
    notify();
  }

  /** The job's next occurrence (read from the store) or the waiting one-shot, whichever is earlier. */
  async function nextRun(reminder: StoredReminder): Promise<number | undefined> {
    let next = reminder.kind === 'once' ? undefined : (await scheduler.getJob(keyOf(reminder.id)))?.nextRunAt?.getTime();
    const timer = reminder.timer;
    if (timer !== undefined && !reminder.paused && (next === undefined || timer.due < next)) next = timer.due;
    return next;
  }

  async function list(): Promise<void> {
    if (reminders.size === 0) return output('no reminders');
    const rows: ListRow[] = [];
    for (const reminder of reminders.values()) {
      if (reminder.paused) {
        const next = reminder.timer?.left === undefined ? 'next -' : `${formatDuration(reminder.timer.left)} left`;
        rows.push({ reminder, state: 'paused', at: undefined, next });
      } else {
        const at = await nextRun(reminder);
        rows.push({ reminder, state: at === undefined ? 'done' : 'scheduled', at, next: at === undefined ? 'next -' : `next ${time(at)}` });
      }
    }
    for (const line of listLines(rows)) output(line);
  }

  /** Rebuilds the list from the store: waiting one-shots and snoozes, scheduled and paused jobs. */
  async function restore(): Promise<void> {
    const found: StoredReminder[] = [];
    const tasks = await scheduler.listTasks({ name: 'remind', keyPrefix: 'reminder:', limit: 10_000 });
    const jobs = await scheduler.listJobs({ name: 'remind', keyPrefix: 'reminder:', limit: 10_000 });
    for (const job of jobs) {
      const payload = job.payload as ReminderPayload;
      nextId = Math.max(nextId, payload.id + 1);
      if (job.state !== 'scheduled' && job.state !== 'paused') continue;
      found.push({
        id: payload.id,
        kind: payload.kind,
        text: payload.text,
        rule: payload.rule,
        timer: undefined,
        paused: job.state === 'paused',
      });
    }
    for (const task of tasks) {
      const payload = task.payload as ReminderPayload;
      nextId = Math.max(nextId, payload.id + 1);
      if (task.state !== 'waiting' || task.jobKey !== null) continue;
      const timer: StoredTimer = { taskId: task.id, due: task.runAt.getTime(), left: payload.left };
      const owner = found.find((reminder) => reminder.id === payload.id);
      if (owner !== undefined) owner.timer = timer;
      else
        found.push({
          id: payload.id,
          kind: payload.kind,
          text: payload.text,
          rule: payload.rule,
          timer,
          paused: payload.left !== undefined,
        });
    }
    for (const reminder of found.sort((a, b) => a.id - b.id)) reminders.set(reminder.id, reminder);
  }

  // The list first, so reminders that are overdue and fire at start() find theirs.
  await restore();
  for (const task of await scheduler.listTasks({ name: 'ask', keyPrefix: 'ask:', limit: 10_000 })) {
    const { id } = task.payload as Question;
    nextId = Math.max(nextId, id + 1);
    if (task.state === 'waiting' || task.state === 'running') asking.add(id);
  }
  onRestore?.(reminders.size);
  await scheduler.start();
  // Waiting reminders stay in the store for the next start, `quit` included.
  return Object.assign(bot, { restored: reminders.size });
}

/** stdin/stdout wiring: a prompt when interactive, plain lines when piped. */
async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const usage = 'usage: npm start [-- --memory | --db <file>]   (or REMINDERS_DB=<file>; REMINDERS_DB=:memory: for in-memory)';
  let db = process.env.REMINDERS_DB ?? './reminders.db';
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--memory') db = ':memory:';
    else if (args[i] === '--db' && args[i + 1] !== undefined) db = args[++i]!;
    else {
      console.error(usage);
      process.exitCode = 2;
      return;
    }
  }
  const memory = db === ':memory:';
  const scheduler = new Scheduler({ workers: 4, ...(memory ? {} : { store: sqliteStore(db) }) });
  const interactive = process.stdin.isTTY === true && process.stdout.isTTY === true;
  let prompting = interactive;
  const rl = readline.createInterface({ input: process.stdin, output: interactive ? process.stdout : undefined, terminal: interactive });
  rl.setPrompt('> ');
  // Taken now, so lines that arrive while the store opens are buffered, not lost.
  const input = rl[Symbol.asyncIterator]();
  const print = interactive
    ? (line: string) => {
        // Reminders arrive while the user types: clear the prompt line, print, redraw it.
        // (Not once input has ended: prompt() would resume stdin and keep the process alive.)
        process.stdout.write(`\r\x1b[K${line}\n`);
        if (prompting) rl.prompt(true);
      }
    : (line: string) => console.log(line);
  // The notice goes on stderr (piped stdout carries only the bot's own lines), before overdue reminders fire.
  const onRestore = (restored: number) => {
    if (restored > 0) console.error(`(${restored} reminder${restored === 1 ? '' : 's'} restored from ${db})`);
  };
  const bot = memory ? createBot({ scheduler, output: print }) : await createStoredBot({ scheduler, output: print, onRestore });

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
    console.log(
      `taskheap reminder bot; times are in ${scheduler.timezone}; reminders ${memory ? 'in memory only' : `kept in ${db}`}. Type help for commands.`,
    );
    rl.prompt();
  }
  for await (const line of { [Symbol.asyncIterator]: () => input }) {
    await bot.handle(line);
    if (bot.closed) break;
    if (interactive) rl.prompt();
  }
  prompting = false;
  if (!bot.closed) {
    const waiting = bot.waitingOneShots;
    if (!stopping && waiting > 0) {
      // On stderr, so piped stdout carries only the bot's own lines.
      console.error(`(end of input: waiting for ${waiting} reminder${waiting === 1 ? '' : 's'} to fire)`);
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
    // The library's own errors say what to do in their message (another bot has the file: StoreInUseError).
    console.error(error instanceof TaskheapError ? `error: ${error.message}` : error);
    process.exit(1);
  });
}
