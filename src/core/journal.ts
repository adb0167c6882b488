// What a task tells while it runs: its progress (the latest value of
// `ctx.progress()`) and its log lines (`ctx.log()`), bounded per task. The
// checks of what handlers pass, the bounds, and the in-memory record a run
// keeps (and hands to its retries). Stored tasks write the same through
// durable/journal-writer.ts.
import { assertStorableText, describe } from './validate.js';

/** One line a task logged with `ctx.log()`. */
export interface TaskLogLine {
  /** When it was logged (the scheduler's clock). */
  readonly at: Date;
  /** The attempt that logged it (1 is the first run). */
  readonly attempt: number;
  /** The text, at most `MAX_LOG_LINE` characters (longer lines are cut, ending with `…`). */
  readonly line: string;
}

/** Log lines a task keeps: the latest 100 (older ones are dropped as new ones come). */
export const MAX_LOG_LINES = 100;
/** Characters a log line keeps: 1,000 (a longer one is cut to 999, or 998 rather than split a surrogate pair, and `…`). */
export const MAX_LOG_LINE = 1_000;
/** Characters of JSON a progress value may take: 1,024 (a larger one is a RangeError at the call). */
export const MAX_PROGRESS_JSON = 1_024;

/** An escape JSON.stringify writes for NUL or a lone surrogate (or a string that only looks like one: the walk then finds nothing). */
const UNSTORABLE_ESCAPE = /\\u(?:0000|d[89a-f])/;

/**
 * A progress value as it is kept: a finite number, or any JSON-serialisable
 * value (`{ done: 3, of: 10 }`) whose JSON is at most MAX_PROGRESS_JSON
 * characters and whose strings (keys too) are text a store keeps
 * (`assertStorableText`: no NUL, no lone surrogate), copied through JSON.
 * Anything else throws at the call.
 * @internal
 */
export function toProgress(value: unknown): unknown {
  if (typeof value === 'number') {
    if (!Number.isFinite(value))
      throw new RangeError(`Expected ctx.progress() to get a finite number or a JSON value, got ${describe(value)}`);
    return value;
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new TypeError(`Expected ctx.progress() to get a JSON-serialisable value, got ${describe(value)} (${(error as Error).message})`);
  }
  if (json === undefined) throw new TypeError(`Expected ctx.progress() to get a number or a JSON value, got ${describe(value)}`);
  if (json.length > MAX_PROGRESS_JSON)
    throw new RangeError(`Expected ctx.progress() to get a value of at most ${MAX_PROGRESS_JSON} characters of JSON, got ${json.length}`);
  const copy = JSON.parse(json) as unknown;
  // JSON writes a NUL or a lone surrogate as an escape (\u0000, \ud800): only then is there a string to look for.
  if (UNSTORABLE_ESCAPE.test(json)) assertStorableStrings(copy, 'progress');
  return copy;
}

/** Throws for the first string (or key) of a JSON value a store cannot keep, naming its path (`progress.phase`). */
function assertStorableStrings(value: unknown, path: string): void {
  if (typeof value === 'string') {
    assertStorableText(value, path === 'progress' ? 'the ctx.progress() value' : `\`${path}\` of ctx.progress()`);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  if (Array.isArray(value)) {
    value.forEach((item, i) => assertStorableStrings(item, `${path}[${i}]`));
    return;
  }
  for (const [key, child] of Object.entries(value)) {
    assertStorableText(key, `a key of \`${path}\` in ctx.progress()`);
    assertStorableStrings(child, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);
  }
}

/**
 * A log line as it is kept: a string a store keeps (`assertStorableText`: no
 * NUL, no lone surrogate), cut to MAX_LOG_LINE characters (never between the
 * two halves of a surrogate pair).
 * @internal
 */
export function toLogLine(line: unknown): string {
  if (typeof line !== 'string') throw new TypeError(`Expected ctx.log() to get a string, got ${describe(line)}`);
  assertStorableText(line, 'the ctx.log() line');
  if (line.length <= MAX_LOG_LINE) return line;
  let end = MAX_LOG_LINE - 1;
  // A high surrogate kept without its low one would be a lone surrogate.
  const last = line.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${line.slice(0, end)}…`;
}

/** The progress and the latest log lines of one task, in memory. @internal */
export class Journal {
  /** The latest `ctx.progress()` value; undefined before the first. */
  progress: unknown = undefined;
  /** The latest MAX_LOG_LINES lines, oldest first. */
  readonly lines: TaskLogLine[] = [];

  add(line: TaskLogLine): void {
    this.lines.push(line);
    if (this.lines.length > MAX_LOG_LINES) this.lines.splice(0, this.lines.length - MAX_LOG_LINES);
  }
}
