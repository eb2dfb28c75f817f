// submem inspector: calls the /v1 API of the server that serves this page.
// The bearer key lives only in sessionStorage (this tab) and is sent as
// `Authorization: Bearer`; nothing else is stored.

import { alignedTable, arrangeBlocks, evidenceItems, jumpToBlock, shareOf } from "/ui/evidence.js";
import { compareMarkdown, offer, readView, writeView } from "/ui/view.js";

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
    await openServedReport(replay);
    const run = report.runs.find((r) => `${r.substrate}@${r.budget}` === v.pt);
    if (run) selectRun(run);
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

async function compare(ev) {
  ev.preventDefault();
  const grid = $("cmp-grid");
  const box = $("cmp-aligned-box");
  // An earlier comparison's columns never stay up beside a later failure.
  grid.replaceChildren();
  box.replaceChildren();
  box.hidden = true;
  $("cmp-caption").textContent = "";
  $("cmp-error").textContent = "";
  $("cmp-progress").replaceChildren();
  $("cmp-export-json").hidden = true;
  $("cmp-export-md").hidden = true;
  following++;
  try {
    const ns = need();
    const gold = idList("cmp-gold");
    const body = {
      substrates: idList("cmp-substrates"),
      question: $("cmp-question").value,
      budget: Number($("cmp-budget").value),
      gold,
    };
    status("comparing…");
    const answer = await api("POST", nsPath(ns, "/compare"), body);
    if (answer.status === 202) {
      followBuilds(answer.data.pending, ev);
      return;
    }
    const { data } = answer;
    const contents = await contentsOf(ns);
    const goldText = gold.map((g) => contents.get(g)).filter(Boolean);
    const isGold = (line) => gold.some((g) => line.includes(g)) || goldText.some((c) => line.includes(c));
    const total = data.results.length;
    const blocks = data.results.map((r) => blocksOf(r.text, r.sources, contents));
    $("cmp-caption").textContent = `“${data.question ?? body.question}” at ${data.budget} tokens in ${ns}`;
    grid.replaceChildren(...data.results.map((r, i) => {
      const col = document.createElement("div");
      col.className = "cmp-col";
      col.dataset.substrate = r.substrate;
      const h = document.createElement("h3");
      h.textContent = r.substrate;
      const facts = document.createElement("p");
      facts.className = "meta";
      facts.textContent = `${r.tokens} / ${data.budget} tokens · ${r.sources.length} source(s) · read ${r.latency_ms.toFixed(1)} ms` +
        (r.build_ms ? ` · built in ${r.build_ms.toFixed(0)} ms` : " · cached");
      const only = document.createElement("p");
      only.className = "meta only-here";
      if (r.only_here && total > 1) {
        only.textContent = `only here: ${r.only_here.sources} source(s), ${r.only_here.raw_tokens} tokens of whole turns`;
        only.dataset.sources = String(r.only_here.sources);
      }
      const ul = document.createElement("ul");
      ul.className = "gold-list";
      const fates = new Map((r.evidence || []).map((e) => [e.source_id, e]));
      for (const g of r.gold) {
        const li = document.createElement("li");
        const e = fates.get(g.source_id);
        li.textContent = e ? `${g.source_id}: ${e.why}` :
          `${g.source_id}: ${g.shown ? (g.whole ? "shown whole" : "shown as " + g.resolution) : "not shown"}`;
        li.dataset.shown = String(g.shown);
        if (e && e.fate) li.dataset.fate = e.fate;
        ul.appendChild(li);
      }
      const by = new Map(r.sources.map((s, j) => [s.source_id, (r.shown_by || [])[j] ?? 0]));
      const text = document.createElement("div");
      for (const b of blocks[i]) {
        for (const line of b.lines) {
          const d = document.createElement("div");
          d.className = isGold(line) ? "line gold" : "line";
          if (b.id && by.has(b.id) && total > 1) {
            const share = shareOf(by.get(b.id), total);
            d.classList.add("share-" + share);
            d.dataset.share = share;
            d.dataset.source = b.id;
          }
          d.textContent = line;
          text.appendChild(d);
        }
      }
      col.append(h, facts, only, ul, text);
      return col;
    }));
    if ($("cmp-align").checked) {
      box.replaceChildren(alignedTable(data.results, blocks));
      box.hidden = false;
    }
    offer($("cmp-export-json"), `${ns}-compare-${data.budget}.json`, "application/json",
      JSON.stringify({ namespace: ns, request: body, response: data }, null, 2));
    offer($("cmp-export-md"), `${ns}-compare-${data.budget}.md`, "text/markdown", compareMarkdown(ns, data));
    drawn.compare = { cs: $("cmp-substrates").value, cq: body.question, cb: body.budget, cg: $("cmp-gold").value,
      ca: $("cmp-align").checked ? "1" : "" };
    saveView();
    status(`compared ${total} substrate(s)`);
  } catch (e) {
    $("cmp-error").textContent = e.message;
    status(e.message, true);
  }
}

// A comparison whose substrates are still being built: each build's
// progress in place, with a cancel; when all are built, the comparison is
// asked again and served from the kept builds.
let following = 0;

function followBuilds(pending, ev) {
  const run = ++following;
  const box = $("cmp-progress");
  const rows = new Map();
  box.replaceChildren(...pending.map((j) => {
    const li = document.createElement("li");
    li.dataset.job = j.id;
    const text = document.createElement("span");
    const bar = document.createElement("progress");
    bar.max = Math.max(1, j.events);
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.setAttribute("aria-label", `cancel the build of ${j.substrate}`);
    cancel.addEventListener("click", async () => {
      try { await api("DELETE", `/v1/jobs/${encodeURIComponent(j.id)}`); } catch (e) { $("cmp-error").textContent = e.message; }
    });
    li.append(text, " ", bar, " ", cancel);
    rows.set(j.id, { li, text, bar });
    return li;
  }));
  const draw = (j) => {
    const r = rows.get(j.id);
    if (!r) return;
    const s = (j.elapsed_ms ?? 0) / 1000;
    const rate = s > 0 ? (j.events_done / s).toFixed(1) : "–";
    r.text.textContent = `${j.substrate}: ${j.state}, ${j.events_done} / ${j.events} events · ${s.toFixed(1)} s · ${rate} events/s`;
    r.bar.value = j.events_done;
    r.li.dataset.state = j.state;
  };
  pending.forEach(draw);
  status(`building ${pending.map((j) => j.substrate).join(", ")}…`);
  const poll = async () => {
    if (run !== following) return; // a newer comparison took over
    try {
      const jobs = await Promise.all(pending.map((j) => api("GET", `/v1/jobs/${encodeURIComponent(j.id)}`).then((a) => a.data)));
      jobs.forEach(draw);
      const stopped = jobs.find((j) => j.state === "failed" || j.state === "cancelled");
      if (stopped) {
        const why = stopped.state === "cancelled" ? "was cancelled; Compare rebuilds it" : `failed: ${stopped.error}`;
        $("cmp-error").textContent = `the build of ${stopped.substrate} ${why}`;
        status($("cmp-error").textContent, true);
        return;
      }
      if (jobs.every((j) => j.state === "done")) {
        compare(ev);
        return;
      }
    } catch (e) {
      $("cmp-error").textContent = e.message;
      return;
    }
    setTimeout(poll, 400);
  };
  setTimeout(poll, 400);
}

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
  Promise.all([refresh(), listServedReports()]).then(restoreView);
}

init();

// ---- Bench report viewer: summary.json (+ items.jsonl) chosen in the page.

const SVG = "http://www.w3.org/2000/svg";
// Sixteen substrate colours, none of them a fate's colour (FATES below), so a
// sweep of every substrate gets one colour each.
const PALETTE = ["#1f77b4", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
  "#393b79", "#ad494a", "#637939", "#7b4173", "#5254a3", "#8c6d31", "#d6616b", "#3c3c3c"];
let report = { runs: [], items: [] };

function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

function colors(runs) {
  const names = [...new Set(runs.map((r) => r.substrate))];
  return new Map(names.map((n, i) => [n, PALETTE[i % PALETTE.length]]));
}

function axes(svg, W, H, m, xlabel, ylabel, xticks, yticks) {
  svg.appendChild(el("line", { x1: m, y1: H - m, x2: W - 10, y2: H - m, stroke: "#333" }));
  svg.appendChild(el("line", { x1: m, y1: 10, x2: m, y2: H - m, stroke: "#333" }));
  for (const [x, label] of xticks) {
    svg.appendChild(el("text", { x, y: H - m + 14, "text-anchor": "middle", "font-size": 10 }, label));
  }
  for (const [y, label] of yticks) {
    svg.appendChild(el("text", { x: m - 4, y: y + 3, "text-anchor": "end", "font-size": 10 }, label));
    svg.appendChild(el("line", { x1: m, y1: y, x2: W - 10, y2: y, stroke: "#eee" }));
  }
  svg.appendChild(el("text", { x: (W + m) / 2, y: H - 4, "text-anchor": "middle", "font-size": 11 }, xlabel));
  svg.appendChild(el("text", { x: 12, y: H / 2, "text-anchor": "middle", "font-size": 11, transform: `rotate(-90 12 ${H / 2})` }, ylabel));
}

function drawCoverage(runs, col) {
  const W = 450, H = 300, m = 40;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "coverage against budget" });
  const budgets = [...new Set(runs.map((r) => r.budget))].sort((a, b) => a - b);
  const lb = budgets.map((b) => Math.log2(b));
  const lo = Math.min(...lb), hi = Math.max(...lb);
  const X = (b) => m + (hi === lo ? 0.5 : (Math.log2(b) - lo) / (hi - lo)) * (W - m - 20);
  const Y = (v) => H - m - v * (H - m - 15);
  axes(svg, W, H, m, "budget (tokens)", "share of gold turns",
    budgets.map((b) => [X(b), String(b)]), [0, 0.25, 0.5, 0.75, 1].map((v) => [Y(v), v.toFixed(2)]));
  for (const [name, c] of col) {
    const rs = runs.filter((r) => r.substrate === name).sort((a, b) => a.budget - b.budget);
    for (const [key, dash] of [["evidence_coverage", ""], ["evidence_partial", "4 3"]]) {
      const pts = rs.filter((r) => num(r.metrics[key]) !== null).map((r) => `${X(r.budget)},${Y(r.metrics[key])}`);
      if (pts.length) svg.appendChild(el("polyline", { points: pts.join(" "), fill: "none", stroke: c, "stroke-width": 2, "stroke-dasharray": dash }));
      for (const r of rs) {
        const v = num(r.metrics[key]);
        if (v !== null) svg.appendChild(el("circle", { cx: X(r.budget), cy: Y(v), r: 2.5, fill: c }));
      }
    }
  }
  return svg;
}

function drawScatter(runs, col, quality) {
  const W = 450, H = 300, m = 40;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "group", "aria-label": "quality against read latency" });
  const pts = runs.map((r) => ({ r, x: num(r.metrics.E4 && r.metrics.E4.p50), y: num(r.metrics[quality]) }))
    .filter((p) => p.x !== null && p.y !== null);
  const lx = pts.map((p) => Math.log10(Math.max(p.x, 1e-6)));
  const lo = Math.floor(Math.min(...lx, -3)), hi = Math.ceil(Math.max(...lx, lo + 1));
  const X = (s) => m + ((Math.log10(Math.max(s, 1e-6)) - lo) / (hi - lo)) * (W - m - 20);
  const Y = (v) => H - m - Math.min(1, v) * (H - m - 15);
  const xt = [];
  for (let e = lo; e <= hi; e++) xt.push([m + ((e - lo) / (hi - lo)) * (W - m - 20), e >= 0 ? `${10 ** e} s` : `${(10 ** (e + 3)).toFixed(e < -3 ? 3 : 0)} ms`]);
  axes(svg, W, H, m, "read latency p50 (log)", quality, xt, [0, 0.25, 0.5, 0.75, 1].map((v) => [Y(v), v.toFixed(2)]));
  const radius = (r) => 4 + Math.log2(r.budget / 256 + 1);
  // Larger points first, so a smaller one drawn over a larger stays on top
  // and clickable; each substrate named beside its largest budget.
  pts.sort((a, b) => radius(b.r) - radius(a.r));
  const largest = new Map();
  for (const p of pts) if (!largest.has(p.r.substrate)) largest.set(p.r.substrate, p);
  for (const p of pts) {
    const c = el("circle", {
      cx: X(p.x), cy: Y(p.y), r: radius(p.r), fill: col.get(p.r.substrate), "fill-opacity": 0.75,
      tabindex: 0, role: "button", "aria-label": `${p.r.substrate} at ${p.r.budget}: ${quality} ${p.y.toFixed(3)}, ${(p.x * 1000).toFixed(1)} ms`,
    });
    c.dataset.substrate = p.r.substrate;
    c.dataset.budget = String(p.r.budget);
    c.appendChild(el("title", {}, `${p.r.substrate} @ ${p.r.budget}`));
    const pick = () => selectRun(p.r);
    c.addEventListener("click", pick);
    c.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); pick(); } });
    svg.appendChild(c);
  }
  for (const [name, p] of largest) {
    const t = el("text", { x: X(p.x) + radius(p.r) + 2, y: Y(p.y) - radius(p.r), "font-size": 9, fill: col.get(name), class: "point-label" }, name);
    svg.appendChild(t);
  }
  return svg;
}

function fmt(v) {
  return typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : v === null || v === undefined ? "–" : String(v);
}

function selectRun(run) {
  $("rep-sel").textContent = `Per category: ${run.substrate} at ${run.budget}`;
  const cats = $("rep-cats").querySelector("tbody");
  cats.replaceChildren(...Object.entries(run.per_category || {}).map(([cat, m]) => {
    const tr = document.createElement("tr");
    for (const v of [run.substrate, run.budget, cat, m.questions, m.P6, m.evidence_coverage, m.evidence_partial]) cell(tr, fmt(v));
    return tr;
  }));
  const items = report.items.filter((i) => i.substrate === run.substrate && i.budget === run.budget &&
    (!run.dataset || !i.dataset || i.dataset === run.dataset));
  const body = $("rep-items-table").querySelector("tbody");
  body.replaceChildren(...items.slice(0, 500).map((i) => {
    const tr = document.createElement("tr");
    const cov = i.coverage || {};
    const td = document.createElement("td");
    const open = document.createElement("button");
    open.type = "button";
    open.className = "link";
    // Ids repeat across conversations: the question's words and its
    // conversation tell the rows apart.
    const words = i.question || (i.shown && i.shown.question) || "";
    open.textContent = words ? `${i.question_id} · ${words.length > 90 ? words.slice(0, 87) + "…" : words}` : i.question_id;
    open.setAttribute("aria-label", `what each substrate showed for ${i.question_id}`);
    open.addEventListener("click", () => showItem(i));
    td.appendChild(open);
    tr.appendChild(td);
    cell(tr, i.conversation);
    for (const v of [i.category, i.recall_at_k, `${fmt(cov.whole)} / ${fmt(cov.part)} / ${fmt(cov.gold)}`,
      i.retrieved_tokens, typeof i.read_seconds === "number" ? (i.read_seconds * 1000).toFixed(2) : null,
      i.answer]) cell(tr, fmt(v));
    return tr;
  }));
  body.dataset.count = String(items.length);
  reportView.point = `${run.substrate}@${run.budget}`;
  offer($("rep-export"), `${run.substrate}-${run.budget}.json`, "application/json",
    JSON.stringify({ run, items }, null, 2));
  saveView();
  status(`${run.substrate} at ${run.budget}: ${items.length} item(s)`);
}

// Every substrate's item for the same question at the same budget, side by
// side: its figures, where each gold id went and, from a `--trace` run, the
// memory it showed with the lines naming a gold id marked.
function showItem(item) {
  const same = report.items.filter((i) => i.dataset === item.dataset && i.conversation === item.conversation &&
    i.question_id === item.question_id && i.budget === item.budget);
  const grid = $("rep-item");
  grid.dataset.question = item.question_id;
  grid.replaceChildren(...same.map((i) => {
    const col = document.createElement("div");
    col.className = "cmp-col";
    col.dataset.substrate = i.substrate;
    const h = document.createElement("h4");
    h.textContent = `${i.substrate} (k ${i.k})`;
    const cov = i.coverage || {};
    const facts = document.createElement("p");
    facts.className = "meta";
    facts.textContent = `${fmt(i.retrieved_tokens)} / ${i.budget} tokens · gold whole ${fmt(cov.whole)}, part ${fmt(cov.part)} of ${fmt(cov.gold)}` +
      ` · answer recall ${fmt(i.answer_recall)}`;
    col.append(h, facts);
    const shown = i.shown;
    if (!shown) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = "not kept: rerun with --trace for the memory shown";
      col.append(p);
      return col;
    }
    const byId = new Map(shown.sources.map(([id, res]) => [id, res]));
    const ul = document.createElement("ul");
    ul.className = "gold-list";
    for (const g of shown.evidence) {
      const li = document.createElement("li");
      const res = byId.get(g);
      li.textContent = `${g}: ${res ? "shown as " + res : "not shown"}`;
      li.dataset.shown = String(Boolean(res));
      ul.appendChild(li);
    }
    const text = document.createElement("div");
    for (const line of shown.text.split("\n")) {
      const d = document.createElement("div");
      const gold = shown.evidence.some((g) => line.includes(g)) ||
        (shown.evidence_text || []).some((c) => line.includes(c) || (line.trim().length >= 12 && c.includes(line.trim())));
      d.className = gold ? "line gold" : "line";
      d.textContent = line;
      text.appendChild(d);
    }
    col.append(ul, text);
    return col;
  }));
  const traced = same.find((i) => i.shown);
  $("rep-item-h").textContent = `What each substrate showed: ${item.question_id} at ${item.budget}` +
    (traced ? ` (“${traced.shown.question}”)` : "");
  const button = $("rep-item-compare");
  button.hidden = !traced;
  button.onclick = traced ? () => {
    $("cmp-question").value = traced.shown.question;
    $("cmp-gold").value = traced.shown.evidence.join(", ");
    $("cmp-budget").value = String(item.budget);
    $("cmp-substrates").value = [...new Set(same.map((i) => i.substrate))].slice(0, 4).join(", ");
    showView("compare");
    $("cmp-h").scrollIntoView();
    $("cmp-question").focus();
    status("the item's question, gold ids, budget and substrates are in the side-by-side form");
  } : null;
  status(`${item.question_id}: ${same.length} substrate(s)`);
}

const FATES = [["whole", "shown whole", "#2ca02c"], ["part_only", "only in part", "#98df8a"],
  ["record_only", "only through a record", "#ff7f0e"], ["absent", "not shown", "#d3d3d3"]];

// One stacked bar per run (substrate at budget): the shares of its gold turns
// by fate.
function drawFates(runs) {
  const rows = runs.filter((r) => r.metrics.evidence_fates && typeof r.metrics.evidence_fates === "object")
    .sort((a, b) => a.substrate.localeCompare(b.substrate) || a.budget - b.budget);
  const W = 450, bar = 14, gap = 6, left = 130, top = 22;
  const H = top + rows.length * (bar + gap) + 30;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "where gold turns went, per run" });
  const X = (v) => left + v * (W - left - 15);
  let lx = 2;
  for (const [, label, c] of FATES) {
    svg.appendChild(el("rect", { x: lx, y: 4, width: 10, height: 10, fill: c }));
    svg.appendChild(el("text", { x: lx + 13, y: 13, "font-size": 10 }, label));
    lx += 13 + label.length * 5.2 + 12;
  }
  rows.forEach((r, n) => {
    const f = r.metrics.evidence_fates;
    const y = top + n * (bar + gap);
    svg.appendChild(el("text", { x: left - 6, y: y + bar - 3, "text-anchor": "end", "font-size": 10 }, `${r.substrate} @ ${r.budget}`));
    const row = el("g", { role: "img" });
    row.dataset.run = `${r.substrate}@${r.budget}`;
    let at = 0;
    const parts = [];
    for (const [key, label, c] of FATES) {
      // Shares past 100% (a malformed summary) are clipped, not drawn outside.
      const v = Math.max(0, Math.min(num(f[key]) ?? 0, 1 - at));
      if (v > 0) {
        const rect = el("rect", { x: X(at), y, width: Math.max(0, X(at + v) - X(at)), height: bar, fill: c });
        rect.dataset.fate = key;
        rect.appendChild(el("title", {}, `${r.substrate} @ ${r.budget}: ${label} ${(100 * v).toFixed(1)}%`));
        row.appendChild(rect);
      }
      parts.push(`${label} ${(100 * v).toFixed(0)}%`);
      at += v;
    }
    row.setAttribute("aria-label", `${r.substrate} at ${r.budget}: ${parts.join(", ")}`);
    svg.appendChild(row);
  });
  [0, 0.5, 1].forEach((v) => svg.appendChild(el("text", { x: X(v), y: H - 8, "text-anchor": "middle", "font-size": 10 }, `${v * 100}%`)));
  return svg;
}

function drawReport() {
  const runs = report.runs;
  const col = colors(runs);
  $("rep-coverage").replaceChildren(drawCoverage(runs, col));
  $("rep-scatter").replaceChildren(drawScatter(runs, col, $("rep-quality").value));
  $("rep-fates").replaceChildren(drawFates(runs));
  $("rep-legend").replaceChildren(...[...col].map(([name, c]) => {
    const s = document.createElement("span");
    s.textContent = name;
    s.style.setProperty("--c", c);
    return s;
  }));
}

// Shows a report from the text of its summary.json and items.jsonl.
function loadReport(summaryText, itemsText) {
  const summary = JSON.parse(summaryText);
  if (!summary || !Array.isArray(summary.runs)) throw new Error("summary.json has no `runs` array");
  report.runs = summary.runs.filter((r) => r && typeof r.substrate === "string" && typeof r.budget === "number" && r.metrics);
  report.items = [];
  for (const line of (itemsText || "").split("\n")) {
    if (!line.trim()) continue;
    try { report.items.push(JSON.parse(line)); } catch (_) { /* a torn last line */ }
  }
  drawReport();
  status(`report: ${report.runs.length} run(s), ${report.items.length} item(s)`);
}

async function openReport(ev) {
  ev.preventDefault();
  try {
    const sf = $("rep-summary").files[0];
    if (!sf) throw new Error("choose a summary.json");
    const itf = $("rep-items").files[0];
    loadReport(await sf.text(), itf ? await itf.text() : "");
  } catch (e) {
    status(e.message, true);
  }
}

// The body of a GET as text, with the page's key; API errors as messages.
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
async function listServedReports() {
  const box = $("rep-served");
  try {
    const { data } = await api("GET", "/v1/reports");
    // Agentic runs open in the episode viewer (episodes.js).
    const runs = data.runs.filter((r) => r.kind !== "agentic");
    const sel = $("rep-run");
    sel.replaceChildren(...runs.map((r) => {
      const o = document.createElement("option");
      o.value = r.name;
      const when = r.modified_unix ? new Date(r.modified_unix * 1000).toISOString().slice(0, 16).replace("T", " ") : "";
      o.textContent = `${r.name === "." ? "(the reports directory)" : r.name}${r.items ? "" : " (no items)"} ${when}`;
      return o;
    }));
    box.hidden = runs.length === 0;
    box.dataset.runs = String(runs.length);
  } catch (_) {
    box.hidden = true;
  }
}

async function openServedReport(ev) {
  ev.preventDefault();
  try {
    const run = encodeURIComponent($("rep-run").value);
    const [summary, items] = await Promise.all([
      apiText(`/v1/reports/${run}/summary`),
      apiText(`/v1/reports/${run}/items`).catch(() => ""),
    ]);
    loadReport(summary, items);
    reportView.run = $("rep-run").value;
    reportView.point = "";
    saveView();
  } catch (e) {
    status(e.message, true);
  }
}

$("rep-form").addEventListener("submit", openReport);
$("rep-served").addEventListener("submit", openServedReport);
$("rep-quality").addEventListener("change", () => { if (report.runs.length) drawReport(); });
