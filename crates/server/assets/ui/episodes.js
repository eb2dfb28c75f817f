// submem inspector, agentic episodes: replays the episodes of a live
// environment run (`submem bench --dataset textworld|alfworld|scienceworld`)
// step by step, with what memory showed the policy at each step. Episodes
// come from a served run (`submem serve --reports DIR`) or from an
// `episodes.jsonl` chosen in the page; nothing is sent anywhere. The key
// handling and status line are app.js's (one module instance per page).

import { apiText as getText, status } from "/ui/app.js";

const $ = (id) => document.getElementById(id);

const view = { episodes: [], shown: [], open: null, step: 1 };

function node(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function td(tr, text) {
  tr.appendChild(node("td", text === undefined || text === null ? "–" : text));
}

const ms = (s) => (typeof s === "number" ? (s * 1000 < 10 ? (s * 1000).toFixed(2) : (s * 1000).toFixed(0)) : "–");
const pct = (v) => (typeof v === "number" ? `${(100 * v).toFixed(0)} %` : "–");
const label = (e) => `${e.substrate} · ${e.game} · ${e.regime} · ${e.budget} tokens · k ${e.k}`;
const outcome = (e) => (e.won ? "won" : e.lost ? "lost" : `not won (${e.steps}/${e.step_cap} steps)`);

// Parses an episodes.jsonl text; a torn last line (a run still writing) is skipped.
export function parseEpisodes(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line);
      if (e && typeof e.substrate === "string" && Array.isArray(e.step_records)) out.push(e);
    } catch (_) { /* torn line */ }
  }
  return out;
}

// What the policy saw as the current observation at step `t` (1-based):
// the opening text, then each step's answer.
export function observationSeen(e, t) {
  if (t <= 1) return e.opening || "(the opening text was not recorded: a run before the episode viewer)";
  const prev = e.step_records[t - 2];
  return prev ? prev.observation : "";
}

// The step of this episode a shown source id is (unit n of a game is the
// command of step n - 1 and its answer; unit 1 is the opening), or null
// for units of other games (a cross-episode bank).
export function stepOfSource(e, id) {
  const prefix = e.game + ":";
  if (!id.startsWith(prefix)) return null;
  const n = Number(id.slice(prefix.length));
  return Number.isInteger(n) && n >= 1 ? n - 1 : null;
}

function loadEpisodes(text, from) {
  view.episodes = parseEpisodes(text);
  view.open = null;
  $("epi-view").hidden = true;
  fillFilters();
  listEpisodes();
  status(`episodes: ${view.episodes.length} from ${from}`);
}

function fillFilters() {
  for (const [id, key] of [["epi-substrate", "substrate"], ["epi-game", "game"], ["epi-regime", "regime"], ["epi-k", "k"]]) {
    const sel = $(id);
    const values = [...new Set(view.episodes.map((e) => String(e[key])))].sort();
    sel.replaceChildren(node("option", "any"), ...values.map((v) => node("option", v)));
    sel.firstChild.value = "";
  }
}

function listEpisodes() {
  const want = {
    substrate: $("epi-substrate").value, game: $("epi-game").value,
    regime: $("epi-regime").value, k: $("epi-k").value,
  };
  view.shown = view.episodes.filter((e) => Object.entries(want).every(([k, v]) => !v || String(e[k]) === v));
  const won = view.shown.filter((e) => e.won).length;
  $("epi-count").textContent = `${view.shown.length} episode(s), ${won} won`;
  const body = $("epi-table").querySelector("tbody");
  body.replaceChildren(...view.shown.slice(0, 1000).map((e, i) => {
    const tr = node("tr");
    const cell = node("td");
    const open = node("button", e.substrate, "link");
    open.type = "button";
    open.setAttribute("aria-label", `replay ${label(e)}`);
    open.addEventListener("click", () => openEpisode(view.shown[i]));
    cell.appendChild(open);
    tr.appendChild(cell);
    const tokens = e.step_records.reduce((a, s) => a + s.memory_tokens, 0) / Math.max(1, e.step_records.length);
    for (const v of [e.game, e.regime, e.budget, e.k, outcome(e), pct(e.max_score > 0 ? e.score / e.max_score : 0),
      e.invalid_steps, tokens.toFixed(0)]) td(tr, v);
    if (e === view.open) tr.className = "selected";
    return tr;
  }));
}

function openEpisode(e) {
  view.open = e;
  view.step = 1;
  $("epi-view").hidden = false;
  $("epi-title").textContent = label(e);
  const facts = $("epi-facts");
  facts.replaceChildren();
  for (const [k, v] of [["Policy", e.policy], ["Outcome", outcome(e)], ["Score", `${e.score} / ${e.max_score}`],
    ["Walkthrough", `${e.walkthrough_steps} steps`], ["History", `${e.history_tokens} tokens`],
    ["Invalid", e.invalid_steps], ["Wall", `${(e.wall_seconds || 0).toFixed(1)} s`]]) {
    facts.appendChild(node("dt", k));
    facts.appendChild(node("dd", v));
  }
  $("epi-objective").textContent = e.objective || "(not recorded)";
  const slider = $("epi-step");
  slider.max = String(Math.max(1, e.step_records.length));
  drawSteps();
  drawOthers();
  showStep(1);
  listEpisodes();
  $("epi-view").scrollIntoView({ block: "nearest" });
}

function drawSteps() {
  const e = view.open;
  const body = $("epi-steps").querySelector("tbody");
  body.replaceChildren(...e.step_records.map((s) => {
    const tr = node("tr");
    const cell = node("td");
    const go = node("button", s.step, "link");
    go.type = "button";
    go.setAttribute("aria-label", `show step ${s.step}`);
    go.addEventListener("click", () => showStep(s.step));
    cell.appendChild(go);
    tr.appendChild(cell);
    for (const v of [s.command + (s.invalid ? " (invalid)" : ""), s.memory_tokens, s.shown.length, s.score,
      s.history_tokens, ms(s.read_seconds), ms(s.policy_seconds)]) td(tr, v);
    tr.dataset.step = String(s.step);
    return tr;
  }));
}

// The same game, regime, budget and k under every other substrate: the
// commands side by side, those that differ from the first column marked.
function drawOthers() {
  const e = view.open;
  const same = view.episodes.filter((o) => o.game === e.game && o.regime === e.regime && o.budget === e.budget &&
    o.k === e.k && o.policy === e.policy);
  same.sort((a, b) => (a.substrate === "nomem" ? -1 : b.substrate === "nomem" ? 1 : a.substrate.localeCompare(b.substrate)));
  const table = $("epi-others");
  const head = node("tr");
  head.appendChild(node("th", "Step"));
  for (const o of same) {
    const th = node("th");
    th.scope = "col";
    const b = node("button", `${o.substrate} (${o.won ? "won" : "not won"})`, "link");
    b.type = "button";
    b.addEventListener("click", () => openEpisode(o));
    th.appendChild(b);
    if (o === e) th.className = "current";
    head.appendChild(th);
  }
  const n = Math.max(0, ...same.map((o) => o.step_records.length));
  const rows = [];
  for (let t = 1; t <= n; t++) {
    const tr = node("tr");
    td(tr, t);
    const base = same[0] && same[0].step_records[t - 1];
    for (const o of same) {
      const s = o.step_records[t - 1];
      const c = node("td", s ? s.command : "");
      if (s && base && o !== same[0] && s.command !== base.command) c.className = "differs";
      tr.appendChild(c);
    }
    rows.push(tr);
  }
  table.querySelector("thead").replaceChildren(head);
  table.querySelector("tbody").replaceChildren(...rows);
  const differ = same.slice(1).filter((o) => o.step_records.some((s, i) => !same[0].step_records[i] ||
    s.command !== same[0].step_records[i].command)).length;
  $("epi-others-note").textContent = same.length > 1
    ? `${same.length} substrates played this game with this regime, budget and k; ${differ} of ${same.length - 1} chose differently from ${same[0].substrate} at some step (marked).`
    : "No other substrate played this game with this regime, budget and k in this run.";
}

function showStep(t) {
  const e = view.open;
  if (!e) return;
  const n = e.step_records.length;
  t = Math.min(Math.max(1, t), Math.max(1, n));
  view.step = t;
  $("epi-step").value = String(t);
  $("epi-step-out").textContent = `step ${t} of ${n}`;
  for (const tr of $("epi-steps").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.step === String(t));
  const s = e.step_records[t - 1];
  $("epi-seen").textContent = observationSeen(e, t);
  if (!s) {
    for (const id of ["epi-memory", "epi-decision", "epi-result"]) $(id).textContent = "";
    return;
  }
  $("epi-memory-h").textContent = `Memory shown: ${s.memory_tokens} tokens, ${s.shown.length} source(s)`;
  $("epi-memory").textContent = typeof s.memory === "string"
    ? (s.memory || "(empty: the substrate showed nothing)")
    : "The memory text was not kept: run with --trace to keep it. The sources it showed are listed below.";
  const ids = $("epi-shown");
  ids.replaceChildren(...s.shown.map((id) => {
    const li = node("li");
    const at = stepOfSource(e, id);
    if (at !== null && at >= 1 && at < t) {
      const b = node("button", `${id} (step ${at}: ${e.step_records[at - 1].command})`, "link");
      b.type = "button";
      b.addEventListener("click", () => showStep(at));
      li.appendChild(b);
    } else {
      li.textContent = at === 0 ? `${id} (the opening)` : at === null ? `${id} (another game: the bank)` : id;
    }
    return li;
  }));
  const decision = [`> ${s.command}`];
  if (s.invalid) decision.push("(not admissible: counted invalid)");
  if (typeof s.reply === "string") decision.push(`reply: ${s.reply}${s.mapped === false ? " (mapped to no admissible command)" : ""}`);
  decision.push(`chosen among ${s.admissible} admissible command(s); read ${ms(s.read_seconds)} ms, policy ${ms(s.policy_seconds)} ms, write ${ms(s.write_seconds)} ms, environment ${ms(s.env_seconds)} ms`);
  $("epi-decision").textContent = decision.join("\n");
  $("epi-result").textContent = `${s.observation}\n\nscore ${s.score} / ${e.max_score}`;
}

async function listServed() {
  const box = $("epi-served");
  try {
    const runs = JSON.parse(await getText("/v1/reports")).runs.filter((r) => r.kind === "agentic");
    $("epi-run").replaceChildren(...runs.map((r) => {
      const o = node("option", `${r.name === "." ? "(the reports directory)" : r.name}${r.items ? "" : " (no episodes yet)"}`);
      o.value = r.name;
      return o;
    }));
    box.hidden = runs.length === 0;
    box.dataset.runs = String(runs.length);
  } catch (_) {
    box.hidden = true;
  }
}

async function openServed(ev) {
  ev.preventDefault();
  const run = $("epi-run").value;
  try {
    loadEpisodes(await getText(`/v1/reports/${encodeURIComponent(run)}/episodes`), `run ${run}`);
  } catch (e) {
    status(e.message, true);
  }
}

async function openFile(ev) {
  ev.preventDefault();
  const f = $("epi-file").files[0];
  if (!f) { status("choose an episodes.jsonl first", true); return; }
  try {
    loadEpisodes(await f.text(), f.name);
  } catch (e) {
    status(`${f.name}: ${e.message}`, true);
  }
}

function init() {
  $("epi-served").addEventListener("submit", openServed);
  $("epi-form").addEventListener("submit", openFile);
  for (const id of ["epi-substrate", "epi-game", "epi-regime", "epi-k"]) $(id).addEventListener("change", listEpisodes);
  $("epi-step").addEventListener("input", () => showStep(Number($("epi-step").value)));
  $("epi-prev").addEventListener("click", () => showStep(view.step - 1));
  $("epi-next").addEventListener("click", () => showStep(view.step + 1));
  $("epi-view").addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "INPUT") return;
    if (ev.key === "ArrowLeft") showStep(view.step - 1);
    if (ev.key === "ArrowRight") showStep(view.step + 1);
  });
  $("key-form").addEventListener("submit", () => setTimeout(listServed, 100));
  listServed();
}

if (typeof document !== "undefined" && document.getElementById("epi-served")) init();
