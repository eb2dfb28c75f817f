// submem inspector: calls the /v1 API of the server that serves this page.
// The bearer key lives only in sessionStorage (this tab) and is sent as
// `Authorization: Bearer`; nothing else is stored.

import { arrangeBlocks, evidenceItems, jumpToBlock } from "/ui/evidence.js";
import { offer, readView, writeView } from "/ui/view.js";
import { compareView } from "/ui/compare.js";
import { reportsView } from "/ui/reports.js";

const $ = (id) => document.getElementById(id);
const idList = (id) => $(id).value.split(",").map((x) => x.trim()).filter(Boolean);
const KEY = "submem.key";
let current = null;

export function status(msg, error = false) {
  const s = $("status");
  s.textContent = msg;
  s.className = error ? "status error" : "status";
}

async function api(method, path, body) {
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await resp.json(); } catch (_) { data = null; }
  if (!resp.ok) {
    const e = data && data.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${resp.status}`;
    throw new Error(e);
  }
  return { status: resp.status, data };
}

const nsPath = (ns, rest = "") => "/v1/namespaces/" + encodeURIComponent(ns) + rest;

function cell(tr, text) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "–" : String(text);
  tr.appendChild(td);
}

async function refresh() {
  try {
    const { data } = await api("GET", "/v1/namespaces");
    const body = $("ns-table").querySelector("tbody");
    body.replaceChildren();
    for (const ns of data.namespaces) {
      const tr = document.createElement("tr");
      tr.dataset.ns = ns.name;
      if (ns.name === current) tr.className = "selected";
      cell(tr, ns.name);
      cell(tr, ns.substrate);
      cell(tr, ns.events);
      cell(tr, ns.log_bytes);
      cell(tr, ns.created_unix ? new Date(ns.created_unix * 1000).toISOString().slice(0, 19) : null);
      cell(tr, ns.last_write_unix ? new Date(ns.last_write_unix * 1000).toISOString().slice(0, 19) : null);
      const td = document.createElement("td");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Open";
      b.setAttribute("aria-label", "Open " + ns.name);
      b.addEventListener("click", () => select(ns.name));
      td.appendChild(b);
      tr.appendChild(td);
      body.appendChild(tr);
    }
    status(`${data.namespaces.length} namespace(s)`);
  } catch (e) {
    status(e.message, true);
  }
}

async function select(name) {
  contentCache = { ns: null, map: null };
  current = name;
  tlOffset = 0;
  $("current").textContent = name;
  for (const tr of $("ns-table").querySelectorAll("tbody tr")) {
    tr.className = tr.dataset.ns === name ? "selected" : "";
  }
  saveView();
  await showFootprint();
}

// One view at a time: namespaces (with the selected one and its timeline),
// the playground, side by side, bench reports, agentic episodes. The nav's
// buttons choose it (arrow keys move along them); the URL keeps it.
const VIEWS = ["namespaces", "playground", "compare", "reports", "episodes"];
let view = "namespaces";

function showView(name, save = true) {
  view = VIEWS.includes(name) ? name : "namespaces";
  for (const s of document.querySelectorAll("section[data-view]")) s.hidden = s.dataset.view !== view;
  for (const b of $("views").querySelectorAll("button")) {
    if (b.dataset.view === view) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  document.body.dataset.view = view;
  if (save) saveView();
}

// The report run and point on view, for the URL.
const reportView = { run: "", point: "" };

// Keeps the page's view in the URL (never the key).
function saveView() {
  writeView({ v: view, ns: current, ...drawn.read, ...drawn.compare, run: reportView.run, pt: reportView.point });
}

// What the playground and side by side last drew (not what their forms
// hold now): a link reopens what was on screen.
const drawn = { read: {}, compare: {} };

// Opens the view a URL names: the namespace, its render and comparison, the
// served report run and its point.
async function restoreView() {
  const v = readView();
  showView(v.v || "namespaces", false);
  const set = (id, value) => { if (value !== undefined) $(id).value = value; };
  set("question", v.q);
  set("budget", v.b);
  $("budget-out").value = $("budget").value;
  set("trace-ids", v.t);
  set("cmp-substrates", v.cs);
  set("cmp-question", v.cq);
  set("cmp-budget", v.cb);
  set("cmp-gold", v.cg);
  $("cmp-align").checked = v.ca === "1";
  const replay = { preventDefault() {} };
  if (v.ns) {
    await select(v.ns);
    if (v.q) await read(replay);
    if (v.cq) await compare(replay);
  }
  if (v.run && [...$("rep-run").options].some((o) => o.value === v.run)) {
    $("rep-run").value = v.run;
    await reports.openServedReport(replay);
    const run = reports.runs().find((r) => `${r.substrate}@${r.budget}` === v.pt);
    if (run) reports.selectRun(run);
  }
  showView(v.v || "namespaces");
  $("status").dataset.restored = "1";
}

async function showFootprint() {
  const dl = $("footprint");
  dl.replaceChildren();
  if (!current) return;
  try {
    timeline();
    const { data } = await api("GET", nsPath(current, "/footprint"));
    for (const k of ["events", "log_bytes", "memory_bytes", "disk_bytes", "stored_tokens", "input_tokens"]) {
      const dt = document.createElement("dt");
      dt.textContent = k.replace("_", " ");
      const dd = document.createElement("dd");
      dd.textContent = data[k] === undefined ? "–" : String(data[k]);
      dd.dataset.field = k;
      dl.append(dt, dd);
    }
  } catch (e) {
    status(e.message, true);
  }
}

const PAGE = 50;
let tlOffset = 0;

async function timeline() {
  const body = $("tl-table").querySelector("tbody");
  if (!current) { body.replaceChildren(); $("tl-count").value = ""; return; }
  try {
    const q = new URLSearchParams({ q: $("tl-q").value, offset: String(tlOffset), limit: String(PAGE) });
    const { data } = await api("GET", nsPath(current, "/events?" + q));
    body.replaceChildren(...data.events.map((e, i) => {
      const tr = document.createElement("tr");
      cell(tr, data.offset + i + 1);
      cell(tr, e.source_id);
      cell(tr, e.kind);
      cell(tr, e.session_id);
      cell(tr, e.speaker ?? (e.action !== undefined ? "(agent)" : null));
      cell(tr, e.text ?? (e.action !== undefined ? `> ${e.action}\n${e.observation}` : null) ?? e.content ?? JSON.stringify(e));
      return tr;
    }));
    const last = Math.min(data.total, data.offset + data.events.length);
    $("tl-count").value = `${data.total ? data.offset + 1 : 0}–${last} of ${data.total}`;
    $("tl-count").dataset.total = String(data.total);
  } catch (e) {
    status(e.message, true);
  }
}

function need() {
  if (!current) throw new Error("open a namespace first");
  return current;
}

async function waitJob(job) {
  for (let i = 0; i < 600; i++) {
    const { data } = await api("GET", "/v1/jobs/" + encodeURIComponent(job));
    if (data.status && data.status !== "queued" && data.status !== "running") return data;
    await new Promise((r) => setTimeout(r, 500));
  }
  return { status: "still running" };
}

function parseTurns(text, session) {
  const events = [];
  let i = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const parts = line.split("|");
    let id = null, speaker = "user", body = line;
    if (parts.length >= 3) {
      id = parts[0].trim(); speaker = parts[1].trim() || "user"; body = parts.slice(2).join("|");
    } else if (parts.length === 2) {
      speaker = parts[0].trim() || "user"; body = parts[1];
    }
    const ev = { kind: "turn", session_id: session, speaker, text: body.trim() };
    ev.source_id = id || `${session}:${Date.now()}:${i}`;
    events.push(ev);
    i++;
  }
  return events;
}

async function write(ev) {
  contentCache = { ns: null, map: null };
  ev.preventDefault();
  try {
    const ns = need();
    const events = parseTurns($("turns").value, $("session").value || "s1");
    if (!events.length) throw new Error("no turns to write");
    const { status: st, data } = await api("POST", nsPath(ns, "/events"), { events });
    if (st === 202) {
      status(`write queued as job ${data.job}…`);
      const j = await waitJob(data.job);
      status(`job ${data.job}: ${j.status}`);
    } else {
      status(`wrote ${data.events} event(s), ${data.units} unit(s)`);
    }
    $("turns").value = "";
    await refresh();
    await showFootprint();
  } catch (e) {
    status(e.message, true);
  }
}

// One block per source the recall names: the lines of the text that carry
// its id or its event's content (looked up in the namespace's logged events),
// in the text's order; lines naming no source stay in blocks of their own, so
// the blocks together are the text exactly.
//
// A 32k render has about a thousand lines and as many sources, so each line
// is first looked up, not scanned for: by the ids among its words, by the
// event content it ends with (tried from each word start), or as the
// continuation of the previous line's event. Only lines none of these place
// are tested against every source.
function blocksOf(text, sources, contents) {
  const lines = text.split("\n");
  const byId = new Map();
  const byContent = new Map();
  for (const h of sources) {
    if (!byId.has(h.source_id)) byId.set(h.source_id, h);
    const c = contents.get(h.source_id);
    if (c && !byContent.has(c)) byContent.set(c, h.source_id);
  }
  const names = (h, line) => {
    if (h.source_id && line.includes(h.source_id)) return true;
    const c = contents.get(h.source_id);
    if (!c) return false;
    const l = line.trim();
    return line.includes(c) || (l.length >= 12 && c.includes(l));
  };
  const idIn = (line) => {
    for (const word of line.split(/[^\w:.#/-]+/)) {
      for (const w of [word, word.replace(/[:.]+$/, "")]) if (w && byId.has(w)) return w;
    }
    return null;
  };
  let previous = null;
  const owner = lines.map((line) => {
    let id = idIn(line);
    if (!id) id = endingContent(line, byContent);
    if (!id && previous) {
      const c = contents.get(previous);
      const l = line.trim();
      if (c && l.length >= 12 && c.includes(l)) id = previous;
    }
    if (!id) {
      const s = sources.find((h) => names(h, line));
      id = s ? s.source_id : null;
    }
    previous = id;
    return id;
  });
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const last = blocks[blocks.length - 1];
    if (last && last.id === owner[i]) last.lines.push(lines[i]);
    else blocks.push({ id: owner[i], lines: [lines[i]] });
  }
  return blocks.map((b) => ({ ...b, hit: b.id ? byId.get(b.id) : null }));
}

// The source whose content `line` ends with, tried from each word start.
function endingContent(line, byContent) {
  const l = line.trimEnd();
  for (let p = 0; p < l.length; p++) {
    if (p === 0 || l[p - 1] === " ") {
      const id = byContent.get(l.slice(p));
      if (id !== undefined) return id;
    }
  }
  return null;
}

// The content of the namespace's logged events by source id, a page of a
// thousand at a time (the recall may name any of them), up to 50 000 events.
let contentCache = { ns: null, map: null };

async function contentsOf(ns) {
  const map = new Map();
  try {
    for (let offset = 0; offset < 50000; offset += 1000) {
      const { data } = await api("GET", nsPath(ns, `/events?offset=${offset}&limit=1000`));
      for (const e of data.events) {
        const c = (e.text ?? e.observation ?? e.content ?? "").trim();
        if (c) map.set(e.source_id, c);
      }
      if (data.events.length < 1000 || offset + 1000 >= data.total) break;
    }
  } catch (_) { /* blocks then rest on ids alone */ }
  return map;
}

async function read(ev) {
  ev.preventDefault();
  try {
    const ns = need();
    const budget = Number($("budget").value);
    // The events that name the blocks are kept from the last read of the
    // namespace (fetched again, while the read runs, when there are none or
    // the recall names one they lack), and the model calls are fetched after
    // the page is drawn: neither delays a re-render.
    const cached = contentCache.ns === ns ? contentCache.map : null;
    const fresh = cached ? null : contentsOf(ns);
    const t0 = performance.now();
    const body = { question: $("question").value, budget };
    const traced = idList("trace-ids");
    if (traced.length) body.trace = traced;
    const { data } = await api("POST", nsPath(ns, "/read"), body);
    const answered = performance.now();
    let contents = cached;
    if (!contents || data.sources.some((h) => !contents.has(h.source_id))) {
      contents = await (fresh ?? contentsOf(ns));
      contentCache = { ns, map: contents };
    }
    show(data, budget, answered - t0, contents);
    $("read-facts").dataset.renderMs = (performance.now() - answered).toFixed(1);
    offer($("read-export"), `${ns}-read-${budget}.json`, "application/json",
      JSON.stringify({ namespace: ns, request: body, response: data }, null, 2));
    drawn.read = { q: body.question, b: budget, t: $("trace-ids").value };
    saveView();
    let calls = "–";
    try {
      const meter = (await api("GET", nsPath(ns, "/meter"))).data;
      if (meter && meter.read) calls = JSON.stringify(meter.read.calls ?? meter.total_calls ?? "–");
    } catch (_) { /* the facts keep the dash */ }
    $("read-calls").textContent = ` · model calls (read) ${calls}`;
  } catch (e) {
    status(e.message, true);
  }
}

function show(data, budget, wall, contents) {
  $("raw-text").textContent = data.text;
  const pct = Math.min(100, (100 * data.tokens) / budget);
  const bar = $("budget-bar");
  bar.style.width = pct.toFixed(1) + "%";
  bar.parentElement.setAttribute("aria-label", `budget use ${data.tokens} of ${budget} tokens`);
  $("read-facts").textContent =
    `${data.tokens} / ${budget} tokens (${pct.toFixed(1)}%) · ${data.sources.length} source(s) · ` +
    `server ${data.latency_ms.toFixed(1)} ms, page ${wall.toFixed(0)} ms`;
  $("read-calls").textContent = "";
  $("read-facts").dataset.tokens = String(data.tokens);
  const ol = $("blocks");
  const items = blocksOf(data.text, data.sources, contents).map((b) => {
    const li = document.createElement("li");
    li.className = b.hit ? b.hit.resolution : "other";
    const meta = document.createElement("div");
    meta.className = "meta";
    const words = b.lines.join("\n").split(/\s+/).filter(Boolean).length;
    meta.textContent = b.hit
      ? `${b.hit.source_id} · ${b.hit.resolution} · score ${Number(b.hit.score).toFixed(3)} · ~${words} words`
      : `(no source id) · ~${words} words`;
    const pre = document.createElement("pre");
    pre.textContent = b.lines.join("\n");
    li.append(meta, pre);
    if (b.hit) {
      li.dataset.source = b.hit.source_id;
      li.dataset.score = String(b.hit.score);
    }
    return li;
  });
  items.forEach((li, i) => { li.dataset.order = String(i); });
  ol.replaceChildren(...items);
  ol.dataset.blocks = String(items.length);
  arrangeShown();
  $("evidence").replaceChildren(...evidenceItems(data.evidence || [], (id) => jumpToBlock(ol, id)));
  status(`rendered ${data.tokens} tokens`);
}

// The playground's blocks in the chosen order, filtered by the search.
function arrangeShown() {
  const n = arrangeBlocks($("blocks"), $("blocks-order").value, $("blocks-q").value);
  $("blocks-count").value = `${n} of ${$("blocks").children.length} block(s)`;
}

async function forget(ev) {
  contentCache = { ns: null, map: null };
  ev.preventDefault();
  try {
    const ns = need();
    const ids = $("forget-ids").value.split(",").map((s) => s.trim()).filter(Boolean);
    if (!ids.length) throw new Error("no source ids to forget");
    const { data } = await api("POST", nsPath(ns, "/forget"), { source_ids: ids });
    status(`forgot ${data.forgotten} event(s)`);
    await refresh();
    await showFootprint();
  } catch (e) {
    status(e.message, true);
  }
}

async function manage() {
  contentCache = { ns: null, map: null };
  try {
    const ns = need();
    const { status: st, data } = await api("POST", nsPath(ns, "/manage"));
    if (st === 202) {
      const j = await waitJob(data.job);
      status(`manage job ${data.job}: ${j.status}`);
    } else {
      status(`manage: changed ${data.changed}`);
    }
    await showFootprint();
  } catch (e) {
    status(e.message, true);
  }
}

async function remove() {
  contentCache = { ns: null, map: null };
  try {
    const ns = need();
    if (!window.confirm(`Delete namespace ${ns} and its history?`)) return;
    await api("DELETE", nsPath(ns));
    current = null;
    $("current").textContent = "none selected";
    $("footprint").replaceChildren();
    status(`deleted ${ns}`);
    await refresh();
  } catch (e) {
    status(e.message, true);
  }
}

async function create(ev) {
  contentCache = { ns: null, map: null };
  ev.preventDefault();
  try {
    const name = $("create-name").value.trim();
    const substrate = $("create-substrate").value.trim();
    await api("POST", "/v1/namespaces", { name, substrate });
    status(`created ${name} (${substrate})`);
    await refresh();
    await select(name);
  } catch (e) {
    status(e.message, true);
  }
}

const reports = reportsView({
  api, apiText, cell, status, showView,
  viewed(changed) { Object.assign(reportView, changed); saveView(); },
});

const compare = compareView({
  api, need, nsPath, status, contentsOf, blocksOf,
  drew(fields) { drawn.compare = fields; saveView(); },
});

function init() {
  $("key").value = sessionStorage.getItem(KEY) || "";
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const k = $("key").value.trim();
    if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY);
    refresh();
    listServedReports();
  });
  $("key-clear").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    $("key").value = "";
    refresh();
    listServedReports();
  });
  $("ns-refresh").addEventListener("click", refresh);
  $("create-form").addEventListener("submit", create);
  $("write-form").addEventListener("submit", write);
  $("forget-form").addEventListener("submit", forget);
  $("manage").addEventListener("click", manage);
  $("delete").addEventListener("click", remove);
  $("read-form").addEventListener("submit", read);
  $("cmp-form").addEventListener("submit", compare);
  $("blocks-order").addEventListener("change", arrangeShown);
  $("blocks-q").addEventListener("input", arrangeShown);
  $("blocks-q").addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    ev.preventDefault();
    const id = $("blocks-q").value.trim();
    if (!jumpToBlock($("blocks"), id)) {
      const first = [...$("blocks").children].find((li) => !li.hidden);
      if (first) first.scrollIntoView({ block: "nearest" });
    }
  });
  $("tl-form").addEventListener("submit", (ev) => { ev.preventDefault(); tlOffset = 0; timeline(); });
  $("tl-prev").addEventListener("click", () => { tlOffset = Math.max(0, tlOffset - PAGE); timeline(); });
  $("tl-next").addEventListener("click", () => {
    const total = Number($("tl-count").dataset.total || 0);
    if (tlOffset + PAGE < total) { tlOffset += PAGE; timeline(); }
  });
  $("budget").addEventListener("input", () => { $("budget-out").value = $("budget").value; });
  const tabs = [...$("views").querySelectorAll("button")];
  tabs.forEach((b, i) => {
    b.addEventListener("click", () => showView(b.dataset.view));
    b.addEventListener("keydown", (ev) => {
      const step = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (!step) return;
      ev.preventDefault();
      const next = tabs[(i + step + tabs.length) % tabs.length];
      next.focus();
      showView(next.dataset.view);
    });
  });
  showView(readView().v || "namespaces", false);
  Promise.all([refresh(), reports.listServedReports()]).then(restoreView);
}

init();

export async function apiText(path) {
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (key) headers["Authorization"] = "Bearer " + key;
  const resp = await fetch(path, { headers });
  const text = await resp.text();
  if (!resp.ok) {
    let e = `HTTP ${resp.status}`;
    try { const d = JSON.parse(text); if (d.error) e = `${d.error.code}: ${d.error.message}`; } catch (_) { /* not JSON */ }
    throw new Error(e);
  }
  return text;
}

// The runs the server serves (`submem serve --reports DIR`), if any.
