/** Number formatting and markdown tables, with every figure also shown as a ratio to taskheap. */

export type Unit = 'ns' | 'bytes' | 'ms' | 'latency' | 'rate' | 'count';

const group = (value: number, digits = 0): string =>
  value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** Three significant figures, at most. */
function sig(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 100) return group(value);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

export function formatValue(value: number, unit: Unit): string {
  switch (unit) {
    case 'ns':
      if (value < 1e3) return `${sig(value)} ns`;
      if (value < 1e6) return `${sig(value / 1e3)} µs`;
      return `${sig(value / 1e6)} ms`;
    case 'bytes':
      // GC noise moves a delta by a few bytes either way: that is "nothing".
      if (value < 8) return '≈0 B';
      if (Math.abs(value) < 1e3) return `${Math.round(value)} B`;
      if (Math.abs(value) < 1e6) return `${sig(value / 1e3)} kB`;
      return `${sig(value / 1e6)} MB`;
    case 'ms':
      return value < 1e3 ? `${sig(value)} ms` : `${sig(value / 1e3)} s`;
    case 'latency':
      return `${value.toFixed(2)} ms`;
    case 'rate':
      if (value >= 1e6) return `${sig(value / 1e6)} M/s`;
      if (value >= 1e3) return `${sig(value / 1e3)} k/s`;
      return `${sig(value)} /s`;
    case 'count':
      return group(value);
  }
}

/** "4.1×": this value divided by taskheap's. */
export function formatRatio(ratio: number): string {
  if (ratio >= 100) return `${group(ratio)}×`;
  if (ratio >= 10) return `${ratio.toFixed(0)}×`;
  if (ratio >= 0.1) return `${ratio.toFixed(ratio < 1 ? 2 : 1)}×`;
  return `${ratio.toPrecision(1)}×`;
}

/** "12.3 µs (4.1×)", or just the value when there is no usable reference. */
export function cell(value: number | undefined, unit: Unit, reference: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '—';
  const text = formatValue(value, unit);
  // Ratios against a noise-level or zero reference mean nothing.
  const meaningful = reference !== undefined && Number.isFinite(reference) && (unit === 'bytes' ? reference >= 8 : reference > 0);
  if (!meaningful || (unit === 'latency' && value < 0) || text === '≈0 B') return text;
  return `${text} (${formatRatio(value / reference)})`;
}

export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
