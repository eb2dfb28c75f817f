//! Whether P4's judges can be trusted: several judges on one run, and
//! checks of each judge on answers whose verdict is known.
//!
//! **Several judges.** A run may have more than one judge
//! ([`crate::options::Models::judges`]). Every answer goes to each, with the
//! same prompt; the first judge's verdict is the item's `judge` (P4, and
//! what `submem compare` and the router read), and with several judges each
//! verdict is kept in the item's `judges` under the judge's name. The
//! summary gives P4 per judge for every run (`P4_by_judge`) and, for each
//! pair of judges, Cohen's kappa over the items both judged readably, with
//! the items they disagree on ([`agreement`]).
//!
//! **Judge checks.** On a seeded sample of the questions a run asks, each
//! judge also grades, with the run's judge prompt, the gold answer, a
//! specific wrong answer and a vague but topical wrong answer
//! ([`probes`] says how they are built). Each probe is judged once per judge,
//! not per substrate (probes do not depend on memory), and logged in
//! `judge_checks.jsonl` beside the items, so a resumed run judges only what
//! is missing. The summary and the report give per judge its *strictness*
//! (the share of gold answers rejected) and *leniency* (the share of each
//! kind of wrong answer accepted), with 95 % Wilson intervals, over the
//! probes whose verdict could be read (unreadable ones counted apart); a
//! judge whose leniency of either kind passes the run's limit is named in a
//! warning at the top of the report ([`checks`], [`report`]).

pub mod agreement;
pub mod checks;
pub mod probes;

use crate::dataset::{DatasetKind, Question};
use crate::options::Judge;
use crate::prompt::JudgeTemplate;
use crate::reader::{self, Verdict};
use crate::Result;

pub use agreement::{Agreement, Disagreement};
pub use checks::{CheckRecord, JudgeCheckSummary, JudgeChecks, Rate, CHECKS_FILE};
pub use probes::{Probe, ProbeKind};

/// Each of `judges`' verdict on `answer` to `question` (gold `gold`), in
/// the judges' order, asked at once.
pub async fn judge_all(
    judges: &[Judge],
    template: &JudgeTemplate,
    dataset: DatasetKind,
    question: &Question,
    gold: &str,
    answer: &str,
) -> Result<Vec<(String, Verdict)>> {
    let mut asks = Vec::with_capacity(judges.len());
    for j in judges {
        asks.push(async move {
            reader::judge(&j.llm, template, dataset, question, gold, answer)
                .await
                .map(|v| (j.name.clone(), v))
        });
    }
    futures::future::try_join_all(asks).await
}
