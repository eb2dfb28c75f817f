//! What a run is given: the [`Models`] besides the substrates' own, and the
//! [`RunOptions`] (budgets, k, output directory, sampling, resumption).

use std::path::PathBuf;
use std::sync::Arc;

use submem_core::query::{MAX_BUDGET, MIN_BUDGET};
use submem_core::{Llm, Services};

use crate::answer_key::AnswerKey;
use crate::prompt::JudgeTemplate;
use crate::reader::ReaderSettings;
use crate::shard::Shard;
use crate::{BenchError, Result};

/// The models a run uses besides the substrates' own.
#[derive(Debug, Clone)]
pub struct Models {
    /// Services substrates are built with (unmetered; each instance gets them
    /// wrapped by its own meter). `llm` is the memory-writing LLM, if any.
    pub services: Services,
    /// The shared reader; `None` runs retrieval only (`--reader none`).
    pub reader: Option<Arc<dyn Llm>>,
    /// The judges, each under its own name: every answer is judged by each
    /// (the first's verdict is an item's `judge`, P4; with several, each
    /// verdict is kept under the judge's name and their agreement
    /// reported, see [`crate::judges`]). None leaves P4 undefined.
    pub judges: Vec<Judge>,
}

impl Models {
    /// Models with `reader` and at most one judge, named `judge` (what a
    /// run with one judge records).
    pub fn with_judge(
        services: Services,
        reader: Option<Arc<dyn Llm>>,
        judge: Option<Arc<dyn Llm>>,
    ) -> Self {
        Models {
            services,
            reader,
            judges: judge.map(|j| Judge::new("judge", j)).into_iter().collect(),
        }
    }

    /// Rejects judges no run can tell apart (an empty or repeated name).
    pub fn validate(&self) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for j in &self.judges {
            if j.name.trim().is_empty() {
                return Err(BenchError::InvalidOption(
                    "a judge has an empty name".into(),
                ));
            }
            if !seen.insert(j.name.as_str()) {
                return Err(BenchError::InvalidOption(format!(
                    "judge {:?} is named twice",
                    j.name
                )));
            }
        }
        Ok(())
    }
}

/// One judge of a run: the name its verdicts and check rates go by
/// (`local`, `openai`, a configured server's name) and its LLM.
#[derive(Debug, Clone)]
pub struct Judge {
    /// The name in items, the summary and the report.
    pub name: String,
    /// The LLM asked.
    pub llm: Arc<dyn Llm>,
}

impl Judge {
    /// `llm` judging under `name`.
    pub fn new(name: impl Into<String>, llm: Arc<dyn Llm>) -> Self {
        Judge {
            name: name.into(),
            llm,
        }
    }
}

/// Questions the judge checks sample by default ([`RunOptions::judge_checks`]).
pub const DEFAULT_JUDGE_CHECKS: usize = 20;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Token budgets to sweep.
    pub budgets: Vec<usize>,
    /// Top-k values to sweep.
    pub ks: Vec<usize>,
    /// Questions per conversation (first N).
    pub limit: Option<usize>,
    /// Conversations (first N).
    pub conversations: Option<usize>,
    /// The first N conversations are training episodes written before every
    /// later one (see the module docs); `None` runs each conversation alone.
    pub train_episodes: Option<usize>,
    /// Questions the reader answers in total (first N answerable).
    pub reader_sample: Option<usize>,
    /// Substrate × conversation tasks run at once.
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Show a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
    /// Stop with [`BenchError::Aborted`] after this many new items (test hook).
    pub abort_after: Option<usize>,
    /// Reader settings (its prompt template among them).
    pub reader: ReaderSettings,
    /// The judge's prompt: the built-in rubrics unless a run names its own
    /// template ([`crate::prompt`]).
    pub judge_prompt: JudgeTemplate,
    /// Questions sampled for the judge checks (each judge grades the gold
    /// answer and two wrong answers to each, with `judge_prompt`; see
    /// [`crate::judges::checks`]); 0 turns them off. They run when the
    /// run has a judge. Default [`DEFAULT_JUDGE_CHECKS`].
    pub judge_checks: usize,
    /// The run's seed: which questions the judge checks sample.
    pub seed: u64,
    /// Ask substrates that rank for a trace of each item's gold evidence
    /// ([`submem_core::Substrate::trace`]), for the loss breakdown. It runs
    /// after the timed read (its query embedding counts in the read phase's
    /// embedder figures). Each item then also keeps the memory shown, with
    /// its question and gold ids ([`crate::items::ShownMemory`]), for the
    /// inspector's report view.
    pub trace: bool,
    /// Keep each task's memory, as written and managed, under
    /// `<out>/memories/<substrate>/<conversation>/`: a resumed run (after a
    /// crash, or extended with more budgets or k) restores it instead of
    /// paying the writes again.
    pub keep_memories: bool,
    /// Run only this shard's share of the substrate × conversation tasks
    /// (`--shard I/N`, see [`crate::shard`]); `None` runs them all.
    pub shard: Option<Shard>,
    /// Corrections to the dataset's gold answers ([`crate::answer_key`]):
    /// every answer metric is then also measured under the corrected key.
    /// `None` scores against the dataset's gold answers only.
    pub answer_key: Option<Arc<AnswerKey>>,
    /// Add the packing baselines ([`submem::baselines::PACKING_BASELINES`]
    /// the registry holds) to a run with a design to compare with them, as
    /// `submem bench` does unless `--no-baselines`. Default true.
    pub packing_baselines: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            budgets: vec![4096],
            ks: vec![10],
            limit: None,
            conversations: None,
            train_episodes: None,
            reader_sample: None,
            jobs: 1,
            out: PathBuf::from("bench-out"),
            progress: true,
            abort_after: None,
            reader: ReaderSettings::default(),
            judge_prompt: JudgeTemplate::builtin(),
            judge_checks: DEFAULT_JUDGE_CHECKS,
            seed: 0,
            trace: false,
            keep_memories: true,
            shard: None,
            answer_key: None,
            packing_baselines: true,
        }
    }
}

/// Rejects a budget/k sweep no run can honour (empty, a budget outside
/// `MIN_BUDGET..=MAX_BUDGET`, a zero k); QA and agentic runs share it.
pub fn check_sweep(budgets: &[usize], ks: &[usize]) -> Result<()> {
    if budgets.is_empty() || ks.is_empty() {
        return Err(BenchError::InvalidOption(
            "give at least one budget and one k".into(),
        ));
    }
    if let Some(b) = budgets
        .iter()
        .find(|b| !(MIN_BUDGET..=MAX_BUDGET).contains(*b))
    {
        return Err(BenchError::InvalidOption(format!(
            "budget {b} is outside {MIN_BUDGET}..={MAX_BUDGET}"
        )));
    }
    if ks.contains(&0) {
        return Err(BenchError::InvalidOption("k must be at least 1".into()));
    }
    Ok(())
}

impl RunOptions {
    /// Rejects options no run can honour.
    pub fn validate(&self) -> Result<()> {
        check_sweep(&self.budgets, &self.ks)?;
        if self.train_episodes == Some(0) {
            return Err(BenchError::InvalidOption(
                "train_episodes must be at least 1 (omit it to run conversations alone)".into(),
            ));
        }
        if self.jobs == 0 {
            return Err(BenchError::InvalidOption("jobs must be at least 1".into()));
        }
        Ok(())
    }
}
