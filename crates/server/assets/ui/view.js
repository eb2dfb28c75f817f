// The page's view in the URL, and its downloads. The view (namespace,
// question, budget, traced ids, the comparison's form, the report run and
// point) lives in the fragment (`#ns=demo&q=...`), so a reload or a pasted
// link opens the same view; API keys never enter it. Downloads are data:
// links built from what the page last drew. Imports nothing.

// The fragment's fields.
export function readView() {
  return Object.fromEntries(new URLSearchParams(location.hash.slice(1)));
}

// Replaces the fragment with `view` (empty fields left out), without a new
// history entry per render.
export function writeView(view) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(view)) {
    if (v !== undefined && v !== null && v !== "" && v !== false) p.set(k, String(v));
  }
  const hash = p.toString();
  history.replaceState(null, "", `${location.pathname}${location.search}${hash ? "#" + hash : ""}`);
}

// Points link `a` at `text` as a download named `name`.
export function offer(a, name, type, text) {
  a.href = `data:${type};charset=utf-8,${encodeURIComponent(text)}`;
  a.download = name;
  a.hidden = false;
}

const cellText = (v) => String(v ?? "–").replace(/\|/g, "\\|").replace(/\n/g, " ");

// A comparison as Markdown: a table of the columns' figures and each gold
// id's fate, then each substrate's memory as returned.
export function compareMarkdown(ns, data) {
  const gold = [...new Set(data.results.flatMap((r) => (r.evidence || []).map((e) => e.source_id)))];
  const lines = [
    `# ${ns}: “${data.question ?? ""}” at ${data.budget} tokens`,
    "",
    `| Substrate | Tokens | Sources | Only here | Read ms |${gold.map((g) => ` ${cellText(g)} |`).join("")}`,
    `|---|---:|---:|---:|---:|${gold.map(() => "---|").join("")}`,
  ];
  for (const r of data.results) {
    const fates = new Map((r.evidence || []).map((e) => [e.source_id, e.why]));
    const only = r.only_here ? `${r.only_here.sources} (${r.only_here.raw_tokens} tokens)` : "–";
    lines.push(`| ${cellText(r.substrate)} | ${r.tokens} | ${r.sources.length} | ${only} | ${r.latency_ms.toFixed(2)} |` +
      gold.map((g) => ` ${cellText(fates.get(g))} |`).join(""));
  }
  for (const r of data.results) {
    lines.push("", `## ${r.substrate}`, "", "```text", r.text, "```");
  }
  return lines.join("\n") + "\n";
}
