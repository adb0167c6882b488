// The command line's output: JSON (--json) or aligned text columns, with
// times as ISO strings and values printed on one line.

/** One value as a table cell: dates as ISO, objects as JSON, nothing as '-'; on one line. */
function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (value instanceof Date) return value.toISOString();
  const text =
    typeof value === 'string' ? value : typeof value === 'number' && !Number.isFinite(value) ? String(value) : JSON.stringify(value);
  return text.replace(/[\r\n\t]+/g, ' ');
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

/** JSON with Infinity (a queue without a limit) kept readable as a string, and two-space indents. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'number' && !Number.isFinite(item) ? String(item) : item), 2);
}
