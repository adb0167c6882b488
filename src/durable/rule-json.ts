// Rules as the stores keep them: taskheap's rules (every(), cron(), the
// calendar rules) to JSON and back, and whether two stored rules are the
// same schedule (a re-registration keeps its place).
import { CalendarRule } from '../rules/calendar.js';
import { CronRule } from '../rules/cron.js';
import { IntervalRule, type Rule } from '../rules/rule.js';

/** A rule as stored: enough to rebuild it in any process. */
type RuleSpec =
  | { type: 'interval'; start: number; interval: number }
  | { type: 'cron'; expression: string; zone: string }
  | {
      type: 'calendar';
      zone: string;
      anchor: number;
      unit: 'day' | 'week';
      every: number;
      weekdays?: number[];
      hour: number;
      minute: number;
      second: number;
    };

/** Serialises one of taskheap's rules. */
export function ruleToJson(rule: Rule): string {
  let spec: RuleSpec;
  if (rule instanceof IntervalRule) spec = { type: 'interval', start: rule.start, interval: rule.interval };
  else if (rule instanceof CronRule) spec = { type: 'cron', expression: rule.expression, zone: rule.zone };
  else if (rule instanceof CalendarRule) {
    const { zone, anchor, unit, every, weekdays, hour, minute, second } = rule;
    spec = {
      type: 'calendar',
      zone,
      anchor,
      unit,
      every,
      weekdays: weekdays === undefined ? undefined : [...weekdays],
      hour,
      minute,
      second,
    };
  } else throw new TypeError('Only every() and cron() rules can be stored');
  return JSON.stringify(spec);
}

/**
 * Whether two stored rules describe the same schedule, whatever their start
 * point: `every(5).minutes()` registered again at the next start must keep
 * its place, not begin anew.
 */
export function sameSchedule(a: string, b: string): boolean {
  const strip = (json: string) => {
    const { start: _start, anchor: _anchor, ...rest } = JSON.parse(json) as Record<string, unknown>;
    return JSON.stringify(rest);
  };
  return strip(a) === strip(b);
}

/** Rebuilds a rule written by `ruleToJson`. */
export function ruleFromJson(json: string): Rule {
  const spec = JSON.parse(json) as RuleSpec;
  if (spec.type === 'interval') return new IntervalRule(spec.start, spec.interval);
  if (spec.type === 'cron') return new CronRule(spec.expression, spec.zone);
  return new CalendarRule(spec);
}
