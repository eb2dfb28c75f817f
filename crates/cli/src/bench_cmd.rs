//! `submem bench`: argument parsing, service construction and the summary
//! printout around [`submem_bench::runner::run`]; `submem bench merge` lives in
//! [`crate::bench_merge`], `run.json` in [`crate::run_info`].

use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::reader::ReaderSettings;
use submem_bench::runner::{run as run_bench, Models, RunOptions};
use submem_bench::shard::Shard;
use submem_bench::{results, Dataset, DatasetKind};
use submem_core::Regime;
use submem_models::{Config, LlmKind};

use crate::agentic_args::AgenticArgs;
use crate::bench_answer_key::{self, AnswerKeyArgs};
use crate::bench_judges::{self, JudgeArgs};
use crate::bench_prompts::PromptArgs;
use crate::run_info::{self, resumable_run_info};
use crate::AnyError;

/// Questions the local reader answers by default (a 135M model is slow and
/// weak: the table leads with LLM-free measures).
pub const LOCAL_READER_SAMPLE: usize = 4;

/// Which LLM plays a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LlmChoice {
    /// The embedded SmolLM2-135M-Instruct.
    Local,
    /// The OpenAI-compatible server of the configuration.
    Openai,
    /// No LLM.
    None,
}

impl From<LlmChoice> for LlmKind {
    fn from(c: LlmChoice) -> Self {
        match c {
            LlmChoice::Local => LlmKind::Local,
            LlmChoice::Openai => LlmKind::Openai,
            LlmChoice::None => LlmKind::None,
        }
    }
}

/// `submem bench` options.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// Work on finished runs instead of running one.
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    /// Dataset format: locomo, longmemeval, probes or synthetic; or a live environment:
    /// textworld, alfworld or scienceworld (`alfworld` with a trajectory JSON file as --data loads
    /// recorded ALFWorld trajectories and asks probe questions instead).
    #[arg(long, default_value = "synthetic")]
    pub dataset: String,
    /// Dataset file (not for synthetic); for a live environment, a directory of game files
    /// (textworld: *.z8 / *.ulx; alfworld: game.tw-pddl files, e.g. ALFWorld's valid_unseen).
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub agentic: AgenticArgs,
    /// Substrates, comma-separated, with optional settings: `m1,m2,flexa:ranking=hybrid,kappa=64`.
    /// `submem substrates` lists every name with its settings and defaults.
    #[arg(long, default_value = "m1,m2,m10,flexa,nomem")]
    pub substrates: String,
    /// Token budgets B to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024")]
    pub budget: Vec<usize>,
    /// Top-k values to sweep, comma-separated. Default: 10 on QA datasets, 1,5 in a live
    /// environment (textworld, alfworld, scienceworld).
    #[arg(long, value_delimiter = ',')]
    pub k: Vec<usize>,
    /// The reader that answers from each recall; `none` runs retrieval only.
    #[arg(long, value_enum)]
    pub reader: Option<LlmChoice>,
    #[command(flatten)]
    pub judges: JudgeArgs,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub answer_key: AnswerKeyArgs,
    /// The LLM that writes memory; `none` uses rule writers and skips substrates that need an LLM.
    #[arg(long, value_enum)]
    pub memory_llm: Option<LlmChoice>,
    /// Questions the reader answers in total (the same ones for every substrate), or `all`.
    /// Default: 4 with the local reader (it is slow and weak), all otherwise.
    #[arg(long, value_name = "N|all")]
    pub reader_sample: Option<String>,
    /// Questions per conversation (the first N).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Conversations (the first N).
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Cross-episode regime: the first N conversations (after --conversations) are training
    /// episodes, asked nothing. Each substrate writes them once into a training bank (kept under
    /// <out>/banks/), which every later conversation restores before writing its own history
    /// (for M7/M8, whose strategies and skills pay off on a new episode).
    #[arg(long, value_name = "N")]
    pub train_episodes: Option<usize>,
    /// Substrate × conversation tasks run at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Keep, for every item, the memory text each substrate showed (the
    /// inspector puts them side by side) and trace each gold evidence turn
    /// through the stages of substrates that report them (FlexA-Mem's
    /// pieces: ranked, cut by the budget, merged): the report then says why
    /// evidence was not shown whole. Items always keep their question text.
    #[arg(long)]
    pub trace: bool,
    /// Do not keep each task's written memory under <out>/memories/ (kept by
    /// default, so a resumed or extended run restores it instead of writing again).
    #[arg(long)]
    pub no_keep_memories: bool,
    /// Do not add the packing baselines (m2-fill, m1-fill, hybrid-fill and
    /// the piece retrievals m2-pieces, m1-pieces, hybrid-pieces) that a run
    /// with any other substrate gets, so its report shows whether a design
    /// beats packing ranked turns or pieces into the same budget.
    #[arg(long)]
    pub no_baselines: bool,
    /// Output directory (resumes if it holds an earlier run). Default: ./bench-out/<UTC time>
    /// (with --shard: ./bench-out/<UTC time>-shard-I-of-N).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run only shard I of N (1 ≤ I ≤ N): every Nth substrate × conversation task, round-robin,
    /// into its own --out; the question sample, seeds and order are the whole run's. Merge the
    /// N directories with `submem bench merge` into what one run writes.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Check the arguments (flags, substrate names and settings, budgets, k, shard) and exit
    /// without loading the dataset or any model: for a job script before it is queued.
    #[arg(long)]
    pub check: bool,
    /// Most tokens of a reader answer.
    #[arg(long, default_value_t = 32)]
    pub answer_tokens: usize,
    /// Synthetic: conversations.
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.conversations)]
    pub synth_conversations: usize,
    /// Synthetic: events per conversation (100 to 1,000,000).
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.units)]
    pub synth_units: usize,
    /// Synthetic: questions per conversation.
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.questions)]
    pub synth_questions: usize,
    /// Synthetic: events per session (write batch).
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.session_size)]
    pub synth_session: usize,
    /// Synthetic: share of questions asked as paraphrases (0 to 1).
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.paraphrase_share)]
    pub synth_paraphrase: f64,
    /// Synthetic: noise turns per fact that mention its attribute.
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.noise_per_fact)]
    pub synth_noise: usize,
    /// Synthetic: `conversational` or `agentic`.
    #[arg(long, default_value = "conversational")]
    pub synth_regime: String,
    /// The run's seed: the synthetic set's generator, and which questions the judge checks
    /// sample (any dataset).
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.seed)]
    pub seed: u64,
}

/// `submem bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchAction {
    /// Merge the output directories of every `--shard I/N` run of one sweep into what the
    /// unsharded run writes (items.jsonl, writes.jsonl, summary.json, report.md and its SVGs).
    Merge(MergeArgs),
}

/// `SUBMEM_BENCH_ABORT_AFTER` (a test hook: stop after that many new
/// results), QA and agentic runs alike.
pub(crate) fn abort_after() -> Result<Option<usize>, AnyError> {
    match std::env::var("SUBMEM_BENCH_ABORT_AFTER") {
        Ok(v) => {
            Ok(Some(v.parse::<usize>().map_err(|e| {
                format!("SUBMEM_BENCH_ABORT_AFTER={v:?}: {e}")
            })?))
        }
        Err(_) => Ok(None),
    }
}

/// `YYYYMMDD-HHMMSS` in UTC.
pub(crate) fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The synthetic set `args` asks for (checked, not generated).
fn synthetic_spec(args: &BenchArgs) -> Result<SyntheticSpec, AnyError> {
    if args.data.is_some() {
        return Err(
            "--data is not used with the synthetic dataset (it is generated; see --synth-*)".into(),
        );
    }
    let regime = match args.synth_regime.to_ascii_lowercase().as_str() {
        "conversational" => Regime::Conversational,
        "agentic" => Regime::Agentic,
        other => {
            return Err(
                format!("--synth-regime {other:?}: expected conversational or agentic").into(),
            )
        }
    };
    let spec = SyntheticSpec {
        conversations: args.synth_conversations,
        units: args.synth_units,
        questions: args.synth_questions,
        session_size: args.synth_session,
        paraphrase_share: args.synth_paraphrase,
        noise_per_fact: args.synth_noise,
        regime,
        seed: args.seed,
        ..SyntheticSpec::DEFAULT_RUN
    };
    spec.validate()?;
    Ok(spec)
}

/// The dataset's file (checked to be given, not to exist).
fn data_path(args: &BenchArgs, kind: DatasetKind) -> Result<&Path, AnyError> {
    Ok(args
        .data
        .as_deref()
        .ok_or_else(|| format!("--data PATH is required for --dataset {}", kind.name()))?)
}

fn load_dataset(args: &BenchArgs) -> Result<Dataset, AnyError> {
    let kind = DatasetKind::parse(&args.dataset)?;
    if kind == DatasetKind::Synthetic {
        return Ok(synthetic_spec(args)?.dataset()?);
    }
    let path = data_path(args, kind)?;
    if !path.exists() {
        return Err(format!("data file {} not found", path.display()).into());
    }
    Ok(Dataset::load(kind, path)?)
}

/// `--reader-sample`: `None` when not given, `Some(None)` for `all`.
fn parse_reader_sample(arg: Option<&str>) -> Result<Option<Option<usize>>, AnyError> {
    match arg {
        None => Ok(None),
        Some("all") => Ok(Some(None)),
        Some(n) => Ok(Some(Some(n.parse::<usize>().map_err(|e| {
            format!("--reader-sample {n:?}: {e} (a number or `all`)")
        })?))),
    }
}

/// The substrates `args` runs, the packing baselines added, each checked
/// against the registry.
fn checked_specs(args: &BenchArgs, factory: &Registry) -> Result<Vec<SubstrateSpec>, AnyError> {
    let specs = SubstrateSpec::parse_list(&args.substrates)?;
    let specs = if args.no_baselines {
        specs
    } else {
        submem::baselines::with_packing_baselines(&specs, factory)
    };
    for s in &specs {
        factory.check(s)?;
    }
    Ok(specs)
}

/// What a run is given, from `args`.
fn run_options(args: &BenchArgs, out: PathBuf, reader_sample: Option<usize>) -> RunOptions {
    RunOptions {
        budgets: args.budget.clone(),
        ks: if args.k.is_empty() {
            vec![10]
        } else {
            args.k.clone()
        },
        limit: args.limit,
        conversations: args.conversations,
        train_episodes: args.train_episodes,
        reader_sample,
        jobs: args.jobs,
        out,
        reader: ReaderSettings {
            max_answer_tokens: args.answer_tokens,
            ..ReaderSettings::default()
        },
        trace: args.trace,
        keep_memories: !args.no_keep_memories,
        shard: args.shard,
        packing_baselines: !args.no_baselines,
        judge_checks: args.judges.judge_checks,
        seed: args.seed,
        ..RunOptions::default()
    }
}

/// `--check`: everything about `args` that can be checked without the
/// dataset's file or a model.
fn check_only(
    args: &BenchArgs,
    specs: &[SubstrateSpec],
    config: &Config,
) -> Result<ExitCode, AnyError> {
    let kind = DatasetKind::parse(&args.dataset)?;
    if kind == DatasetKind::Synthetic {
        synthetic_spec(args)?;
    } else {
        data_path(args, kind)?;
    }
    parse_reader_sample(args.reader_sample.as_deref())?;
    args.prompts.load()?;
    args.answer_key.check()?;
    args.judges.check(config)?;
    run_options(args, PathBuf::new(), None).validate()?;
    let names: Vec<String> = specs.iter().map(ToString::to_string).collect();
    println!(
        "submem bench: arguments ok: {} substrates ({}), budgets {:?}, k {:?}{}",
        specs.len(),
        names.join(", "),
        args.budget,
        run_options(args, PathBuf::new(), None).ks,
        args.shard
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `submem bench`.
pub async fn run(
    args: BenchArgs,
    mut config: Config,
    quiet: bool,
    factory: Arc<Registry>,
) -> Result<ExitCode, AnyError> {
    let specs = checked_specs(&args, &factory)?;
    if args.check {
        return check_only(&args, &specs, &config);
    }
    args.judges.check(&config)?;
    let prompts = args.prompts.load()?;
    let factory = prompts.registry(factory);
    let dataset = load_dataset(&args)?;
    let answer_key = args.answer_key.load(&dataset)?;
    let synthetic_default_writer = args.memory_llm.is_none()
        && dataset.kind == DatasetKind::Synthetic
        && config.services.memory_llm == LlmKind::Local;
    if let Some(c) = args.memory_llm {
        config.services.memory_llm = c.into();
    } else if synthetic_default_writer {
        // SmolLM2 writing FlexA-Mem's records is most of a default run's
        // time on 2 cores (minutes), while the rule writers already separate
        // the substrates; one flag turns the model on, and the notes say so.
        config.services.memory_llm = LlmKind::None;
    }
    if let Some(c) = args.reader {
        config.services.reader = c.into();
    } else if dataset.kind == DatasetKind::Synthetic && config.services.reader == LlmKind::Local {
        // The default run separates the substrates by retrieval in about two
        // minutes on 2 cores; the local 135M reader would add minutes and
        // answer little (its answers are noise at this size). One flag
        // turns it on, and the run's notes say so.
        config.services.reader = LlmKind::None;
    }
    let reader_kind = config.services.reader;
    let judge_default = if dataset.kind == DatasetKind::Synthetic {
        LlmKind::None
    } else {
        reader_kind
    };
    let reader_sample = match parse_reader_sample(args.reader_sample.as_deref())? {
        Some(given) => given,
        None if reader_kind == LlmKind::Local => Some(LOCAL_READER_SAMPLE),
        None => None,
    };

    let services = config.lazy_services()?;
    let reader = config.lazy_llm(reader_kind, "reader");
    let judges = args
        .judges
        .judges(&config, judge_default, reader.is_some())?;
    let models = Arc::new(Models {
        services,
        reader: reader.clone(),
        judges: judges.clone(),
    });

    let out = args.out.clone().unwrap_or_else(|| {
        let name = match args.shard {
            Some(s) => format!("{}-shard-{}-of-{}", timestamp(), s.index(), s.count()),
            None => timestamp(),
        };
        PathBuf::from("bench-out").join(name)
    });
    let abort_after = abort_after()?;
    let mut opts = RunOptions {
        progress: !quiet,
        abort_after,
        judge_prompt: prompts.judge.clone(),
        answer_key: answer_key.clone(),
        ..run_options(&args, out.clone(), reader_sample)
    };
    opts.reader.prompt = prompts.reader.clone();
    opts.validate()?;
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let w = &dataset.warnings;
    let mut notes = vec![format!(
        "dataset {}: {} conversations, {} questions{}",
        dataset.name,
        dataset.conversations.len(),
        dataset.question_count(),
        args.limit
            .map(|l| format!(" (first {l} per conversation asked)"))
            .unwrap_or_default()
    )];
    if !w.is_empty() {
        notes.push(format!(
            "load warnings: {} malformed evidence strings, {} evidence ids naming no turn, {} other (see run log)",
            w.malformed_evidence.len(),
            w.unknown_evidence.len(),
            w.notes.len()
        ));
        for m in w
            .malformed_evidence
            .iter()
            .chain(&w.unknown_evidence)
            .chain(&w.notes)
            .take(20)
        {
            tracing::warn!("{m}");
        }
    }
    notes.push(match (&reader, reader_sample) {
        (None, _) if args.reader.is_none() => {
            "reader: none by default on the synthetic set (retrieval only: answer metrics and E2 are n/a); \
add `--reader local` to answer a sample with the local model"
                .into()
        }
        (None, _) => "reader: none (retrieval only: answer metrics and E2 are n/a)".into(),
        (Some(r), Some(n)) => format!("reader: {} on a sample of {n} questions", r.name()),
        (Some(r), None) => format!("reader: {} on every question", r.name()),
    });
    notes.extend(bench_judges::notes(&judges, &args.judges, args.seed));
    notes.push(match models.services.llm.as_ref() {
        Some(l) => format!("memory LLM: {}", l.name()),
        None if synthetic_default_writer => {
            "memory LLM: none by default on the synthetic set (rule writers); \
add `--memory-llm local` to have the local model write memory (minutes more on 2 cores)"
                .into()
        }
        None => "memory LLM: none (rule writers)".into(),
    });
    notes.extend(prompts.notes());
    notes.extend(bench_answer_key::notes(answer_key.as_deref()));

    let synthetic = match dataset.kind {
        DatasetKind::Synthetic => Some(synthetic_spec(&args)?),
        _ => None,
    };
    let mut run_info = serde_json::json!({
        "dataset": dataset.name,
        "data": args.data,
        "substrates": specs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "budgets": args.budget,
        "k": run_options(&args, PathBuf::new(), None).ks,
        "reader": reader.as_ref().map(|r| r.name().to_string()),
        "judge": bench_judges::record(&judges),
        "memory_llm": models.services.llm.as_ref().map(|r| r.name().to_string()),
        "reader_sample": reader_sample,
        "limit": args.limit,
        "conversations": args.conversations,
        "train_episodes": args.train_episodes,
        "seed": args.seed,
        // Not checked on resume (older directories lack them), but a merge
        // of shards refuses shards that differ in them.
        "synthetic": synthetic,
        "answer_tokens": args.answer_tokens,
        "trace": args.trace,
        "judge_checks": args.judges.judge_checks,
        (run_info::LENIENCY_LIMIT): args.judges.judge_leniency_limit,
        (run_info::SHARD): args.shard.map(|s| s.to_string()),
        (run_info::NOTES): notes,
    });
    prompts.record(&mut run_info)?;
    bench_answer_key::record(answer_key.as_deref(), &mut run_info)?;
    let run_info = resumable_run_info(&out, run_info)?;
    run_info::write(&out, &run_info)?;

    let outcome = run_bench(Arc::new(dataset), specs, factory, models, opts).await?;
    notes.extend(outcome.task_notes());
    if outcome.resumed > 0 {
        notes.push(format!(
            "resumed: {} items were already done, {} added",
            outcome.resumed, outcome.new_items
        ));
    }
    let md = results::write_results(
        &out,
        &outcome.items,
        &outcome.writes,
        &notes,
        args.judges.judge_leniency_limit,
    )?;
    Ok(finish(
        &out,
        &md,
        &outcome.failures,
        outcome.items.is_empty(),
    ))
}

/// `submem bench merge` options.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' output directories: every shard 1..N of one run, in any order.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the merged run (a new directory, or an earlier merge's).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Prints the report and where the results are, and the failures; the exit
/// code of a run (or a merge) that wrote them.
pub(crate) fn finish(out: &Path, md: &str, failures: &[String], no_items: bool) -> ExitCode {
    println!("{md}");
    println!(
        "results: {}/items.jsonl, summary.json, report.md, coverage.svg, scatter.svg, fates.svg{}",
        out.display(),
        [
            submem_bench::judges::CHECKS_FILE,
            submem_bench::answer_key::APPLIED_FILE
        ]
        .iter()
        .filter(|f| out.join(f).is_file())
        .map(|f| format!(", {f}"))
        .collect::<String>()
    );
    if !failures.is_empty() {
        eprintln!(
            "error: {} substrate × conversation task(s) failed:",
            failures.len()
        );
        for f in failures {
            eprintln!("  {f}");
        }
        return ExitCode::from(1);
    }
    if no_items {
        eprintln!("error: no substrate produced results");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_shape() {
        let t = timestamp();
        assert_eq!(t.len(), 15);
        assert_eq!(&t[8..9], "-");
        assert!(t.starts_with("20"));
    }
}
