// The dashboard page's panels opened from a link (`#task-<id>`,
// `#memory-task-<id>`, `#job-<key>`): a stored task in detail (payload,
// result, errors by attempt, lease, progress, log lines, and its
// dependencies, dependents and flow; without a store, an in-memory flow's
// task the same way), an in-memory task of the heap while it waits or runs,
// and a stored recurring job's recent runs, newest first, paged.
// Script and markup that page.ts puts in its one page; the script uses the
// helpers page.ts defines before it ($, cell, fill, when, time, relative,
// iso) and puts user data in the page with `textContent` only.

/** The panels' styles. */
export const DETAIL_STYLE = `
  #detail, #runs { background: #fff; box-shadow: 0 1px 4px #0003; padding: 8px 12px; margin: 12px 0; }
  #detail dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
  #detail dt { color: #555; } #detail dd { margin: 0; overflow-wrap: anywhere; }
  #detail-flow-summary { margin: 4px 0; }
  .ids a { margin-right: 6px; }
`;

/** The panels' script: what the hash opens, drawn from api/task, api/links and api/job-runs. */
export const DETAIL_SCRIPT = `
function detailField(dl, name, value) {
  const dt = document.createElement('dt');
  dt.textContent = name;
  const dd = document.createElement('dd');
  if (value instanceof Node) dd.appendChild(value); else dd.textContent = value === null || value === undefined ? '—' : String(value);
  dl.append(dt, dd);
}

function pre(value) {
  const p = document.createElement('pre');
  p.textContent = value === undefined ? '(none)' : JSON.stringify(value, null, 2);
  return p;
}

function taskLink(id) {
  const a = document.createElement('a');
  a.href = '#task-' + Number(id);
  a.textContent = String(Number(id));
  return a;
}

const inMemory = () => view.last !== null && view.last.stored === null && view.last.storedError === null;

function logRows(logs, now) {
  return (logs ?? []).map((l) => {
    const tr = document.createElement('tr');
    when(tr, iso(l.at), now);
    cell(tr, l.attempt);
    cell(tr, l.line);
    return tr;
  });
}

function stepRows(steps, now) {
  return (steps ?? []).map((s) => {
    const tr = document.createElement('tr');
    cell(tr, s.name);
    cell(tr, s.kind);
    cell(tr, s.state);
    cell(tr, s.attempts);
    when(tr, iso(s.startedAt), now);
    when(tr, iso(s.endedAt ?? s.until), now);
    cell(tr, s.resultSize);
    return tr;
  });
}

function drawDetail(task, now) {
  const box = $('detail');
  box.hidden = false;
  $('detail-title').textContent = 'Task ' + task.id + ' · ' + task.name + (inMemory() ? ' · in memory' : '');
  const dl = document.createElement('dl');
  const at = (ms) => ms === null || ms === undefined ? '—' : time(ms) + ' (' + relative(ms, now) + ')';
  detailField(dl, 'State', task.state);
  detailField(dl, 'Key', task.key);
  detailField(dl, 'Queue', task.queue);
  detailField(dl, 'Job', task.jobKey);
  detailField(dl, 'Attempts', task.attempts + ' of ' + task.maxAttempts);
  detailField(dl, 'Due', at(iso(task.runAt)));
  detailField(dl, 'Created', at(iso(task.createdAt)));
  detailField(dl, 'Updated', at(iso(task.updatedAt)));
  detailField(dl, 'Started', at(iso(task.startedAt)));
  detailField(dl, 'Lease', task.lease ? task.lease.owner + ' until ' + at(iso(task.lease.until)) : '—');
  detailField(dl, 'Priority', task.priority);
  detailField(dl, 'Progress', task.progress === undefined ? '—' : JSON.stringify(task.progress));
  detailField(dl, 'Payload', pre(task.payload));
  detailField(dl, 'Result', pre(task.result));
  $('detail-fields').replaceChildren(dl);
  fill('detail-errors', (task.errors ?? []).map((e) => {
    const tr = document.createElement('tr');
    cell(tr, e.attempt);
    when(tr, iso(e.at), now);
    const td = cell(tr, '', 'error');
    td.appendChild(pre(e.error)).textContent = e.error;
    return tr;
  }), 'No errors');
  fill('detail-logs', logRows(task.logs, now), 'No log lines');
  fill('detail-steps', stepRows(task.steps, now), 'No steps');
}

/** An in-memory task (a heap task of the Waiting tasks table) while it waits or runs: what memory knows of it. */
function drawMemoryTask(task, now) {
  $('detail').hidden = false;
  $('detail-title').textContent = 'In-memory task ' + task.id + ' · ' + (task.name ?? '(no name)');
  const dl = document.createElement('dl');
  const at = (ms) => ms === null || ms === undefined ? '—' : time(ms) + ' (' + relative(ms, now) + ')';
  detailField(dl, 'State', task.state);
  if (task.runsTask !== null) detailField(dl, 'Runs task', taskLink(task.runsTask));
  detailField(dl, 'Key', task.key);
  detailField(dl, 'Queue', task.queue);
  detailField(dl, 'Attempts', task.attempts + ' of ' + task.maxAttempts);
  detailField(dl, 'Due', at(task.runAt));
  detailField(dl, 'Started', at(task.startedAt));
  detailField(dl, 'Timeout', task.timeout === null ? 'none' : task.timeout + ' ms');
  detailField(dl, 'Priority', task.priority);
  detailField(dl, 'Serial key', task.serial);
  detailField(dl, 'Progress', task.progress === undefined ? '—' : JSON.stringify(task.progress));
  $('detail-fields').replaceChildren(dl);
  $('detail-links').hidden = true;
  fill('detail-errors', [], 'Not kept in memory (onError and the failure event have them)');
  fill('detail-logs', logRows(task.logs, now), 'No log lines');
  fill('detail-steps', [], 'Not shown for in-memory tasks');
}

function linkRows(list) {
  return list.map((link) => {
    const tr = document.createElement('tr');
    tr.dataset.id = link.id;
    cell(tr, '').appendChild(taskLink(link.id));
    cell(tr, link.name);
    state(link.state, tr);
    cell(tr, link.onFailure);
    cell(tr, link.done ? 'yes' : 'no');
    return tr;
  });
}

const shownOf = (shown, all) => shown < all ? ' (' + shown + ' of ' + all + ' shown)' : '';

function drawLinks(links) {
  $('detail-links').hidden = links.dependencyCount === 0 && links.dependentCount === 0 && links.flow === null;
  $('detail-deps-title').textContent = 'Depends on · ' + links.dependencyCount + shownOf(links.dependencies.length, links.dependencyCount);
  fill('detail-deps', linkRows(links.dependencies), 'No dependencies');
  $('detail-dependents-title').textContent = 'Depended on by · ' + links.dependentCount + shownOf(links.dependents.length, links.dependentCount);
  fill('detail-dependents', linkRows(links.dependents), 'No dependents');
  const flow = links.flow;
  $('detail-flow').hidden = flow === null;
  if (flow === null) return;
  const title = $('detail-flow-title');
  title.replaceChildren('Flow ', taskLink(flow.id), ' · ' + flow.total + ' task(s) · ' + (flow.done ? 'done' : 'in progress'));
  $('detail-flow-summary').textContent = STATES.filter((st) => flow.counts[st] > 0).map((st) => st + ' ' + flow.counts[st]).join(' · ');
  $('detail-flow-blocked-title').textContent = 'Blocked, and on what · ' + flow.blockedCount + shownOf(flow.blocked.length, flow.blockedCount);
  fill('detail-flow-blocked', flow.blocked.map((b) => {
    const tr = document.createElement('tr');
    tr.dataset.id = b.id;
    cell(tr, '').appendChild(taskLink(b.id));
    cell(tr, b.name);
    const ids = cell(tr, '', 'ids');
    for (const id of b.waitingFor) ids.appendChild(taskLink(id));
    if (b.waitingCount > b.waitingFor.length) ids.appendChild(document.createTextNode('and ' + (b.waitingCount - b.waitingFor.length) + ' more'));
    return tr;
  }), 'Nothing is blocked');
}

async function getJson(url) {
  const response = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
  const answer = await response.json().catch(() => ({}));
  return response.ok ? answer : Promise.reject(new Error(answer.error ?? 'HTTP ' + response.status));
}

/** Draws what view.detail names: 'task-<id>' (a stored task, or an in-memory flow's without a store) or 'memory-task-<id>'. */
async function showDetail(opened) {
  const key = view.detail;
  const id = key.slice(key.lastIndexOf('-') + 1);
  const now = () => view.last === null ? Date.now() : view.last.now;
  try {
    if (key.startsWith('memory-')) {
      const task = await getJson('api/memory-task?id=' + id);
      if (view.detail !== key) return;
      drawMemoryTask(task, now());
    } else {
      const [task, links] = await Promise.all([getJson('api/task?id=' + id), getJson('api/links?id=' + id)]);
      if (view.detail !== key) return;
      drawDetail(task, now());
      drawLinks(links);
    }
    if (opened) $('detail').scrollIntoView();
  } catch (error) {
    $('message').textContent = error.message;
    $('detail').hidden = true;
  }
}

async function showRuns(opened) {
  const key = view.runs;
  const q = new URLSearchParams({ key });
  if (view.runsAfter !== null) q.set('after', view.runsAfter);
  try {
    const answer = await getJson('api/job-runs?' + q.toString());
    if (view.runs !== key) return;
    const now = view.last === null ? Date.now() : view.last.now;
    $('runs').hidden = false;
    $('runs-title').textContent = 'Runs of ' + key + ' · newest first';
    fill('runs-rows', answer.runs.map((run) => {
      const tr = document.createElement('tr');
      tr.dataset.id = run.id;
      cell(tr, '').appendChild(taskLink(run.id));
      state(run.state, tr);
      when(tr, run.runAt, now);
      when(tr, run.startedAt, now);
      cell(tr, run.duration === null ? '—' : run.duration < 1000 ? run.duration + ' ms' : (run.duration / 1000).toFixed(1) + ' s');
      cell(tr, run.attempts);
      cell(tr, run.error, 'error');
      return tr;
    }), 'No runs stored');
    view.runsNext = answer.next;
    $('runs-older').disabled = answer.next === null;
    $('runs-newest').disabled = view.runsAfter === null;
    if (opened) $('runs').scrollIntoView();
  } catch (error) {
    $('message').textContent = error.message;
    $('runs').hidden = true;
  }
}

/** Opens what the hash names: a task's detail, or a job's runs; closes the other. */
function route() {
  const task = /^#((?:memory-)?task-\\d+)$/.exec(location.hash);
  const job = /^#job-(.+)$/.exec(location.hash);
  const detail = task === null ? null : task[1];
  let runs = null;
  if (job !== null) try { runs = decodeURIComponent(job[1]); } catch { runs = null; }
  const openedDetail = detail !== null && view.detail !== detail;
  const openedRuns = runs !== null && view.runs !== runs;
  view.detail = detail;
  if (openedRuns) view.runsAfter = null;
  view.runs = runs;
  $('detail').hidden = detail === null || $('detail').hidden;
  $('runs').hidden = runs === null || $('runs').hidden;
  if (detail !== null) showDetail(openedDetail);
  if (runs !== null) showRuns(openedRuns);
}

function closePanel() {
  history.replaceState(null, '', location.pathname + location.search);
  route();
}

function wirePanels() {
  $('detail-close').addEventListener('click', closePanel);
  $('runs-close').addEventListener('click', closePanel);
  $('runs-older').addEventListener('click', () => { if (view.runsNext) { view.runsAfter = view.runsNext; showRuns(false); } });
  $('runs-newest').addEventListener('click', () => { view.runsAfter = null; showRuns(false); });
  window.addEventListener('hashchange', route);
}

/** On each refresh: what is open is read again. */
function refreshPanels() {
  if (view.detail !== null) showDetail(false);
  if (view.runs !== null) showRuns(false);
}
`;

/** The panels' markup. */
export const DETAIL_HTML = `<section id="detail" hidden>
<h2 id="detail-title"></h2><button id="detail-close" type="button">Close</button>
<div id="detail-fields"></div>
<div id="detail-links" hidden>
<h3 id="detail-deps-title">Depends on</h3>
<table><thead><tr><th>Id</th><th>Handler</th><th>State</th><th>On failure</th><th>Counted done</th></tr></thead><tbody id="detail-deps"></tbody></table>
<h3 id="detail-dependents-title">Depended on by</h3>
<table><thead><tr><th>Id</th><th>Handler</th><th>State</th><th>On failure</th><th>Counted done</th></tr></thead><tbody id="detail-dependents"></tbody></table>
<div id="detail-flow" hidden>
<h3 id="detail-flow-title">Flow</h3>
<div id="detail-flow-summary"></div>
<h4 id="detail-flow-blocked-title">Blocked, and on what</h4>
<table><thead><tr><th>Task</th><th>Handler</th><th>Waits for</th></tr></thead><tbody id="detail-flow-blocked"></tbody></table>
</div>
</div>
<h3>Steps</h3>
<table><thead><tr><th>Step</th><th>Kind</th><th>State</th><th>Attempts</th><th>Started</th><th>Ended, or until</th><th>JSON characters</th></tr></thead><tbody id="detail-steps"></tbody></table>
<h3>Errors by attempt</h3>
<table><thead><tr><th>Attempt</th><th>At</th><th>Error</th></tr></thead><tbody id="detail-errors"></tbody></table>
<h3>Log</h3>
<table><thead><tr><th>At</th><th>Attempt</th><th>Line</th></tr></thead><tbody id="detail-logs"></tbody></table>
</section>
<section id="runs" hidden>
<h2 id="runs-title"></h2><button id="runs-close" type="button">Close</button>
<table><thead><tr><th>Task</th><th>State</th><th>Due</th><th>Started</th><th>Duration</th><th>Attempts</th><th>Error</th></tr></thead><tbody id="runs-rows"></tbody></table>
<div><button id="runs-newest" type="button">Newest</button><button id="runs-older" type="button">Older</button></div>
</section>`;
