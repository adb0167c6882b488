#!/usr/bin/env node
// `taskheap`, the command line (package.json "bin"): parses the arguments,
// opens the store, runs one command, prints its result and exits with a
// code scripts can test (0 done, 1 error, 2 usage, 3 not found).
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse, USAGE } from './args.js';
import { CliError, EXIT } from './errors.js';
import { commands } from './commands.js';
import { connect } from './connect.js';
import { printableLines, toJson } from './format.js';

/** Where the command line writes. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/**
 * Runs the command line on `argv` (the arguments after the script) and
 * resolves with its exit code.
 * @internal
 */
export async function run(argv: readonly string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  let json = argv.includes('--json');
  try {
    const invocation = parse(argv);
    if (invocation === 'help') {
      io.out(USAGE);
      return EXIT.ok;
    }
    json = invocation.options.json === true;
    // Every argument and option is checked before connecting: a usage error is one whatever the database's state.
    const action = commands[invocation.command]!(invocation.argument ?? '', invocation.options);
    const connection = await connect(invocation.options, env, invocation.command === 'migrate');
    try {
      const outcome = await action(connection);
      io.out(json ? toJson(outcome.json) : printableLines(outcome.text));
      return outcome.code;
    } finally {
      await connection.close();
    }
  } catch (error) {
    const code =
      error instanceof CliError
        ? error.code
        : // A value the scheduler refused (a key too long, a bad filter): the invocation's fault.
          error instanceof TypeError || error instanceof RangeError
          ? EXIT.usage
          : EXIT.error;
    const message = error instanceof Error ? error.message : String(error);
    // `code`: the error's own (ERR_TASK_NOT_FINISHED...), when it has one.
    const own = (error as { code?: unknown } | null)?.code;
    if (json) io.err(toJson({ error: message, exitCode: code, ...(typeof own === 'string' ? { code: own } : {}) }));
    // A message may quote a key or a value the database sent: escaped as stored text is.
    else io.err(`taskheap: ${printableLines(message)}${code === EXIT.usage ? '\nRun `taskheap --help` for usage.' : ''}`);
    return code;
  }
}

/** Run as a program (not imported): the real process's arguments, environment and streams. */
function isMain(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  void run(process.argv.slice(2), process.env, {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  }).then((code) => {
    process.exitCode = code;
  });
}
