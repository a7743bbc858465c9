// bench/ui-stub: a stand-in for the inspector's page (runtime/ui/), used by
// bench/ui.sh only while the built page does not open /events yet. It does
// what docs/inspector.md asks of any page, and no more: the EventSource,
// every event parsed (and its message text), deduped by seq and kept (as
// many as the server's history), rendered at most once per animation frame
// (the newest rows only), and the "ui" connection initialized.
'use strict';
const KEEP = 100000, ROWS = 200;
const token = new URLSearchParams(location.search).get('token') || sessionStorage.getItem('token');
sessionStorage.setItem('token', token);
const events = [];
let pending = [], lastSeq = 0, frame = 0, live = false;
const rows = document.getElementById('rows'), status = document.getElementById('status');

function post(msg) {
  return fetch('/send?token=' + token, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(msg)});
}

function initialize() {
  post({jsonrpc: '2.0', id: 1, method: 'initialize', params: {protocolVersion: '2025-11-25',
    capabilities: {roots: {listChanged: true}, sampling: {}, elicitation: {form: {}}},
    clientInfo: {name: 'luamcp-inspector', version: 'bench-stub'}}})
    .then(() => post({jsonrpc: '2.0', method: 'notifications/initialized'}));
}

function render() {
  frame = 0;
  const batch = pending;
  pending = [];
  for (const e of batch) {
    if (e.kind === 'message') {
      try { e.parsed = JSON.parse(e.text); } catch (_) { e.parsed = null; }
    }
    events.push(e);
  }
  if (events.length > KEEP) events.splice(0, events.length - KEEP);
  const from = Math.max(0, batch.length - ROWS);
  for (let i = from; i < batch.length; i++) {
    const e = batch[i], tr = document.createElement('tr');
    const m = e.parsed || {};
    for (const text of [e.seq, e.dir || e.kind, e.conn || '', m.method || (m.result ? 'result' : ''), e.text || '']) {
      const td = document.createElement('td');
      td.textContent = String(text).slice(0, 200);
      tr.appendChild(td);
    }
    rows.appendChild(tr);
  }
  while (rows.childElementCount > ROWS) rows.removeChild(rows.firstElementChild);
  status.textContent = (live ? 'live' : 'replaying') + ', ' + lastSeq + ' events';
}

const source = new EventSource('/events?token=' + token);
source.onmessage = (m) => {
  const e = JSON.parse(m.data);
  if (e.kind === 'hello') {
    if (!e.initialized) initialize();
    return;
  }
  if (e.kind === 'live') { live = true; return; }
  if (e.seq <= lastSeq) return;
  lastSeq = e.seq;
  pending.push(e);
  if (!frame) frame = requestAnimationFrame(render);
};
