//! The agentic report: one row per substrate × regime × budget × `k`, with
//! the task metrics (P8 task success with its 95 % Wilson interval, P9
//! goal-condition success, P10 steps to goal on successes, P_avg partial
//! success, invalid-command rate, history length) and the efficiency
//! metrics of the QA runs (E1–E15, per-step read latency), written as
//! `agentic.json`, `report.md` and `k.svg` (task success against `k`, one
//! line per substrate: the paper's Figure 4, bottom).
//!
//! Definitions here: P9 is the mean of final score / max score (ALFWorld
//! games score 1 on a win, so there P9 = P8); P_avg is the mean of the best
//! score / max score an episode reached at any step; E2 is read + policy
//! seconds per step; E14 the episodes' wall seconds; E15 = E14 / steps.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use submem::{LatencyStats, PhaseStats};

use super::episode::{AgenticRegime, EpisodeRecord};
use super::BankRecord;
use crate::{BenchError, Result};

/// File name of the summary.
pub const SUMMARY_FILE: &str = "agentic.json";
/// File name of the report.
pub const REPORT_FILE: &str = "report.md";
/// File name of the task-success-against-k chart.
pub const K_SVG: &str = "k.svg";

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticRow {
    /// The substrate spec.
    pub substrate: String,
    /// Its family.
    pub family: String,
    /// Within or cross episode.
    pub regime: AgenticRegime,
    /// Budget B.
    pub budget: usize,
    /// Retrieval breadth.
    pub k: usize,
    /// Episodes.
    pub episodes: usize,
    /// Episodes won.
    pub successes: usize,
    /// P8 task success.
    pub task_success: f64,
    /// P8's 95 % Wilson interval.
    pub task_success_ci: (f64, f64),
    /// P9 goal-condition success.
    pub goal_condition: f64,
    /// P10 mean steps on successes (`None` without a success).
    pub steps_to_goal: Option<f64>,
    /// P_avg partial success.
    pub partial: f64,
    /// Mean steps per episode (successes and failures).
    pub mean_steps: f64,
    /// Invalid commands / steps.
    pub invalid_rate: f64,
    /// Unmapped chat replies / steps.
    pub unmapped_rate: f64,
    /// Mean history tokens at the end of an episode.
    pub history_tokens: f64,
    /// Largest history of an episode.
    pub max_history_tokens: usize,
    /// E1 mean memory bytes at the end.
    pub memory_bytes: f64,
    /// E2 read + policy seconds per step.
    pub step_latency: LatencyStats,
    /// E3 write seconds per unit.
    pub write_latency: LatencyStats,
    /// E4 read seconds per step.
    pub read_latency: LatencyStats,
    /// E5 / E6 write-phase LLM tokens / calls (all episodes).
    pub write_tokens: u64,
    /// E6.
    pub write_calls: u64,
    /// E7 mean memory tokens shown per step.
    pub retrieved_tokens: f64,
    /// E8 / E9 read-phase LLM tokens / calls of the substrate.
    pub read_tokens: u64,
    /// E9.
    pub read_calls: u64,
    /// E10 / E11 management tokens / calls.
    pub manage_tokens: u64,
    /// E11.
    pub manage_calls: u64,
    /// The policy's LLM tokens / calls (the "generate" half of E2).
    pub policy_tokens: u64,
    /// Policy calls.
    pub policy_calls: u64,
    /// E14 wall seconds over the episodes.
    pub wall_seconds: f64,
    /// E15 wall seconds per step.
    pub seconds_per_step: f64,
}

/// The whole agentic summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticSummary {
    /// The environment.
    pub env: String,
    /// The policy.
    pub policy: String,
    /// The step cap.
    pub step_cap: u32,
    /// Games played.
    pub games: Vec<String>,
    /// Rows.
    pub rows: Vec<AgenticRow>,
    /// The training banks' costs (cross-episode).
    pub banks: Vec<BankRecord>,
    /// Seconds of an environment step as the environment spent them.
    pub env_step: LatencyStats,
    /// Seconds the bridge added to a step (the harness's wait minus the
    /// environment's own time: pipes, JSON, Python's loop).
    pub bridge_overhead: LatencyStats,
}

/// Wilson score interval at 95 % (the harness's one, [`crate::metrics::wilson`]).
pub use crate::metrics::stats::wilson;

fn add(a: &mut PhaseStats, b: &PhaseStats) {
    a.llm_calls += b.llm_calls;
    a.input_tokens += b.input_tokens;
    a.output_tokens += b.output_tokens;
}

/// Summarises `episodes` (one environment, one policy).
pub fn summarize(episodes: &[EpisodeRecord], banks: &[BankRecord]) -> AgenticSummary {
    let mut groups: BTreeMap<(String, AgenticRegime, usize, usize), Vec<&EpisodeRecord>> =
        BTreeMap::new();
    for e in episodes {
        groups
            .entry((e.substrate.clone(), e.regime, e.budget, e.k))
            .or_default()
            .push(e);
    }
    let mut games: Vec<String> = episodes.iter().map(|e| e.game.clone()).collect();
    games.sort();
    games.dedup();
    let rows = groups
        .into_iter()
        .map(|((substrate, regime, budget, k), eps)| {
            let n = eps.len();
            let mean = |f: &dyn Fn(&EpisodeRecord) -> f64| {
                eps.iter().map(|e| f(e)).sum::<f64>() / n as f64
            };
            let successes = eps.iter().filter(|e| e.won).count();
            let won_steps: Vec<f64> = eps
                .iter()
                .filter(|e| e.won)
                .map(|e| f64::from(e.steps))
                .collect();
            let steps: u64 = eps.iter().map(|e| u64::from(e.steps)).sum();
            let per_step = |f: &dyn Fn(&super::episode::StepRecord) -> f64| {
                let v: Vec<f64> = eps
                    .iter()
                    .flat_map(|e| e.step_records.iter().map(f))
                    .collect();
                LatencyStats::from_samples(&v)
            };
            let (mut w, mut r, mut m) = (
                PhaseStats::default(),
                PhaseStats::default(),
                PhaseStats::default(),
            );
            for e in &eps {
                add(&mut w, &e.write);
                add(&mut r, &e.read);
                add(&mut m, &e.manage);
            }
            let wall: f64 = eps.iter().map(|e| e.wall_seconds).sum();
            let shown: Vec<f64> = eps
                .iter()
                .flat_map(|e| e.step_records.iter().map(|s| s.memory_tokens as f64))
                .collect();
            AgenticRow {
                family: eps[0].family.clone(),
                substrate,
                regime,
                budget,
                k,
                episodes: n,
                successes,
                task_success: successes as f64 / n as f64,
                task_success_ci: wilson(successes, n),
                goal_condition: mean(&|e| e.goal_fraction()),
                steps_to_goal: (!won_steps.is_empty())
                    .then(|| won_steps.iter().sum::<f64>() / won_steps.len() as f64),
                partial: mean(&|e| e.best_fraction),
                mean_steps: mean(&|e| f64::from(e.steps)),
                invalid_rate: eps.iter().map(|e| u64::from(e.invalid_steps)).sum::<u64>() as f64
                    / steps.max(1) as f64,
                unmapped_rate: eps
                    .iter()
                    .map(|e| u64::from(e.unmapped_replies))
                    .sum::<u64>() as f64
                    / steps.max(1) as f64,
                history_tokens: mean(&|e| e.history_tokens as f64),
                max_history_tokens: eps.iter().map(|e| e.history_tokens).max().unwrap_or(0),
                memory_bytes: mean(&|e| e.memory_bytes as f64),
                step_latency: per_step(&|s| s.read_seconds + s.policy_seconds),
                write_latency: per_step(&|s| s.write_seconds),
                read_latency: per_step(&|s| s.read_seconds),
                write_tokens: w.total_tokens(),
                write_calls: w.llm_calls,
                retrieved_tokens: if shown.is_empty() {
                    0.0
                } else {
                    shown.iter().sum::<f64>() / shown.len() as f64
                },
                read_tokens: r.total_tokens(),
                read_calls: r.llm_calls,
                manage_tokens: m.total_tokens(),
                manage_calls: m.llm_calls,
                policy_tokens: eps.iter().map(|e| e.policy_tokens).sum(),
                policy_calls: eps.iter().map(|e| e.policy_calls).sum(),
                wall_seconds: wall,
                seconds_per_step: wall / steps.max(1) as f64,
            }
        })
        .collect();
    let steps = || episodes.iter().flat_map(|e| e.step_records.iter());
    let own: Vec<f64> = steps().map(|s| s.env_own_seconds).collect();
    let overhead: Vec<f64> = steps()
        .map(|s| (s.env_seconds - s.env_own_seconds).max(0.0))
        .collect();
    AgenticSummary {
        env_step: LatencyStats::from_samples(&own),
        bridge_overhead: LatencyStats::from_samples(&overhead),
        env: episodes.first().map(|e| e.env.clone()).unwrap_or_default(),
        policy: episodes
            .first()
            .map(|e| e.policy.clone())
            .unwrap_or_default(),
        step_cap: episodes.first().map_or(0, |e| e.step_cap),
        games,
        rows,
        banks: banks.to_vec(),
    }
}

fn ms(s: f64) -> String {
    let ms = s * 1000.0;
    if ms < 1.0 {
        format!("{ms:.3}")
    } else if ms < 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// The report's Markdown.
pub fn markdown(s: &AgenticSummary, notes: &[String]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Agentic run: {} · policy {}\n", s.env, s.policy);
    let _ = writeln!(
        md,
        "{} games, step cap {}. Every substrate steered the same policy with the same template; `nomem` \
         shows it an empty memory block. P9 = mean final score / max score; P_avg = mean best score / max \
         score reached; E2 = read + policy per step.\n",
        s.games.len(),
        s.step_cap
    );
    let _ = writeln!(
        md,
        "- environment step: {} ms p50 ({} ms p90) in the environment, plus {} ms p50 ({} ms p90) of bridge overhead",
        ms(s.env_step.p50),
        ms(s.env_step.p90),
        ms(s.bridge_overhead.p50),
        ms(s.bridge_overhead.p90)
    );
    for n in notes {
        let _ = writeln!(md, "- {n}");
    }
    if !notes.is_empty() {
        md.push('\n');
    }
    let _ = writeln!(md, "## Task performance\n");
    let _ = writeln!(md, "| substrate | regime | B | k | episodes | P8 TSR % [95 % CI] | P9 GC % | P10 steps\\|S | P_avg % | steps | invalid % | unmapped % | history tokens (mean / max) |");
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &s.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} [{}, {}] | {} | {} | {} | {:.1} | {} | {} | {:.0} / {} |",
            r.substrate,
            r.regime.name(),
            r.budget,
            r.k,
            r.episodes,
            pct(r.task_success),
            pct(r.task_success_ci.0),
            pct(r.task_success_ci.1),
            pct(r.goal_condition),
            r.steps_to_goal.map_or("n/a".into(), |v| format!("{v:.1}")),
            pct(r.partial),
            r.mean_steps,
            pct(r.invalid_rate),
            pct(r.unmapped_rate),
            r.history_tokens,
            r.max_history_tokens
        );
    }
    let _ = writeln!(md, "\n## Efficiency\n");
    let _ = writeln!(md, "| substrate | regime | B | k | E1 bytes | E2 p50 / p90 ms | E3 p50 ms | E4 p50 / p90 ms | E5 / E6 | E7 tokens | E8 / E9 | E10 / E11 | policy tokens / calls | E12 / E13 | E14 s | E15 s/step |");
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---|---:|---|---|---:|---|---|---|---|---:|---:|"
    );
    for r in &s.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {} / {} | {} | {} / {} | {} / {} | {:.0} | {} / {} | {} / {} | {} / {} | {} / {} | {:.1} | {:.3} |",
            r.substrate,
            r.regime.name(),
            r.budget,
            r.k,
            r.memory_bytes,
            ms(r.step_latency.p50),
            ms(r.step_latency.p90),
            ms(r.write_latency.p50),
            ms(r.read_latency.p50),
            ms(r.read_latency.p90),
            r.write_tokens,
            r.write_calls,
            r.retrieved_tokens,
            r.read_tokens,
            r.read_calls,
            r.manage_tokens,
            r.manage_calls,
            r.policy_tokens,
            r.policy_calls,
            r.write_tokens + r.read_tokens + r.manage_tokens,
            r.write_calls + r.read_calls + r.manage_calls,
            r.wall_seconds,
            r.seconds_per_step
        );
    }
    if !s.banks.is_empty() {
        let _ = writeln!(md, "\n## Training banks (cross-episode)\n");
        let _ = writeln!(md, "| substrate | games | units | write s | manage s | write tokens / calls | manage tokens / calls | bytes |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---|---|---:|");
        for b in &s.banks {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {:.2} | {} / {} | {} / {} | {} |",
                b.substrate,
                b.games.len(),
                b.events,
                b.write_seconds,
                b.manage_seconds,
                b.write.total_tokens(),
                b.write.llm_calls,
                b.manage.total_tokens(),
                b.manage.llm_calls,
                b.memory_bytes
            );
        }
    }
    let _ = writeln!(md, "\n![task success against k]({K_SVG})");
    md
}

/// Task success against `k`, a line per substrate × regime × budget.
pub fn k_svg(s: &AgenticSummary, path: &Path) -> Result<()> {
    draw_k(s, path).map_err(|reason| BenchError::Plot {
        path: path.to_path_buf(),
        reason,
    })
}

fn draw_k(s: &AgenticSummary, path: &Path) -> std::result::Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &s.rows {
        let name = format!("{} · {} · B={}", r.substrate, r.regime.name(), r.budget);
        lines
            .entry(name)
            .or_default()
            .push((r.k as f64, r.task_success));
    }
    let kmax = s.rows.iter().map(|r| r.k).max().unwrap_or(1).max(2) as f64;
    let root = SVGBackend::new(path, (760, 420 + 18 * lines.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (top, legend) = root.split_vertically(420);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("Task success against k · {} · {}", s.env, s.policy),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.5..kmax + 0.5, 0.0..1.0)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("k (retrieval breadth)")
        .y_desc("task success (P8)")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, mut pts)) in lines.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(|x| e(&x))?;
        let y = 8 + 18 * i as i32;
        legend
            .draw(&Rectangle::new([(20, y), (36, y + 10)], color.filled()))
            .map_err(|x| e(&x))?;
        legend
            .draw(&Text::new(name, (44, y), ("sans-serif", 13)))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))
}

/// Writes `agentic.json`, `report.md` and `k.svg` into `dir`; the report's text.
pub fn write_all(dir: &Path, s: &AgenticSummary, notes: &[String]) -> Result<String> {
    let json = serde_json::to_string_pretty(s).map_err(|e| BenchError::Json {
        what: "the agentic summary".into(),
        source: e,
    })?;
    let p = dir.join(SUMMARY_FILE);
    std::fs::write(&p, json).map_err(|e| BenchError::io(&p, e))?;
    let md = markdown(s, notes);
    let p = dir.join(REPORT_FILE);
    std::fs::write(&p, &md).map_err(|e| BenchError::io(&p, e))?;
    k_svg(s, &dir.join(K_SVG))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_brackets_the_rate() {
        let (lo, hi) = wilson(5, 10);
        assert!(lo < 0.5 && hi > 0.5 && lo > 0.2 && hi < 0.8, "{lo} {hi}");
        assert_eq!(wilson(0, 0), (0.0, 0.0));
        let (lo, hi) = wilson(0, 20);
        assert_eq!(lo, 0.0);
        assert!(hi > 0.1 && hi < 0.2);
    }
}
