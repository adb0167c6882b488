// The dashboard page's Limits panel (docs/operations-console.md): the limit groups stored
// tasks name (rate, concurrency and serial groups) with their limit, what is
// in use now and how many tasks wait for each, drawn from api/limits, the
// groups with the most waiting first. Script and markup that page.ts puts in
// its one page; the script uses the helpers page.ts defines before it ($,
// cell, fill) and puts user data in the page with `textContent` only.

/** The panel's script: `refreshLimits()` reads api/limits and draws its rows (the section stays hidden without a store). */
export const LIMITS_SCRIPT = `
function limitWhy(group) {
  if (group.waiting === 0) return '';
  if (group.inUse < group.limit) return 'room now: starting soon, or not due yet';
  return group.kind === 'rate' ? group.limit + ' starts in the last ' + (group.interval >= 1000 ? group.interval / 1000 + ' s' : group.interval + ' ms') : 'every slot held (' + group.limit + ')';
}

async function refreshLimits() {
  try {
    const response = await fetch('api/limits', { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!response.ok) throw new Error('HTTP ' + response.status);
    const answer = await response.json();
    $('limits-section').hidden = answer.groups === null;
    if (answer.groups === null) return;
    $('limits-error').textContent = '';
    $('limits-title').textContent = 'Limits' + (answer.groups.length === answer.limit ? ' · the ' + answer.limit + ' groups with the most waiting' : '');
    fill('limits', answer.groups.map((group) => {
      const tr = document.createElement('tr');
      tr.dataset.limitGroup = group.kind + ':' + group.group;
      cell(tr, group.kind);
      cell(tr, group.group);
      cell(tr, group.kind === 'rate' ? group.limit + ' per ' + (group.interval >= 1000 ? group.interval / 1000 + ' s' : group.interval + ' ms') : group.limit + ' at once');
      cell(tr, group.inUse + (group.kind === 'rate' ? ' started' : ' running'));
      cell(tr, group.waiting);
      cell(tr, limitWhy(group));
      return tr;
    }), 'No limit groups in use');
  } catch (error) {
    $('limits-error').textContent = 'Could not read the limits: ' + error.message;
  }
}
`;

/** The panel's markup. */
export const LIMITS_HTML = `<section id="limits-section" hidden>
<h2 id="limits-title">Limits</h2>
<div id="limits-error" class="error"></div>
<table><thead><tr><th>Kind</th><th>Key</th><th>Limit</th><th>In use</th><th>Waiting</th><th>Waiting because</th></tr></thead><tbody id="limits"></tbody></table>
</section>`;
