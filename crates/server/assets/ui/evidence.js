// Evidence fates, the playground's block order and search, and the side by
// side's diff: what each substrate showed that the others did or did not.
// Pure DOM helpers; the page's script (app.js) calls them with API answers.

// One list item per traced source id: its fate in words (the server's `why`,
// the vocabulary of `submem bench --trace`). `jump(id)` is called when the
// user activates an id that the memory shows.
export function evidenceItems(evidence, jump) {
  return evidence.map((e) => {
    const li = document.createElement("li");
    li.dataset.source = e.source_id;
    li.dataset.shown = e.shown;
    if (e.fate) li.dataset.fate = e.fate;
    if (e.shown !== "absent" && jump) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "link";
      b.textContent = e.source_id;
      b.setAttribute("aria-label", `jump to ${e.source_id} in the memory`);
      b.addEventListener("click", () => jump(e.source_id));
      li.append(b, `: ${e.why}`);
    } else {
      li.textContent = `${e.source_id}: ${e.why}`;
    }
    return li;
  });
}

// Orders the playground's blocks (`li` with `data-order` and, when they have a
// source, `data-score`) by time or by score, and hides those that match
// neither the search's words nor its source id. Returns how many are shown.
export function arrangeBlocks(ol, order, query) {
  const items = [...ol.children];
  const score = (li) => (li.dataset.score === undefined ? -Infinity : Number(li.dataset.score));
  items.sort((a, b) => (order === "score"
    ? score(b) - score(a) || Number(a.dataset.order) - Number(b.dataset.order)
    : Number(a.dataset.order) - Number(b.dataset.order)));
  const q = query.trim().toLowerCase();
  let shown = 0;
  for (const li of items) {
    const hit = !q || (li.dataset.source || "").toLowerCase() === q ||
      li.textContent.toLowerCase().includes(q);
    li.hidden = !hit;
    if (hit) shown++;
  }
  ol.replaceChildren(...items);
  ol.dataset.visible = String(shown);
  return shown;
}

// The block of source `id` in `ol`, scrolled to and marked; null when the
// memory does not show it.
export function jumpToBlock(ol, id) {
  const li = [...ol.children].find((x) => x.dataset.source === id);
  for (const x of ol.querySelectorAll(".target")) x.classList.remove("target");
  if (!li) return null;
  li.hidden = false;
  li.classList.add("target");
  li.scrollIntoView({ block: "nearest" });
  return li;
}

// "all", "some" or "only": how many of `total` columns show a source that
// `n` of them show.
export function shareOf(n, total) {
  if (total > 1 && n >= total) return "all";
  if (n <= 1) return "only";
  return "some";
}

// The comparison aligned by source id: one row per source any column shows
// (shown by the most columns first, then by id), one cell per column with
// that source's lines there, empty where the column does not show it.
// `blocks[i]` is column i's blocks ({id, lines}).
export function alignedTable(results, blocks) {
  const count = new Map();
  blocks.forEach((bs) => {
    for (const id of new Set(bs.map((b) => b.id).filter(Boolean))) count.set(id, (count.get(id) || 0) + 1);
  });
  const ids = [...count.keys()].sort((a, b) => count.get(b) - count.get(a) || a.localeCompare(b, undefined, { numeric: true }));
  const table = document.createElement("table");
  table.id = "cmp-aligned";
  const head = document.createElement("tr");
  for (const name of ["Source", ...results.map((r) => r.substrate)]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = name;
    head.appendChild(th);
  }
  const thead = document.createElement("thead");
  thead.appendChild(head);
  const tbody = document.createElement("tbody");
  for (const id of ids) {
    const tr = document.createElement("tr");
    tr.dataset.source = id;
    tr.dataset.share = shareOf(count.get(id), results.length);
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = id;
    tr.appendChild(th);
    blocks.forEach((bs) => {
      const td = document.createElement("td");
      td.textContent = bs.filter((b) => b.id === id).map((b) => b.lines.join("\n")).join("\n");
      if (!td.textContent) td.className = "missing";
      tr.appendChild(td);
    });
    tbody.appendChild(tr);
  }
  table.append(thead, tbody);
  return table;
}
