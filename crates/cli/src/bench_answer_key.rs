//! `submem bench --answer-key FILE`: corrections to the dataset's gold
//! answers ([`submem_bench::answer_key`]), read and checked against the
//! dataset before anything runs (`--check` reads the file's format and
//! entries without the dataset), recorded with its hash in `run.json` (a
//! resume or a merge with another key is refused, see [`crate::run_info`])
//! and named in the report's notes by hash.

use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

use submem_bench::answer_key::{self, AnswerKey};
use submem_bench::Dataset;

use crate::run_info;
use crate::AnyError;

/// The answer key flag of `submem bench`.
#[derive(Debug, Args)]
pub struct AnswerKeyArgs {
    /// Corrections to the dataset's gold answers, a JSON file: every answer metric is then also
    /// reported under the corrected key, with each category's ceiling, and the report lists every
    /// change. Either the LoCoMo audit's error list (its errors.json, or audit/errors_conv_N.json
    /// for one conversation's file: score-corrupting entries replace the gold answer with
    /// correct_answer, WRONG_CITATION entries are set aside) or submem's own format:
    /// {"corrections": [{"conversation": ID, "question_id": "q5" (or "question": its text),
    /// "answer": NEW (or "exclude": true), "reason": WHY}]}. An entry naming no question of the
    /// dataset, or malformed, is an error naming it. run.json records the file and its sha256.
    #[arg(long, value_name = "FILE")]
    pub answer_key: Option<PathBuf>,
}

impl AnswerKeyArgs {
    /// `--check`: the file's format and entries, without the dataset.
    pub fn check(&self) -> Result<(), AnyError> {
        if let Some(path) = &self.answer_key {
            answer_key::read_file(path)?;
        }
        Ok(())
    }

    /// The key the flag names, checked against `dataset`.
    pub fn load(&self, dataset: &Dataset) -> Result<Option<Arc<AnswerKey>>, AnyError> {
        Ok(match &self.answer_key {
            Some(path) => Some(Arc::new(AnswerKey::load(path, dataset)?)),
            None => None,
        })
    }
}

/// Sets the `answer_key` key of a run description: the file and its
/// sha256, or null.
pub fn record(key: Option<&AnswerKey>, info: &mut Value) -> Result<(), AnyError> {
    info[run_info::ANSWER_KEY] = match key {
        Some(k) => serde_json::to_value(&k.id)?,
        None => Value::Null,
    };
    Ok(())
}

/// The report's note on the key, by hash (run.json names the file; a path
/// would keep shards run from other directories from merging).
pub fn notes(key: Option<&AnswerKey>) -> Vec<String> {
    key.map(|k| {
        format!(
            "answer key: sha256 {}… ({}; run.json names the file): {} gold answers replaced, \
{} questions excluded; the Answer key section scores every answer under both keys",
            k.id.sha256.chars().take(12).collect::<String>(),
            k.format.describe(),
            k.replaced(),
            k.excluded()
        )
    })
    .into_iter()
    .collect()
}
