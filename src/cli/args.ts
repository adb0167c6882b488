// The command line's arguments: the commands, their options (node:util
// parseArgs) and the usage text; a bad one is a usage error (errors.ts).
import { parseArgs } from 'node:util';
import { CliError, EXIT } from './errors.js';

/** What each command takes: its positional argument, and its own options besides the connection ones. */
const COMMANDS: Record<string, { argument?: string; options: readonly string[]; summary: string }> = {
  migrate: { options: [], summary: 'create or upgrade the schema' },
  tasks: {
    options: ['state', 'name', 'queue', 'key-prefix', 'job-key', 'from', 'to', 'limit', 'after'],
    summary: 'list stored tasks, earliest due first',
  },
  task: { argument: 'id', options: [], summary: 'show one task' },
  jobs: { options: ['state', 'name', 'key-prefix', 'limit', 'after'], summary: 'list stored recurring jobs, in key order' },
  job: { argument: 'key', options: [], summary: 'show one recurring job' },
  retry: { argument: 'id', options: [], summary: 'run a failed, timed-out or cancelled task again' },
  cancel: { argument: 'id', options: [], summary: 'cancel a waiting or running task' },
  pause: { argument: 'key', options: [], summary: 'pause a recurring job' },
  resume: { argument: 'key', options: [], summary: 'resume a paused recurring job' },
  trigger: { argument: 'key', options: [], summary: 'add one occurrence of a job, due now' },
  prune: { options: ['succeeded', 'failed'], summary: 'delete finished tasks and jobs past their age' },
  stats: { options: ['name', 'queue', 'key-prefix', 'job-key', 'from', 'to'], summary: 'count stored tasks per state' },
  queues: { options: [], summary: 'list queues with their settings and counts' },
};

const OPTIONS = {
  'database-url': { type: 'string' },
  sqlite: { type: 'string' },
  schema: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  state: { type: 'string' },
  name: { type: 'string' },
  queue: { type: 'string' },
  'key-prefix': { type: 'string' },
  'job-key': { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  limit: { type: 'string' },
  after: { type: 'string' },
  succeeded: { type: 'string' },
  failed: { type: 'string' },
} as const;

/** A parsed command line. */
export interface Invocation {
  command: string;
  /** The command's one positional argument (an id or a key), when it takes one. */
  argument: string | undefined;
  options: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean : string };
}

export const USAGE = `Usage: taskheap <command> [argument] [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, { argument, summary }]) => `  ${`${name}${argument === undefined ? '' : ` <${argument}>`}`.padEnd(16)}${summary}`)
  .join('\n')}

Connection (one of):
  --database-url <url>   PostgreSQL (postgres://user:password@host:5432/db); default: $DATABASE_URL
  --sqlite <file>        a SQLite file (not while a worker has it open)
  --schema <name>        PostgreSQL schema of taskheap's tables (default: the search_path)

Options:
  --json                 print JSON instead of aligned text
  tasks: --state <state> --name <handler> --queue <q> --key-prefix <p> --job-key <key> --from <time> --to <time>
         --limit <n> (default 100) --after <cursor> (printed after a full page)
  stats: the filters of tasks but --state, --limit and --after
  jobs:  --state <state> --name <handler> --key-prefix <p> --limit <n> --after <key>
  prune: --succeeded <age> (default 1d) --failed <age> (default 7d); "off" keeps that kind

Exit codes: 0 done, 1 error, 2 usage error, 3 not found.`;

/**
 * `argv` with a negative number after an option that takes a value joined to
 * it (`--limit -1` as `--limit=-1`): parseArgs would take `-1` for an option
 * and say only that the value is ambiguous, where the option's own check says
 * what it accepts (and `--from -5000` is a time before 1970). No option is a
 * dash and a digit, so this takes nothing that could be one.
 */
function negativeValues(argv: readonly string[]): string[] {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return [...args, ...argv.slice(i)];
    const next = argv[i + 1];
    if (takesValue(arg) && next !== undefined && /^-\d/.test(next)) {
      args.push(`${arg}=${next}`);
      i++;
    } else args.push(arg);
  }
  return args;
}

/** Whether `arg` is an option that takes its value from the next argument (`--limit`; not `--limit=5`, not `--json`). */
function takesValue(arg: string): boolean {
  const name = arg.startsWith('--') ? arg.slice(2) : '';
  return Object.hasOwn(OPTIONS, name) && OPTIONS[name as keyof typeof OPTIONS].type === 'string';
}

/** Parses `argv` (the arguments after the script); throws a usage CliError on anything it does not know. */
export function parse(argv: readonly string[]): Invocation | 'help' {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: negativeValues(argv), options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError((error as Error).message, EXIT.usage);
  }
  const { values, positionals } = parsed;
  if (values.help === true || positionals.length === 0) return 'help';
  const [command, ...rest] = positionals as [string, ...string[]];
  const spec = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (spec === undefined)
    throw new CliError(`Unknown command ${JSON.stringify(command)}; expected one of: ${Object.keys(COMMANDS).join(', ')}`, EXIT.usage);
  const wanted = spec.argument === undefined ? 0 : 1;
  if (rest.length !== wanted) {
    throw new CliError(
      wanted === 0
        ? `\`${command}\` takes no argument, got ${JSON.stringify(rest[0])}`
        : rest.length === 0
          ? `\`${command}\` needs a <${spec.argument}>`
          : `\`${command}\` takes one <${spec.argument}>, got ${rest.length}: ${rest.map((value) => JSON.stringify(value)).join(' ')}`,
      EXIT.usage,
    );
  }
  const general = new Set(['database-url', 'sqlite', 'schema', 'json', 'help']);
  for (const key of Object.keys(values)) {
    if (!general.has(key) && !spec.options.includes(key))
      throw new CliError(
        `\`${command}\` has no option --${key}${spec.options.length === 0 ? '' : ` (it takes: ${spec.options.map((o) => `--${o}`).join(', ')})`}`,
        EXIT.usage,
      );
  }
  return { command, argument: rest[0], options: values as Invocation['options'] };
}
