//! `submem route eval`: router runs against single substrates on the
//! questions a policy was **not** fitted on.
//!
//! The held-out questions are those the policy file's split
//! ([`submem_router::HoldoutSplit`]) holds out; `--all-items` evaluates every
//! item instead, for a policy fitted on other data. Per budget (and pooled
//! over budgets) each router is paired with each single substrate through
//! [`submem_bench::compare::compare_on`] (exact McNemar on items whose score
//! is 1, paired bootstrap of the mean difference), on the policy's quality
//! metric unless `--metric` says otherwise; median read latencies are over
//! the same held-out items.

use clap::Args;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use submem::LatencyStats;
use submem_bench::agentic::episode::EpisodeRecord;
use submem_bench::agentic::EPISODES_FILE;
use submem_bench::compare::{compare_on, Comparison, Scorer};
use submem_bench::items::{read_jsonl, ItemRecord};
use submem_router::{HoldoutSplit, PolicyFile, QualityMetric};

use crate::AnyError;

/// `submem route eval` options.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The bench output directory with router and single-substrate runs.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The policy file: its split selects the held-out questions, its metric the score.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Evaluate every item (the policy was fitted on other data).
    #[arg(long)]
    pub all_items: bool,
    /// A router spec as written in the run (repeatable; default: every spec starting with `router`).
    #[arg(long)]
    pub router: Vec<String>,
    /// A single substrate to compare with (repeatable; default: every other spec).
    #[arg(long)]
    pub against: Vec<String>,
    /// Score: judge, f1, coverage, recall_verbatim, recall or task_success (default: the policy's, else
    /// coverage; task_success for an agentic run).
    #[arg(long)]
    pub metric: Option<String>,
    /// Print JSON instead of a markdown table.
    #[arg(long)]
    pub json: bool,
}

/// One router-vs-substrate comparison.
#[derive(Debug, Serialize)]
pub struct EvalRow {
    /// Budget, `None` pooled over budgets.
    pub budget: Option<usize>,
    /// Median read latency of the router, ms.
    pub router_p50_ms: f64,
    /// Median read latency of the other, ms.
    pub other_p50_ms: f64,
    /// Whether the other is the best single substrate at this budget.
    pub best_single: bool,
    /// The paired comparison (router is `a`).
    pub comparison: Comparison,
}

fn scorer(metric: QualityMetric) -> Scorer {
    match metric {
        QualityMetric::Judge => |i| i.judge.map(|j| f64::from(u8::from(j))),
        QualityMetric::F1 => |i| i.f1,
        QualityMetric::Coverage => |i| {
            (i.coverage.gold > 0).then(|| f64::from(i.coverage.whole) / f64::from(i.coverage.gold))
        },
        QualityMetric::RecallVerbatim => |i| i.recall_verbatim,
        QualityMetric::Recall => |i| i.recall_at_k,
        QualityMetric::TaskSuccess => |i| i.task_success,
    }
}

fn p50_ms(items: &[&ItemRecord], label: &str) -> f64 {
    let s: Vec<f64> = items
        .iter()
        .filter(|i| i.key.substrate == label)
        .map(|i| i.read_seconds)
        .collect();
    LatencyStats::from_samples(&s).p50 * 1000.0
}

/// Evaluates the routers of `items` against the other substrates.
pub fn evaluate(
    items: &[ItemRecord],
    split: Option<HoldoutSplit>,
    routers: &[String],
    against: &[String],
    metric: QualityMetric,
) -> Result<Vec<EvalRow>, AnyError> {
    let held: Vec<ItemRecord> = items
        .iter()
        .filter(|i| {
            split.is_none_or(|s| {
                s.is_held_out(&i.key.dataset, &i.key.conversation, &i.key.question_id)
            })
        })
        .cloned()
        .collect();
    if held.is_empty() {
        return Err("no held-out items in this run".into());
    }
    let budgets: BTreeSet<usize> = held.iter().map(|i| i.key.budget).collect();
    let score = scorer(metric);
    let mut rows = Vec::new();
    let slices = budgets
        .iter()
        .map(|b| Some(*b))
        .chain(std::iter::once(None));
    for budget in slices {
        let sub: Vec<ItemRecord> = held
            .iter()
            .filter(|i| budget.is_none_or(|b| i.key.budget == b))
            .cloned()
            .collect();
        let refs: Vec<&ItemRecord> = sub.iter().collect();
        let mean = |label: &str| {
            let v: Vec<f64> = sub
                .iter()
                .filter(|i| i.key.substrate == label)
                .filter_map(score)
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let best = against
            .iter()
            .filter_map(|a| mean(a).map(|m| (a, m)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(a, _)| a.clone());
        for r in routers {
            for a in against {
                let comparison = compare_on(&sub, r, a, metric.name(), score)?;
                rows.push(EvalRow {
                    budget,
                    router_p50_ms: p50_ms(&refs, r),
                    other_p50_ms: p50_ms(&refs, a),
                    best_single: best.as_deref() == Some(a.as_str()),
                    comparison,
                });
            }
        }
    }
    Ok(rows)
}

/// The rows as a markdown table.
pub fn eval_table(rows: &[EvalRow]) -> String {
    let mut s = String::from(
        "| B | router | vs | n | router q | other q | router p50 ms | other p50 ms | McNemar b/c, p | Δ q [95% CI] |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let c = &r.comparison;
        s.push_str(&format!(
            "| {} | {} | {}{} | {} | {:.3} | {:.3} | {:.2} | {:.2} | {}/{}, {:.4} | {:+.3} [{:+.3}, {:+.3}] |\n",
            r.budget.map_or("all".into(), |b| b.to_string()),
            c.a,
            c.b,
            if r.best_single { " ★" } else { "" },
            c.pairs,
            c.mean_a,
            c.mean_b,
            r.router_p50_ms,
            r.other_p50_ms,
            c.mcnemar.b,
            c.mcnemar.c,
            c.mcnemar.p_value,
            c.bootstrap.difference,
            c.bootstrap.low,
            c.bootstrap.high
        ));
    }
    s
}

/// The episodes of an agentic run directory (`episodes.jsonl`), each as an
/// item ([`EpisodeRecord::as_item`]) with its final history length.
pub fn episode_items(dir: &Path) -> Result<Vec<(ItemRecord, u64)>, AnyError> {
    let path = dir.join(EPISODES_FILE);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let episodes: Vec<EpisodeRecord> = read_jsonl(&path)?;
    Ok(episodes
        .iter()
        .map(|e| (e.as_item(), e.history_tokens as u64))
        .collect())
}

/// Runs `submem route eval`.
pub fn run(a: EvalArgs) -> Result<ExitCode, AnyError> {
    let path = a.out.join("items.jsonl");
    let episodes: Vec<ItemRecord> = episode_items(&a.out)?.into_iter().map(|(i, _)| i).collect();
    if !path.is_file() && episodes.is_empty() {
        return Err(format!(
            "{} not found: is {} a `submem bench` output directory?",
            path.display(),
            a.out.display()
        )
        .into());
    }
    let mut items: Vec<ItemRecord> = if path.is_file() {
        read_jsonl(&path)?
    } else {
        Vec::new()
    };
    let agentic_run = items.is_empty();
    items.extend(episodes);
    let policy = a.policy.as_deref().map(PolicyFile::load).transpose()?;
    let split = match (&policy, a.all_items) {
        (_, true) => None,
        (Some(p), false) => Some(p.settings.holdout.ok_or(
            "the policy was fitted without a held-out split (--holdout-seed); pass --all-items if this run's questions are disjoint from the fit's",
        )?),
        (None, false) => return Err("give --policy (for its held-out split) or --all-items".into()),
    };
    let metric = match (&a.metric, &policy) {
        (Some(m), _) => parse_metric(m)?,
        (None, Some(p)) if agentic_run => p.agentic_quality_metric.unwrap_or(p.quality_metric),
        (None, Some(p)) => p.quality_metric,
        (None, None) if agentic_run => QualityMetric::TaskSuccess,
        (None, None) => QualityMetric::Coverage,
    };
    let labels: BTreeSet<&str> = items.iter().map(|i| i.key.substrate.as_str()).collect();
    let routers: Vec<String> = if a.router.is_empty() {
        labels
            .iter()
            .filter(|l| l.starts_with("router"))
            .map(|l| l.to_string())
            .collect()
    } else {
        a.router.clone()
    };
    let against: Vec<String> = if a.against.is_empty() {
        labels
            .iter()
            .filter(|l| !routers.iter().any(|r| r == *l))
            .map(|l| l.to_string())
            .collect()
    } else {
        a.against.clone()
    };
    if routers.is_empty() || against.is_empty() {
        return Err(format!(
            "need router and single-substrate runs in {}; it has: {}",
            a.out.display(),
            labels.into_iter().collect::<Vec<_>>().join(", ")
        )
        .into());
    }
    let rows = evaluate(&items, split, &routers, &against, metric)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "held-out evaluation on {} ({}), metric {}; ★ = best single substrate at that budget",
            display(&a.out),
            split.map_or("every item".into(), |s| format!(
                "split seed {}, held-out share {}",
                s.seed, s.share
            )),
            metric.name()
        );
        print!("{}", eval_table(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// Parses `--metric`.
pub fn parse_metric(s: &str) -> Result<QualityMetric, AnyError> {
    QualityMetric::parse(s).ok_or_else(|| {
        format!("unknown metric {s:?}; known: judge, f1, coverage, recall_verbatim, recall, task_success").into()
    })
}
