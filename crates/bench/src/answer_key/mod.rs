//! Answer keys as data: corrections to a dataset's gold answers, applied
//! beside the original key, so that every answer metric is reported under
//! both (`submem bench --answer-key FILE`).
//!
//! A correction either **replaces** a question's gold answer or
//! **excludes** the question (its gold answer is wrong and no right one is
//! given), with an optional reason. The key is read and checked against the
//! dataset before a run starts ([`AnswerKey::load`]): a malformed entry, an
//! entry naming no question of the dataset, one whose record of the
//! question or of its original answer differs from the dataset's, a
//! question corrected twice, a correction to a question without a gold
//! answer (LoCoMo's adversarial category) or one that changes nothing are
//! each an error naming the entry (numbered from 1 in file order) and the
//! question as the entry names it.
//!
//! Two formats are read, told apart by their shape:
//!
//! - **The LoCoMo audit's error list** ([`audit`]): a JSON list of entries
//!   `{"question_id": "locomo_0_qa5", "question", "golden_answer",
//!   "category", "error_type", "correct_answer", "reasoning", …}`, as the
//!   audit publishes them (`errors.json`, `audit/errors_conv_N.json`). Its
//!   score-corrupting entries (`HALLUCINATION`, `TEMPORAL_ERROR`,
//!   `ATTRIBUTION_ERROR`, `AMBIGUOUS`, `INCOMPLETE`) replace the gold
//!   answer with `correct_answer`, as the audit rescored published runs;
//!   `WRONG_CITATION` entries (right answer, wrong evidence ids) are set
//!   aside and counted.
//! - **submem's own** ([`own`]): `{"description": …, "dataset": …,
//!   "corrections": [{"conversation", "question_id" or "question", "answer"
//!   or "exclude": true, "reason", "old_answer"}]}`.
//!
//! During a run, an item whose question the key changes keeps its answer
//! metrics under the corrected key in its `corrected` field ([`Corrected`]:
//! the new gold answer, answer recall, EM, F1, BLEU-1, SubEM and a second
//! verdict of every judge, asked only for such items and metered); items
//! the key leaves alone score the same under both keys. The run keeps the
//! key it applied in [`APPLIED_FILE`], from which the summary gives every
//! answer metric under both keys with each category's *ceiling* (the share
//! of questions asked whose original gold answer the key keeps) and the
//! report lists every change ([`summary`], [`report`]).

pub mod audit;
pub mod own;
mod resolve;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

use crate::dataset::{Dataset, QuestionKind};
use crate::{BenchError, Result};

/// The file in a run directory that keeps the key the run applied.
pub const APPLIED_FILE: &str = "answer_key.json";

/// The format name in error messages.
const FORMAT: &str = "answer key";

/// Problems listed in one error before the rest are counted.
const LISTED_PROBLEMS: usize = 10;

/// Which format a key file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyFormat {
    /// The LoCoMo audit's list of errors ([`audit`]).
    LocomoAudit,
    /// submem's own corrections file ([`own`]).
    Submem,
}

impl KeyFormat {
    /// How the report names the format.
    pub fn describe(self) -> &'static str {
        match self {
            KeyFormat::LocomoAudit => "the LoCoMo audit's error list",
            KeyFormat::Submem => "submem's corrections format",
        }
    }
}

/// Which key: the file as named and the SHA-256 of its bytes (what
/// `sha256sum` prints), the part two runs must share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyId {
    /// The file's path as given.
    pub name: String,
    /// SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
}

impl KeyId {
    /// The id of `bytes` read from `name`.
    pub fn of(name: impl Into<String>, bytes: &[u8]) -> Self {
        KeyId {
            name: name.into(),
            sha256: format!("{:x}", Sha256::digest(bytes)),
        }
    }
}

/// One change a key makes to a question's gold answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The entry of the key file (from 1, in file order).
    pub entry: usize,
    /// The question as the entry names it (`locomo_0_qa5`, `conv-26/q5`).
    pub id: String,
    /// The dataset's conversation id.
    pub conversation: String,
    /// The dataset's question id.
    pub question_id: String,
    /// The question.
    pub question: String,
    /// The question's category.
    pub category: String,
    /// The question's kind.
    pub kind: QuestionKind,
    /// The dataset's gold answer.
    pub gold: String,
    /// The gold answer under the corrected key; `None` when the key
    /// excludes the question.
    pub corrected: Option<String>,
    /// Why, as the key says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Change {
    /// Whether the key excludes the question (rather than replacing its gold
    /// answer).
    pub fn excludes(&self) -> bool {
        self.corrected.is_none()
    }
}

/// A key read and checked against a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerKey {
    /// Which file.
    #[serde(flatten)]
    pub id: KeyId,
    /// Its format.
    pub format: KeyFormat,
    /// The dataset it was checked against (its name in results).
    pub dataset: String,
    /// What the key says of itself (submem's format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Entries in the file.
    pub entries: usize,
    /// Entries that change no gold answer, counted by why (the audit's
    /// `WRONG_CITATION`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set_aside: BTreeMap<String, usize>,
    /// The changes, in file order.
    pub changes: Vec<Change>,
}

/// What a format reader makes of a file: its entries, not yet checked
/// against a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The format.
    pub format: KeyFormat,
    /// What the key says of itself.
    pub description: Option<String>,
    /// The dataset the key says it is for.
    pub dataset: Option<String>,
    /// Entries in the file.
    pub entries: usize,
    /// The entries, in file order.
    pub list: Vec<Entry>,
}

/// One entry of a key file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its number (from 1, in file order).
    pub number: usize,
    /// The question as the entry names it.
    pub id: String,
    /// Which question.
    pub target: Target,
    /// The key's record of the original gold answer, checked against the
    /// dataset's when given.
    pub gold: Option<String>,
    /// The key's record of the question's category number, checked when given.
    pub category: Option<i64>,
    /// What the entry does.
    pub action: Action,
    /// Why.
    pub reason: Option<String>,
}

/// Which question an entry names.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The LoCoMo audit's `locomo_<N>_qa<J>`: question `q<J>` of sample `N`
    /// of `locomo10.json`, with the question's text.
    Indexed {
        /// Sample index in `locomo10.json`.
        sample: usize,
        /// Index in the sample's `qa` list (the dataset's `q<J>`).
        qa: usize,
        /// The question's text.
        question: String,
    },
    /// A conversation id with a question id, the question's text, or both.
    Named {
        /// Conversation id.
        conversation: String,
        /// Question id.
        question_id: Option<String>,
        /// The question's text.
        question: Option<String>,
    },
}

/// What an entry does to its question's gold answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Replaces it.
    Replace(String),
    /// Excludes the question under the corrected key.
    Exclude,
    /// Leaves it (counted under this label, e.g. `WRONG_CITATION`).
    SetAside(String),
}

/// `text` with its white space collapsed, for comparisons.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error in the key file `name` listing `problems`, then `hint`.
fn problems_error(name: &str, problems: &[String], hint: Option<&str>) -> BenchError {
    let mut reason = match problems {
        [one] => one.clone(),
        many => {
            let mut s = format!("{} problems: ", many.len());
            s.push_str(
                &many
                    .iter()
                    .take(LISTED_PROBLEMS)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
            );
            if many.len() > LISTED_PROBLEMS {
                s.push_str(&format!("; and {} more", many.len() - LISTED_PROBLEMS));
            }
            s
        }
    };
    if let Some(h) = hint {
        reason.push_str(&format!(" ({h})"));
    }
    BenchError::format(name, FORMAT, reason)
}

/// Reads a key file's format and entries without a dataset: what
/// `--check` can say of it (malformed entries, an unknown format).
pub fn parse(name: &str, bytes: &[u8]) -> Result<Parsed> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| BenchError::format(name, FORMAT, format!("not UTF-8 text ({e})")))?;
    let root: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| BenchError::format(name, FORMAT, format!("invalid JSON: {e}")))?;
    let parsed = match &root {
        serde_json::Value::Array(list) => audit::parse(list),
        serde_json::Value::Object(o) => own::parse(o),
        _ => Err(vec![
            "expected the LoCoMo audit's list of errors or an object with \"corrections\"".into(),
        ]),
    }
    .map_err(|problems| problems_error(name, &problems, None))?;
    if parsed.entries == 0 {
        return Err(BenchError::format(name, FORMAT, "the file has no entries"));
    }
    Ok(parsed)
}

/// Reads and parses the key file at `path` ([`parse`]), with its id.
pub fn read_file(path: &Path) -> Result<(KeyId, Parsed)> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::io(path, e))?;
    let name = path.display().to_string();
    let parsed = parse(&name, &bytes)?;
    Ok((KeyId::of(name, &bytes), parsed))
}

impl AnswerKey {
    /// Reads the key at `path` and checks it against `dataset` (see the
    /// module docs).
    pub fn load(path: &Path, dataset: &Dataset) -> Result<Self> {
        let (id, parsed) = read_file(path)?;
        Self::resolve(id, parsed, dataset)
    }

    /// The change the key makes to question `question_id` of `conversation`.
    pub fn change(&self, conversation: &str, question_id: &str) -> Option<&Change> {
        self.changes
            .iter()
            .find(|c| c.question_id == question_id && c.conversation == conversation)
    }

    /// Gold answers the key replaces.
    pub fn replaced(&self) -> usize {
        self.changes.iter().filter(|c| !c.excludes()).count()
    }

    /// Questions the key excludes.
    pub fn excluded(&self) -> usize {
        self.changes.iter().filter(|c| c.excludes()).count()
    }

    /// The key a run directory applied ([`APPLIED_FILE`]), if any.
    pub fn read_applied(dir: &Path) -> Result<Option<Self>> {
        crate::items::read_json_file(&dir.join(APPLIED_FILE))
    }

    /// Writes the key into `dir` as the one its run applied.
    pub fn write_applied(&self, dir: &Path) -> Result<()> {
        crate::items::write_json_file(&dir.join(APPLIED_FILE), self)
    }
}

/// Before a run into `dir` starts: refuses to resume results scored under
/// another key (or none, or under a key where there was none), then records
/// `key` as the one the run applies. `has_items`: whether `dir` holds items.
pub fn prepare_dir(
    dir: &Path,
    key: Option<&AnswerKey>,
    dataset: &str,
    has_items: bool,
) -> Result<()> {
    if let Some(k) = key.filter(|k| k.dataset != dataset) {
        return Err(BenchError::InvalidOption(format!(
            "the answer key {} was checked against the dataset {}, the run's is {dataset}",
            k.id.name, k.dataset
        )));
    }
    let old = AnswerKey::read_applied(dir)?;
    let sha = |k: Option<&AnswerKey>| k.map(|k| k.id.sha256.clone());
    if has_items && sha(old.as_ref()) != sha(key) {
        let name = |k: Option<&AnswerKey>| {
            k.map_or("no answer key".to_string(), |k| {
                format!("the answer key {} (sha256 {})", k.id.name, k.id.sha256)
            })
        };
        return Err(BenchError::InvalidOption(format!(
            "{} holds items scored with {}, this run has {}: use a new output directory \
(or the same answer key)",
            dir.display(),
            name(old.as_ref()),
            name(key)
        )));
    }
    match key {
        Some(k) => k.write_applied(dir),
        None => Ok(()),
    }
}

/// For a merge of shards: the key every shard in `dirs` applied (the same
/// in each, or none in any), written into `out`.
pub fn merge_applied(dirs: &[&Path], out: &Path) -> Result<()> {
    let mut first: Option<(Option<AnswerKey>, &Path)> = None;
    for dir in dirs {
        let key = AnswerKey::read_applied(dir)?;
        match &first {
            None => first = Some((key, dir)),
            Some((k, d))
                if k.as_ref().map(|k| &k.id.sha256) != key.as_ref().map(|k| &k.id.sha256) =>
            {
                return Err(BenchError::Merge(format!(
                    "{} and {} applied different answer keys",
                    d.display(),
                    dir.display()
                )))
            }
            Some(_) => {}
        }
    }
    let stale = out.join(APPLIED_FILE);
    match first.and_then(|(k, _)| k) {
        Some(k) => k.write_applied(out),
        None if stale.is_file() => {
            std::fs::remove_file(&stale).map_err(|e| BenchError::io(&stale, e))
        }
        None => Ok(()),
    }
}
