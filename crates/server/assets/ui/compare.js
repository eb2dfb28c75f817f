// Side by side: one namespace's history rendered by up to four substrates,
// each gold id's fate, what each column shows that others do not, and the
// builds of substrates the server has not built yet, followed as jobs with
// their progress and a cancel. `compareView(page)` takes what it needs from
// the page's script (its API call, status line and view keeping), so this
// module imports only leaf modules.

import { alignedTable, shareOf } from "/ui/evidence.js";
import { compareMarkdown, offer } from "/ui/view.js";

const $ = (id) => document.getElementById(id);
const idList = (id) => $(id).value.split(",").map((x) => x.trim()).filter(Boolean);

// `page`: { api, need, nsPath, status, contentsOf, blocksOf, drew(fields) }.
export function compareView(page) {
  const { api, need, nsPath, status, contentsOf, blocksOf } = page;
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
      page.drew({ cs: $("cmp-substrates").value, cq: body.question, cb: body.budget, cg: $("cmp-gold").value,
        ca: $("cmp-align").checked ? "1" : "" });
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

  return compare;
}
