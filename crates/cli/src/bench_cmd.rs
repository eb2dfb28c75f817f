//! `submem bench`: argument parsing, service construction and the summary
//! printout around [`submem_bench::runner::run`].

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::reader::ReaderSettings;
use submem_bench::registry::{Registry, SubstrateSpec};
use submem_bench::runner::{run as run_bench, Models, RunOptions};
use submem_bench::{report, summary, Dataset, DatasetKind};
use submem_core::Regime;
use submem_models::{Config, LlmKind};

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
pub struct BenchArgs {
    /// Dataset format: locomo, longmemeval, alfworld (alias agentic), probes or synthetic.
    #[arg(long, default_value = "synthetic")]
    pub dataset: String,
    /// Dataset file (not for synthetic).
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Substrates, comma-separated, with optional settings: `m1,m2,flexa:ranking=hybrid,kappa=64`.
    /// `submem substrates` lists every name with its settings and defaults.
    #[arg(long, default_value = "m1,m2,m10,flexa,nomem")]
    pub substrates: String,
    /// Token budgets B to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024")]
    pub budget: Vec<usize>,
    /// Top-k values to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10")]
    pub k: Vec<usize>,
    /// The reader that answers from each recall; `none` runs retrieval only.
    #[arg(long, value_enum)]
    pub reader: Option<LlmChoice>,
    /// The judge (P4). Default: none on the synthetic set (SubEM is exact there), else the reader's kind.
    #[arg(long, value_enum)]
    pub judge: Option<LlmChoice>,
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
    /// Trace each item's gold evidence through substrates that rank (FlexA-Mem's
    /// pieces): the report then says why evidence was not shown whole.
    #[arg(long)]
    pub trace: bool,
    /// Do not keep each task's written memory under <out>/memories/ (kept by
    /// default, so a resumed or extended run restores it instead of writing again).
    #[arg(long)]
    pub no_keep_memories: bool,
    /// Do not add the packing baselines (m2-fill, m1-fill, hybrid-fill) that a
    /// run with any other substrate gets, so its report shows whether a design
    /// beats packing ranked turns into the same budget.
    #[arg(long)]
    pub no_baselines: bool,
    /// Output directory (resumes if it holds an earlier run). Default: ./bench-out/<UTC time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
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
    /// Synthetic: seed.
    #[arg(long, default_value_t = SyntheticSpec::DEFAULT_RUN.seed)]
    pub seed: u64,
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn timestamp() -> String {
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

fn load_dataset(args: &BenchArgs) -> Result<Dataset, AnyError> {
    let kind = DatasetKind::parse(&args.dataset)?;
    if kind == DatasetKind::Synthetic {
        if args.data.is_some() {
            return Err(
                "--data is not used with the synthetic dataset (it is generated; see --synth-*)"
                    .into(),
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
        return Ok(spec.dataset()?);
    }
    let path = args
        .data
        .as_ref()
        .ok_or_else(|| format!("--data PATH is required for --dataset {}", kind.name()))?;
    if !path.exists() {
        return Err(format!("data file {} not found", path.display()).into());
    }
    Ok(Dataset::load(kind, path)?)
}

/// Runs `submem bench`.
pub async fn run(args: BenchArgs, mut config: Config, quiet: bool) -> Result<ExitCode, AnyError> {
    let factory = Arc::new(Registry::default());
    let specs = SubstrateSpec::parse_list(&args.substrates)?;
    let specs = if args.no_baselines {
        specs
    } else {
        submem_bench::baselines::with_packing_baselines(&specs, &factory)
    };
    for s in &specs {
        factory.check(s)?;
    }
    let dataset = load_dataset(&args)?;
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
    let judge_kind: LlmKind = match args.judge {
        Some(c) => c.into(),
        None if dataset.kind == DatasetKind::Synthetic => LlmKind::None,
        None => reader_kind,
    };
    let reader_sample = match args.reader_sample.as_deref() {
        Some("all") => None,
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|e| format!("--reader-sample {n:?}: {e} (a number or `all`)"))?,
        ),
        None if reader_kind == LlmKind::Local => Some(LOCAL_READER_SAMPLE),
        None => None,
    };

    let services = config.lazy_services()?;
    let reader = config.lazy_llm(reader_kind, "reader");
    let judge = if reader.is_some() {
        config.lazy_llm(judge_kind, "judge")
    } else {
        None
    };
    let models = Arc::new(Models {
        services,
        reader: reader.clone(),
        judge: judge.clone(),
    });

    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-out").join(timestamp()));
    let abort_after = match std::env::var("SUBMEM_BENCH_ABORT_AFTER") {
        Ok(v) => Some(
            v.parse::<usize>()
                .map_err(|e| format!("SUBMEM_BENCH_ABORT_AFTER={v:?}: {e}"))?,
        ),
        Err(_) => None,
    };
    let opts = RunOptions {
        budgets: args.budget.clone(),
        ks: args.k.clone(),
        limit: args.limit,
        conversations: args.conversations,
        train_episodes: args.train_episodes,
        reader_sample,
        jobs: args.jobs,
        out: out.clone(),
        progress: !quiet,
        abort_after,
        reader: ReaderSettings {
            max_answer_tokens: args.answer_tokens,
        },
        trace: args.trace,
        keep_memories: !args.no_keep_memories,
    };
    opts.validate()?;
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let run_info = serde_json::json!({
        "dataset": dataset.name,
        "data": args.data,
        "substrates": specs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "budgets": args.budget,
        "k": args.k,
        "reader": reader.as_ref().map(|r| r.name().to_string()),
        "judge": judge.as_ref().map(|r| r.name().to_string()),
        "memory_llm": models.services.llm.as_ref().map(|r| r.name().to_string()),
        "reader_sample": reader_sample,
        "limit": args.limit,
        "conversations": args.conversations,
        "train_episodes": args.train_episodes,
        "seed": args.seed,
    });
    let run_info = resumable_run_info(&out, run_info)?;
    std::fs::write(
        out.join("run.json"),
        serde_json::to_string_pretty(&run_info)?,
    )?;

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
    notes.push(match &judge {
        Some(j) => format!("judge: {}", j.name()),
        None => "judge: none (P4 n/a)".into(),
    });
    notes.push(match models.services.llm.as_ref() {
        Some(l) => format!("memory LLM: {}", l.name()),
        None if synthetic_default_writer => {
            "memory LLM: none by default on the synthetic set (rule writers); \
add `--memory-llm local` to have the local model write memory (minutes more on 2 cores)"
                .into()
        }
        None => "memory LLM: none (rule writers)".into(),
    });

    let outcome = run_bench(Arc::new(dataset), specs, factory, models, opts).await?;
    for s in &outcome.skipped {
        notes.push(format!("skipped {s}"));
    }
    for f in &outcome.failures {
        notes.push(format!("FAILED {f}"));
    }
    if outcome.resumed > 0 {
        notes.push(format!(
            "resumed: {} items were already done, {} added",
            outcome.resumed, outcome.new_items
        ));
    }
    let summary = summary::summarize(&outcome.items, &outcome.writes);
    let md = report::write_all(&out, &summary, &notes)?;
    println!("{md}");
    println!(
        "results: {}/items.jsonl, summary.json, report.md, scatter.svg",
        out.display()
    );
    if !outcome.failures.is_empty() {
        eprintln!(
            "error: {} substrate × conversation task(s) failed:",
            outcome.failures.len()
        );
        for f in &outcome.failures {
            eprintln!("  {f}");
        }
        return Ok(ExitCode::from(1));
    }
    if outcome.items.is_empty() {
        eprintln!("error: no substrate produced results");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Settings that change what an item's result means: a run directory holds
/// results for one value of each, so a resume with another is refused.
const RUN_IDENTITY: [&str; 7] = [
    "dataset",
    "data",
    "reader",
    "judge",
    "memory_llm",
    "seed",
    "train_episodes",
];

/// Lists that a resume may extend (more substrates, budgets or k values).
const RUN_EXTENSIBLE: [&str; 3] = ["substrates", "budgets", "k"];

/// Checks `info` against the run already in `out` (if it holds items) and
/// returns what `run.json` should say: refuses a resume whose results would
/// mean something else (another memory LLM, reader, dataset...), since the
/// old items would be kept and mixed with the new ones under the same keys;
/// extends the substrate, budget and k lists otherwise.
fn resumable_run_info(
    out: &std::path::Path,
    mut info: serde_json::Value,
) -> Result<serde_json::Value, AnyError> {
    let has_items = std::fs::metadata(out.join("items.jsonl")).is_ok_and(|m| m.len() > 0);
    let path = out.join("run.json");
    let old: serde_json::Value = match std::fs::read_to_string(&path) {
        Ok(text) if has_items => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a run description ({e}); use a new --out",
                path.display()
            )
        })?,
        _ => return Ok(info),
    };
    for key in RUN_IDENTITY {
        let (was, now) = (&old[key], &info[key]);
        if was != now {
            return Err(format!(
                "{} holds a run with {key} = {was}, this one has {now}: its results would be mixed with \
the old ones; use a new --out (or the same {key})",
                out.display()
            )
            .into());
        }
    }
    for key in RUN_EXTENSIBLE {
        let mut merged: Vec<serde_json::Value> = old[key].as_array().cloned().unwrap_or_default();
        for v in info[key].as_array().cloned().unwrap_or_default() {
            if !merged.contains(&v) {
                merged.push(v);
            }
        }
        info[key] = serde_json::Value::Array(merged);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(memory_llm: Option<&str>, substrates: &[&str]) -> serde_json::Value {
        serde_json::json!({
            "dataset": "locomo", "data": "conv.json", "reader": null, "judge": null,
            "memory_llm": memory_llm, "seed": 42, "train_episodes": null,
            "substrates": substrates, "budgets": [4096], "k": [10], "limit": 20,
        })
    }

    #[test]
    fn a_resume_may_extend_a_run_but_not_change_what_its_items_mean() {
        let dir = tempfile::tempdir().unwrap();
        let first = info(Some("local SmolLM2 (memory)"), &["m3"]);
        // No items yet: anything goes, and nothing is merged.
        let written = resumable_run_info(dir.path(), first.clone()).unwrap();
        assert_eq!(written, first);
        std::fs::write(dir.path().join("run.json"), written.to_string()).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();

        let more = resumable_run_info(
            dir.path(),
            info(Some("local SmolLM2 (memory)"), &["m4", "m3"]),
        );
        assert_eq!(more.unwrap()["substrates"], serde_json::json!(["m3", "m4"]));

        let err = resumable_run_info(dir.path(), info(None, &["m3"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("memory_llm") && err.contains("new --out"),
            "{err}"
        );
    }

    #[test]
    fn timestamp_shape() {
        let t = timestamp();
        assert_eq!(t.len(), 15);
        assert_eq!(&t[8..9], "-");
        assert!(t.starts_with("20"));
    }
}
