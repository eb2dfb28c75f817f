// Bench reports: a run the server serves (`--reports DIR`) or a summary.json
// (and items.jsonl) chosen from disk, drawn as charts (charts.js), a table per
// category, the items behind a point and what every substrate showed for one
// item. `reportsView(page)` takes what it needs from the page's script (its
// API calls, table cells, status line, views), so this module imports only
// leaf modules.

import { colors, drawCoverage, drawFates, drawScatter } from "/ui/charts.js";
import { offer } from "/ui/view.js";

const $ = (id) => document.getElementById(id);

// `page`: { api, apiText, cell, status, showView, viewed({run?, point?}) }.
export function reportsView(page) {
  const { api, apiText, cell, status } = page;
  let report = { runs: [], items: [] };

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
    offer($("rep-export"), `${run.substrate}-${run.budget}.json`, "application/json",
      JSON.stringify({ run, items }, null, 2));
    page.viewed({ point: `${run.substrate}@${run.budget}` });
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
      page.showView("compare");
      $("cmp-h").scrollIntoView();
      $("cmp-question").focus();
      status("the item's question, gold ids, budget and substrates are in the side-by-side form");
    } : null;
    status(`${item.question_id}: ${same.length} substrate(s)`);
  }

  function drawReport() {
    const runs = report.runs;
    const col = colors(runs);
    $("rep-coverage").replaceChildren(drawCoverage(runs, col));
    $("rep-scatter").replaceChildren(drawScatter(runs, col, $("rep-quality").value, selectRun));
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
      page.viewed({ run: $("rep-run").value, point: "" });
    } catch (e) {
      status(e.message, true);
    }
  }

  $("rep-form").addEventListener("submit", openReport);
  $("rep-served").addEventListener("submit", openServedReport);
  $("rep-quality").addEventListener("change", () => { if (report.runs.length) drawReport(); });

  return { listServedReports, openServedReport, selectRun, runs: () => report.runs };
}
