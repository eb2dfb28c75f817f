// The bench report's charts, drawn as SVG from a summary's runs: coverage
// against budget, quality against read latency, where gold turns went. Pure
// drawing: the page's script (app.js) gives the runs, the colours and what a
// point does when picked. Imports nothing.

const SVG = "http://www.w3.org/2000/svg";
// Sixteen substrate colours, none of them a fate's colour (FATES below), so a
// sweep of every substrate gets one colour each.
export const PALETTE = ["#1f77b4", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
  "#393b79", "#ad494a", "#637939", "#7b4173", "#5254a3", "#8c6d31", "#d6616b", "#3c3c3c"];
function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

export const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

export function colors(runs) {
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

export function drawCoverage(runs, col) {
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

export function drawScatter(runs, col, quality, onPick) {
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
    const pick = () => onPick(p.r);
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

export const FATES = [["whole", "shown whole", "#2ca02c"], ["part_only", "only in part", "#98df8a"],
  ["record_only", "only through a record", "#ff7f0e"], ["absent", "not shown", "#d3d3d3"]];

// One stacked bar per run (substrate at budget): the shares of its gold turns
// by fate.
export function drawFates(runs) {
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

