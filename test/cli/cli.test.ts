// The command line as operators run it, against a real SQLite file and a real
// PostgreSQL server, with the data put there by a real Scheduler. Checks what
// it prints (text and --json) and its exit codes: 0 done, 1 error, 2 usage,
// 3 not found. Most invocations call the program's run(argv, env, io) in this
// process (what the bin calls with process.argv, process.env and the real
// streams: a child process costs about 0.4 s of CPU, and this file makes some
// hundred and twenty invocations); a few run the bin as a real child process (`node
// main.mjs ...`, src/cli/main.ts bundled once by ../compiled-fixture.ts) to
// prove that end to end: what it writes to stdout and stderr, its exit code,
// and a file another process owns.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { run as main } from '../../src/cli/main.js';
import { Scheduler, type StoredJob, type StoredTask } from '../../src/index.js';
import type { Store } from '../../src/store.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { PgServer } from '../durable/pg-server.js';
import { schemaNamer, usePostgres } from '../durable/use-postgres.js';
import { compiled } from '../compiled-fixture.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `taskheap ...args` in this process, as the bin does (a line per write); DATABASE_URL only as `env` says. */
async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, env, {
    out: (text) => {
      stdout += `${text}\n`;
    },
    err: (text) => {
      stderr += `${text}\n`;
    },
  });
  return { code, stdout, stderr };
}

/** Runs `taskheap ...args` as a child process (the bundled bin under node); DATABASE_URL only as `env` says. */
function spawnCli(args: readonly string[], env: Record<string, string> = {}): Promise<Result> {
  // Bundled once for the file, under node_modules so its package imports (pg, better-sqlite3, luxon) resolve.
  const bin = compiled('src/cli/main.ts');
  const { DATABASE_URL: _ignored, ...base } = process.env;
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { cwd: ROOT, env: { ...base, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Stored text a terminal would act on: retitle it (OSC 0 ... BEL), clear it
 * (CSI 2J), show what follows reversed (U+202E), clear it again by a one-byte
 * C1 CSI (U+009B), and a line break inside a one-line field.
 */
const HOSTILE = 'x\x1b]0;pwned\x07\x1b[2J\u202eevil\u009b2J\ny';
/** HOSTILE as the text output shows it. */
const ESCAPED = String.raw`x\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b2J\ny`;

/** Asserts `output` holds none of HOSTILE's control characters raw. */
function expectNoControls(output: string): void {
  for (const char of ['\x1b', '\x07', '\u202e', '\u009b']) expect(output).not.toContain(char);
}

/** The value of `name` in a record (`task <id>`): what follows `name:` and the alignment. */
function field(stdout: string, name: string): string | undefined {
  const line = stdout.split('\n').find((text) => text.startsWith(`${name}:`));
  return line?.slice(name.length + 1).trimStart();
}

async function json<T>(args: readonly string[], env?: Record<string, string>): Promise<T> {
  const result = await cli([...args, '--json'], env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as T;
}

/**
 * Fills a store the way an application would: a failed task (its worker ran
 * and closed), three tasks due in an hour (two keyed 'mail:'), a cron job.
 */
async function fill(store: Store): Promise<{ failed: number; later: number[] }> {
  const scheduler = new Scheduler({ store, onError: () => {} });
  scheduler.define('boom', () => {
    throw new Error('billing is down');
  });
  scheduler.define('mail', () => {});
  scheduler.define('report', () => {});
  await scheduler.start();
  const failed = await scheduler.schedule(Date.now(), 'boom');
  await scheduler.waitFor(failed.id, { timeout: '20s' });
  const hour = Date.now() + 3_600_000;
  const later = await scheduler.scheduleMany([
    { when: hour, name: 'mail', key: 'mail:ann', payload: { to: 'ann' } },
    { when: hour + 1, name: 'mail', key: 'mail:bob', payload: { to: 'bob' } },
    { when: hour + 2, name: 'report', payload: {} },
  ]);
  await scheduler.cron('0 6 * * *', { timezone: 'UTC' }).run('report', { key: 'report:daily' });
  await scheduler.close();
  return { failed: failed.id, later: later.map((task) => task.id) };
}

/** Every command on one store, through `connection` (the flags naming it) and `env`. */
async function operate(connection: readonly string[], env: Record<string, string>, ids: { failed: number; later: number[] }) {
  const run = (...args: string[]) => cli([...args, ...connection], env);
  const read = <T>(...args: string[]) => json<T>([...args, ...connection], env);

  // tasks: filters and a cursor page by page.
  const failed = await read<{ tasks: StoredTask[]; next: string | null }>('tasks', '--state', 'failed');
  expect(failed.tasks.map((task) => [task.id, task.name, task.lastError])).toEqual([
    [ids.failed, 'boom', expect.stringMatching(/billing is down/)],
  ]);
  expect(failed.next).toBeNull();
  const mail = await read<{ tasks: StoredTask[] }>('tasks', '--name', 'mail', '--key-prefix', 'mail:');
  expect(mail.tasks.map((task) => task.key)).toEqual(['mail:ann', 'mail:bob']);
  const first = await read<{ tasks: StoredTask[]; next: string }>('tasks', '--state', 'waiting', '--limit', '2');
  expect(first.tasks).toHaveLength(2);
  expect(first.next).toMatch(/^\d+:\d+$/);
  const second = await read<{ tasks: StoredTask[]; next: string | null }>(
    'tasks',
    '--state',
    'waiting',
    '--limit',
    '2',
    '--after',
    first.next,
  );
  const waiting = [...first.tasks, ...second.tasks].map((task) => task.id);
  expect(new Set(waiting).size).toBe(waiting.length);
  for (const id of ids.later) expect(waiting).toContain(id);

  // Aligned text: a header, then one line per task.
  const text = await run('tasks', '--name', 'mail');
  expect(text.code).toBe(0);
  const lines = text.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^id\s+name\s+state\s+runAt\s+attempts\s+queue\s+key\s+jobKey\s+lastError$/);
  expect(lines.slice(1).map((line) => line.split(/\s+/)[6])).toEqual(['mail:ann', 'mail:bob']);

  // task, stats, queues.
  expect(await read<StoredTask>('task', String(ids.failed))).toMatchObject({ id: ids.failed, state: 'failed', attempts: 1 });
  expect(await read<Record<string, number>>('stats')).toMatchObject({ failed: 1, waiting: 3, succeeded: 0, total: 4 }); // the job's next occurrence is made when due;
  // Counted by the store under the filters of `tasks`; --queue selects a queue's tasks.
  expect(await read<Record<string, number>>('stats', '--name', 'mail', '--key-prefix', 'mail:')).toMatchObject({ waiting: 2, total: 2 });
  expect(await read<Record<string, number>>('stats', '--queue', 'nothing')).toMatchObject({ total: 0 });
  expect((await read<{ tasks: StoredTask[] }>('tasks', '--queue', 'default', '--name', 'report')).tasks).toHaveLength(1);
  expect((await read<{ tasks: StoredTask[] }>('tasks', '--queue', 'nothing')).tasks).toEqual([]);
  const queues = await read<{ name: string; counts: { waiting: number } }[]>('queues');
  expect(queues.find((queue) => queue.name === 'default')?.counts.waiting).toBeGreaterThanOrEqual(3);

  // retry and cancel, and what they refuse.
  expect(await read<StoredTask>('retry', String(ids.failed))).toMatchObject({ id: ids.failed, state: 'waiting' });
  const again = await run('retry', String(ids.later[0]));
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/taskheap: .*waiting/);
  expect(await read<{ cancelled: boolean }>('cancel', String(ids.later[0]))).toEqual({ cancelled: true, id: ids.later[0] });
  const twice = await run('cancel', String(ids.later[0]));
  expect(twice).toMatchObject({ code: 1, stderr: expect.stringMatching(/is cancelled: only a waiting or running task can be cancelled/) });
  expect((await run('cancel', '999999')).code).toBe(3);
  expect((await run('retry', '999999')).code).toBe(3);
  expect(await run('task', '999999')).toMatchObject({ code: 3, stderr: 'taskheap: No stored task with id 999999\n' });

  // jobs: list, show, pause, resume, trigger.
  const jobs = await read<{ jobs: StoredJob[] }>('jobs');
  expect(jobs.jobs.map((job) => [job.key, job.state])).toEqual([['report:daily', 'scheduled']]);
  expect(await read<StoredJob>('job', 'report:daily')).toMatchObject({ key: 'report:daily', name: 'report', state: 'scheduled' });
  expect((await run('pause', 'report:daily')).stdout).toBe('Job "report:daily" is paused.\n');
  expect((await read<{ jobs: StoredJob[] }>('jobs', '--state', 'paused')).jobs.map((job) => job.key)).toEqual(['report:daily']);
  expect(await run('pause', 'report:daily')).toMatchObject({
    code: 1,
    stderr: expect.stringMatching(/is paused: only a scheduled job can be paused/),
  });
  expect((await run('resume', 'report:daily')).code).toBe(0);
  const triggered = await read<StoredTask>('trigger', 'report:daily');
  expect(triggered).toMatchObject({ name: 'report', jobKey: 'report:daily', state: 'waiting' });
  expect((await run('job', 'nope')).code).toBe(3);
  expect((await run('pause', 'nope')).code).toBe(3);
  expect((await run('trigger', 'nope')).code).toBe(3);

  // prune: nothing old enough by default; everything finished with an age of 0.
  expect(await read<{ deleted: number }>('prune')).toEqual({ deleted: 0 });
  expect((await read<{ deleted: number }>('prune', '--succeeded', '0s', '--failed', '0s')).deleted).toBeGreaterThanOrEqual(1);
  expect(await read<Record<string, number>>('stats')).toMatchObject({ cancelled: 0 });

  // Usage errors name the value.
  expect(await run('tasks', '--state', 'done')).toMatchObject({
    code: 2,
    stderr: expect.stringMatching(
      /Expected --state to be one of blocked, waiting, running, succeeded, failed, timed-out, cancelled, got "done"/,
    ),
  });
  expect(await run('tasks', '--after', 'x')).toMatchObject({ code: 2, stderr: expect.stringMatching(/--after .* got "x"/) });
  expect(await run('task')).toMatchObject({ code: 2, stderr: expect.stringMatching(/`task` needs a <id>/) });
  expect(await run('jobs', '--from', '1')).toMatchObject({ code: 2, stderr: expect.stringMatching(/`jobs` has no option --from/) });
  const jsonError = await run('task', '999999', '--json');
  expect(jsonError.code).toBe(3);
  expect(JSON.parse(jsonError.stderr)).toEqual({ error: 'No stored task with id 999999', exitCode: 3 });
  const refused = await run('retry', String(ids.later[1]), '--json');
  expect(refused.code).toBe(1);
  expect(JSON.parse(refused.stderr)).toMatchObject({ exitCode: 1, code: 'ERR_TASK_NOT_FINISHED' });
}

describe('taskheap on SQLite', () => {
  it('migrates a new file, then lists, shows, retries, cancels, pauses, resumes, triggers, prunes and counts', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'taskheap-cli-')), 'app.db');
    const missing = await cli(['tasks', '--sqlite', file]);
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringContaining('create it with `taskheap migrate --sqlite') });
    expect(await cli(['migrate', '--sqlite', file])).toMatchObject({ code: 0, stdout: 'The schema is up to date.\n' });
    const ids = await fill(sqliteStore(file));
    await operate(['--sqlite', file], {}, ids);
    // The bin as a child process: its JSON on stdout and exit code 0, a not-found on stderr and exit code 3.
    const stats = await spawnCli(['stats', '--sqlite', file, '--json']);
    expect(stats).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(stats.stdout)).toMatchObject({ cancelled: 0 });
    expect(await spawnCli(['task', '999999', '--sqlite', file])).toEqual({
      code: 3,
      stdout: '',
      stderr: 'taskheap: No stored task with id 999999\n',
    });
    // While a worker (this process) owns the file, the command line (another process) says who does.
    const worker = new Scheduler({ store: sqliteStore(file), onError: () => {} });
    await worker.start();
    try {
      expect(await spawnCli(['stats', '--sqlite', file])).toMatchObject({
        code: 1,
        stderr: expect.stringMatching(new RegExp(`is in use by process ${process.pid} on `)),
      });
    } finally {
      await worker.close();
    }
  }, 120_000);

  it('shows the control characters of stored keys, names, errors, log lines and payloads escaped, in text and in --json', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'taskheap-cli-')), 'app.db');
    expect(await cli(['migrate', '--sqlite', file])).toMatchObject({ code: 0 });
    const scheduler = new Scheduler({ store: sqliteStore(file), onError: () => {} });
    const name = `mail${HOSTILE}`;
    scheduler.define(name, (ctx) => {
      ctx.log(`sent ${HOSTILE}`);
      throw new Error(`refused ${HOSTILE}`);
    });
    await scheduler.start();
    const task = await scheduler.schedule(Date.now(), name, { key: `key${HOSTILE}`, payload: { note: HOSTILE } });
    await scheduler.waitFor(task.id, { timeout: '20s' });
    await scheduler.cron('0 6 * * *', { timezone: 'UTC' }).run(name, { key: `job${HOSTILE}` });
    await scheduler.close();
    const at = ['--sqlite', file];

    // tasks: one line per task (the value's newline escaped too), each value escaped.
    const tasks = await cli(['tasks', ...at]);
    expect(tasks).toMatchObject({ code: 0, stderr: '' });
    expectNoControls(tasks.stdout);
    expect(tasks.stdout.trimEnd().split('\n')).toHaveLength(2);
    for (const text of [`mail${ESCAPED}`, `key${ESCAPED}`, `refused ${ESCAPED}`]) expect(tasks.stdout).toContain(text);

    // task <id>: its name, key, last error, log line and payload; as the bin writes it to a real stdout too.
    for (const shown of [await cli(['task', String(task.id), ...at]), await spawnCli(['task', String(task.id), ...at])]) {
      expect(shown).toMatchObject({ code: 0, stderr: '' });
      expectNoControls(shown.stdout);
      expect(field(shown.stdout, 'name')).toBe(`mail${ESCAPED}`);
      expect(field(shown.stdout, 'key')).toBe(`key${ESCAPED}`);
      expect(field(shown.stdout, 'lastError')).toContain(`refused ${ESCAPED}`);
      expect(field(shown.stdout, 'logs')).toMatch(/sent x.*pwned/);
      // An object is shown as JSON that still reads back as the value.
      expect(JSON.parse(field(shown.stdout, 'payload')!)).toEqual({ note: HOSTILE });
    }

    // Jobs, a message quoting a key, and a not-found error quoting one.
    const jobs = await cli(['jobs', ...at]);
    expect(jobs.stdout).toContain(`job${ESCAPED}`);
    expectNoControls(jobs.stdout);
    expectNoControls((await cli(['job', `job${HOSTILE}`, ...at])).stdout);
    const paused = await cli(['pause', `job${HOSTILE}`, ...at]);
    expect(paused.code).toBe(0);
    expectNoControls(paused.stdout);
    const missing = await cli(['job', `nope${HOSTILE}`, ...at]);
    expect(missing.code).toBe(3);
    expectNoControls(missing.stderr);

    // --json: escaped as \uXXXX (still JSON), read back exactly.
    const raw = await cli(['task', String(task.id), '--json', ...at]);
    expectNoControls(raw.stdout);
    expect(raw.stdout).toContain(String.raw`\u202e`);
    expect(JSON.parse(raw.stdout)).toMatchObject({ name, key: `key${HOSTILE}`, payload: { note: HOSTILE } });
  }, 60_000);

  it('checks every argument and option before opening the store: a usage error (exit 2) naming the option and the value', async () => {
    // No SQLite file there: opening it would fail (exit 1), so each of these must be refused first.
    const file = join(mkdtempSync(join(tmpdir(), 'taskheap-cli-')), 'none.db');
    const refusals: [string[], string][] = [
      [['tasks', '--limit', 'abc'], 'Expected --limit to be an integer from 1 to 10000, got "abc"'],
      [['tasks', '--limit', '-1'], 'Expected --limit to be an integer from 1 to 10000, got "-1"'],
      [['jobs', '--limit', '0'], 'Expected --limit to be an integer from 1 to 10000, got "0"'],
      [
        ['tasks', '--state', 'bogus'],
        'Expected --state to be one of blocked, waiting, running, succeeded, failed, timed-out, cancelled, got "bogus"',
      ],
      [['jobs', '--state', 'waiting'], 'Expected --state to be one of scheduled, paused, done, cancelled, got "waiting"'],
      [['task', 'abc'], 'Expected a task id (an integer >= 1), got "abc"'],
      [['retry', '0'], 'Expected a task id (an integer >= 1), got "0"'],
      [['tasks', '--from', 'yesterday'], 'Expected --from to be an ISO time (2026-01-31T09:00:00Z) or epoch milliseconds, got "yesterday"'],
      [['stats', '--to', '99999999999999999'], 'Expected --to to be between years 1 and 9999, got 100000000000000000 (number)'],
      [['tasks', '--after', '1:x'], 'Expected --after to be a cursor <runAt ms>:<id> as printed after a full page, got "1:x"'],
      [['tasks', '--key-prefix', ''], 'Expected --key-prefix to be a non-empty string, got "" (string)'],
      [['stats', '--name', 'n'.repeat(256)], 'Expected --name to be at most 255 characters long, got 256'],
      [['job', ''], 'Expected the job key to be a non-empty string, got "" (string)'],
      [['prune', '--failed', 'soon'], 'Expected --failed to be an age such as "1d" or "12h", or "off", got "soon"'],
    ];
    for (const [args, message] of refusals) {
      const refused = await cli([...args, '--sqlite', file]);
      expect(refused, args.join(' ')).toEqual({
        code: 2,
        stdout: '',
        stderr: `taskheap: ${message}\nRun \`taskheap --help\` for usage.\n`,
      });
    }
    expect(existsSync(file)).toBe(false);
    // A negative number after an option is its value: a time before 1970 passes, and then the missing file is the error.
    expect(await cli(['tasks', '--from', '-5000', '--sqlite', file])).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/No SQLite database at/),
    });
  });

  it('usage errors exit 2 with the value named; --help exits 0', async () => {
    expect(await cli(['frobnicate'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/Unknown command "frobnicate"/) });
    expect(await cli(['tasks'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/No database: pass --database-url/) });
    expect(await cli(['tasks', '--sqlite', 'a.db', '--database-url', 'postgres://x/y'])).toMatchObject({ code: 2 });
    expect(await cli(['tasks', '--bogus'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/--bogus/) });
    // --help as a child process: the usage on stdout, exit code 0; a usage error: exit code 2.
    const help = await spawnCli(['--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^Usage: taskheap <command>/);
    expect(help.stdout).toMatch(/Exit codes: 0 done, 1 error, 2 usage error, 3 not found/);
    expect(await spawnCli(['frobnicate'])).toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringMatching(/Unknown command "frobnicate"/),
    });
  }, 60_000);
});

describe('taskheap on PostgreSQL', () => {
  let server!: PgServer;
  usePostgres((started) => {
    server = started;
  });
  const schema = schemaNamer('cli');

  it('says to migrate a schema that has no tables, migrates it, and runs every command (DATABASE_URL)', async () => {
    const name = schema();
    const missing = await cli(['stats', '--schema', name], { DATABASE_URL: server.url });
    expect(missing.code).toBe(1);
    // A bad option or argument is a usage error before the schema is looked at.
    for (const [args, option] of [
      [['tasks', '--limit', 'abc'], '--limit'],
      [['tasks', '--limit', '-1'], '--limit'],
      [['tasks', '--state', 'bogus'], '--state'],
      [['task', 'abc'], 'a task id'],
    ] as const) {
      expect(await cli([...args, '--schema', name], { DATABASE_URL: server.url })).toMatchObject({
        code: 2,
        stderr: expect.stringContaining(`taskheap: Expected ${option} `),
      });
    }
    expect(missing.stderr).toMatch(/the schema is not migrated; run `taskheap migrate --database-url <url> --schema cli\d+_\d+`/);
    expect(await cli(['migrate', '--schema', name], { DATABASE_URL: server.url })).toMatchObject({ code: 0 });
    const ids = await fill(postgresStore({ connectionString: server.url, schema: name }));
    await operate(['--schema', name], { DATABASE_URL: server.url }, ids);
  }, 120_000);

  it('a bad URL is a usage error; an unreachable server or a wrong database an error that names where', async () => {
    expect(await cli(['stats', '--database-url', 'mysql://localhost/db'])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/Expected a postgres:\/\/ or postgresql:\/\/ database URL, got "mysql:\/\/localhost\/db"/),
    });
    expect(await cli(['stats', '--database-url', 'not a url'])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/got "not a url"/),
    });
    const url = new URL(server.url);
    url.pathname = '/no_such_database';
    const wrong = await cli(['stats', '--database-url', url.href]);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/Cannot reach PostgreSQL at .*\/no_such_database \(3D000\)/);
    url.password = 'secret-password';
    url.port = '1';
    const down = await cli(['stats', '--database-url', url.href]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/Cannot reach PostgreSQL at 127\.0\.0\.1:1\/no_such_database/);
    expect(down.stderr).not.toContain('secret-password');
  }, 120_000);
});
