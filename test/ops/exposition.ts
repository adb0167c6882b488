// A strict checker of the Prometheus text exposition format (version 0.0.4),
// for the metrics tests: what `promtool check metrics` does (its parser's
// errors and its linter's complaints), without a Go binary that no npm package
// ships. It follows the format's own rules where promtool 2.42 is lenient: a
// metric's lines form one group, a series appears once, a summary's samples
// carry `quantile` and a histogram's buckets `le`, `__` label names are
// reserved. test/ops/exposition.test.ts shows it on a corpus of good and bad
// expositions, and compares it with a real promtool wherever one is at hand.

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const FLOAT = /^(?:[+-]?(?:Inf|NaN)|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const CAMEL = /[a-z][A-Z]/;
const NON_BASE_UNITS: Record<string, string> = {
  nanoseconds: 'seconds',
  microseconds: 'seconds',
  milliseconds: 'seconds',
  minutes: 'seconds',
  hours: 'seconds',
  days: 'seconds',
  weeks: 'seconds',
  kilobytes: 'bytes',
  megabytes: 'bytes',
  gigabytes: 'bytes',
  terabytes: 'bytes',
  kilometers: 'meters',
  centimeters: 'meters',
  millimeters: 'meters',
};
const ABBREVIATED = /(?:^|_)(?:ms|us|ns|sec|secs|min|mins|hr|hrs|kb|mb|gb|kib|mib|gib)(?:_|$)/i;

interface Family {
  name: string;
  help?: string;
  type?: string;
  samples: number;
  labelNames: Set<string>;
}

/** The problems found in an exposition, one line each; empty when it is clean. */
export function checkExposition(text: string): string[] {
  const problems: string[] = [];
  if (text !== '' && !text.endsWith('\n')) problems.push('the exposition does not end with a newline');
  const families = new Map<string, Family>();
  const closed = new Set<string>();
  const series = new Set<string>();
  let current: string | undefined;
  const family = (name: string, line: number): Family => {
    if (current !== name) {
      if (current !== undefined) closed.add(current);
      if (closed.has(name)) problems.push(`line ${line}: metric family "${name}" appears in more than one group`);
      current = name;
    }
    let found = families.get(name);
    if (found === undefined) {
      found = { name, samples: 0, labelNames: new Set() };
      families.set(name, found);
    }
    return found;
  };
  /** The family a sample name belongs to: a summary's or histogram's suffixed samples belong to its base name. */
  const familyOf = (name: string): { base: string; suffix: string } => {
    for (const suffix of ['_bucket', '_sum', '_count']) {
      if (!name.endsWith(suffix)) continue;
      const base = name.slice(0, -suffix.length);
      const type = families.get(base)?.type;
      if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return { base, suffix };
    }
    return { base: name, suffix: '' };
  };

  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((raw, index) => {
    const at = index + 1;
    const line = raw.replace(/^[ \t]+/, '');
    if (line === '') return;
    if (line.startsWith('#')) {
      const match = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(line);
      if (match === null) return; // a plain comment
      const [, keyword, name = '', rest = ''] = match;
      if (!new RegExp(`${METRIC_NAME.source}$`).test(name)) {
        problems.push(`line ${at}: invalid metric name "${name}" in ${keyword}`);
        return;
      }
      const f = family(name, at);
      if (keyword === 'HELP') {
        if (f.help !== undefined) problems.push(`line ${at}: second HELP line for metric name "${name}"`);
        if (/\\[^\\n]|\\$/.test(rest.replace(/\\\\/g, ''))) problems.push(`line ${at}: invalid escape sequence in the HELP of "${name}"`);
        f.help = rest;
      } else {
        if (f.type !== undefined || f.samples > 0)
          problems.push(`line ${at}: second TYPE line for metric name "${name}", or TYPE reported after samples`);
        if (!TYPES.has(rest.trim())) problems.push(`line ${at}: unknown metric type "${rest.trim()}"`);
        f.type = rest.trim();
      }
      return;
    }
    const problem = sample(line, at);
    if (problem !== undefined) problems.push(`line ${at}: ${problem}`);
  });

  /** Parses one sample line; returns what is wrong with it. */
  function sample(line: string, at: number): string | undefined {
    const nameMatch = METRIC_NAME.exec(line);
    if (nameMatch === null) return 'invalid metric name';
    const name = nameMatch[0];
    let rest = line.slice(name.length);
    const labels = new Map<string, string>();
    if (rest.startsWith('{')) {
      rest = rest.slice(1);
      for (;;) {
        rest = rest.replace(/^[ \t]+/, '');
        if (rest.startsWith('}')) {
          rest = rest.slice(1);
          break;
        }
        const labelMatch = LABEL_NAME.exec(rest);
        if (labelMatch === null) return `invalid label name for metric "${name}"`;
        const label = labelMatch[0];
        rest = rest.slice(label.length).replace(/^[ \t]+/, '');
        if (!rest.startsWith('="') && !/^=[ \t]*"/.test(rest)) return `expected '="' after label name "${label}"`;
        rest = rest.replace(/^=[ \t]*"/, '');
        let value = '';
        let closedQuote = false;
        while (rest !== '') {
          const char = rest[0];
          if (char === '"') {
            rest = rest.slice(1);
            closedQuote = true;
            break;
          }
          if (char === '\\') {
            const next = rest[1];
            if (next === '\\' || next === '"') value += next;
            else if (next === 'n') value += '\n';
            else return `invalid escape sequence '\\${next ?? ''}' in label value`;
            rest = rest.slice(2);
          } else {
            value += char;
            rest = rest.slice(1);
          }
        }
        if (!closedQuote) return `label value of "${label}" is not closed on its line (unescaped new-line)`;
        if (labels.has(label)) return `duplicate label names for metric "${name}"`;
        if (label.startsWith('__')) return `label name "${label}" is reserved (starts with __)`;
        labels.set(label, value);
        rest = rest.replace(/^[ \t]+/, '');
        if (rest.startsWith(',')) rest = rest.slice(1);
        else if (!rest.startsWith('}')) return `expected ',' or '}' after the value of label "${label}"`;
      }
    }
    if (!/^[ \t]/.test(rest)) return `expected a space and a value after metric "${name}"`;
    const tokens = rest.trim().split(/[ \t]+/);
    const [value = '', timestamp, ...extra] = tokens;
    if (!FLOAT.test(value)) return `expected float as value, got "${value}"`;
    if (timestamp !== undefined && !/^-?\d+$/.test(timestamp)) return `expected integer as timestamp, got "${timestamp}"`;
    if (extra.length > 0) return `spurious string after timestamp: "${extra.join(' ')}"`;

    const { base, suffix } = familyOf(name);
    const f = family(base, at);
    f.samples++;
    for (const label of labels.keys()) f.labelNames.add(label);
    if (f.type === 'summary' && suffix === '') {
      const quantile = labels.get('quantile');
      if (quantile === undefined) return `summary "${base}" sample without a 'quantile' label`;
      if (!FLOAT.test(quantile)) return `expected float as value for 'quantile' label, got "${quantile}"`;
    }
    if (f.type === 'histogram' && suffix === '_bucket') {
      const le = labels.get('le');
      if (le === undefined) return `histogram "${base}" bucket without an 'le' label`;
      if (!FLOAT.test(le)) return `expected float as value for 'le' label, got "${le}"`;
    }
    const key = `${name}{${[...labels]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',')}}`;
    if (series.has(key)) return `duplicate series ${key}`;
    series.add(key);
    return undefined;
  }

  // What promtool's linter (promlint) says about each family.
  for (const f of families.values()) {
    const type = f.type ?? 'untyped';
    if (f.help === undefined || f.help.trim() === '') problems.push(`${f.name} no help text`);
    if (type === 'counter' && !f.name.endsWith('_total')) problems.push(`${f.name} counter metrics should have "_total" suffix`);
    if (type !== 'counter' && f.name.endsWith('_total')) problems.push(`${f.name} non-counter metrics should not have "_total" suffix`);
    if (type !== 'histogram' && type !== 'summary')
      for (const suffix of ['_count', '_sum', '_bucket'])
        if (f.name.endsWith(suffix)) problems.push(`${f.name} non-histogram and non-summary metrics should not have "${suffix}" suffix`);
    if (type !== 'histogram' && f.labelNames.has('le')) problems.push(`${f.name} non-histogram metrics should not have "le" label`);
    if (type !== 'summary' && f.labelNames.has('quantile')) problems.push(`${f.name} non-summary metrics should not have "quantile" label`);
    if (CAMEL.test(f.name)) problems.push(`${f.name} metric names should be written in 'snake_case' not 'camelCase'`);
    for (const label of f.labelNames)
      if (CAMEL.test(label)) problems.push(`${f.name} label names should be written in 'snake_case' not 'camelCase'`);
    for (const [unit, base] of Object.entries(NON_BASE_UNITS))
      if (f.name.split('_').includes(unit)) problems.push(`${f.name} use base unit "${base}" instead of "${unit}"`);
    if (ABBREVIATED.test(f.name)) problems.push(`${f.name} metric names should not contain abbreviated units`);
  }
  return problems;
}
