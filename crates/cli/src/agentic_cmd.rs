//! `submem bench --dataset textworld|alfworld|scienceworld`: the live
//! agentic regime ([`submem_bench::agentic`]): games, policy, regimes and
//! the bridge's settings from the arguments, then the episode loop and the
//! agentic report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::agentic::bridge::{BridgeConfig, EnvKind};
use submem_bench::agentic::episode::AgenticRegime;
use submem_bench::agentic::games::{default_specs, games_from_dir, games_from_specs};
use submem_bench::agentic::policy::{LlmPolicy, Policy, RandomPolicy, WalkthroughPolicy};
use submem_bench::agentic::{report, run_episodes, AgenticOptions};
use submem_models::{Config, LlmKind, ModelLocator};

use crate::agentic_args::{PolicyChoice, RegimeChoice};
use crate::bench_cmd::{timestamp, BenchArgs};
use crate::run_info;
use crate::AnyError;

/// Whether `args` asks for a live environment rather than a QA dataset.
pub fn is_live(args: &BenchArgs) -> bool {
    match EnvKind::parse(&args.dataset) {
        // `--dataset alfworld --data trajectories.json`: recorded trajectories and probes.
        Some(EnvKind::Alfworld) => args.data.as_ref().is_none_or(|d| d.is_dir()),
        Some(_) => true,
        None => false,
    }
}

fn seconds(v: f64, flag: &str) -> Result<Duration, AnyError> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!("{flag} must be between 0 and 86400 seconds, got {v}").into());
    }
    Ok(Duration::from_secs_f64(v))
}

/// Runs a live agentic bench.
pub async fn run(
    args: BenchArgs,
    mut config: Config,
    quiet: bool,
    registry: Arc<Registry>,
) -> Result<ExitCode, AnyError> {
    let Some(env) = EnvKind::parse(&args.dataset) else {
        return Err(format!("{} is not a live environment", args.dataset).into());
    };
    if args.answer_key.answer_key.is_some() {
        return Err(
            "--answer-key is for question datasets: a live environment has no gold answers".into(),
        );
    }
    if let Some(flag) = args.prompts.given() {
        return Err(format!(
            "{flag} is for question datasets: in a live environment the agent's policy asks \
with its own prompt"
        )
        .into());
    }
    let a = &args.agentic;
    // The packing baselines belong to QA reports; an agentic run plays what it is told.
    let specs = SubstrateSpec::parse_list(&args.substrates)?;
    for s in &specs {
        registry.check(s)?;
    }
    let games = match &args.data {
        Some(dir) => games_from_dir(env, dir)?,
        None => games_from_specs(env, a.games.as_deref().unwrap_or(default_specs(env)))?,
    };
    let regimes = match a.regime {
        RegimeChoice::Within => vec![AgenticRegime::Within],
        RegimeChoice::Cross => vec![AgenticRegime::Cross],
        RegimeChoice::Both => vec![AgenticRegime::Within, AgenticRegime::Cross],
    };
    let train_games = match &a.train_games {
        Some(spec) => games_from_specs(env, spec)?,
        None => Vec::new(),
    };
    if let Some(g) = train_games
        .iter()
        .find(|t| games.iter().any(|g| g.id == t.id))
    {
        return Err(format!(
            "training game {} is also a test game: choose other seeds",
            g.id
        )
        .into());
    }
    let cache = ModelLocator::new(&config.models).cache_dir()?;
    let out = args.out.clone().unwrap_or_else(|| {
        let shard = args
            .shard
            .map(|s| format!("-shard-{}-of-{}", s.index(), s.count()))
            .unwrap_or_default();
        PathBuf::from("bench-out").join(format!("{}-{env}{shard}", timestamp()))
    });
    let mut bridge = BridgeConfig::new(&cache);
    bridge.step_timeout = seconds(a.step_timeout, "--step-timeout")?;
    bridge.make_timeout = seconds(a.make_timeout, "--make-timeout")?;
    let abort_after = crate::bench_cmd::abort_after()?;
    let opts = AgenticOptions {
        budgets: args.budget.clone(),
        ks: if args.k.is_empty() {
            vec![1, 5]
        } else {
            args.k.clone()
        },
        regimes,
        train_games,
        step_cap: a.steps,
        manage_every: a.manage_every,
        seed: args.seed,
        jobs: args.jobs,
        out: out.clone(),
        trace: args.trace,
        progress: !quiet,
        abort_after,
        bridge,
        shard: args.shard,
    };
    opts.validate()?;
    if args.check {
        println!(
            "submem bench: arguments ok: {} games of {env}, {} substrates, budgets {:?}, k {:?}, policy {:?}",
            games.len(),
            specs.len(),
            opts.budgets,
            opts.ks,
            a.policy
        );
        return Ok(ExitCode::SUCCESS);
    }

    // Memory writers: rule writers unless asked (as on the synthetic set:
    // the 135M model writing memory at every step would take most of a run).
    config.services.memory_llm = match args.memory_llm {
        Some(c) => c.into(),
        None => LlmKind::None,
    };
    let services = config.lazy_services()?;
    let policy: Arc<dyn Policy> = match a.policy {
        PolicyChoice::Walkthrough => Arc::new(WalkthroughPolicy),
        PolicyChoice::Random => Arc::new(RandomPolicy),
        PolicyChoice::Llm => {
            let kind: LlmKind = args.reader.map_or(LlmKind::Local, Into::into);
            let llm = config
                .lazy_llm(kind, "policy")
                .ok_or("--policy llm needs a reader: --reader local or --reader openai")?;
            Arc::new(LlmPolicy::new(llm, services.tokens.clone()))
        }
    };
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut notes = vec![
        format!(
            "environment {env}: {} games ({})",
            games.len(),
            games
                .iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!("policy: {}", policy.name()),
        match services.llm.as_ref() {
            Some(l) => format!("memory LLM: {}", l.name()),
            None => {
                "memory LLM: none (rule writers; `--memory-llm local` brings the local model in)"
                    .into()
            }
        },
    ];
    if !opts.train_games.is_empty() {
        notes.push(format!(
            "training games (cross-episode bank): {}",
            opts.train_games
                .iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let info = serde_json::json!({
        "dataset": env.name(),
        "data": args.data,
        "games": games.iter().map(|g| g.id.clone()).collect::<Vec<_>>(),
        "train_games": opts.train_games.iter().map(|g| g.id.clone()).collect::<Vec<_>>(),
        "substrates": specs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "budgets": opts.budgets,
        "k": opts.ks,
        "regimes": opts.regimes,
        "policy": policy.name(),
        "memory_llm": services.llm.as_ref().map(|l| l.name().to_string()),
        "steps": opts.step_cap,
        "manage_every": opts.manage_every,
        "seed": opts.seed,
        (run_info::SHARD): opts.shard.map(|s| s.to_string()),
        (run_info::NOTES): notes,
    });
    run_info::write(&out, &info)?;
    let outcome = run_episodes(games, specs, registry, services, policy, opts).await?;
    if outcome.resumed > 0 {
        notes.push(format!(
            "resumed: {} episodes were already done, {} added",
            outcome.resumed, outcome.new_episodes
        ));
    }
    notes.push(format!(
        "wall time of this run: {:.1} s",
        outcome.wall_seconds
    ));
    for s in &outcome.skipped {
        notes.push(format!("skipped {s}"));
    }
    for f in &outcome.failures {
        notes.push(format!("failed: {f}"));
    }
    let summary = report::summarize(&outcome.episodes, &outcome.banks);
    let md = report::write_all(&out, &summary, &notes)?;
    finish_agentic(&out, &md, &outcome.failures, outcome.episodes.is_empty())
}

fn jsonl<T: serde::Serialize>(path: &Path, records: &[T]) -> Result<(), AnyError> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()).into())
}

/// `submem bench merge` of agentic shard directories: their episodes and
/// banks merged into `out`, with the summary and report one run writes.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<ExitCode, AnyError> {
    let infos: Vec<serde_json::Value> = dirs
        .iter()
        .map(|d| run_info::read(d))
        .collect::<Result<_, _>>()?;
    let Some(first) = infos.first() else {
        return Err("no shard directory given".into());
    };
    let count = first[run_info::SHARD]
        .as_str()
        .and_then(|s| s.split_once('/'))
        .and_then(|(_, n)| n.parse::<usize>().ok())
        .ok_or_else(|| {
            format!(
                "{}: run.json names no shard (--shard I/N)",
                dirs[0].display()
            )
        })?;
    let mut shards: Vec<String> = Vec::new();
    for (dir, info) in dirs.iter().zip(&infos) {
        if let Some((key, a, b)) = run_info::difference_apart_from_shard(first, info) {
            return Err(format!(
                "{} and {} are not shards of one run: run with {key} = {a} and {key} = {b}",
                dirs[0].display(),
                dir.display()
            )
            .into());
        }
        let s = info[run_info::SHARD].as_str().unwrap_or("none").to_string();
        if shards.contains(&s) {
            return Err(format!("shard {s} is given twice").into());
        }
        shards.push(s);
    }
    if shards.len() != count {
        return Err(format!(
            "the sweep has {count} shards; {} were given ({})",
            shards.len(),
            shards.join(", ")
        )
        .into());
    }
    if dirs.iter().any(|d| {
        d.canonicalize().ok().is_some() && d.canonicalize().ok() == out.canonicalize().ok()
    }) {
        return Err(format!(
            "--out {} is one of the shards: merge into a new directory",
            out.display()
        )
        .into());
    }
    let (episodes, banks) = submem_bench::agentic::merge_episodes(dirs)?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    jsonl(&out.join(submem_bench::agentic::EPISODES_FILE), &episodes)?;
    jsonl(&out.join(submem_bench::agentic::BANKS_FILE), &banks)?;
    let mut info = first.clone();
    info[run_info::SHARD] = serde_json::Value::Null;
    info["merged_shards"] = count.into();
    run_info::write(out, &info)?;
    let mut notes = run_info::notes(&info);
    notes.push(format!(
        "merged from {count} shards: {} episodes",
        episodes.len()
    ));
    let summary = report::summarize(&episodes, &banks);
    let md = report::write_all(out, &summary, &notes)?;
    finish_agentic(out, &md, &[], episodes.is_empty())
}

fn finish_agentic(
    out: &Path,
    md: &str,
    failures: &[String],
    empty: bool,
) -> Result<ExitCode, AnyError> {
    println!("{md}");
    println!(
        "results: {}/episodes.jsonl, agentic.json, report.md, k.svg",
        out.display()
    );
    if !failures.is_empty() {
        eprintln!("error: {} episode(s) failed:", failures.len());
        for f in failures {
            eprintln!("  {f}");
        }
        return Ok(ExitCode::from(1));
    }
    if empty {
        eprintln!("error: no substrate produced an episode");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
