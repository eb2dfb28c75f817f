//! `submem route`: fit a routing policy from `submem bench` outputs, explain
//! a routing decision, and evaluate a router on held-out questions.
//!
//! **Inputs of `fit`.** Each `--from` directory must hold `items.jsonl` (one
//! record per substrate × question × budget × k: the per-item quality and
//! read latency) and `writes.jsonl` (the history depth of each conversation:
//! the largest `input_tokens` any substrate reported for it).
//! `summary.json` alone is not enough: its means cannot be paired per
//! question nor split into train and held-out questions.
//! The regime of an item is read from its dataset name (`alfworld`, `probes`
//! and `*-agentic` are agentic, everything else conversational), since item
//! records do not carry it. A directory of an agentic run (`submem bench
//! --dataset textworld|alfworld|scienceworld`) holds `episodes.jsonl`
//! instead: each episode is an agentic observation (dataset
//! `<env>-agentic`, the game as its conversation, the regime as its
//! question) whose quality is task success, so `fit` takes QA and agentic
//! runs together.

use clap::{Args, Subcommand};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use submem::registry::Registry;
use submem_bench::items::{read_jsonl, ItemRecord, WriteRecord};
use submem_bench::reader::{fixed_prompt_tokens, ReaderSettings};
use submem_bench::{Dataset, DatasetKind};
use submem_core::plugin::{BuildContext, SubstrateSettings};
use submem_core::{Namespace, Query, Regime, Services, Substrate};
use submem_models::Config;
use submem_router::factory::{build_router, RouterSettings};
use submem_router::{fit, FitSettings, HoldoutSplit, Observation, PolicyFile, RouteNames, Scores};

use crate::route_eval::{self, parse_metric, EvalArgs};
use crate::AnyError;

/// `submem route` actions.
#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// Fit a routing policy file from `submem bench` output directories.
    Fit(FitArgs),
    /// Explain where the router sends a question of a dataset, and why.
    Explain(ExplainArgs),
    /// Evaluate router runs against single substrates on held-out questions.
    Eval(EvalArgs),
}

/// `submem route fit` options.
#[derive(Debug, Args)]
pub struct FitArgs {
    /// Bench output directories (each with items.jsonl and writes.jsonl).
    #[arg(long, num_args = 1.., required = true, value_name = "DIR")]
    pub from: Vec<PathBuf>,
    /// Where to write the policy file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Quality metric: judge, f1, coverage, recall_verbatim, recall or task_success. Default, per
    /// regime: the first of those that every substrate has (task success first in agentic cells).
    #[arg(long)]
    pub metric: Option<String>,
    /// Never choose a candidate whose median read latency exceeds this (ms).
    #[arg(long)]
    pub latency_cap_ms: Option<f64>,
    /// Fewest paired items a candidate needs in a cell.
    #[arg(long, default_value_t = FitSettings::default().min_items)]
    pub min_items: usize,
    /// Candidates within this much quality of the best are decided by latency.
    #[arg(long, default_value_t = 0.0)]
    pub quality_margin: f64,
    /// Budget bucket edges in tokens (default 3072,6144).
    #[arg(long, value_delimiter = ',')]
    pub budget_edges: Option<Vec<usize>>,
    /// Depth edges as history tokens / budget (default 1,32).
    #[arg(long, value_delimiter = ',')]
    pub depth_edges: Option<Vec<f64>>,
    /// Hold out questions by a seeded hash (evaluate on them with `route eval`).
    #[arg(long)]
    pub holdout_seed: Option<u64>,
    /// Share of questions held out (with --holdout-seed; default 0.5).
    #[arg(long)]
    pub holdout_share: Option<f64>,
    /// The router members to fit for, comma- or `+`-separated (`m1-fill,m2,m10,flexa`); only
    /// they are candidates. Needed when the runs hold two variants of one method (m1 and m1-fill).
    #[arg(long)]
    pub members: Option<String>,
}

/// `submem route explain` options.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A fitted policy file; without it the paper-derived rules decide.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Router members, `+`-separated.
    #[arg(long, default_value = submem_router::factory::DEFAULT_MEMBERS)]
    pub members: String,
    /// Let runtime signals act (they are always shown when BM25 is a member).
    #[arg(long)]
    pub signals: bool,
    /// Dataset format: locomo, longmemeval, alfworld or probes.
    #[arg(long, default_value = "locomo")]
    pub dataset: String,
    /// Dataset file.
    #[arg(long, value_name = "PATH")]
    pub data: PathBuf,
    /// Conversation id (default: the first).
    #[arg(long)]
    pub conversation: Option<String>,
    /// Question id in the conversation (default: the first).
    #[arg(long)]
    pub question_id: Option<String>,
    /// Ask this text instead of the dataset question's.
    #[arg(long)]
    pub question: Option<String>,
    /// Token budget B.
    #[arg(long, default_value_t = 4096)]
    pub budget: usize,
    /// Top-k hint of the query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `submem route` action.
pub async fn run(
    cmd: RouteCommand,
    config: Config,
    registry: &Registry,
) -> Result<ExitCode, AnyError> {
    match cmd {
        RouteCommand::Fit(a) => fit_cmd(a, registry),
        RouteCommand::Explain(a) => explain_cmd(a, config, registry).await,
        RouteCommand::Eval(a) => route_eval::run(a),
    }
}

/// The regime of a dataset name (see the module docs).
pub fn regime_of(dataset: &str) -> Regime {
    let d = dataset.to_ascii_lowercase();
    if d == "alfworld" || d == "probes" || d.ends_with("-agentic") {
        Regime::Agentic
    } else {
        Regime::Conversational
    }
}

/// The per-item quality values of a bench item.
pub fn scores_of(i: &ItemRecord) -> Scores {
    Scores {
        judge: i.judge.map(|j| f64::from(u8::from(j))),
        f1: i.f1,
        coverage: (i.coverage.gold > 0)
            .then(|| f64::from(i.coverage.whole) / f64::from(i.coverage.gold)),
        recall_verbatim: i.recall_verbatim,
        recall: i.recall_at_k,
        task_success: i.task_success,
    }
}

fn need(dir: &Path, name: &str) -> Result<PathBuf, AnyError> {
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found: is {} a `submem bench` output directory? (fitting needs items.jsonl and writes.jsonl)",
            p.display(),
            dir.display()
        )
        .into())
    }
}

fn observation(i: &ItemRecord, history_tokens: u64) -> Observation {
    Observation {
        dataset: i.key.dataset.clone(),
        conversation: i.key.conversation.clone(),
        question_id: i.key.question_id.clone(),
        spec: i.key.substrate.clone(),
        regime: regime_of(&i.key.dataset),
        history_tokens,
        budget: i.key.budget,
        k: i.key.k,
        scores: scores_of(i),
        read_seconds: i.read_seconds,
    }
}

/// Reads one bench output directory as observations: a QA run's items, an
/// agentic run's episodes (task success), or both.
pub fn load_observations(dir: &Path) -> Result<Vec<Observation>, AnyError> {
    let episodes = route_eval::episode_items(dir)?;
    if !episodes.is_empty() && !dir.join("items.jsonl").is_file() {
        return Ok(episodes.iter().map(|(i, h)| observation(i, *h)).collect());
    }
    let mut out: Vec<Observation> = episodes.iter().map(|(i, h)| observation(i, *h)).collect();
    out.extend(load_qa_observations(dir)?);
    Ok(out)
}

fn load_qa_observations(dir: &Path) -> Result<Vec<Observation>, AnyError> {
    let items: Vec<ItemRecord> = read_jsonl(&need(dir, "items.jsonl")?)?;
    let writes: Vec<WriteRecord> = read_jsonl(&need(dir, "writes.jsonl")?)?;
    let mut depth: HashMap<(&str, &str), u64> = HashMap::new();
    for w in &writes {
        let d = depth.entry((&w.dataset, &w.conversation)).or_insert(0);
        *d = (*d).max(w.input_tokens);
    }
    items
        .iter()
        .map(|i| {
            let history_tokens = *depth
                .get(&(i.key.dataset.as_str(), i.key.conversation.as_str()))
                .ok_or_else(|| {
                    format!(
                        "{}: no writes.jsonl record for {} conversation {}",
                        dir.display(),
                        i.key.dataset,
                        i.key.conversation
                    )
                })?;
            Ok(observation(i, history_tokens))
        })
        .collect()
}

/// The routable names of `registry`.
fn registry_route_names(registry: &Registry) -> RouteNames {
    RouteNames::new(registry.route_names())
}

fn fit_settings(a: &FitArgs, registry: &Registry) -> Result<FitSettings, AnyError> {
    let mut s = FitSettings {
        metric: a.metric.as_deref().map(parse_metric).transpose()?,
        latency_cap_ms: a.latency_cap_ms,
        min_items: a.min_items,
        quality_margin: a.quality_margin,
        ..FitSettings::default()
    };
    if let Some(e) = &a.budget_edges {
        s.budget_edges = e.clone();
    }
    if let Some(e) = &a.depth_edges {
        s.depth_edges = match e.as_slice() {
            [x, y] => [*x, *y],
            _ => return Err("--depth-edges takes two numbers, e.g. 1,32".into()),
        };
    }
    let route_names = registry_route_names(registry);
    if let Some(m) = &a.members {
        let names: Vec<String> = m
            .split([',', '+'])
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                route_names
                    .canonical_name(n)
                    .map(str::to_string)
                    .ok_or_else(|| format!("--members: {n:?} is not a routable substrate"))
            })
            .collect::<Result<_, _>>()?;
        s.members = Some(names);
    }
    if a.holdout_seed.is_some() || a.holdout_share.is_some() {
        s.holdout = Some(HoldoutSplit {
            seed: a.holdout_seed.unwrap_or(HoldoutSplit::default().seed),
            share: a.holdout_share.unwrap_or(HoldoutSplit::default().share),
        });
    }
    Ok(s)
}

fn fit_cmd(a: FitArgs, registry: &Registry) -> Result<ExitCode, AnyError> {
    let settings = fit_settings(&a, registry)?;
    let mut obs = Vec::new();
    for dir in &a.from {
        obs.extend(load_observations(dir)?);
    }
    let sources = a.from.iter().map(|p| p.display().to_string()).collect();
    let policy = fit(&obs, &settings, sources, &registry_route_names(registry))?;
    std::fs::write(&a.out, policy.to_json()? + "\n")
        .map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    println!("{}", policy_table(&policy));
    println!("policy: {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// A markdown table of a policy's cells.
pub fn policy_table(p: &PolicyFile) -> String {
    let mut s = format!(
        "| regime | depth | budget | choice | k | {q} | n | p50 ms | runner-up |\n|---|---|---|---|---|---|---|---|---|\n",
        q = p.quality_metric.name()
    );
    for c in &p.cells {
        let best = c.evidence.first();
        let second = c.evidence.get(1).map_or("—".to_string(), |e| {
            format!("{} k={} {:.3}", e.spec, e.k, e.quality)
        });
        s.push_str(&format!(
            "| {} | {:?} | {} | {} | {} | {} | {} | {} | {} |\n",
            c.regime,
            c.depth,
            p.budget_label(c.budget_bucket),
            c.choice
                .as_ref()
                .map_or("(rules)", |ch| ch.substrate.as_str()),
            c.choice
                .as_ref()
                .map_or("—".into(), |ch| ch.top_k.to_string()),
            best.map_or("—".into(), |e| format!("{:.3}", e.quality)),
            best.map_or("—".into(), |e| e.n.to_string()),
            best.map_or("—".into(), |e| format!("{:.2}", e.p50_ms)),
            second
        ));
    }
    s
}

async fn explain_cmd(
    a: ExplainArgs,
    config: Config,
    registry: &Registry,
) -> Result<ExitCode, AnyError> {
    let kind = DatasetKind::parse(&a.dataset)?;
    if kind == DatasetKind::Synthetic {
        return Err(
            "route explain reads a dataset file (--dataset locomo|longmemeval|alfworld|probes)"
                .into(),
        );
    }
    if !a.data.exists() {
        return Err(format!("data file {} not found", a.data.display()).into());
    }
    let dataset = Dataset::load(kind, &a.data)?;
    let conv = match &a.conversation {
        Some(id) => dataset.conversations.iter().find(|c| &c.id == id),
        None => dataset.conversations.first(),
    }
    .ok_or("no such conversation in the dataset")?;
    let question = match &a.question_id {
        Some(id) => conv.questions.iter().find(|q| &q.id == id),
        None => conv.questions.first(),
    }
    .ok_or("no such question in the conversation")?;
    let mut question = question.clone();
    if let Some(t) = &a.question {
        question.text = t.clone();
    }

    let settings = RouterSettings {
        members: a.members.clone(),
        policy: a.policy.as_ref().map(|p| p.display().to_string()),
        signals: a.signals,
        ..RouterSettings::default()
    };
    settings.validate()?;
    let tokens = config.token_counter()?;
    let services = Services {
        llm: None,
        embedder: config.lazy_embedder(),
        tokens: tokens.clone(),
    };
    let ctx = BuildContext::new(services).with_members(registry);
    let router = build_router(&ctx, &settings)?;
    let ns = Namespace::new("explain")?;
    for batch in conv.history.batches() {
        if !batch.is_empty() {
            router.write(&ns, &batch).await?;
        }
    }
    router.manage().await?;
    let p = fixed_prompt_tokens(&question, tokens.as_ref(), &ReaderSettings::default());
    let query = match question.regime {
        Regime::Conversational => Query::question(ns, question.text.clone(), a.budget),
        Regime::Agentic => Query::agentic(
            ns,
            question.text.clone(),
            question.newest.clone().unwrap_or_default(),
            a.budget,
        ),
    }
    .with_top_k(a.k)
    .with_fixed_prompt_tokens(p);
    let explanation = router.explain(&query).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&explanation)?);
    } else {
        println!("question {} of {}: {}", question.id, conv.id, question.text);
        print!("{explanation}");
    }
    Ok(ExitCode::SUCCESS)
}
