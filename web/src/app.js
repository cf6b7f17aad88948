// The page of `loom dashboard`: asks /api/status every second or two and draws it. Everything
// shown comes from that JSON (src/tools/dashboard_json.c writes it); what the page shows is
// also set as data-* attributes, for tests and scripts (tests/integration/test_dashboard.py).
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './app.css';

const MiB = 1 << 20;
const $ = (id) => document.getElementById(id);

// ---- formatting ----

function fmtBytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(1)) + ' ' + units[i];
}
const fmtRate = (bps) => (bps == null ? '–' : (bps / MiB).toFixed(1));
const fmtNum = (v, d = 0) => (v == null ? '–' : v.toFixed(d));
const timeOfDay = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
const lastOf = (a) => { for (let i = a.length - 1; i >= 0; i--) if (a[i] != null) return a[i]; return null; };
const maxOf = (a) => a.reduce((m, v) => (v != null && v > m ? v : m), 0);

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'data') for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
    else e.setAttribute(k, v);
  }
  for (const kid of kids) e.append(kid instanceof Node ? kid : String(kid));
  return e;
}

// ---- charts ----

// One uPlot chart of some series of /api/status, made on the first data and updated after.
class Chart {
  constructor(id, series) {
    this.box = $('chart-' + id);
    this.legend = $('legend-' + id);
    this.series = series; // [{key, label, color, scale: (v) => shown value, digits}]
    this.plot = null;
  }

  options() {
    return {
      width: Math.max(this.box.clientWidth, 300),
      height: 200,
      ms: 1, // the API's times are milliseconds
      legend: { show: false }, // ours, above the chart, always shows the last values
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      // The time of day only (uPlot's default adds a second row of dates, which overlap).
      axes: [{ stroke: '#6b7385', space: 70, values: (u, splits) => splits.map(timeOfDay) },
        { stroke: '#6b7385', size: 55 }],
      series: [{}].concat(this.series.map((s) => ({
        label: s.label, stroke: s.color, width: 2, fill: s.color + '22', points: { show: false },
      }))),
    };
  }

  update(api) {
    const t = api.series.t;
    const cols = this.series.map((s) => api.series[s.key].map((v) => (v == null ? null : s.scale(v))));
    const data = [t].concat(cols);
    if (!this.plot) this.plot = new uPlot(this.options(), data, this.box);
    else this.plot.setData(data);
    // What was drawn, for whoever reads the DOM: the number of points, each series' last and
    // largest value as plotted.
    this.box.dataset.points = String(t.length);
    this.legend.replaceChildren();
    this.series.forEach((s, i) => {
      const last = lastOf(cols[i]);
      this.box.dataset['last' + s.attr] = last == null ? '' : String(last);
      this.box.dataset['max' + s.attr] = String(maxOf(cols[i]));
      this.legend.append(el('span', { class: 'swatch', style: 'background:' + s.color }),
        s.label + ' ', el('b', {}, last == null ? '–' : last.toFixed(s.digits)));
    });
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: Math.max(this.box.clientWidth, 300), height: 200 });
  }
}

// The series' colours, as app.css's (--read, --write...): a chart's fill is its colour, translucent.
const COLORS = { read: '#2f7ed8', write: '#e4672e', ops: '#5b8c3a', mdt: '#8e44ad', ost: '#16a085' };
const color = (name) => COLORS[name];
const toMiB = (v) => v / MiB;
const toMs = (v) => v / 1000;
const charts = [
  new Chart('throughput', [
    { key: 'read_Bps', attr: 'Read', label: 'read', color: color('read'), scale: toMiB, digits: 1 },
    { key: 'write_Bps', attr: 'Write', label: 'write', color: color('write'), scale: toMiB, digits: 1 },
  ]),
  new Chart('ops', [
    { key: 'ops_s', attr: 'Ops', label: 'requests/s', color: color('ops'), scale: (v) => v, digits: 0 },
  ]),
  new Chart('latency', [
    { key: 'lat_mdt_us', attr: 'Mdt', label: 'MDT', color: color('mdt'), scale: toMs, digits: 3 },
    { key: 'lat_ost_us', attr: 'Ost', label: 'OSTs', color: color('ost'), scale: toMs, digits: 3 },
  ]),
];
window.addEventListener('resize', () => charts.forEach((c) => c.resize()));

// ---- tables and cards ----

function renderTargets(api) {
  const rows = api.targets.map((t) => {
    const down = t.state !== 'up';
    const usedPct = t.used != null && t.used + t.avail > 0 ? (100 * t.used) / (t.used + t.avail) : null;
    const bar = el('div', { class: 'bar' + (usedPct != null && usedPct >= 90 ? ' high' : '') },
      el('div', { style: 'width:' + (usedPct == null ? 0 : usedPct.toFixed(1)) + '%' }));
    return el('tr', {
      class: down ? 'down' : '',
      data: { target: t.name, state: down ? 'down' : 'up', used: t.used ?? '', size: t.size ?? '' },
    },
    el('td', {}, t.name),
    el('td', { class: down ? 'state-down' : 'state-up' }, down ? 'DOWN' + (t.reason ? ' (' + t.reason + ')' : '') : 'up'),
    el('td', {}, bar, ' ', usedPct == null ? '–' : Math.ceil(usedPct) + '%'),
    el('td', {}, fmtBytes(t.used) + ' / ' + fmtBytes(t.size)),
    el('td', { class: 'num' }, down ? '–' : fmtRate(t.read_Bps)),
    el('td', { class: 'num' }, down ? '–' : fmtRate(t.write_Bps)),
    el('td', { class: 'num' }, down ? '–' : fmtNum(t.ops_s)));
  });
  $('targets').tBodies[0].replaceChildren(...rows);
}

function renderJobs(api) {
  const rows = api.jobs.map((j) => el('tr', {
    data: {
      job: j.id, readBytes: j.read_bytes, writeBytes: j.write_bytes, readBps: j.read_Bps,
      writeBps: j.write_Bps, minuteReadBytes: j.read_bytes_minute, minuteWriteBytes: j.write_bytes_minute,
    },
  },
  el('td', {}, j.id),
  el('td', { class: 'num' }, fmtRate(j.read_Bps)),
  el('td', { class: 'num' }, fmtRate(j.write_Bps)),
  el('td', { class: 'num' }, fmtNum(j.ops_s)),
  el('td', { class: 'num', title: j.read_bytes_minute + ' bytes' }, fmtBytes(j.read_bytes_minute)),
  el('td', { class: 'num', title: j.write_bytes_minute + ' bytes' }, fmtBytes(j.write_bytes_minute)),
  el('td', { class: 'num', title: j.read_bytes + ' bytes' }, fmtBytes(j.read_bytes)),
  el('td', { class: 'num', title: j.write_bytes + ' bytes' }, fmtBytes(j.write_bytes))));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 8, class: 'dim' }, 'no job has moved data')));
  $('jobs').tBodies[0].replaceChildren(...rows);
}

function renderRecovery(r) {
  const box = $('recovery');
  box.dataset.status = r && r.status ? r.status : '';
  if (!r || !r.status) box.textContent = 'unknown';
  else if (r.status === 'RECOVERING')
    box.textContent = 'RECOVERING, ' + (r.time_remaining ?? '?') + ' s left' +
      (r.clients != null ? ', ' + r.replayed_requests + ' requests of ' + r.clients + ' clients replayed' : '');
  else if (r.status === 'COMPLETE')
    box.textContent = 'COMPLETE in ' + (r.recovery_duration ?? '?') + ' s';
  else if (r.status === 'INACTIVE') box.textContent = 'none needed';
  else box.textContent = r.status;
}

function render(api) {
  $('fsname').textContent = api.fsname;
  $('mds').textContent = 'MDS ' + api.mds;
  $('updated').textContent = api.updated ? 'updated ' + new Date(api.updated).toLocaleTimeString() : 'no reading yet';
  const err = $('error');
  err.hidden = !api.error;
  err.textContent = api.error || '';
  const s = api.series;
  $('now-read').textContent = fmtRate(lastOf(s.read_Bps)) + ' MiB/s';
  $('now-write').textContent = fmtRate(lastOf(s.write_Bps)) + ' MiB/s';
  $('now-ops').textContent = fmtNum(lastOf(s.ops_s)) + ' /s';
  $('clients').textContent = api.clients ?? '–';
  renderRecovery(api.recovery);
  renderTargets(api);
  renderJobs(api);
  charts.forEach((c) => c.update(api));
  document.body.dataset.loaded = '1';
  document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
}

async function refresh() {
  let next = 1000;
  try {
    const r = await fetch('api/status', { cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    const api = await r.json();
    render(api);
    next = Math.min(Math.max(api.interval * 1000, 1000), 2000);
  } catch (e) {
    const err = $('error');
    err.hidden = false;
    err.textContent = 'loom dashboard does not answer: ' + e.message;
  }
  setTimeout(refresh, next);
}

refresh();
