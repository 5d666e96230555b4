'use strict';
// The web view of `gputaskman serve` (src/serve/web.rs): draws /snapshot,
// once per sampling interval. Every figure is a field of the snapshot, set
// with textContent: nothing from the snapshot is ever parsed as HTML.
// A `serve` that shows a fleet (--remote, --prometheus) answers /snapshot
// with its hosts (src/serve/fleet.rs); the page then lists them, each
// expandable to its GPUs, and the process table gains a HOST column.

const INTERVAL_MS = Math.max(100, 1000 * (Number(
  document.querySelector('meta[name="gputaskman-interval"]').content) || 1));
// Samples of each GPU's memory kept for its sparkline.
const HISTORY = 120;
// Up to this many hosts, each is shown expanded until closed.
const OPEN_HOSTS = 4;

// The clock-event reasons' words, as src/snapshot/health.rs REASONS and
// AMD_THROTTLERS have them (a test in src/serve/web.rs keeps them the same).
const REASONS = {
  gpu_idle: 'idle',
  applications_clocks: 'applications clocks',
  sw_power_cap: 'power cap',
  hw_slowdown: 'hardware slowdown',
  sync_boost: 'sync boost',
  sw_thermal_slowdown: 'thermal',
  hw_thermal_slowdown: 'hardware thermal',
  hw_power_brake_slowdown: 'power brake',
  display_clocks: 'display clocks',
  // amdgpu's throttlers (AMD_THROTTLERS there).
  amd_ppt0: 'power limit (PPT0)',
  amd_ppt1: 'power limit (PPT1)',
  amd_ppt2: 'power limit (PPT2)',
  amd_ppt3: 'power limit (PPT3)',
  amd_spl: 'sustained power limit (SPL)',
  amd_fppt: 'fast power limit (FPPT)',
  amd_sppt: 'slow power limit (SPPT)',
  amd_sppt_apu: 'APU slow power limit (SPPT)',
  amd_tdc_gfx: 'current limit (TDC GFX)',
  amd_tdc_soc: 'current limit (TDC SoC)',
  amd_tdc_mem: 'current limit (TDC memory)',
  amd_tdc_vdd: 'current limit (TDC VDD)',
  amd_tdc_cvip: 'current limit (TDC CVIP)',
  amd_edc_cpu: 'current limit (EDC CPU)',
  amd_edc_gfx: 'current limit (EDC GFX)',
  amd_apcc: 'current limit (APCC)',
  amd_temp_gpu: 'thermal (GPU)',
  amd_temp_core: 'thermal (core)',
  amd_temp_mem: 'thermal (memory)',
  amd_temp_edge: 'thermal (edge)',
  amd_temp_hotspot: 'thermal (hotspot)',
  amd_temp_soc: 'thermal (SoC)',
  amd_temp_vr_gfx: 'thermal (VR GFX)',
  amd_temp_vr_soc: 'thermal (VR SoC)',
  amd_temp_vr_mem0: 'thermal (VR memory 0)',
  amd_temp_vr_mem1: 'thermal (VR memory 1)',
  amd_temp_liquid0: 'thermal (liquid 0)',
  amd_temp_liquid1: 'thermal (liquid 1)',
  amd_vrhot0: 'VR hot (0)',
  amd_vrhot1: 'VR hot (1)',
  amd_prochot_cpu: 'PROCHOT (CPU)',
  amd_prochot_gfx: 'PROCHOT (GFX)',
  amd_ppm: 'power management (PPM)',
  amd_fit: 'reliability (FIT)',
};
// A GPU this close (°C) to its slowdown temperature is hot (HOT_MARGIN_C).
const HOT_MARGIN_C = 5;

const state = {
  // The snapshot drawn; for a fleet, every host's processes with their
  // host (fleetSnapshot).
  snap: null,
  sort: { key: 'vram', desc: true },
  filter: '',
  all: false,
  // The selected process's rowKey.
  selected: null,
  // (host,) GPU (uuid, else index) -> [used / total], oldest first.
  history: new Map(),
  // Host label -> expanded, for the hosts a person opened or closed.
  open: new Map(),
};

// A process's row: its host (in a fleet) and PID.
function rowKey(p) {
  return `${p.host || ''}\u0000${p.pid}`;
}

// What must not be shown as itself, as src/view/safe_text.rs hidden()
// has it: controls, bidi overrides and isolates (which would reorder what
// a name seems to say), zero-width and other invisible characters.
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u180e\u200b-\u200d\u2060-\u2065\u206a-\u206f\u2028\u2029\ufeff\ufff9-\ufffb\u{e0000}-\u{e007f}]/gu;
const NAMED = { '\u001b': '\\e', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

// As safe_text::escape: each hidden character as a visible escape.
function visible(text) {
  return String(text).replace(HIDDEN, (c) => {
    if (NAMED[c]) return NAMED[c];
    const n = c.codePointAt(0);
    return n < 0x20 || n === 0x7f ? '\\x' + n.toString(16).padStart(2, '0') : `\\u{${n.toString(16)}}`;
  });
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined && text !== null) e.textContent = visible(text);
  return e;
}

// As src/units.rs bytes(): binary units, n/a for unknown.
function bytes(b) {
  if (b === null || b === undefined) return 'n/a';
  const k = 1024;
  if (b >= k * k * k) return (b / (k * k * k)).toFixed(2) + ' GiB';
  if (b >= k * k) return (b / (k * k)).toFixed(1) + ' MiB';
  if (b >= k) return (b / k).toFixed(1) + ' KiB';
  return b + ' B';
}

function signedBytes(d) {
  return (d < 0 ? '-' : '+') + bytes(Math.abs(d));
}

function orNa(v, unit, digits) {
  if (v === null || v === undefined) return 'n/a';
  return (digits === undefined ? String(v) : Number(v).toFixed(digits)) + (unit || '');
}

// A process's figure summed over its devices, the largest entry of each
// device (as the live view's App::figure); null when no device knows it.
function perDevice(p, field) {
  const best = new Map();
  for (const g of p.gpu) {
    const v = g[field];
    if (v === null || v === undefined) continue;
    best.set(g.device, Math.max(best.get(g.device) || 0, v));
  }
  if (best.size === 0) return null;
  let sum = 0;
  for (const v of best.values()) sum += v;
  return sum;
}

// The busiest engine (SM for NVML), as the live view's App::gpu_percent.
function gpuPercent(p) {
  let best = null;
  for (const g of p.gpu) {
    const engines = g.engines || {};
    let v = engines.sm;
    if (v === undefined) {
      const all = Object.values(engines);
      v = all.length ? Math.max(...all) : undefined;
    }
    if (v !== undefined && (best === null || v > best)) best = v;
  }
  return best;
}

function modelText(p) {
  if (p.models_pending) return 'looking…';
  if (!p.models.length) return '';
  const m = p.models[0];
  const name = m.name || m.path || 'n/a';
  return p.models.length > 1 ? `${name} (+${p.models.length - 1})` : name;
}

function evidenceText(p) {
  if (!p.models.length) return '';
  const m = p.models[0];
  return m.evidence.join(', ') + (m.confirmed ? '' : ' (unconfirmed)');
}

// The table's columns: the text shown, the value sorted by (and set as
// data-value, the snapshot's own figure).
const COLUMNS = {
  host: { value: (p) => p.host, text: (p) => (p.host || '') + (p.stale ? ' (stale)' : '') },
  pid: { value: (p) => p.pid, text: (p) => p.pid },
  user: { value: (p) => p.user, text: (p) => p.user || 'n/a' },
  name: { value: (p) => p.name, text: (p) => p.name },
  gpus: { value: (p) => p.gpu.map((g) => g.device).join(','), text: (p) => p.gpu.map((g) => g.device).join(', ') },
  vram: { value: (p) => perDevice(p, 'vram_bytes'), text: (p) => bytes(perDevice(p, 'vram_bytes')) },
  spill: { value: (p) => perDevice(p, 'spill_bytes'), text: (p) => bytes(perDevice(p, 'spill_bytes')) },
  gpu_percent: { value: gpuPercent, text: (p) => orNa(gpuPercent(p), '%') },
  cpu_percent: { value: (p) => p.cpu_percent, text: (p) => orNa(p.cpu_percent, '%', 1) },
  runtime: { value: (p) => p.runtimes.join(', '), text: (p) => p.runtimes.join(', ') },
  model: { value: modelText, text: modelText },
  evidence: { value: evidenceText, text: evidenceText },
};

function shown(snap) {
  const words = state.filter.toLowerCase().split(/\s+/).filter((w) => w);
  return snap.processes.filter((p) => {
    if (!state.all && !p.gpu.length && p.kind !== 'ai') return false;
    if (!words.length) return true;
    const hay = [p.host, p.pid, p.name, p.user, p.cmdline, p.exe, ...p.runtimes,
      ...p.models.flatMap((m) => [m.name, m.path])].filter((s) => s !== null && s !== undefined)
      .join('\n').toLowerCase();
    return words.every((w) => hay.includes(w));
  });
}

function compare(a, b) {
  const col = COLUMNS[state.sort.key];
  const va = col.value(a);
  const vb = col.value(b);
  // Unknown goes last whichever way the column is sorted.
  const na = va === null || va === undefined || va === '';
  const nb = vb === null || vb === undefined || vb === '';
  if (na || nb) return na === nb ? a.pid - b.pid : (na ? 1 : -1);
  const order = typeof va === 'number' && typeof vb === 'number'
    ? va - vb : String(va).localeCompare(String(vb));
  return (state.sort.desc ? -order : order) || a.pid - b.pid;
}

function renderHeader(snap) {
  const h = snap.host || {};
  document.getElementById('host').textContent =
    [h.hostname, h.os_name || h.os, h.kernel].filter((s) => s).join(' · ');
  document.getElementById('taken').textContent = snap.taken_at || '';
  document.title = `gputaskman: ${h.hostname || 'this host'}`;
  const list = document.getElementById('backends');
  list.replaceChildren(...snap.backends.map((b) => {
    const li = el('li', `backend ${b.status}`, `${b.name}: ${b.status}${b.detail ? ' · ' + b.detail : ''}`);
    li.dataset.backend = b.name;
    return li;
  }));
}

function healthText(d) {
  const h = d.health;
  if (!h) return { text: 'health: n/a', bad: false };
  const said = [];
  let bad = false;
  if (h.lost_since) {
    said.push(`lost since ${h.lost_since}`);
    bad = true;
  }
  const reasons = (h.throttle_reasons || []).filter((r) => r !== 'gpu_idle');
  for (const r of reasons) {
    const v = h.violations.find((x) => (x.policy === 'power' && r === 'sw_power_cap')
      || (x.policy === 'thermal' && r.includes('thermal')));
    const share = v && v.share !== null ? `: ${Math.round(100 * v.share)}% of the last interval` : '';
    said.push(`throttled: ${REASONS[r] || r}${share}`);
  }
  if (h.ecc && h.ecc.volatile_uncorrected) {
    said.push(`ECC: ${h.ecc.volatile_uncorrected} uncorrected`);
    bad = true;
  }
  if (h.remapped_rows && (h.remapped_rows.failure || h.remapped_rows.pending)) {
    said.push(h.remapped_rows.failure ? 'row remapping failed' : 'row remap pending a reset');
    bad = true;
  }
  if (h.xid_count) {
    const last = h.xid_events[h.xid_events.length - 1];
    said.push(`XID events: ${h.xid_count}${last ? ` (last XID ${last.xid}${last.meaning ? ': ' + last.meaning : ''})` : ''}`);
    bad = true;
  }
  if (h.nvlink && h.nvlink.went_down.length) {
    said.push(`NVLink ${h.nvlink.went_down.join(', ')} went down`);
    bad = true;
  }
  const slowdown = h.temperature_limits ? h.temperature_limits.slowdown_c : null;
  if (slowdown !== null && d.temperature_c !== null && d.temperature_c + HOT_MARGIN_C >= slowdown) {
    // Not yet slower: marked as throttling is, not as an error.
    said.push(`hot: ${d.temperature_c} °C, slowdown at ${slowdown} °C`);
  }
  if (h.throttle_reasons === null && !said.length) return { text: 'health: clock reasons n/a', bad };
  return { text: said.length ? said.join(' · ') : 'health: no fault reported', bad };
}

// The GPU's sparkline points, with this sample's added when `record`.
function remember(d, host, record) {
  const key = `${host || ''}/${d.uuid || `#${d.index}`}`;
  const points = state.history.get(key) || [];
  if (record && d.memory_used_bytes !== null && d.memory_total_bytes) {
    points.push(d.memory_used_bytes / d.memory_total_bytes);
    if (points.length > HISTORY) points.shift();
  }
  state.history.set(key, points);
  return points;
}

function drawSparkline(canvas, points) {
  canvas.dataset.samples = String(points.length);
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  if (points.length < 2) return;
  ctx.strokeStyle = getComputedStyle(canvas).color;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  points.forEach((v, i) => {
    const x = (i / (HISTORY - 1)) * width;
    const y = height - 1 - v * (height - 2);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
}

// `host`: the GPU's host in a fleet, whose own index d.index is; `stale`:
// that host did not answer the last round (its last figures, kept out of
// the sparkline).
function renderGpu(d, snap, host, stale) {
  const card = el('article', 'gpu');
  card.dataset.index = String(d.index);
  if (host) card.dataset.host = host;
  const head = el('div', 'gpu-head');
  head.append(el('strong', null, `GPU ${d.index}`), el('span', 'gpu-name', d.name || 'n/a'));
  if (d.stale || stale) head.append(el('span', 'badge bad', 'stale'));
  card.append(head);

  const used = d.memory_used_bytes;
  const total = d.memory_total_bytes;
  const bar = el('div', 'bar');
  const legend = el('ul', 'legend');
  const segment = (className, share, label) => {
    const seg = el('span', `seg ${className}`);
    seg.style.width = `${(100 * share).toFixed(3)}%`;
    seg.title = visible(label);
    bar.append(seg);
    const item = el('li', null, label);
    item.prepend(el('span', `swatch ${className}`));
    legend.append(item);
    return seg;
  };
  if (total) {
    const held = [];
    for (const p of snap.processes) {
      for (const g of p.gpu) {
        if (g.device === d.index && g.vram_bytes) held.push([p, g.vram_bytes]);
      }
    }
    held.sort((a, b) => b[1] - a[1]);
    held.forEach(([p, vram], i) => {
      segment(`c${i % 6}`, vram / total, `${p.name} (${p.pid}) ${bytes(vram)}`).dataset.pid = String(p.pid);
    });
    const att = (snap.attribution.devices || []).find((a) => a.device === d.index);
    if (att && att.unattributed_bytes) {
      segment('rest', att.unattributed_bytes / total, `not attributed to a process ${bytes(att.unattributed_bytes)}`);
    }
  }
  card.append(bar);

  const mem = el('div', 'mem', `${bytes(used)} of ${bytes(total)} used`);
  mem.dataset.used = String(used);
  mem.dataset.total = String(total);
  card.append(mem, legend);

  const stats = el('div', 'stats');
  const stat = (name, text, value) => {
    const s = el('span', 'stat', text);
    s.dataset.stat = name;
    s.dataset.value = String(value);
    stats.append(s);
  };
  stat('util', `util ${orNa(d.gpu_util_percent, '%')}`, d.gpu_util_percent);
  stat('temperature', orNa(d.temperature_c, ' °C'), d.temperature_c);
  stat('power', `${orNa(d.power_w, ' W', 0)} / ${orNa(d.power_limit_w, ' W', 0)}`, d.power_w);
  if (d.fan_percent !== null) stat('fan', `fan ${d.fan_percent}%`, d.fan_percent);
  card.append(stats);

  const health = healthText(d);
  card.append(el('div', health.bad ? 'health bad' : 'health', health.text));
  for (const e of d.errors) card.append(el('div', 'note bad', `${e.query}: ${e.message}`));

  const canvas = el('canvas', 'spark');
  canvas.width = 240;
  canvas.height = 32;
  canvas.title = 'memory used, the last samples';
  card.append(canvas);
  drawSparkline(canvas, remember(d, host, !stale));
  return card;
}

function renderTable(snap) {
  const rows = shown(snap).sort(compare);
  const body = document.querySelector('#table tbody');
  for (const th of document.querySelectorAll('#table th.fleet')) th.hidden = !snap.fleet;
  const keys = [...document.querySelectorAll('#table th')].filter((th) => !th.hidden).map((th) => th.dataset.key);
  body.replaceChildren(...rows.map((p) => {
    const tr = el('tr');
    tr.dataset.pid = String(p.pid);
    tr.dataset.key = rowKey(p);
    if (p.host) tr.dataset.host = p.host;
    // A host that stopped answering: its last figures, marked.
    if (p.stale) tr.dataset.stale = 'true';
    tr.className = [rowKey(p) === state.selected ? 'selected' : '', p.stale ? 'stale' : ''].join(' ').trim();
    for (const key of keys) {
      const col = COLUMNS[key];
      const td = el('td', document.querySelector(`#table th[data-key="${key}"]`).className, col.text(p));
      const v = col.value(p);
      td.dataset.key = key;
      td.dataset.value = v === null || v === undefined ? '' : String(v);
      tr.append(td);
    }
    return tr;
  }));
  for (const th of document.querySelectorAll('#table th')) {
    th.setAttribute('aria-sort', th.dataset.key === state.sort.key
      ? (state.sort.desc ? 'descending' : 'ascending') : 'none');
  }
  document.getElementById('count').textContent =
    `${rows.length} of ${snap.processes.length} processes`;
}

function part(table, cells, header) {
  const tr = el('tr');
  for (const c of cells) tr.append(el(header ? 'th' : 'td', null, c));
  table.append(tr);
}

function renderModel(m) {
  const box = el('div', 'model');
  box.append(el('h3', null, m.name || m.path || 'a model'));
  const facts = [
    ['file', m.path], ['architecture', m.architecture], ['parameters', m.params],
    ['type', m.file_type], ['context', m.context], ['slots', m.slots_total],
    ['server', m.server_url],
    ['evidence', m.evidence.join(', ') + (m.confirmed ? ', confirmed' : ', unconfirmed')],
  ];
  const dl = el('dl');
  for (const [k, v] of facts) {
    if (v === null || v === undefined) continue;
    dl.append(el('dt', null, k), el('dd', null, v));
  }
  box.append(dl);
  // Estimated and reported side by side, never added to each other.
  const e = m.estimate || {};
  const r = m.reported || {};
  const split = el('table', 'split');
  split.dataset.model = m.name || m.path || '';
  part(split, ['', 'estimated', `reported${r.source ? ' (' + r.source + ')' : ''}`], true);
  part(split, ['weights', bytes(e.weights_bytes), bytes(r.weights_bytes)]);
  part(split, ['KV cache', bytes(e.kv_bytes), bytes(r.kv_bytes)]);
  part(split, ['compute', bytes(e.compute_bytes), bytes(r.compute_bytes)]);
  part(split, ['output', bytes(e.output_bytes), 'n/a']);
  part(split, ['total', bytes(e.total_bytes), bytes(r.total_bytes)]);
  box.append(split);
  for (const n of m.notes || []) box.append(el('p', 'note', n));
  return box;
}

function renderReconciliation(rec) {
  const box = el('div', 'reconciliation');
  box.dataset.device = String(rec.device);
  box.append(el('h3', null, `GPU ${rec.device}: ${bytes(rec.measured_bytes)} measured (${rec.measured_source})`));
  const t = el('table', 'parts');
  part(t, ['part', 'bytes', 'how known', 'source'], true);
  for (const p of rec.parts) part(t, [p.kind + (p.model ? ` · ${p.model}` : ''), bytes(p.bytes), p.provenance, p.source]);
  for (const k of rec.missing) part(t, [k, 'n/a', 'unknown', '']);
  box.append(t);
  const rest = el('p', rec.large ? 'rest bad' : 'rest',
    `rest: ${signedBytes(rec.unexplained_bytes)} (measured − ${bytes(rec.reported_bytes)} reported − ${bytes(rec.estimated_bytes)} estimated)`);
  rest.dataset.value = String(rec.unexplained_bytes);
  box.append(rest);
  for (const c of rec.likely_causes) box.append(el('p', 'note', `likely: ${c}`));
  return box;
}

function renderDetail(snap) {
  const pane = document.getElementById('detail');
  const p = snap.processes.find((x) => rowKey(x) === state.selected);
  if (!p) {
    pane.hidden = true;
    pane.replaceChildren();
    return;
  }
  pane.hidden = false;
  const title = el('h2', null, `${p.name} (${p.pid})`);
  const dl = el('dl');
  for (const [k, v] of [['host', p.host], ['user', p.user], ['kind', p.kind], ['started', p.start_time],
    ['command', p.cmdline], ['runtimes', p.runtimes.join(', ')],
    ['memory (RSS)', p.rss_bytes === null ? null : bytes(p.rss_bytes)]]) {
    if (v === null || v === undefined || v === '') continue;
    dl.append(el('dt', null, k), el('dd', k === 'command' ? 'cmd' : null, v));
  }
  const usage = el('table', 'usage');
  part(usage, ['GPU', 'VRAM', 'spill', 'source', 'match'], true);
  for (const g of p.gpu) part(usage, [g.device, bytes(g.vram_bytes), bytes(g.spill_bytes), g.source, g.match]);
  const close = el('button', 'close', 'close');
  close.addEventListener('click', () => { state.selected = null; draw(); });
  pane.replaceChildren(close, title, dl, usage,
    ...(p.reconciliation || []).map(renderReconciliation), ...p.models.map(renderModel),
    ...p.notes.map((n) => el('p', 'note', n)));
}

function draw() {
  const snap = state.snap;
  if (!snap) return;
  renderHeader(snap);
  renderTable(snap);
  renderDetail(snap);
}

function drawGpus(snap) {
  const section = document.getElementById('gpus');
  section.classList.toggle('fleet', !!snap.fleet);
  section.replaceChildren(...(snap.fleet
    ? snap.fleet.map((h) => renderHost(h, snap.fleet.length))
    : snap.devices.map((d) => renderGpu(d, snap))));
}

// A sum of bytes only when every part is measured, else null (n/a).
function measuredSum(values) {
  return values.some((v) => v === null || v === undefined) ? null : values.reduce((a, b) => a + b, 0);
}

// One host of a fleet: its name, how it answered, its GPUs when expanded.
function renderHost(h, hosts) {
  const box = el('details', 'host');
  box.dataset.host = h.name;
  const ok = !h.error && h.snapshot;
  const kind = ok ? 'ok' : (h.stale ? 'stale' : 'down');
  box.dataset.state = kind;
  box.open = state.open.has(h.label) ? state.open.get(h.label) : hosts <= OPEN_HOSTS;
  box.addEventListener('toggle', () => state.open.set(h.label, box.open));
  const summary = el('summary');
  summary.append(el('strong', 'host-name', h.name), el('span', `host-status ${kind === 'ok' ? '' : 'bad'}`, h.status));
  const snap = h.snapshot;
  if (snap) {
    const used = measuredSum(snap.devices.map((d) => d.memory_used_bytes));
    const total = measuredSum(snap.devices.map((d) => d.memory_total_bytes));
    const busy = snap.processes.filter((p) => p.gpu.length).length;
    const n = snap.devices.length;
    summary.append(el('span', 'host-figures',
      `${n} GPU${n === 1 ? '' : 's'} · ${bytes(used)} of ${bytes(total)} used · ${busy} GPU process${busy === 1 ? '' : 'es'}`));
  }
  box.append(summary);
  const gpus = el('div', 'host-gpus');
  if (snap) gpus.append(...snap.devices.map((d) => renderGpu(d, snap, h.name, kind !== 'ok')));
  for (const b of (snap ? snap.backends : []).filter((x) => x.status === 'error')) {
    gpus.append(el('div', 'note bad', `${b.name}: ${b.detail}`));
  }
  box.append(gpus);
  return box;
}

// The fleet's hosts as one snapshot for the table and the detail pane:
// every host's processes, each with its host.
function fleetSnapshot(data) {
  const processes = [];
  for (const h of data.hosts) {
    const stale = !!h.error;
    for (const p of (h.snapshot ? h.snapshot.processes : [])) processes.push({ ...p, host: h.name, stale });
  }
  const answering = data.hosts.filter((h) => !h.error && h.snapshot).length;
  const n = data.hosts.length;
  return {
    fleet: data.hosts,
    processes,
    host: { hostname: `${n} host${n === 1 ? '' : 's'}, ${answering} answering` },
    taken_at: data.taken_at,
    backends: data.error ? [{ name: 'fleet', status: 'error', detail: data.error }] : [],
  };
}

function say(text, bad) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = bad ? 'bad' : '';
}

async function refresh() {
  try {
    if (document.hidden) return;
    const r = await fetch('snapshot', { cache: 'no-store', credentials: 'same-origin' });
    if (r.status === 401) {
      // The server restarted (a new session secret): sign in again.
      location.reload();
      return;
    }
    if (r.status === 503) {
      say('waiting for the first sample', false);
      return;
    }
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const data = await r.json();
    const snap = Array.isArray(data.hosts) ? fleetSnapshot(data) : data;
    state.snap = snap;
    drawGpus(snap);
    draw();
    say(`updated ${new Date().toLocaleTimeString()}`, false);
  } catch (e) {
    say(`no answer from the server: ${e.message}; the figures shown are the last ones`, true);
  } finally {
    setTimeout(refresh, INTERVAL_MS);
  }
}

function start() {
  document.getElementById('filter').addEventListener('input', (e) => {
    state.filter = e.target.value;
    draw();
  });
  document.getElementById('all').addEventListener('change', (e) => {
    state.all = e.target.checked;
    draw();
  });
  for (const th of document.querySelectorAll('#table th')) {
    th.tabIndex = 0;
    const sort = () => {
      const key = th.dataset.key;
      state.sort = state.sort.key === key ? { key, desc: !state.sort.desc }
        : { key, desc: ['vram', 'spill', 'gpu_percent', 'cpu_percent'].includes(key) };
      draw();
    };
    th.addEventListener('click', sort);
    th.addEventListener('keydown', (e) => { if (e.key === 'Enter') sort(); });
  }
  document.querySelector('#table tbody').addEventListener('click', (e) => {
    const tr = e.target.closest('tr');
    if (!tr) return;
    state.selected = state.selected === tr.dataset.key ? null : tr.dataset.key;
    draw();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) say('resuming', false);
  });
  refresh();
}

start();
