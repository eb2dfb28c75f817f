//! The run's append-only result files and how a run resumes from them.
//!
//! - `items.jsonl`: one [`ItemRecord`] per (substrate, dataset, conversation,
//!   question, budget, k), appended and flushed as each finishes;
//! - `writes.jsonl`: one [`WriteRecord`] per (substrate, dataset,
//!   conversation): the write and manage phases' costs and the footprint.
//!
//! On start the files are read back; a torn last line (a run killed mid-write)
//! is cut off, and every key already present is skipped, so an interrupted run
//! resumes where it stopped without duplicating or losing an item.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use submem::PhaseStats;
use submem_core::Diagnostics;

use crate::dataset::QuestionKind;
use crate::metrics::{CoverageCounts, EvidenceFates};
use crate::{BenchError, Result};

/// How many shown events were at each resolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionCounts {
    /// Shown only through an LLM-written record.
    pub record: u32,
    /// Shown in part, verbatim.
    pub excerpt: u32,
    /// Shown whole, verbatim.
    pub raw: u32,
}

/// The unique key of an item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ItemKey {
    /// Substrate spec as written (`flexa:kappa=64`).
    pub substrate: String,
    /// Dataset name.
    pub dataset: String,
    /// Conversation id.
    pub conversation: String,
    /// Question id.
    pub question_id: String,
    /// Token budget.
    pub budget: usize,
    /// Top-k.
    pub k: usize,
}

/// One question answered (or retrieved for) by one substrate at one budget and k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    /// Which item.
    #[serde(flatten)]
    pub key: ItemKey,
    /// The question asked (always kept, so a run's items read on their own).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub question: String,
    /// Breakdown label.
    pub category: String,
    /// Judge rubric selector.
    pub kind: QuestionKind,
    /// Number of gold evidence ids.
    pub gold_evidence: usize,
    /// P6 for this item (`None` without gold evidence).
    pub recall_at_k: Option<f64>,
    /// P6 counting only sources shown verbatim (excerpt or raw), not those
    /// shown only through an LLM-written record.
    #[serde(default)]
    pub recall_verbatim: Option<f64>,
    /// Evidence coverage counts.
    pub coverage: CoverageCounts,
    /// Whether the rendered memory holds the normalised gold answer (every
    /// element of a list answer): 1 or 0; `None` without a gold answer to
    /// look for (abstention, adversarial) or when the substrate shows no
    /// history (see [`answer_recall`](mod@crate::metrics::answer_recall)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_recall: Option<f64>,
    /// Shown events by resolution.
    pub resolutions: ResolutionCounts,
    /// Where each gold turn went (see [`crate::metrics::fates`]).
    #[serde(default, skip_serializing_if = "EvidenceFates::is_empty")]
    pub fates: EvidenceFates,
    /// E7: tokens of the rendered memory.
    pub retrieved_tokens: usize,
    /// E4: `read()` wall time, seconds.
    pub read_seconds: f64,
    /// E8: LLM tokens the substrate spent in this read.
    pub read_llm_tokens: u64,
    /// E9: LLM calls the substrate made in this read.
    pub read_llm_calls: u64,
    /// The substrate's behaviour counters that moved during this read
    /// (e.g. `selection_fallbacks: 1` when M3's page choice fell back to
    /// BM25); see [`submem_core::Substrate::diagnostics`].
    #[serde(default, skip_serializing_if = "Diagnostics::is_empty")]
    pub read_diagnostics: Diagnostics,
    /// Whether the reader answered this item (the reader may sample items).
    pub answered: bool,
    /// Why the reader refused this item's request (e.g. the prompt is longer
    /// than the reader's context); the item then counts as not answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_error: Option<String>,
    /// Reader generation wall time, seconds.
    pub generate_seconds: Option<f64>,
    /// Reader tokens (prompt + answer), as the reader counted them.
    pub reader_tokens: Option<u64>,
    /// The reader's answer.
    pub answer: Option<String>,
    /// The gold answer.
    pub gold: Option<String>,
    /// P1.
    pub em: Option<f64>,
    /// P2.
    pub f1: Option<f64>,
    /// P3.
    pub bleu1: Option<f64>,
    /// P12.
    pub sub_em: Option<f64>,
    /// P4 verdict (`None`: not judged, or the judge's reply was unreadable).
    pub judge: Option<bool>,
    /// The judge's raw reply (kept so unreadable verdicts can be inspected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_reply: Option<String>,
    /// Tokens the judge calls used (prompt + reply), as the judges counted
    /// them: with several judges, all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_tokens: Option<u64>,
    /// Every judge's verdict by judge name, when the run has several
    /// (`judge`, `judge_reply` are the first judge's); empty with one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, JudgeVerdict>,
    /// The answer metrics under the run's answer key, for an item whose
    /// question the key changes (see [`crate::answer_key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Corrected>,
    /// P8: whether the agent's episode reached its goal (1/0); only for an
    /// episode seen as an item ([`crate::agentic::episode::EpisodeRecord::as_item`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_success: Option<f64>,
    /// What the substrate showed for this item, kept with `--trace` (the
    /// inspector's report view puts every substrate's memory for a question
    /// side by side from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<ShownMemory>,
}

impl ItemRecord {
    /// An item of `key` with nothing measured yet: no evidence, no reader, no
    /// judge. Callers set what they measured with struct update syntax.
    pub fn unmeasured(key: ItemKey, category: String, kind: QuestionKind) -> Self {
        ItemRecord {
            key,
            question: String::new(),
            category,
            kind,
            gold_evidence: 0,
            recall_at_k: None,
            recall_verbatim: None,
            coverage: CoverageCounts::default(),
            answer_recall: None,
            resolutions: ResolutionCounts::default(),
            fates: EvidenceFates::default(),
            retrieved_tokens: 0,
            read_seconds: 0.0,
            read_llm_tokens: 0,
            read_llm_calls: 0,
            read_diagnostics: Diagnostics::default(),
            answered: false,
            reader_error: None,
            generate_seconds: None,
            reader_tokens: None,
            answer: None,
            gold: None,
            em: None,
            f1: None,
            bleu1: None,
            sub_em: None,
            judge: None,
            judge_reply: None,
            judge_tokens: None,
            judges: BTreeMap::new(),
            corrected: None,
            task_success: None,
            shown: None,
        }
    }
}

/// One judge's verdict on an item's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeVerdict {
    /// CORRECT / WRONG; `None` when the reply was unreadable.
    pub correct: Option<bool>,
    /// The judge's raw reply.
    #[serde(default)]
    pub reply: String,
    /// Tokens the call used (prompt + reply), as the judge counted them.
    #[serde(default)]
    pub tokens: u64,
}

impl From<crate::reader::Verdict> for JudgeVerdict {
    fn from(v: crate::reader::Verdict) -> Self {
        JudgeVerdict {
            correct: v.correct,
            reply: v.reply,
            tokens: v.tokens,
        }
    }
}

/// The memory one substrate rendered for one item, with the question and the
/// gold evidence ids to read it against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownMemory {
    /// The question asked.
    pub question: String,
    /// Gold evidence source ids.
    pub evidence: Vec<String>,
    /// The text of each gold evidence event the dataset gives (in
    /// `evidence`'s order), to find it in `text` when the render names no ids.
    #[serde(default)]
    pub evidence_text: Vec<String>,
    /// The rendered memory, exactly as the reader gets it.
    pub text: String,
    /// Source ids the recall names, with their resolution, in the recall's
    /// order.
    pub sources: Vec<(String, submem_core::Resolution)>,
}

/// Costs of writing one conversation into one substrate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteRecord {
    /// Substrate spec.
    pub substrate: String,
    /// Substrate family, for reports.
    pub family: String,
    /// Dataset name.
    pub dataset: String,
    /// Conversation id.
    pub conversation: String,
    /// Events written.
    pub events: usize,
    /// Wall time of all write calls, seconds.
    pub write_seconds: f64,
    /// Per-event write latency of each batch (batch time / events), seconds (E3 samples).
    pub write_latency_samples: Vec<f64>,
    /// Wall time of the manage call, seconds.
    pub manage_seconds: f64,
    /// Wall time of restoring the training bank before the writes, seconds
    /// (cross-episode regime; 0 otherwise).
    #[serde(default)]
    pub restore_seconds: f64,
    /// Meter counts of the write phase.
    pub write: PhaseStats,
    /// Meter counts of the manage phase.
    pub manage: PhaseStats,
    /// Footprint after write and manage.
    pub memory_bytes: u64,
    /// Disk bytes reported by the footprint.
    pub disk_bytes: u64,
    /// Tokens stored.
    pub stored_tokens: u64,
    /// Tokens ingested.
    pub input_tokens: u64,
    /// The substrate's behaviour counters after write and manage (LLM
    /// replies used or fallen back to rules, evolution calls...); see
    /// [`submem_core::Substrate::diagnostics`].
    #[serde(default, skip_serializing_if = "Diagnostics::is_empty")]
    pub diagnostics: Diagnostics,
}

/// An append-only JSONL file of records with a key.
#[derive(Debug)]
pub struct JsonlLog {
    path: PathBuf,
    file: File,
}

impl JsonlLog {
    /// Opens (creating) `path`, cuts a torn last line, and returns the log with
    /// every complete, parseable line. Unparseable complete lines are skipped
    /// with a warning.
    pub fn open<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<(Self, Vec<T>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| BenchError::io(path, e))?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| BenchError::io(path, e))?;
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            tracing::warn!(path = %path.display(), bytes = text.len() - complete, "cutting a torn last line");
            file.set_len(complete as u64)
                .map_err(|e| BenchError::io(path, e))?;
            file.seek(SeekFrom::End(0))
                .map_err(|e| BenchError::io(path, e))?;
        }
        let mut records = Vec::new();
        for (i, line) in text[..complete].lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<T>(line) {
                Ok(r) => records.push(r),
                Err(e) => {
                    tracing::warn!(path = %path.display(), line = i + 1, error = %e, "skipping unreadable line")
                }
            }
        }
        Ok((
            JsonlLog {
                path: path.to_path_buf(),
                file,
            },
            records,
        ))
    }

    /// Appends one record as one line and flushes it to the OS.
    pub fn append<T: Serialize>(&mut self, record: &T) -> Result<()> {
        let mut line = serde_json::to_string(record).map_err(|e| BenchError::Json {
            what: "a result line".into(),
            source: e,
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| BenchError::io(&self.path, e))?;
        self.file.flush().map_err(|e| BenchError::io(&self.path, e))
    }
}

/// Reads every complete record of a JSONL file without opening it for writing.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    Ok(text[..complete]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The JSON record `path` holds (a run directory's `shard.json`,
/// `answer_key.json`); `None` when there is no such file.
pub(crate) fn read_json_file<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(BenchError::io(path, e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| BenchError::Json {
            what: path.display().to_string(),
            source: e,
        })
}

/// Writes `value` into `path` as pretty JSON, replacing the old file whole
/// ([`submem::persist::write_atomic`]: a reader never sees half a record).
pub(crate) fn write_json_file<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| BenchError::Json {
        what: path.display().to_string(),
        source: e,
    })?;
    Ok(submem::persist::write_atomic(path, &json)?)
}

/// Keys already done in a list of items.
pub fn done_keys(items: &[ItemRecord]) -> HashSet<ItemKey> {
    items.iter().map(|i| i.key.clone()).collect()
}

/// An item's answer metrics under the corrected key (items whose question
/// the key leaves alone have none: they score as under the original key).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Corrected {
    /// The gold answer under the corrected key; `None` when the key excludes
    /// the question (it then counts in no answer metric of that key).
    pub gold: Option<String>,
    /// Answer recall against the corrected gold answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_recall: Option<f64>,
    /// P1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub em: Option<f64>,
    /// P2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f1: Option<f64>,
    /// P3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bleu1: Option<f64>,
    /// P12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_em: Option<f64>,
    /// P4: the first judge's verdict against the corrected gold answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<bool>,
    /// The first judge's reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_reply: Option<String>,
    /// Tokens of the judge calls against the corrected gold answer (all
    /// judges'), the second judging the key costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_tokens: Option<u64>,
    /// Every judge's verdict by name, when the run has several.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, JudgeVerdict>,
}

impl Corrected {
    /// Whether the key excludes the item's question.
    pub fn excluded(&self) -> bool {
        self.gold.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct R {
        n: u32,
    }

    #[test]
    fn torn_last_line_is_cut_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, "{\"n\":1}\n{\"n\":2}\n{\"n\":").unwrap();
        let (mut log, recs) = JsonlLog::open::<R>(&p).unwrap();
        assert_eq!(recs, vec![R { n: 1 }, R { n: 2 }]);
        log.append(&R { n: 3 }).unwrap();
        drop(log);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"
        );
        assert_eq!(read_jsonl::<R>(&p).unwrap().len(), 3);
    }

    #[test]
    fn garbage_complete_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("y.jsonl");
        std::fs::write(&p, "{\"n\":1}\nnot json\n\n{\"n\":4}\n").unwrap();
        let (_, recs) = JsonlLog::open::<R>(&p).unwrap();
        assert_eq!(recs, vec![R { n: 1 }, R { n: 4 }]);
    }
}
