// The dashboard page's Limits panel (docs/operations-console.md): the per-key limits stored
// tasks name (rate, concurrency and serial keys) with their limit, what is
// in use now and how many tasks wait for each, drawn from api/limits, the
// keys with the most waiting first. Script and markup that page.ts puts in
// its one page; the script uses the helpers page.ts defines before it ($,
// cell, fill) and puts user data in the page with `textContent` only.

/** The panel's script: `refreshLimits()` reads api/limits and draws its rows (the section stays hidden without a store). */
export const LIMITS_SCRIPT = `
function limitWhy(key) {
  if (key.waiting === 0) return '';
  if (key.inUse < key.limit) return 'room now: starting soon, or not due yet';
  return key.kind === 'rate' ? key.limit + ' starts in the last ' + (key.interval >= 1000 ? key.interval / 1000 + ' s' : key.interval + ' ms') : 'every slot held (' + key.limit + ')';
}

async function refreshLimits() {
  try {
    const response = await fetch('api/limits', { headers: { accept: 'application/json' }, cache: 'no-store' });
    if (!response.ok) throw new Error('HTTP ' + response.status);
    const answer = await response.json();
    $('limits-section').hidden = answer.keys === null;
    if (answer.keys === null) return;
    $('limits-error').textContent = '';
    $('limits-title').textContent = 'Limits' + (answer.keys.length === answer.limit ? ' · the ' + answer.limit + ' keys with the most waiting' : '');
    fill('limits', answer.keys.map((key) => {
      const tr = document.createElement('tr');
      tr.dataset.limitKey = key.kind + ':' + key.key;
      cell(tr, key.kind);
      cell(tr, key.key);
      cell(tr, key.kind === 'rate' ? key.limit + ' per ' + (key.interval >= 1000 ? key.interval / 1000 + ' s' : key.interval + ' ms') : key.limit + ' at once');
      cell(tr, key.inUse + (key.kind === 'rate' ? ' started' : ' running'));
      cell(tr, key.waiting);
      cell(tr, limitWhy(key));
      return tr;
    }), 'No limit keys in use');
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
