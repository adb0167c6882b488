/** Turns measurements into the markdown report: one table per workload, then the SPEC §3 targets. */
import { CONTENDERS, type Capability } from '../contenders/index.js';
import { cell, formatValue, markdownTable, type Unit } from './format.js';
import type { Measurement, Workload } from './plan.js';

interface Column {
  title: string;
  key: string;
  unit: Unit;
}

interface TableSpec {
  title: string;
  workload: Workload;
  /** A capability whose absence blanks the row even when the process ran (cancel shares workload 1's process). */
  capability?: Capability;
  note: string;
  columns: Column[];
}

const TABLES: TableSpec[] = [
  {
    title: '1. Schedule N one-shot tasks (random times 1 to 4 hours ahead)',
    workload: 'oneshot',
    note: 'Per pending task, after a full GC (memory from the first round, times the median of rounds). Timers = live Node `Timeout` handles.',
    columns: [
      { title: 'time / task', key: 'scheduleNsPerTask', unit: 'ns' },
      { title: 'heap / task', key: 'heapPerTask', unit: 'bytes' },
      { title: 'RSS / task', key: 'rssPerTask', unit: 'bytes' },
      { title: 'timers', key: 'timers', unit: 'count' },
    ],
  },
  {
    title: '2. Cancel all N',
    workload: 'oneshot',
    capability: 'cancel',
    note: 'Same process as table 1. Retained = heap still held after cancelling and dropping the handles, after a full GC.',
    columns: [
      { title: 'cancel all', key: 'cancelMs', unit: 'ms' },
      { title: 'retained / task', key: 'retainedPerTask', unit: 'bytes' },
      { title: 'timers left', key: 'timersAfterCancel', unit: 'count' },
    ],
  },
  {
    title: '3. N recurring jobs (`*/5 * * * *`, or every 5 minutes)',
    workload: 'recurring',
    note:
      'Interval rules: taskheap `every(5).minutes()`, setTimeout = `setInterval`, croner = per-second pattern with `interval: 300`, toad = `SimpleIntervalJob`. ' +
      'A 5-minute boundary can pass during a large round: the cron jobs then fire (no-ops), and taskheap may be between its timer and a `setImmediate` when timers are counted (0).',
    columns: [
      { title: 'time / job', key: 'nsPerJob', unit: 'ns' },
      { title: 'heap / job', key: 'heapPerJob', unit: 'bytes' },
      { title: 'timers', key: 'timers', unit: 'count' },
      { title: 'stop all', key: 'stopMs', unit: 'ms' },
    ],
  },
  {
    title: '4. Drain N no-op tasks all due now',
    workload: 'drain',
    note:
      'Drain rate: from the end of scheduling (or the due time, for libraries that refuse a past time) to the last run. End-to-end includes scheduling. Ratios are against taskheap with workers=∞. ' +
      'tinyqueue = a synchronous pop-and-call loop with the comparator `a.t - b.t`: with all times equal its pops cost O(1), so it is a floor for call overhead only; ' +
      'taskheap runs equal times in scheduling order (an id tie-break), which makes every pop a full O(log n) sift-down.',
    columns: [
      { title: 'drain rate', key: 'tasksPerSec', unit: 'rate' },
      { title: 'end-to-end', key: 'endToEndPerSec', unit: 'rate' },
    ],
  },
  {
    title: '5. Precision: lateness of tasks spread evenly over a window',
    workload: 'precision',
    note: 'Lateness = actual start (performance.timeOrigin + performance.now()) − intended time. Busy loop: a `setInterval(…, 1)` that spins 0.5 ms each tick. min < 0 means a task started early. Full runs repeat each window up to 3 times (fast contenders) and show the median window by p99.',
    columns: [
      { title: 'p50', key: 'p50', unit: 'latency' },
      { title: 'p99', key: 'p99', unit: 'latency' },
      { title: 'max', key: 'max', unit: 'latency' },
      { title: 'min', key: 'min', unit: 'latency' },
    ],
  },
  {
    title: '7. Rate limits, serial keys and priorities: their cost (taskheap only)',
    workload: 'limits',
    note:
      'N no-op tasks due now, scheduled then drained with 16 workers, each with no options, a priority (0-9), one of 1,000 serial keys, or one of 1,000 rate-limit keys whose limit never binds: ' +
      'the bookkeeping alone. Ratios are against no options, which is also the path of every scheduler that never uses these options.',
    columns: [
      { title: 'schedule / task', key: 'scheduleNsPerTask', unit: 'ns' },
      { title: 'drain rate', key: 'tasksPerSec', unit: 'rate' },
      { title: 'end-to-end', key: 'endToEndPerSec', unit: 'rate' },
    ],
  },
];

const naReason = (contender: string, capability: Capability): string | undefined =>
  CONTENDERS.find((c) => c.name === contender)?.na[capability];

/** "timeout (killed after 120 s)", "n/a (not built)"… for a row without figures. */
function statusText(m: Measurement, capability?: Capability): string | undefined {
  const reason = capability === undefined ? undefined : naReason(m.contender, capability);
  if (reason !== undefined) return `n/a (${reason})`;
  const outcome = m.outcome;
  if (outcome === undefined) return 'not run';
  if (outcome.status === 'ok') return undefined;
  const message = (outcome.message ?? '').replace(/\|/g, '/').replace(/\s+/g, ' ').slice(0, 120);
  return message === '' ? outcome.status : `${outcome.status} (${message})`;
}

const numberAt = (m: Measurement | undefined, key: string): number | undefined => {
  const value = m?.outcome?.status === 'ok' ? m.outcome.data?.[key] : undefined;
  return typeof value === 'number' ? value : undefined;
};

function renderTable(spec: TableSpec, all: Measurement[]): string {
  const rows = all.filter((m) => m.workload === spec.workload);
  if (rows.length === 0) return '';
  const body = rows.map((m) => {
    const ref = rows.find((r) => r.group === m.group && r.ref);
    const status = statusText(m, spec.capability);
    const cells =
      status !== undefined
        ? [status, ...spec.columns.slice(1).map(() => '—')]
        : spec.columns.map((c) => cell(numberAt(m, c.key), c.unit, m.ref ? undefined : numberAt(ref, c.key)));
    return [m.group, m.label, ...cells];
  });
  const firstTitle = spec.workload === 'precision' ? 'tasks' : spec.workload === 'recurring' ? 'rule, N' : 'N';
  return `## ${spec.title}\n\n${spec.note}\n\n${markdownTable([firstTitle, 'contender', ...spec.columns.map((c) => c.title)], body)}`;
}

interface PatternResult {
  opsPerSec?: number;
  sample?: (number | null)[];
  error?: string;
}

/** Table 6: patterns are columns; each cell is ops/s, and answers are checked against taskheap's (else croner's). */
function renderNextRun(all: Measurement[]): string {
  const rows = all.filter((m) => m.workload === 'next-run');
  if (rows.length === 0) return '';
  const patternsOf = (m: Measurement | undefined): Record<string, PatternResult> | undefined =>
    m?.outcome?.status === 'ok' ? (m.outcome.data?.patterns as Record<string, PatternResult>) : undefined;
  const ref = rows.find((m) => m.ref);
  const judge = patternsOf(ref) !== undefined ? ref : rows.find((m) => m.contender === 'croner');
  const keys = Object.keys(patternsOf(rows.find((m) => patternsOf(m) !== undefined)) ?? {});
  const disagreements: string[] = [];

  const body = rows.map((m) => {
    const status = statusText(m);
    const results = patternsOf(m);
    if (status !== undefined || results === undefined) return [m.label, status ?? '—', ...keys.slice(1).map(() => '—')];
    return [
      m.label,
      ...keys.map((key) => {
        const r = results[key];
        if (r?.error !== undefined) return `error (${r.error.slice(0, 60)})`;
        const differs = judge !== m ? firstDifference(r?.sample, patternsOf(judge)?.[key]?.sample) : undefined;
        if (differs !== undefined) disagreements.push(`- ${m.label}, \`${key}\`: ${differs} (vs ${judge!.label})`);
        return cell(r?.opsPerSec, 'rate', m.ref ? undefined : patternsOf(ref)?.[key]?.opsPerSec) + (differs === undefined ? '' : ' ≠');
      }),
    ];
  });
  const note =
    'Next occurrence after 1,024 instants spread over 2025–2029 (two on New York DST days), repeated for the duration. ' +
    `Answers for the first 32 instants are compared with ${judge?.label ?? 'nobody (no reference ran)'}; ≠ marks a disagreement.`;
  const table = markdownTable(['contender', ...keys.map((k) => `\`${k}\``)], body);
  const listing = disagreements.length > 0 ? `\n\nDisagreements:\n${disagreements.join('\n')}` : '';
  return `## 6. Next occurrence of a cron pattern\n\n${note}\n\n${table}${listing}`;
}

function firstDifference(mine: (number | null)[] | undefined, theirs: (number | null)[] | undefined): string | undefined {
  if (mine === undefined || theirs === undefined) return undefined;
  const i = mine.findIndex((t, k) => t !== theirs[k]);
  if (i < 0) return undefined;
  const show = (t: number | null | undefined): string => (t == null ? 'none' : new Date(t).toISOString());
  const count = mine.filter((t, k) => t !== theirs[k]).length;
  return `${count}/${mine.length} differ, e.g. ${show(mine[i])} vs ${show(theirs[i])}`;
}

export interface Target {
  target: string;
  measured: string;
  goal: string;
  met: boolean | undefined;
}

/** SPEC §3's targets, judged at the largest N of this run (1,000,000 in a full run). */
export function targets(all: Measurement[], n: number, precisionGroup: string): Target[] {
  const find = (workload: Workload, label: string, group: string) =>
    all.find((m) => m.workload === workload && m.label === label && m.group === group);
  const g = n.toLocaleString('en-US');
  const out: Target[] = [];

  const mine = numberAt(find('oneshot', 'taskheap', g), 'scheduleNsPerTask');
  const floor = numberAt(find('oneshot', 'tinyqueue', g), 'scheduleNsPerTask');
  const ratio = mine !== undefined && floor !== undefined ? mine / floor : undefined;
  out.push(
    judge(
      `schedule cost vs bare tinyqueue push, N=${g}`,
      ratio === undefined ? undefined : `${ratio.toFixed(2)}× (${formatValue(mine!, 'ns')} vs ${formatValue(floor!, 'ns')})`,
      '≤ 2×',
      ratio,
      (r) => r <= 2,
    ),
  );

  const heap = numberAt(find('oneshot', 'taskheap', g), 'heapPerTask');
  out.push(
    judge(`heap per pending task, N=${g}`, heap === undefined ? undefined : formatValue(heap, 'bytes'), '≤ 150 B', heap, (v) => v <= 150),
  );

  const cancel = numberAt(find('oneshot', 'taskheap', g), 'cancelMs');
  out.push(judge(`cancel all, N=${g}`, cancel === undefined ? undefined : formatValue(cancel, 'ms'), '< 0.5 s', cancel, (v) => v < 500));

  for (const workers of ['1', '16', '∞']) {
    const rate = numberAt(find('drain', `taskheap (workers=${workers})`, g), 'tasksPerSec');
    out.push(
      judge(
        `drain no-op tasks, workers=${workers}, N=${g}`,
        rate === undefined ? undefined : formatValue(rate, 'rate'),
        '> 1 M/s',
        rate,
        (v) => v > 1e6,
      ),
    );
  }

  for (const loop of ['idle', 'busy']) {
    const group = `${precisionGroup}, ${loop} loop`;
    const p99 = numberAt(find('precision', 'taskheap', group), 'p99');
    const label = `p99 lateness, ${group}${loop === 'busy' ? ' (beyond SPEC: for information)' : ''}`;
    out.push(judge(label, p99 === undefined ? undefined : formatValue(p99, 'latency'), '< 2 ms', p99, (v) => v < 2));
  }
  return out;
}

function judge(target: string, measured: string | undefined, goal: string, value: number | undefined, ok: (v: number) => boolean): Target {
  return { target, measured: measured ?? 'not measured', goal, met: value === undefined ? undefined : ok(value) };
}

export function renderTargets(list: Target[], note: string): string {
  const rows = list.map((t) => [t.target, t.measured, t.goal, t.met === undefined ? '?' : t.met ? 'met' : '**missed**']);
  return `## Targets (SPEC §3)\n\n${note}\n\n${markdownTable(['target', 'measured', 'goal', 'result'], rows)}`;
}

export function renderTables(all: Measurement[]): string {
  const table = (limits: boolean) => TABLES.filter((spec) => (spec.workload === 'limits') === limits).map((spec) => renderTable(spec, all));
  return [...table(false), renderNextRun(all), ...table(true)].filter(Boolean).join('\n\n');
}
