// The command line's output: JSON (--json) or aligned text columns, with
// times as ISO strings and values printed on one line. Stored text (keys,
// names, payloads, errors, log lines) is anyone's input, so nothing a
// terminal would act on reaches it raw: printable() escapes text (and
// main.ts writes every line through it), escapeJson() what is shown as JSON.

/**
 * What a terminal acts on rather than shows: the C0 controls (ESC starts the
 * sequences that retitle or clear it, BEL ends some), DEL, the C1 controls
 * (U+009B is a one-byte CSI), the bidirectional controls (U+202E shows the
 * text after it reversed) and the line and paragraph separators.
 */
const CONTROL = /[\p{Cc}\p{Bidi_Control}\u2028\u2029]/gu;
/** The same but C0, which JSON.stringify already escapes (and a raw newline in its output is indentation). */
const JSON_UNESCAPED = /[\u007f-\u009f\p{Bidi_Control}\u2028\u2029]/gu;
const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function hex(char: string, digits: number): string {
  return char.charCodeAt(0).toString(16).padStart(digits, '0');
}

/**
 * `text` with every control character escaped (`\n`, `\x1b`, `\u202e`), all
 * else as it is: one line, safe to write to a terminal. Backslashes are left
 * alone (paths and patterns read as they are); --json gives the exact value.
 */
function printable(text: string): string {
  return text.replace(CONTROL, (char) => SHORT[char] ?? (char <= '\u00ff' ? `\\x${hex(char, 2)}` : `\\u${hex(char, 4)}`));
}

/** Text made of lines (a table, a message): each line through printable(), the line breaks kept. */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}

/** JSON text with what JSON.stringify writes raw escaped as \uXXXX: still JSON, read back as the same value. */
function escapeJson(text: string): string {
  return text.replace(JSON_UNESCAPED, (char) => `\\u${hex(char, 4)}`);
}

/** One value as a table cell: dates as ISO, objects as JSON (still JSON), nothing as '-'; on one line, its controls escaped. */
function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string') return printable(value);
  return typeof value === 'number' && !Number.isFinite(value) ? String(value) : escapeJson(JSON.stringify(value));
}

/** Rows as aligned columns under a header; '(none)' for no rows. */
export function table(rows: readonly Record<string, unknown>[], columns: readonly string[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((row) => columns.map((column) => cell(row[column])));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((line) => line[i]!.length)));
  const line = (values: readonly string[]) =>
    values
      .map((value, i) => (i === values.length - 1 ? value : value.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns), ...cells.map(line)].join('\n');
}

/** One record as `field: value` lines, the names aligned. */
export function record(value: Record<string, unknown>): string {
  const keys = Object.keys(value);
  const width = Math.max(...keys.map((key) => key.length));
  return keys.map((key) => `${`${key}:`.padEnd(width + 1)} ${cell(value[key])}`).join('\n');
}

/**
 * JSON with Infinity (a queue without a limit) kept readable as a string, and
 * two-space indents. JSON.stringify escapes C0 controls but writes DEL, C1
 * and the bidirectional controls raw; they are escaped as \uXXXX too, so
 * --json on a terminal is as safe as text (a JSON parser reads the same value).
 */
export function toJson(value: unknown): string {
  const text = JSON.stringify(
    value,
    (_key, item: unknown) => (typeof item === 'number' && !Number.isFinite(item) ? String(item) : item),
    2,
  );
  return escapeJson(text);
}
