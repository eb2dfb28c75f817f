//! Datasets the harness runs: every format becomes the same [`Dataset`] of
//! [`Conversation`]s (a history written in session-sized batches, plus the
//! questions asked over it).
//!
//! | module | format | events |
//! |---|---|---|
//! | [`locomo`] | LoCoMo `locomo10.json` | `Event::Turn`, source id = `dia_id` |
//! | [`longmemeval`] | LongMemEval (`_s`, `_m`, `_oracle`) | `Event::Turn`, source id = `<session id>:<turn index>` |
//! | [`trajectories`] | ALFWorld ReAct text, and the probe JSONL below | `Event::Step`, source id = `<episode>:<step>` |
//! | [`synthetic`] | generated, seeded | turns or steps |
//!
//! ## The agent-probe JSONL format
//!
//! One episode per line, so that agentic memory can be measured without a
//! live environment: the agent's steps are written to memory, then probe
//! questions ask about earlier steps.
//!
//! ```json
//! {"id": "ep1", "task": "put a key in the drawer",
//!  "steps": [{"action": "go to desk 1", "observation": "On the desk 1, you see a key 1."},
//!            {"action": "run ./login.sh", "observation": "access token: XK-4821"}],
//!  "probes": [{"id": "ep1-q1", "question": "What access token did login.sh print?",
//!              "answer": "XK-4821", "evidence": [2], "category": "token"}]}
//! ```
//!
//! `steps` are 1-based in order (step `n` gets source id `ep1:n`); a probe's
//! `evidence` lists step numbers; `category` is optional (default `probe`).

pub mod locomo;
pub mod longmemeval;
pub mod synthetic;
pub mod trajectories;

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use submem_core::{Event, Regime};

use crate::{BenchError, Result};

/// Which benchmark family a dataset belongs to; selects the judge rubric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetKind {
    /// LoCoMo (Mem0 binary rubric).
    Locomo,
    /// LongMemEval (per-type rubric).
    LongMemEval,
    /// ALFWorld-style trajectories with generated probes.
    Alfworld,
    /// Agent-probe JSONL.
    Probes,
    /// The bundled synthetic generator.
    Synthetic,
}

impl DatasetKind {
    /// Parses a `--dataset` name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "locomo" => DatasetKind::Locomo,
            "longmemeval" | "lme" => DatasetKind::LongMemEval,
            // ALFWorld trajectories are the agentic format the harness loads.
            "alfworld" | "agentic" => DatasetKind::Alfworld,
            "probes" | "agent-probes" => DatasetKind::Probes,
            "synthetic" | "synth" => DatasetKind::Synthetic,
            other => {
                return Err(BenchError::InvalidOption(format!(
                    "unknown dataset {other:?}; known: locomo, longmemeval, alfworld (agentic), probes, synthetic"
                )))
            }
        })
    }

    /// The short name used in results.
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Locomo => "locomo",
            DatasetKind::LongMemEval => "longmemeval",
            DatasetKind::Alfworld => "alfworld",
            DatasetKind::Probes => "probes",
            DatasetKind::Synthetic => "synthetic",
        }
    }
}

/// What kind of answer a question expects (drives the judge rubric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// A plain factual question.
    Standard,
    /// Temporal reasoning (off-by-one tolerance in the judge).
    Temporal,
    /// A fact that was updated: the latest value is right.
    KnowledgeUpdate,
    /// The history does not answer it: the model should decline.
    Abstention,
    /// LoCoMo category 5 (adversarial): no gold answer; excluded from answer metrics.
    Adversarial,
}

/// One question over a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Stable id within the conversation.
    pub id: String,
    /// The question.
    pub text: String,
    /// The gold answer; `None` when the dataset gives none (LoCoMo category 5).
    pub answer: Option<String>,
    /// Source ids of the gold evidence events.
    pub evidence: Vec<String>,
    /// Breakdown label (LoCoMo category, LongMemEval type, probe category).
    pub category: String,
    /// Judge rubric selector.
    pub kind: QuestionKind,
    /// Conversational question or agentic probe.
    pub regime: Regime,
    /// The newest unit the agent sees (agentic probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// When the question is asked, if the dataset says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// A conversation's history: concrete batches, or a generator that produces
/// them again on demand (so that a million-unit synthetic history is never
/// held in memory).
#[derive(Debug, Clone)]
pub enum HistorySource {
    /// Session-sized batches of events, oldest first.
    Sessions(Arc<Vec<Vec<Event>>>),
    /// A synthetic conversation, generated lazily.
    Synthetic(Arc<synthetic::SyntheticConversation>),
}

impl HistorySource {
    /// Iterates over the write batches, oldest first.
    pub fn batches(&self) -> Box<dyn Iterator<Item = Vec<Event>> + Send + '_> {
        match self {
            HistorySource::Sessions(s) => Box::new(s.iter().cloned()),
            HistorySource::Synthetic(g) => Box::new(g.batches()),
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        match self {
            HistorySource::Sessions(s) => s.iter().map(Vec::len).sum(),
            HistorySource::Synthetic(g) => g.units(),
        }
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One history and the questions asked over it. Every substrate writes the
/// same history.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// Stable id (LoCoMo `sample_id`, LongMemEval `question_id`, episode id).
    pub id: String,
    /// The history.
    pub history: HistorySource,
    /// Questions, in dataset order.
    pub questions: Vec<Question>,
    /// Text of every event cited as evidence (source id → the event's text,
    /// e.g. a turn's utterance), for evidence coverage.
    pub evidence_text: HashMap<String, String>,
}

/// The text of every event `questions` cite as evidence, looked up in
/// `texts` (source id → text); cited ids `texts` lacks are left out.
pub(crate) fn evidence_text(
    questions: &[Question],
    texts: &HashMap<String, String>,
) -> HashMap<String, String> {
    questions
        .iter()
        .flat_map(|q| q.evidence.iter())
        .filter_map(|e| texts.get(e).map(|t| (e.clone(), t.clone())))
        .collect()
}

/// Problems found while loading that did not stop the load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadWarnings {
    /// Evidence strings that could not be parsed as ids (e.g. LoCoMo `"D"`).
    pub malformed_evidence: Vec<String>,
    /// Evidence ids that name no event of their conversation.
    pub unknown_evidence: Vec<String>,
    /// Other notes (skipped items, missing fields).
    pub notes: Vec<String>,
}

impl LoadWarnings {
    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.malformed_evidence.is_empty()
            && self.unknown_evidence.is_empty()
            && self.notes.is_empty()
    }
}

/// A loaded dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Format / family.
    pub kind: DatasetKind,
    /// Name used in results (`locomo`, `synthetic`...).
    pub name: String,
    /// The conversations.
    pub conversations: Vec<Conversation>,
    /// Problems found while loading.
    pub warnings: LoadWarnings,
}

impl Dataset {
    /// Loads `path` in the format of `kind` (not for [`DatasetKind::Synthetic`],
    /// which is generated: see [`synthetic::SyntheticSpec::dataset`]).
    pub fn load(kind: DatasetKind, path: &Path) -> Result<Self> {
        match kind {
            DatasetKind::Locomo => locomo::load(path),
            DatasetKind::LongMemEval => longmemeval::load(path),
            DatasetKind::Alfworld => trajectories::load_alfworld(path),
            DatasetKind::Probes => trajectories::load_probes(path),
            DatasetKind::Synthetic => Err(BenchError::InvalidOption(
                "the synthetic dataset is generated, not loaded; omit --data".into(),
            )),
        }
    }

    /// What a loader read from `path`: `conversations` in `kind`, or an
    /// error in `format` saying there were `none` (`"no samples"`).
    pub(crate) fn loaded(
        kind: DatasetKind,
        conversations: Vec<Conversation>,
        warnings: LoadWarnings,
        path: &Path,
        format: &'static str,
        none: &str,
    ) -> Result<Self> {
        if conversations.is_empty() {
            return Err(BenchError::format(path, format, none));
        }
        Ok(Dataset {
            kind,
            name: kind.name().into(),
            conversations,
            warnings,
        })
    }

    /// Total questions.
    pub fn question_count(&self) -> usize {
        self.conversations.iter().map(|c| c.questions.len()).sum()
    }
}

/// Reads a whole file, with the path in the error.
pub(crate) fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))
}

/// Renders a JSON scalar answer (LoCoMo answers are sometimes integers).
pub(crate) fn answer_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}
