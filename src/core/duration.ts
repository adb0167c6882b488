// Durations: milliseconds, or strings such as `'1h30m'`, parsed and checked.
import { describe } from './validate.js';

/**
 * A length of time: milliseconds as a number, or a string of one or more
 * `<number><unit>` parts such as `'10m'`, `'1h30m'`, `'1.5s'` or `'1h 30m'`
 * (see `parseDuration`).
 */
export type Duration = number | string;

/** Milliseconds per unit, largest first: the order parts must come in. */
const UNITS: ReadonlyArray<readonly [unit: string, ms: number]> = [
  ['w', 604_800_000],
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

// A part: digits, an optional fraction, a unit. `ms` is tried before `m`
// (alternation order), so '5ms' is never read as 5 minutes and 's'.
const PART = /(\d+)(?:\.(\d+))?(ms|w|d|h|m|s)/y;

const GRAMMAR = 'expected one or more <number><unit> parts such as "10m", "1h30m", "1h 30m" or "1.5s", units ms, s, m, h, d, w';

/**
 * Parses a duration string into milliseconds.
 *
 * The grammar is strict, so that a typo is an error and never a different
 * length of time: one or more parts `<digits>[.<digits>]<unit>`, units
 * `ms` `s` `m` `h` `d` `w` (lowercase; `d` is 24 h and `w` 7 × 24 h of
 * elapsed time, not calendar days), largest unit first and each at most once,
 * parts optionally separated by one space. No sign, no spaces inside a part,
 * no bare numbers (pass a number for milliseconds). The result may have a
 * fraction of a millisecond (`'0.5ms'`).
 *
 * @throws TypeError if `text` is not a string; RangeError, quoting `text`, if it does not follow the grammar.
 * @example
 * parseDuration('10m');    // 600000
 * parseDuration('1h30m');  // 5400000
 * parseDuration('1h 30m'); // 5400000
 * parseDuration('1.5s');   // 1500
 */
export function parseDuration(text: string): number {
  if (typeof text !== 'string') throw new TypeError(`Expected a duration string such as "10m", got ${describe(text)}`);
  return parse(text, 'duration');
}

/**
 * A duration option as milliseconds: a number (finite, >= `min`) is taken as
 * it is, a string goes through `parseDuration`. Errors name the option.
 * @internal
 */
export function toDuration(value: unknown, what: string, min = 0): number {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string') ms = parse(value, `\`${what}\``);
  else throw new TypeError(`Expected \`${what}\` to be milliseconds or a duration string such as "30s", got ${describe(value)}`);
  if (!Number.isFinite(ms) || ms < min) {
    throw new RangeError(`Expected \`${what}\` to be a finite duration of at least ${min} ms, got ${describe(value)}`);
  }
  return ms;
}

function parse(text: string, what: string): number {
  const bad = (why: string) => new RangeError(`Invalid ${what} "${text}": ${why}`);
  let total = 0;
  let smallest = -1; // index in UNITS of the last unit read
  let at = 0;
  if (text === '') throw bad(`it is empty; ${GRAMMAR}`);
  while (true) {
    PART.lastIndex = at;
    const match = PART.exec(text);
    if (match === null) {
      const rest = text.slice(at);
      if (rest === '') throw bad(`it ends with a space; ${GRAMMAR}`);
      // '10min', '2hours': a unit it does not know, said as such (the parts read before it stopped short of its end).
      const unknown = /\d\s?([A-Za-z]+)(?!\d)/g;
      for (let part = unknown.exec(text); part !== null; part = unknown.exec(text)) {
        if (!UNITS.some(([name]) => name === part![1])) throw bad(`unknown unit "${part[1]}"; ${GRAMMAR}`);
      }
      const hint = /^\d+(?:\.\d+)? (?:ms|w|d|h|m|s)(?![A-Za-z])/.test(rest) ? ' (no space between a number and its unit)' : '';
      throw bad(`cannot read "${rest}"${hint}; ${GRAMMAR}`);
    }
    const [, whole, fraction = '', unit] = match;
    const index = UNITS.findIndex(([name]) => name === unit);
    if (index <= smallest) throw bad('units must go from largest to smallest, each at most once (w d h m s ms)');
    smallest = index;
    // Integer arithmetic, then one division: '1.1s' is exactly 1100, not 1100.0000000000002.
    total += (Number(whole + fraction) * UNITS[index]![1]) / 10 ** fraction.length;
    at = PART.lastIndex;
    if (at === text.length) break;
    if (text[at] === ' ') at++;
  }
  if (!Number.isFinite(total)) throw bad('too large');
  return total;
}
