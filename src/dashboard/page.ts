// The dashboard's one page: no build step, no framework, no CDN, so it works
// offline and behind any proxy. Names, payloads and errors are user data:
// the script only ever puts them in the page with `textContent`, and the
// Content-Security-Policy (handler.ts) allows no script but this one. The
// panels a link opens (a task's detail, a job's runs) are page-detail.ts's.
import { DETAIL_HTML, DETAIL_SCRIPT, DETAIL_STYLE } from './page-detail.js';
import { LIMITS_HTML, LIMITS_SCRIPT } from './page-limits.js';

const STYLE = `
  :root { font: 14px/1.4 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0 auto; max-width: 1200px; padding: 16px; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 16px; margin: 24px 0 8px; }
  #stats { color: #555; }
  table { width: 100%; border-collapse: collapse; background: #fff; box-shadow: 0 1px 2px #0002; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e6e8eb; vertical-align: top; }
  th { font-weight: 600; background: #eef0f3; }
  td.error { color: #a21d1d; max-width: 360px; overflow-wrap: anywhere; }
  .state { font-weight: 600; }
  .state-paused, .state-waiting { color: #8a5a00; }
  .state-blocked { color: #5b4a9e; }
  .state-failed, .state-cancelled, .state-timed-out { color: #a21d1d; }
  .state-scheduled, .state-running, .state-succeeded { color: #1c6b2a; }
  button { margin-right: 4px; font: inherit; padding: 2px 8px; cursor: pointer; }
  .empty { color: #777; font-style: italic; }
  #message { min-height: 20px; color: #a21d1d; }
  .rel { color: #777; font-size: 12px; display: block; }
  form#filters { display: flex; flex-wrap: wrap; gap: 6px; align-items: end; margin-bottom: 8px; }
  form#filters label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
  input, select { font: inherit; padding: 2px 4px; }
  #counts button[aria-pressed="true"] { font-weight: 700; border-width: 2px; }
  #counts, #bulk, #paging, #zone-bar { margin: 6px 0; }
  #confirm { background: #fff4e5; border: 1px solid #e0b060; padding: 6px 8px; margin: 6px 0; }
  pre { background: #f0f2f5; padding: 6px; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; }
  progress { width: 80px; }
  @media (max-width: 700px) {
    body { padding: 8px; }
    table { display: block; overflow-x: auto; white-space: nowrap; }
    td.error { white-space: normal; min-width: 200px; }
    form#filters label { flex: 1 1 45%; }
  }
`;

const SCRIPT = `
const csrf = document.querySelector('meta[name="taskheap-csrf"]').content;
const $ = (id) => document.getElementById(id);
let zone = 'UTC';
let view = { filter: {}, after: null, pages: [], detail: null, runs: null, runsAfter: null, runsNext: null, last: null, confirm: null };
function absolute(ms) {
  if (zone === 'UTC') return new Date(ms).toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, 'Z');
  return new Intl.DateTimeFormat('sv-SE', { timeZone: zone === 'browser' ? undefined : zone, dateStyle: 'short', timeStyle: 'medium' }).format(new Date(ms));
}
function relative(ms, now) {
  const d = ms - now, a = Math.abs(d);
  const [n, u] = a < 59500 ? [Math.round(a / 1000), 's'] : a < 3570000 ? [Math.round(a / 60000), 'min'] : a < 84600000 ? [Math.round(a / 3600000), 'h'] : [Math.round(a / 86400000), 'd'];
  return d >= 0 ? 'in ' + n + ' ' + u : n + ' ' + u + ' ago';
}
const time = (ms) => ms === null || ms === undefined ? '—' : absolute(ms);
function when(row, ms, now) {
  const td = cell(row, time(ms));
  if (ms !== null && ms !== undefined) {
    const rel = document.createElement('span');
    rel.className = 'rel';
    rel.textContent = relative(ms, now);
    td.appendChild(rel);
  }
  return td;
}
const iso = (value) => value === null || value === undefined ? null : Date.parse(value);

function cell(row, text, className) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '' : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function actions(row, state, kind, id, names) {
  const td = cell(row, '');
  if (!state.actions) return;
  for (const name of names) {
    const button = document.createElement('button');
    button.textContent = name;
    button.dataset.action = name;
    button.addEventListener('click', () => act(kind, id, name));
    td.appendChild(button);
  }
}

function fill(id, rows, empty) {
  const body = $(id);
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(tr, empty, 'empty');
    td.colSpan = 9;
    body.appendChild(tr);
  }
}

function state(cellText, row) {
  cell(row, cellText, 'state state-' + cellText);
}

function draw(s) {
  const l = s.stats.lateness;
  $('stats').textContent = 'waiting ' + s.stats.waiting + ' · running ' + s.stats.running + ' · due, waiting for a worker ' + s.stats.due +
    ' · workers ' + s.stats.workers + ' · succeeded ' + s.stats.succeeded + ' · failed ' + s.stats.failed +
    ' · lateness p50 ' + l.p50.toFixed(1) + ' ms, p99 ' + l.p99.toFixed(1) + ' ms, max ' + l.max.toFixed(1) + ' ms' +
    (s.actions ? '' : ' · read-only');
  fill('jobs', s.jobs.map((job) => {
    const tr = document.createElement('tr');
    tr.dataset.id = job.id;
    cell(tr, job.name ?? '#' + job.id);
    cell(tr, job.rule);
    state(job.state + (job.running ? ' (running)' : ''), tr);
    when(tr, job.nextRunAt, s.now);
    when(tr, job.lastRunAt, s.now);
    cell(tr, job.runs + ' / ' + job.failures);
    cell(tr, job.lastError, 'error');
    const names = job.state === 'cancelled' || job.state === 'done' ? [] : [job.state === 'paused' ? 'resume' : 'pause', 'trigger', 'cancel'];
    actions(tr, s, 'job', job.id, names);
    return tr;
  }), 'No jobs');
  fill('tasks', s.tasks.map((task) => {
    const tr = document.createElement('tr');
    tr.dataset.id = task.id;
    // Its detail: the task it runs (a claimed stored task, or an in-memory flow's), or its own.
    const open = document.createElement('a');
    open.href = task.runsTask === null ? '#memory-task-' + task.id : '#task-' + task.runsTask;
    open.textContent = task.name ?? '#' + task.id;
    cell(tr, '').appendChild(open);
    state(task.state, tr);
    when(tr, task.runAt, s.now);
    cell(tr, task.attempts);
    actions(tr, s, 'task', task.id, ['cancel']);
    return tr;
  }), 'No waiting tasks');
  $('more-tasks').textContent = s.moreTasks > 0 ? 'and ' + s.moreTasks + ' more' : '';
  $('stored-section').hidden = s.stored === null && s.storedError === null;
  $('stored-jobs-section').hidden = s.storedJobs === null;
  $('queues-section').hidden = s.queues === null;
  fill('queues', (s.queues ?? []).map((queue) => {
    const tr = document.createElement('tr');
    tr.dataset.queue = queue.name;
    cell(tr, queue.name);
    cell(tr, queue.paused ? 'paused' : 'active');
    cell(tr, (queue.concurrency ?? '∞') + ' / ' + (queue.globalConcurrency ?? '∞'));
    cell(tr, queue.counts.waiting);
    cell(tr, queue.counts.running);
    cell(tr, queue.counts.succeeded);
    cell(tr, queue.counts.failed + queue.counts['timed-out']);
    cell(tr, queue.rate === null ? '—' : queue.rate.limit + ' per ' + (queue.rate.interval >= 1000 ? queue.rate.interval / 1000 + ' s' : queue.rate.interval + ' ms'));
    // What is waiting, and why it does not run.
    const why = queue.counts.waiting === 0 ? '' : queue.paused ? 'paused'
      : queue.globalConcurrency !== null && queue.counts.running >= queue.globalConcurrency ? 'at its concurrency (' + queue.globalConcurrency + ')'
      : 'due later, or waiting for a worker or its rate';
    cell(tr, why);
    return tr;
  }), 'No queues');
  fill('stored-jobs', (s.storedJobs ?? []).map((job) => {
    const tr = document.createElement('tr');
    tr.dataset.key = job.key;
    const runs = document.createElement('a');
    runs.href = '#job-' + encodeURIComponent(job.key);
    runs.textContent = job.key;
    runs.title = 'Its runs';
    cell(tr, '').appendChild(runs);
    cell(tr, job.name);
    state(job.state, tr);
    cell(tr, job.rule ?? '—');
    cell(tr, job.timezone ?? '—');
    const next = when(tr, job.nextRunAt, s.now);
    if (job.nextRuns.length > 1) {
      const more = document.createElement('span');
      more.className = 'rel';
      more.textContent = 'then ' + job.nextRuns.slice(1).map(time).join(', ');
      next.appendChild(more);
    }
    when(tr, job.lastRunAt, s.now);
    cell(tr, job.runs + ' / ' + (job.counts.failed + job.counts['timed-out']));
    const names = job.state === 'scheduled' ? ['pause', 'trigger', 'cancel'] : job.state === 'paused' ? ['resume', 'trigger', 'cancel'] : [];
    actions(tr, s, 'stored-job', job.key, names);
    return tr;
  }), 'No stored jobs');
  $('stored-error').textContent = s.storedError ?? '';
  drawCounts(s);
  fill('stored', (s.stored ?? []).map((task) => {
    const tr = document.createElement('tr');
    tr.dataset.id = task.id;
    const open = document.createElement('a');
    open.href = '#task-' + task.id;
    open.textContent = String(task.id);
    cell(tr, '').appendChild(open);
    cell(tr, task.name);
    cell(tr, task.key);
    state(task.state, tr);
    when(tr, iso(task.runAt), s.now);
    cell(tr, task.attempts + ' / ' + task.maxAttempts);
    // The first line of a stored error (its message); the whole stack on hover.
    cell(tr, task.lastError === null ? null : task.lastError.split('\\n')[0], 'error').title = task.lastError ?? '';
    cell(tr, task.queue);
    progressCell(tr, task.progress);
    const finished = task.state === 'failed' || task.state === 'timed-out' || task.state === 'cancelled';
    actions(tr, s, 'stored', task.id, task.state === 'blocked' || task.state === 'waiting' || task.state === 'running' ? ['cancel'] : finished ? ['retry'] : []);
    return tr;
  }), 'No stored tasks match');
  const shown = (s.stored ?? []).length;
  $('page-info').textContent = shown === 0 ? '' : 'page ' + (view.pages.length + 1) + ' · ' + shown + ' shown';
  $('page-next').disabled = s.storedNext === null;
  $('page-first').disabled = view.pages.length === 0;
  view.next = s.storedNext;
  $('bulk').hidden = !s.actions || s.stored === null;
}

function progressCell(tr, value) {
  const td = cell(tr, '');
  if (value === undefined || value === null) return;
  if (typeof value === 'number' && value >= 0 && value <= 100) {
    const bar = document.createElement('progress');
    bar.max = 100;
    bar.value = value;
    td.appendChild(bar);
    td.appendChild(document.createTextNode(' ' + value + '%'));
  } else td.textContent = JSON.stringify(value);
}

const STATES = ['blocked', 'waiting', 'running', 'succeeded', 'failed', 'timed-out', 'cancelled'];
function drawCounts(s) {
  const counts = s.storedCounts;
  if (counts === null) return $('counts').replaceChildren();
  const total = STATES.reduce((sum, st) => sum + counts[st], 0);
  const buttons = [['', 'all ' + total], ...STATES.map((st) => [st, st + ' ' + counts[st]])].map(([st, text]) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.dataset.state = st;
    b.textContent = text;
    b.setAttribute('aria-pressed', String((view.filter.state ?? '') === st));
    b.addEventListener('click', () => { $('f-state').value = st; apply(); });
    return b;
  });
  $('counts').replaceChildren(...buttons);
}

function readFilter() {
  const f = {};
  for (const [key, id] of [['state', 'f-state'], ['name', 'f-name'], ['queue', 'f-queue'], ['keyPrefix', 'f-key']]) {
    const v = $(id).value.trim();
    if (v !== '') f[key] = v;
  }
  for (const [key, id] of [['from', 'f-from'], ['to', 'f-to']]) {
    const v = $(id).value;
    if (v !== '') f[key] = String(Date.parse(zone === 'UTC' ? v + 'Z' : v));
  }
  return f;
}

function apply() {
  view.filter = readFilter();
  view.after = null;
  view.pages = [];
  view.confirm = null;
  $('confirm').hidden = true;
  refresh();
}

function stateUrl() {
  const q = new URLSearchParams(view.filter);
  if (view.after !== null) q.set('after', view.after);
  return 'api/state?' + q.toString();
}

function ask(action) {
  const counts = view.last && view.last.storedCounts;
  const n = counts === null || counts === undefined ? '?' :
    action === 'delete' ? ['succeeded', 'failed', 'timed-out', 'cancelled'].filter((st) => !view.filter.state || view.filter.state === st).reduce((sum, st) => sum + counts[st], 0)
    : action === 'cancel' ? ['blocked', 'waiting', 'running'].filter((st) => !view.filter.state || view.filter.state === st).reduce((sum, st) => sum + counts[st], 0)
    : ['failed', 'timed-out'].filter((st) => !view.filter.state || view.filter.state === st).reduce((sum, st) => sum + counts[st], 0);
  const what = action === 'delete' ? 'Delete ' + n + ' finished' : action === 'cancel' ? 'Cancel ' + n + ' waiting or running' : 'Retry ' + n + ' failed';
  const f = Object.entries(view.filter).map(([k, v]) => k + '=' + v).join(', ');
  $('confirm-text').textContent = what + ' task(s) matching ' + (f === '' ? 'every stored task' : f) + '?';
  view.confirm = action;
  $('confirm').hidden = false;
}

async function bulk(action) {
  $('confirm').hidden = true;
  const response = await fetch('api/action', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-taskheap-csrf': csrf },
    body: JSON.stringify({ kind: 'bulk', action, filter: view.filter }),
  });
  const answer = await response.json().catch(() => ({}));
  await refresh();
  $('message').textContent = response.ok ? action + ': ' + answer.count + ' task(s)' + (answer.more ? ' (more remain: run it again)' : '') : (answer.error ?? 'HTTP ' + response.status);
}

function wire() {
  $('filters').addEventListener('submit', (event) => { event.preventDefault(); apply(); });
  $('f-clear').addEventListener('click', () => { $('filters').reset(); apply(); });
  $('page-next').addEventListener('click', () => { if (view.next) { view.pages.push(view.after); view.after = view.next; refresh(); } });
  $('page-first').addEventListener('click', () => { view.after = null; view.pages = []; refresh(); });
  for (const b of document.querySelectorAll('#bulk button')) b.addEventListener('click', () => ask(b.dataset.bulk));
  $('confirm-yes').addEventListener('click', () => bulk(view.confirm));
  $('confirm-no').addEventListener('click', () => { view.confirm = null; $('confirm').hidden = true; });
  $('zone').addEventListener('change', () => { zone = $('zone').value; if (view.last) draw(view.last); });
  const local = Intl.DateTimeFormat().resolvedOptions().timeZone;
  $('zone-browser').textContent = 'Browser (' + local + ')';
  wirePanels();
}

let unreachable = false;
async function refresh() {
  try {
    const response = await fetch(stateUrl(), { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!response.ok) throw new Error('HTTP ' + response.status);
    view.last = await response.json();
    draw(view.last);
    // For benchmarks: when the counts were first drawn, in ms since the navigation began.
    if (view.last.storedCounts !== null && performance.getEntriesByName('taskheap:counts').length === 0) performance.mark('taskheap:counts');
    refreshPanels();
    refreshLimits();
    if (unreachable) $('message').textContent = '';
    unreachable = false;
  } catch (error) {
    $('message').textContent = 'Cannot reach the scheduler: ' + error.message;
    unreachable = true;
  }
}

async function act(kind, id, action) {
  const response = await fetch('api/action', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-taskheap-csrf': csrf },
    body: JSON.stringify(kind === 'stored-job' ? { kind, key: id, action } : { kind, id, action }),
  });
  const answer = await response.json().catch(() => ({}));
  $('message').textContent = response.ok ? '' : (answer.error ?? 'HTTP ' + response.status);
  await refresh();
}

`;

/** Runs last, once every function of SCRIPT and DETAIL_SCRIPT is defined. */
const START = `
wire();
// The state the page came with, drawn at once; then every two seconds from api/state.
view.last = JSON.parse($('initial-state').textContent);
draw(view.last);
performance.mark('taskheap:rows');
route();
// The first state has the rows but not the counts and queues (a scan of every stored task): they come now.
if (view.last.stored !== null && view.last.storedCounts === null) refresh();
refreshLimits();
setInterval(refresh, 2000);
`;

/**
 * The page, with its title escaped, the request's CSP nonce and CSRF token in
 * place, and its first state as JSON (`<` escaped, so no text in it can close
 * the element; a JSON script is data, never run).
 */
export function page(title: string, nonce: string, csrf: string, state: unknown): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="taskheap-csrf" content="${csrf}">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}${DETAIL_STYLE}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<div id="stats">Loading…</div>
<div id="zone-bar"><label>Times in <select id="zone"><option value="UTC">UTC</option><option id="zone-browser" value="browser">Browser</option></select></label></div>
<div id="message" role="status"></div>
${DETAIL_HTML}
<section id="stored-section" hidden>
<h2>Stored tasks</h2>
<div id="stored-error" class="error"></div>
<form id="filters">
<label>State<select id="f-state"><option value="">any</option><option>waiting</option><option>running</option><option>succeeded</option><option>failed</option><option>timed-out</option><option>cancelled</option></select></label>
<label>Handler<input id="f-name" size="12"></label>
<label>Queue<input id="f-queue" size="10"></label>
<label>Key prefix<input id="f-key" size="12"></label>
<label>Due from<input id="f-from" type="datetime-local" step="1"></label>
<label>Due before<input id="f-to" type="datetime-local" step="1"></label>
<button id="f-apply" type="submit">Apply</button><button id="f-clear" type="button">Clear</button>
</form>
<div id="counts" aria-label="Tasks by state (from the store)"></div>
<div id="bulk" hidden>On every task matching the filter: <button type="button" data-bulk="retry">Retry failed</button><button type="button" data-bulk="cancel">Cancel waiting</button><button type="button" data-bulk="delete">Delete finished</button></div>
<div id="confirm" role="alertdialog" hidden><span id="confirm-text"></span> <button id="confirm-yes" type="button">Confirm</button><button id="confirm-no" type="button">Keep them</button></div>
<table><thead><tr><th>Id</th><th>Handler</th><th>Key</th><th>State</th><th>Due</th><th>Attempts</th><th>Last error</th><th>Queue</th><th>Progress</th><th></th></tr></thead><tbody id="stored"></tbody></table>
<div id="paging"><button id="page-first" type="button">First page</button><button id="page-next" type="button">Next page</button> <span id="page-info"></span></div>
</section>
<section id="queues-section" hidden>
<h2>Queues</h2>
<table><thead><tr><th>Queue</th><th>State</th><th>Concurrency (here / all)</th><th>Waiting</th><th>Running</th><th>Succeeded</th><th>Failed</th><th>Rate</th><th>Waiting because</th></tr></thead><tbody id="queues"></tbody></table>
</section>
${LIMITS_HTML}
<section id="stored-jobs-section" hidden>
<h2>Stored jobs</h2>
<table><thead><tr><th>Key</th><th>Handler</th><th>State</th><th>Rule</th><th>Zone</th><th>Next runs</th><th>Last run</th><th>Runs / failures</th><th></th></tr></thead><tbody id="stored-jobs"></tbody></table>
</section>
<h2>Jobs</h2>
<table><thead><tr><th>Name</th><th>Rule</th><th>State</th><th>Next run</th><th>Last run</th><th>Runs / failures</th><th>Last error</th><th></th></tr></thead><tbody id="jobs"></tbody></table>
<h2>Waiting tasks <small id="more-tasks"></small></h2>
<table><thead><tr><th>Name</th><th>State</th><th>Due</th><th>Attempts</th><th></th></tr></thead><tbody id="tasks"></tbody></table>
<script type="application/json" id="initial-state">${JSON.stringify(state).replace(/</g, '\\u003c')}</script>
<script nonce="${nonce}">${SCRIPT}${DETAIL_SCRIPT}${LIMITS_SCRIPT}${START}</script>
</body>
</html>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
