//! Human-readable outputs: `report.md` (a table shaped like Table 1 of
//! *Harness the Memory* — P4 and E15 per substrate, best ▲ and worst ▼ marked
//! per column — followed by the LLM-free columns and per-category recall,
//! then the pictures with a line on how to read each) and the pictures
//! themselves, drawn by [`crate::charts`]: `coverage.svg`, `scatter.svg`
//! (quality against read latency) and `fates.svg`.

mod judge_report;
mod key_report;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::charts::{COVERAGE_SVG, FATES_SVG, QUALITY_LATENCY_SVG};
use crate::summary::{RunSummary, Summary};
use crate::{BenchError, Result};

/// Whether higher or lower is better for a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
    Neither,
}

struct Column {
    title: &'static str,
    metric: &'static str,
    better: Better,
    format: fn(f64) -> String,
}

fn f3(x: f64) -> String {
    format!("{x:.3}")
}
fn f2(x: f64) -> String {
    format!("{x:.2}")
}
fn ms(x: f64) -> String {
    if x * 1000.0 >= 100.0 {
        format!("{:.0}", x * 1000.0)
    } else {
        format!("{:.2}", x * 1000.0)
    }
}
fn int(x: f64) -> String {
    human(x)
}
fn secs(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 0.01 || x == 0.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

/// `1234567` → `1.23M`.
fn human(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2}G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}K", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

const COLUMNS: &[Column] = &[
    Column {
        title: "P4 judge ↑",
        metric: "P4",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "E15 s/q ↓",
        metric: "E15",
        better: Better::Lower,
        format: secs,
    },
    Column {
        title: "P6 R@k ↑",
        metric: "P6",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "P6 verb ↑",
        metric: "P6_verbatim",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "cover ↑",
        metric: "evidence_coverage",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "part ↑",
        metric: "evidence_partial",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "ans ↑",
        metric: "answer_recall",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "E4 ms ↓",
        metric: "E4",
        better: Better::Lower,
        format: ms,
    },
    Column {
        title: "E3 ms/ev ↓",
        metric: "E3",
        better: Better::Lower,
        format: ms,
    },
    Column {
        title: "E7 tok",
        metric: "E7",
        better: Better::Neither,
        format: int,
    },
    Column {
        title: "E12 tok ↓",
        metric: "E12",
        better: Better::Lower,
        format: int,
    },
    Column {
        title: "E13 calls ↓",
        metric: "E13",
        better: Better::Lower,
        format: int,
    },
    Column {
        title: "E1 bytes ↓",
        metric: "E1",
        better: Better::Lower,
        format: int,
    },
    Column {
        title: "P5",
        metric: "P5",
        better: Better::Neither,
        format: f2,
    },
    Column {
        title: "SubEM ↑",
        metric: "P12",
        better: Better::Higher,
        format: f3,
    },
    Column {
        title: "F1 ↑",
        metric: "P2",
        better: Better::Higher,
        format: f3,
    },
];

/// Renders the markdown tables of `summary` (one per dataset × budget × k).
pub fn markdown(summary: &Summary, notes: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# submem bench report\n");
    for w in judge_report::warnings(summary) {
        let _ = writeln!(out, "> {w}\n");
    }
    if let Some(line) = key_report::headline(summary) {
        let _ = writeln!(out, "{line}\n");
    }
    for n in notes {
        let _ = writeln!(out, "- {n}");
    }
    if !notes.is_empty() {
        out.push('\n');
    }
    let mut groups: BTreeMap<(String, usize, usize), Vec<&RunSummary>> = BTreeMap::new();
    for r in &summary.runs {
        groups
            .entry((r.dataset.clone(), r.budget, r.k))
            .or_default()
            .push(r);
    }
    // Which runs are packing baselines (names and aliases), built once.
    let registry = submem::Registry::default();
    for ((dataset, budget, k), runs) in &groups {
        let answered = runs
            .iter()
            .filter_map(|r| r.number("answered"))
            .fold(0.0f64, f64::max);
        let questions = runs
            .iter()
            .filter_map(|r| r.number("questions"))
            .fold(0.0f64, f64::max);
        let _ = writeln!(out, "## {dataset} · budget {budget} · k {k}\n");
        let _ = writeln!(
            out,
            "{questions:.0} questions per substrate; the reader answered {answered:.0} of them (P4, SubEM, F1 and E2 are over those only).\n"
        );
        let _ = write!(out, "| Substrate | Family |");
        for c in COLUMNS {
            let _ = write!(out, " {} |", c.title);
        }
        out.push('\n');
        out.push_str("|---|---|");
        for _ in COLUMNS {
            out.push_str("---:|");
        }
        out.push('\n');
        let extremes: Vec<Option<(f64, f64)>> = COLUMNS
            .iter()
            .map(|c| {
                let vals: Vec<f64> = runs.iter().filter_map(|r| r.number(c.metric)).collect();
                if c.better == Better::Neither || vals.len() < 2 {
                    return None;
                }
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if (hi - lo).abs() < 1e-12 {
                    return None;
                }
                Some(if c.better == Better::Higher {
                    (hi, lo)
                } else {
                    (lo, hi)
                })
            })
            .collect();
        for r in runs {
            let _ = write!(out, "| {} | {} |", r.substrate, r.family);
            for (c, ext) in COLUMNS.iter().zip(&extremes) {
                match r.number(c.metric) {
                    None => out.push_str(" n/a |"),
                    Some(v) => {
                        let mark = match ext {
                            Some((best, _)) if (v - best).abs() < 1e-12 => " ▲",
                            Some((_, worst)) if (v - worst).abs() < 1e-12 => " ▼",
                            _ => "",
                        };
                        let _ = write!(out, " {}{mark} |", (c.format)(v));
                    }
                }
            }
            out.push('\n');
        }
        write_against_packing(&mut out, runs, &registry);
        for r in runs {
            if let Some(n) = r.number("reader_rejected").filter(|n| *n > 0.0) {
                let _ = writeln!(
                    out,
                    "\n{}: the reader refused {n:.0} requests (prompt over its context, see items.jsonl `reader_error`); they count as not answered.",
                    r.substrate
                );
            }
        }
        // Substrates' own counters (LLM replies used or fallen back to rules).
        let counters: Vec<String> = runs
            .iter()
            .filter_map(|r| {
                let d = r.metrics.get("diagnostics")?.as_object()?;
                let phase = |p: &str| {
                    d.get(p)
                        .and_then(serde_json::Value::as_object)
                        .filter(|m| !m.is_empty())
                        .map(|m| {
                            let list = m
                                .iter()
                                .map(|(k, v)| format!("{k} {v}"))
                                .collect::<Vec<_>>()
                                .join(", ");
                            format!("{p}: {list}")
                        })
                };
                let parts: Vec<String> =
                    ["write", "read"].iter().filter_map(|p| phase(p)).collect();
                (!parts.is_empty()).then(|| format!("- {}: {}", r.substrate, parts.join("; ")))
            })
            .collect();
        if !counters.is_empty() {
            let _ = writeln!(
                out,
                "\nSubstrate counters (summed over conversations; `read` over all reads):\n"
            );
            for line in counters {
                let _ = writeln!(out, "{line}");
            }
        }
        // Resolutions of the events shown.
        let res: Vec<(&str, [f64; 3])> = runs
            .iter()
            .filter_map(|r| {
                let o = r.metrics.get("resolution_shares")?.as_object()?;
                let g = |k: &str| o.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
                Some((r.substrate.as_str(), [g("record"), g("excerpt"), g("raw")]))
            })
            .collect();
        if !res.is_empty() {
            let _ = writeln!(
                out,
                "\nShown events by resolution (share of the sources recalls report):\n"
            );
            out.push_str("| Substrate | record | excerpt | raw |\n|---|---:|---:|---:|\n");
            for (name, [a, b, c]) in res {
                let _ = writeln!(out, "| {name} | {} | {} | {} |", f3(a), f3(b), f3(c));
            }
        }
        // Where gold evidence went.
        let fates: Vec<(&str, &serde_json::Map<String, serde_json::Value>)> = runs
            .iter()
            .filter_map(|r| {
                Some((
                    r.substrate.as_str(),
                    r.metrics.get("evidence_fates")?.as_object()?,
                ))
            })
            .collect();
        if !fates.is_empty() {
            let traced = fates.iter().any(|(_, o)| o.contains_key("traced"));
            let _ = writeln!(
                out,
                "\nWhere gold evidence turns went (share of gold turns{}):\n",
                if traced {
                    "; the traced columns are shares of the turns the substrate traced, `--trace`"
                } else {
                    ""
                }
            );
            out.push_str("| Substrate | whole | part only | record only | absent |");
            if traced {
                out.push_str(
                    " not ranked | ranked too low | crowded out | fit, not whole | beyond top k |",
                );
            }
            out.push_str("\n|---|---:|---:|---:|---:|");
            if traced {
                out.push_str("---:|---:|---:|---:|---:|");
            }
            out.push('\n');
            let cell = |o: &serde_json::Map<String, serde_json::Value>, k: &str| {
                o.get(k)
                    .and_then(serde_json::Value::as_f64)
                    .map_or("n/a".into(), f3)
            };
            for (name, o) in fates {
                let _ = write!(
                    out,
                    "| {name} | {} | {} | {} | {} |",
                    cell(o, "whole"),
                    cell(o, "part_only"),
                    cell(o, "record_only"),
                    cell(o, "absent")
                );
                if traced {
                    let _ = write!(
                        out,
                        " {} | {} | {} | {} | {} |",
                        cell(o, "not_ranked"),
                        cell(o, "ranked_too_low"),
                        cell(o, "crowded_out"),
                        cell(o, "fit_not_whole"),
                        cell(o, "beyond_top_k")
                    );
                }
                out.push('\n');
            }
        }
        // Per-category recall.
        let mut cats: Vec<String> = runs
            .iter()
            .flat_map(|r| r.per_category.keys().cloned())
            .collect();
        cats.sort();
        cats.dedup();
        if cats.len() > 1 {
            let _ = writeln!(
                out,
                "\nP6 Recall@k (whole-evidence coverage; answer recall) per category:\n"
            );
            let _ = write!(out, "| Substrate |");
            for c in &cats {
                let _ = write!(out, " {c} |");
            }
            out.push_str("\n|---|");
            for _ in &cats {
                out.push_str("---:|");
            }
            out.push('\n');
            for r in runs {
                let _ = write!(out, "| {} |", r.substrate);
                for c in &cats {
                    let cell = r.per_category.get(c).map(|m| {
                        let p6 = m
                            .get("P6")
                            .and_then(serde_json::Value::as_f64)
                            .map_or("n/a".into(), f3);
                        let cov = m
                            .get("evidence_coverage")
                            .and_then(serde_json::Value::as_f64)
                            .map_or("n/a".into(), f3);
                        let ans = m
                            .get("answer_recall")
                            .and_then(serde_json::Value::as_f64)
                            .map_or("n/a".into(), f3);
                        format!("{p6} ({cov}; {ans})")
                    });
                    let _ = write!(out, " {} |", cell.unwrap_or_else(|| "n/a".into()));
                }
                out.push('\n');
            }
        }
        out.push('\n');
    }
    if let Some(checks) = &summary.judge_checks {
        judge_report::write_checks(&mut out, checks);
    }
    judge_report::write_judges(&mut out, summary);
    key_report::write_section(&mut out, summary);
    write_pictures(&mut out);
    out.push_str(
        "Legend: ▲ best, ▼ worst per column. Times: E15 and E14 in seconds, E3/E4 in milliseconds (means). \
`P6 verb` = Recall@k counting only events shown verbatim (not only inside an LLM-written record); `cover` = share of gold evidence turns shown whole and verbatim; `part` = shown at least in part (a verbatim run of 8+ words); `ans` = share of questions whose normalised gold answer (every element of a list) appears in the memory. \
A recall that names more events through LLM-written records than its k (FlexA-Mem's timeline) lists rather than ranks: its P6 counts the events shown verbatim. \
P8–P11 (task success, goal conditions, steps, pass@1) need a live environment: n/a here. \
Full definitions: `summary.json` and the `submem_bench::summary` docs.\n",
    );
    out
}

/// The pictures [`write_all`] draws beside the report, each with a line on
/// how to read it.
fn write_pictures(out: &mut String) {
    let _ = writeln!(out, "## Pictures\n");
    for (file, alt, how) in [
        (
            COVERAGE_SVG,
            "Evidence coverage against token budget",
            "one line per substrate over the budgets; left panel evidence shown whole, right panel whole or in part; \
higher is better, and a line that climbs with the budget is one the budget holds back (a dashed level line: a substrate \
measured at one budget only).",
        ),
        (
            QUALITY_LATENCY_SVG,
            "Quality against read latency",
            "one colour and marker per substrate, a bigger marker for a bigger budget, a substrate's budgets joined; \
up and to the left is better; the y axis names the measure (answer recall when every run has it).",
        ),
        (
            FATES_SVG,
            "Where gold evidence turns went",
            "one bar per substrate and budget, split into the shares of gold turns shown whole, shown in part only, \
present only inside an LLM-written record, and not shown; the more green, the more evidence the reader gets.",
        ),
    ] {
        let _ = writeln!(out, "![{alt}]({file})\n\n`{file}`: {how}\n");
    }
}

/// What a design is compared with the packing baselines on: evidence shown
/// whole, evidence shown whole or in part, and the gold answer in the memory.
const AGAINST_PACKING: [(&str, &str); 3] = [
    ("evidence_coverage", "whole"),
    ("evidence_partial", "whole or part"),
    ("answer_recall", "answer"),
];

/// One line per substrate of the group saying how it compares with the best
/// packing baseline ([`submem::baselines::PACKING_BASELINES`]) at the same
/// budget on each of [`AGAINST_PACKING`] (the best baseline per measure).
fn write_against_packing(out: &mut String, runs: &[&RunSummary], registry: &submem::Registry) {
    let name_of = |r: &RunSummary| {
        r.substrate
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let is_packing = |r: &RunSummary| submem::baselines::is_packing_baseline(registry, &name_of(r));
    let best: Vec<Option<(&str, f64)>> = AGAINST_PACKING
        .iter()
        .map(|(metric, _)| {
            runs.iter()
                .filter(|r| is_packing(r))
                .filter_map(|r| Some((r.substrate.as_str(), r.number(metric)?)))
                // Ties go to the baseline listed first (whole turns before pieces).
                .reduce(|best, r| if r.1 > best.1 { r } else { best })
        })
        .collect();
    let Some((best_name, best_cover)) = best[0] else {
        return;
    };
    let lines: Vec<String> = runs
        .iter()
        .filter(|r| !is_packing(r) && r.family != "baseline")
        .filter_map(|r| {
            let cover = r.number("evidence_coverage")?;
            let verdict = if cover >= best_cover {
                "beats or ties"
            } else {
                "below"
            };
            let mut line = format!(
                "- {}: {} ({verdict} packing, {:+.3})",
                r.substrate,
                f3(cover),
                cover - best_cover
            );
            for ((metric, label), best) in AGAINST_PACKING.iter().zip(&best).skip(1) {
                if let (Some(value), Some((name, top))) = (r.number(metric), best) {
                    let _ = write!(
                        line,
                        "; {label} {} ({:+.3} against {name})",
                        f3(value),
                        value - top
                    );
                }
            }
            Some(line)
        })
        .collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "
Against packing: whole-evidence coverage beside the best packing baseline here, {best_name} ({}); \
then whole-or-part coverage and answer recall beside the best baseline on each:\n",
        f3(best_cover)
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
}

/// Writes `summary.json`, `report.md` and the pictures (`coverage.svg`,
/// `scatter.svg`, `fates.svg`, see [`crate::charts`]) into `dir`; returns the
/// markdown.
pub fn write_all(dir: &Path, summary: &Summary, notes: &[String]) -> Result<String> {
    let json = serde_json::to_string_pretty(summary).map_err(|e| BenchError::Json {
        what: "summary.json".into(),
        source: e,
    })?;
    let p = dir.join("summary.json");
    std::fs::write(&p, json).map_err(|e| BenchError::io(&p, e))?;
    let md = markdown(summary, notes);
    let p = dir.join("report.md");
    std::fs::write(&p, &md).map_err(|e| BenchError::io(&p, e))?;
    crate::charts::write_all(dir, summary)?;
    Ok(md)
}

#[cfg(test)]
mod tests;
