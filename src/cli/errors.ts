// The command line's errors: `CliError`, reported in one line, and the exit
// codes a script can tell apart.

/** Exit codes: 0 done, 1 an error (the database, the action refused), 2 a usage error, 3 not found. */
export const EXIT = { ok: 0, error: 1, usage: 2, notFound: 3 } as const;

/** An error the command line reports in one line and exits with `code`. */
export class CliError extends Error {
  readonly code: number;

  constructor(message: string, code: number = EXIT.error) {
    super(message);
    this.name = 'CliError';
    this.code = code;
  }
}
