// The dashboard's one page: no build step, no framework, no CDN, so it works
// offline and behind any proxy. Names, payloads and errors are user data:
// the script only ever puts them in the page with `textContent`, and the
// Content-Security-Policy (handler.ts) allows no script but this one.

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
  .state-failed, .state-cancelled, .state-timed-out { color: #a21d1d; }
  .state-scheduled, .state-running, .state-succeeded { color: #1c6b2a; }
  button { margin-right: 4px; font: inherit; padding: 2px 8px; cursor: pointer; }
  .empty { color: #777; font-style: italic; }
  #message { min-height: 20px; color: #a21d1d; }
`;

const SCRIPT = `
const csrf = document.querySelector('meta[name="taskheap-csrf"]').content;
const $ = (id) => document.getElementById(id);
const time = (ms) => ms === null ? '—' : new Date(ms).toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, 'Z');

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
  $('stats').textContent = 'pending ' + s.stats.pending + ' · running ' + s.stats.running + ' · waiting for a worker ' + s.stats.waiting +
    ' · workers ' + s.stats.workers + ' · succeeded ' + s.stats.succeeded + ' · failed ' + s.stats.failed +
    ' · lateness p50 ' + l.p50.toFixed(1) + ' ms, p99 ' + l.p99.toFixed(1) + ' ms, max ' + l.max.toFixed(1) + ' ms' +
    (s.actions ? '' : ' · read-only');
  fill('jobs', s.jobs.map((job) => {
    const tr = document.createElement('tr');
    tr.dataset.id = job.id;
    cell(tr, job.name ?? '#' + job.id);
    cell(tr, job.rule);
    state(job.state + (job.running ? ' (running)' : ''), tr);
    cell(tr, time(job.nextRunAt));
    cell(tr, time(job.lastRunAt));
    cell(tr, job.runs + ' / ' + job.failures);
    cell(tr, job.lastError, 'error');
    const names = job.state === 'cancelled' || job.state === 'done' ? [] : [job.state === 'paused' ? 'resume' : 'pause', 'trigger', 'cancel'];
    actions(tr, s, 'job', job.id, names);
    return tr;
  }), 'No jobs');
  fill('tasks', s.tasks.map((task) => {
    const tr = document.createElement('tr');
    tr.dataset.id = task.id;
    cell(tr, task.name ?? '#' + task.id);
    state(task.state, tr);
    cell(tr, time(task.runAt));
    cell(tr, task.attempts);
    actions(tr, s, 'task', task.id, ['cancel']);
    return tr;
  }), 'No pending tasks');
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
    return tr;
  }), 'No queues');
  fill('stored-jobs', (s.storedJobs ?? []).map((job) => {
    const tr = document.createElement('tr');
    tr.dataset.key = job.key;
    cell(tr, job.key);
    cell(tr, job.name);
    state(job.state, tr);
    cell(tr, time(job.nextRunAt === null ? null : Date.parse(job.nextRunAt)));
    cell(tr, time(job.lastRunAt === null ? null : Date.parse(job.lastRunAt)));
    cell(tr, job.runs + ' / ' + (job.counts.failed + job.counts['timed-out']));
    const names = job.state === 'scheduled' ? ['pause', 'trigger', 'cancel'] : job.state === 'paused' ? ['resume', 'trigger', 'cancel'] : [];
    actions(tr, s, 'stored-job', job.key, names);
    return tr;
  }), 'No stored jobs');
  $('stored-error').textContent = s.storedError ?? '';
  fill('stored', (s.stored ?? []).map((task) => {
    const tr = document.createElement('tr');
    tr.dataset.id = task.id;
    cell(tr, task.id);
    cell(tr, task.name);
    cell(tr, task.key);
    state(task.state, tr);
    cell(tr, time(task.runAt));
    cell(tr, task.attempts);
    // The first line of a stored error (its message); the whole stack on hover.
    cell(tr, task.lastError === null ? null : task.lastError.split('\\n')[0], 'error').title = task.lastError ?? '';
    const finished = task.state === 'failed' || task.state === 'timed-out' || task.state === 'cancelled';
    actions(tr, s, 'stored', task.id, task.state === 'blocked' || task.state === 'waiting' || task.state === 'running' ? ['cancel'] : finished ? ['retry'] : []);
    return tr;
  }), 'No stored tasks');
}

async function refresh() {
  try {
    const response = await fetch('api/state', { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!response.ok) throw new Error('HTTP ' + response.status);
    draw(await response.json());
    $('message').textContent = '';
  } catch (error) {
    $('message').textContent = 'Cannot reach the scheduler: ' + error.message;
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

refresh();
setInterval(refresh, 1000);
`;

/** The page, with its title escaped and the request's CSP nonce and CSRF token in place. */
export function page(title: string, nonce: string, csrf: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="taskheap-csrf" content="${csrf}">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<div id="stats">Loading…</div>
<div id="message" role="status"></div>
<h2>Jobs</h2>
<table><thead><tr><th>Name</th><th>Rule</th><th>State</th><th>Next run</th><th>Last run</th><th>Runs / failures</th><th>Last error</th><th></th></tr></thead><tbody id="jobs"></tbody></table>
<h2>Pending tasks <small id="more-tasks"></small></h2>
<table><thead><tr><th>Name</th><th>State</th><th>Due</th><th>Attempts</th><th></th></tr></thead><tbody id="tasks"></tbody></table>
<section id="queues-section" hidden>
<h2>Queues</h2>
<table><thead><tr><th>Queue</th><th>State</th><th>Concurrency (here / all)</th><th>Waiting</th><th>Running</th><th>Succeeded</th><th>Failed</th></tr></thead><tbody id="queues"></tbody></table>
</section>
<section id="stored-jobs-section" hidden>
<h2>Stored jobs</h2>
<table><thead><tr><th>Key</th><th>Handler</th><th>State</th><th>Next run</th><th>Last run</th><th>Runs / failures</th><th></th></tr></thead><tbody id="stored-jobs"></tbody></table>
</section>
<section id="stored-section" hidden>
<h2>Stored tasks</h2>
<div id="stored-error" class="error"></div>
<table><thead><tr><th>Id</th><th>Handler</th><th>Key</th><th>State</th><th>Due</th><th>Attempts</th><th>Last error</th><th></th></tr></thead><tbody id="stored"></tbody></table>
</section>
<script nonce="${nonce}">${SCRIPT}</script>
</body>
</html>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
