//! `submem bench --reader-prompt FILE --judge-prompt FILE`: the run's reader
//! and judge templates ([`submem_bench::prompt`]), loaded and checked before
//! anything else, recorded with their hashes in `run.json`, named in the
//! report's notes, and given to the registry so that the substrates serving
//! their own reader (M9, M11) are built for the reader template.

use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

use submem::registry::Registry;
use submem_bench::prompt::{JudgeTemplate, PromptId, ReaderTemplate};

use crate::run_info;
use crate::AnyError;

/// The prompt template flags of `submem bench`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The reader's prompt template, a UTF-8 text file (default: the built-in prompt). Above a
    /// line `---`, the system message (blank: none; without the line, the built-in one); below
    /// it, the user message with `{memory}` and then `{question}`, once each, and optionally
    /// `{if date}…{date}…{end}` and `{if observation}…{observation}…{end}` blocks, left out
    /// for questions without a date or an observation (a block tag alone on its line removes
    /// the line). The fixed part of the budget is counted on it, M9 and M11 are built for it,
    /// and run.json records the file and its sha256; README's bench section has an example.
    #[arg(long, value_name = "FILE")]
    pub reader_prompt: Option<PathBuf>,
    /// The judge's prompt template, a UTF-8 text file with `{question}`, `{gold}` and
    /// `{answer}`, used for every question instead of the built-in rubrics (default). Its
    /// reply is read as yes/no when its first word is one, else by its last CORRECT / WRONG /
    /// INCORRECT, else by a lone yes or no. run.json records the file and its sha256.
    #[arg(long, value_name = "FILE")]
    pub judge_prompt: Option<PathBuf>,
}

/// A run's templates.
#[derive(Debug, Clone)]
pub struct Prompts {
    /// The reader's.
    pub reader: ReaderTemplate,
    /// The judge's.
    pub judge: JudgeTemplate,
}

impl PromptArgs {
    /// The templates the flags name (the built-in ones where none is named),
    /// each read and checked.
    pub fn load(&self) -> Result<Prompts, AnyError> {
        Ok(Prompts {
            reader: match &self.reader_prompt {
                Some(path) => ReaderTemplate::from_file(path)?,
                None => ReaderTemplate::builtin(),
            },
            judge: match &self.judge_prompt {
                Some(path) => JudgeTemplate::from_file(path)?,
                None => JudgeTemplate::builtin(),
            },
        })
    }

    /// The first of the flags given, if any (for a run that asks no
    /// questions and so cannot honour them).
    pub fn given(&self) -> Option<&'static str> {
        if self.reader_prompt.is_some() {
            Some("--reader-prompt")
        } else if self.judge_prompt.is_some() {
            Some("--judge-prompt")
        } else {
            None
        }
    }
}

impl Prompts {
    /// `registry`, building for the reader template when it is not the
    /// built-in one (a plugin's registry keeps its own reader prompt
    /// otherwise).
    pub fn registry(&self, registry: Arc<Registry>) -> Arc<Registry> {
        if self.reader.id().is_builtin() {
            return registry;
        }
        Arc::new(Registry::clone(&registry).with_reader_prompt(self.reader.reader_prompt()))
    }

    /// Sets the `reader_prompt` and `judge_prompt` keys of a run description.
    pub fn record(&self, info: &mut Value) -> Result<(), AnyError> {
        info[run_info::READER_PROMPT] = serde_json::to_value(self.reader.id())?;
        info[run_info::JUDGE_PROMPT] = serde_json::to_value(self.judge.id())?;
        Ok(())
    }

    /// The report's notes on the templates: one per custom template, by
    /// hash (run.json names the file; a path would keep shards run from other
    /// directories from merging).
    pub fn notes(&self) -> Vec<String> {
        let short = |id: &PromptId| id.sha256.chars().take(12).collect::<String>();
        let mut out = Vec::new();
        if !self.reader.id().is_builtin() {
            out.push(format!(
                "reader prompt: a custom template (sha256 {}…; run.json names the file)",
                short(self.reader.id())
            ));
        }
        if !self.judge.id().is_builtin() {
            out.push(format!(
                "judge prompt: a custom template for every question (sha256 {}…; run.json names the file)",
                short(self.judge.id())
            ));
        }
        out
    }
}
