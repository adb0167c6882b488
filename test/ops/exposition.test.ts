// The exposition checker the metrics tests use instead of promtool: a corpus
// of good and bad expositions, each with the reason it must be refused; and,
// wherever a real promtool is at hand ($PROMTOOL or the system's; none in
// .ci/run's proof run), promtool's verdict on the same corpus, so the checker
// is shown to refuse at least what promtool refuses.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { promtoolBinary } from '../binaries.js';
import { checkExposition } from './exposition.js';

interface Case {
  name: string;
  text: string;
  /** What the checker must say ('' for a clean exposition). */
  problem: string;
  /** Whether promtool 2.42 refuses it too (it lets some breaches of the format through). */
  promtoolRefuses: boolean;
}

const c = (name: string, text: string, problem: string, promtoolRefuses = problem !== ''): Case => ({
  name,
  text,
  problem,
  promtoolRefuses,
});

const CASES: Case[] = [
  c('a counter with labels', '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 1\n', ''),
  c('a comment line', '# a comment\n# HELP g G.\n# TYPE g gauge\ng 1\n', ''),
  c('escaped label values', '# HELP a_total A.\n# TYPE a_total counter\na_total{x="q\\"\\n\\\\"} 1\n', ''),
  c(
    'a histogram',
    '# HELP h_seconds H.\n# TYPE h_seconds histogram\nh_seconds_bucket{le="1"} 1\nh_seconds_bucket{le="+Inf"} 1\nh_seconds_sum 1\nh_seconds_count 1\n',
    '',
  ),
  c(
    'NaN, infinities and a timestamp',
    '# HELP g G.\n# TYPE g gauge\ng{a="1"} NaN\ng{a="2"} +Inf\ng{a="3"} -Inf\ng{a="4"} 1.5e-3 1700000000000\n',
    '',
  ),
  c('a summary', '# HELP s_seconds S.\n# TYPE s_seconds summary\ns_seconds{quantile="0.5"} 1\ns_seconds_sum 1\ns_seconds_count 1\n', ''),
  c('a trailing comma in labels', '# HELP g G.\n# TYPE g gauge\ng{a="1",} 1\n', ''),
  c('an untyped metric', '# HELP u U.\nu 1\n', ''),
  c('an unclosed label value', '# TYPE x counter\nx{name="a} 1\n', 'not closed'),
  c('an unknown escape', '# HELP g G.\n# TYPE g gauge\ng{a="\\t"} 1\n', 'invalid escape'),
  c('a value that is no number', '# HELP g G.\n# TYPE g gauge\ng 1x\n', 'expected float as value'),
  c('no value', '# HELP g G.\n# TYPE g gauge\ng\n', 'a value'),
  c('a fractional timestamp', '# HELP g G.\n# TYPE g gauge\ng 1 1.5\n', 'integer as timestamp'),
  c('text after the timestamp', '# HELP g G.\n# TYPE g gauge\ng 1 2 3\n', 'spurious string'),
  c('a metric name starting with a digit', '# HELP g G.\n# TYPE g gauge\n9g 1\n', 'invalid metric name'),
  c('a label name starting with a digit', '# HELP g G.\n# TYPE g gauge\ng{9a="1"} 1\n', 'invalid label name'),
  c('a label given twice', '# HELP g G.\n# TYPE g gauge\ng{a="1",a="2"} 1\n', 'duplicate label names'),
  c('an unknown type', '# HELP g G.\n# TYPE g meter\ng 1\n', 'unknown metric type'),
  c('two TYPE lines', '# HELP g G.\n# TYPE g gauge\n# TYPE g gauge\ng 1\n', 'second TYPE'),
  c('two HELP lines', '# HELP g G.\n# HELP g G.\n# TYPE g gauge\ng 1\n', 'second HELP'),
  c('TYPE after the samples', '# HELP g G.\ng 1\n# TYPE g gauge\n', 'second TYPE'),
  c('no newline at the end', '# HELP g G.\n# TYPE g gauge\ng 1', 'newline'),
  c('a quantile that is no number', '# HELP s S.\n# TYPE s summary\ns{quantile="x"} 1\n', "'quantile' label"),
  c('no HELP', '# TYPE g gauge\ng 1\n', 'no help text'),
  c('a counter without _total', '# HELP c C.\n# TYPE c counter\nc 1\n', '"_total" suffix'),
  c('a gauge with _total', '# HELP g_total G.\n# TYPE g_total gauge\ng_total 1\n', '"_total" suffix'),
  c('a gauge with _count', '# HELP g_count G.\n# TYPE g_count gauge\ng_count 1\n', '"_count" suffix'),
  c('an le label on a gauge', '# HELP g G.\n# TYPE g gauge\ng{le="1"} 1\n', '"le" label'),
  c('a camelCase metric name', '# HELP fooBar F.\n# TYPE fooBar gauge\nfooBar 1\n', 'snake_case'),
  c('a camelCase label name', '# HELP g G.\n# TYPE g gauge\ng{fooBar="1"} 1\n', 'snake_case'),
  c('milliseconds', '# HELP d_milliseconds D.\n# TYPE d_milliseconds gauge\nd_milliseconds 1\n', 'base unit'),
  // Breaches of the format that promtool 2.42 lets through.
  c('a series given twice', '# HELP g G.\n# TYPE g gauge\ng{a="1"} 1\ng{a="1"} 2\n', 'duplicate series', false),
  c(
    'a metric in two groups',
    '# HELP g G.\n# TYPE g gauge\ng{a="1"} 1\n# HELP h H.\n# TYPE h gauge\nh 1\ng{a="2"} 1\n',
    'more than one group',
    false,
  ),
  c('a histogram bucket without le', '# HELP h H.\n# TYPE h histogram\nh_bucket 1\n', "without an 'le' label", false),
  c('a summary sample without quantile', '# HELP s S.\n# TYPE s summary\ns 1\n', "without a 'quantile' label", false),
  c('a reserved label name', '# HELP g G.\n# TYPE g gauge\ng{__a="1"} 1\n', 'reserved', false),
];

describe('checkExposition', () => {
  it.each(CASES.map((x) => [x.name, x] as const))('%s', (_, { text, problem }) => {
    const problems = checkExposition(text);
    if (problem === '') expect(problems).toEqual([]);
    else expect(problems.join('\n')).toContain(problem);
  });
});

const promtool = promtoolBinary();

/** promtool's verdict: true when it refuses the text. */
function promtoolRefuses(file: string, text: string): boolean {
  try {
    execFileSync(file, ['check', 'metrics'], { input: text, stdio: ['pipe', 'pipe', 'pipe'] });
    return false;
  } catch {
    return true;
  }
}

describe.runIf(promtool !== undefined)('promtool on the same corpus', () => {
  it.each(CASES.map((x) => [x.name, x] as const))('%s', (_, { text, promtoolRefuses: refuses }) => {
    expect(promtoolRefuses(promtool as string, text)).toBe(refuses);
  });
});
