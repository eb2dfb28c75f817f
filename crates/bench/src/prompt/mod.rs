//! The reader and judge prompt templates: the built-in ones, and the text
//! files `submem bench --reader-prompt FILE --judge-prompt FILE` names. A run
//! records each as a [`PromptId`] (name and SHA-256) in `run.json`.
//!
//! **Syntax.** A template is UTF-8 text with placeholders in braces; `\r\n`
//! line breaks read as `\n`, and the file's final line break is not part of
//! the prompt. `{name}` (letters, digits, `_`) is a placeholder and must be
//! one the template takes; any other brace is text (`{"label": …}` is fine).
//!
//! **Reader template.** If a line is exactly `---`, the text above the first
//! such line is the system message (none is sent when it is blank) and the
//! text below it the user message; without one, the whole file is the user
//! message and the built-in system message ([`READER_SYSTEM`]) is sent. The
//! system message is plain text. The user message takes:
//!
//! - `{memory}` (once): the memory block;
//! - `{question}` (once, after `{memory}`);
//! - `{date}`, only inside `{if date}` … `{end}`: the block is left out when
//!   the question has no date;
//! - `{observation}`, only inside `{if observation}` … `{end}`: the newest
//!   observation of an agentic probe, the block left out for other questions.
//!
//! `{if …}` or `{end}` alone on a line removes that line. Blocks do not nest
//! and come after `{memory}`: everything before the memory block is the same
//! for every question, so the substrates that serve their own reader are
//! built for the template ([`ReaderTemplate::reader_prompt`]: M9 trains its
//! adapter on it, M11 prefills its episode caches under its head).
//!
//! The built-in reader template ([`ReaderTemplate::builtin_text`]):
//!
//! ```text
//! You answer questions from a memory of earlier conversations or agent steps. Use only the memory. …
//! ---
//! Memory:
//! {memory}
//!
//! {if observation}
//! Current observation:
//! {observation}
//!
//! {end}
//! {if date}
//! Today is {date}.
//! {end}
//! Question: {question}
//! Answer:
//! ```
//!
//! **Judge template.** One user message, used for every question (the
//! built-in judge picks a rubric per dataset and question type instead; see
//! [`crate::reader`]). It takes `{question}`, `{gold}` (the gold answer, or
//! for an abstention question the explanation) and `{answer}`, each at least
//! once, and no blocks. The reply is read by [`parse_custom_verdict`]: a
//! first word `yes` / `no`, else the last `CORRECT` / `WRONG` /
//! `INCORRECT` label, else a lone `yes` or `no`.
//!
//! **Hashes.** A file's SHA-256 is that of its bytes (what `sha256sum`
//! prints); the built-in templates' is that of [`ReaderTemplate::builtin_text`]
//! and [`JudgeTemplate::builtin_text`]. Runs compare templates by hash.

pub mod builtin;
mod syntax;

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use submem_core::plugin::{ReaderPrompt, MEMORY_INTRO, READER_SYSTEM};
use submem_core::ChatMessage;

use crate::{BenchError, Question, Result};
use builtin::{judge_prompt, parse_verdict, Rubric};
use syntax::{Fill, Grammar, Piece, Slot};

/// The name a built-in template is recorded under.
pub const BUILTIN: &str = "builtin";

/// Which template a run used: `builtin` or the file as named, and the
/// SHA-256 (lower-case hex) of its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptId {
    /// `builtin`, or the file's path as given.
    pub name: String,
    /// SHA-256 of the template's bytes, lower-case hex.
    pub sha256: String,
}

impl PromptId {
    fn of(name: impl Into<String>, text: &[u8]) -> Self {
        PromptId {
            name: name.into(),
            sha256: format!("{:x}", Sha256::digest(text)),
        }
    }

    /// Whether this is a built-in template.
    pub fn is_builtin(&self) -> bool {
        self.name == BUILTIN
    }
}

/// A template file's text: read, checked to be non-empty UTF-8, its line
/// breaks made `\n`, and its id.
fn read_template(path: &Path, format: &'static str) -> Result<(String, PromptId)> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::io(path, e))?;
    let id = PromptId::of(path.display().to_string(), &bytes);
    let text = String::from_utf8(bytes)
        .map_err(|e| BenchError::format(path, format, format!("not UTF-8 text ({e})")))?;
    if text.trim().is_empty() {
        return Err(BenchError::format(path, format, "the file is empty"));
    }
    Ok((text.replace("\r\n", "\n"), id))
}

/// The id of a template given as text under `name` (which cannot be the
/// built-in templates' name).
fn text_id(name: &str, text: &str, format: &'static str) -> Result<PromptId> {
    if name == BUILTIN {
        return Err(BenchError::format(
            name,
            format,
            "`builtin` names the built-in template; give another name",
        ));
    }
    Ok(PromptId::of(name, text.as_bytes()))
}

/// `text` without its final line break.
fn without_final_break(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

const READER_FORMAT: &str = "reader prompt template";
const JUDGE_FORMAT: &str = "judge prompt template";

const READER_GRAMMAR: Grammar = Grammar {
    slots: &[Slot::Memory, Slot::Question, Slot::Date, Slot::Observation],
    optional: &[Slot::Date, Slot::Observation],
    takes: "a reader template takes {memory}, {question}, and {date} / {observation} \
inside {if date} … {end} / {if observation} … {end}",
};

const JUDGE_GRAMMAR: Grammar = Grammar {
    slots: &[Slot::Question, Slot::Gold, Slot::Answer],
    optional: &[],
    takes: "a judge template takes {question}, {gold} and {answer}",
};

/// The reader's prompt: a system message (or none) and a user message
/// template. [`ReaderTemplate::default`] is the built-in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderTemplate {
    id: PromptId,
    system: Option<String>,
    user: Vec<Piece>,
}

impl Default for ReaderTemplate {
    fn default() -> Self {
        ReaderTemplate::builtin()
    }
}

impl ReaderTemplate {
    /// The built-in template's text, in the template syntax.
    pub fn builtin_text() -> String {
        format!(
            "{READER_SYSTEM}\n---\n{MEMORY_INTRO}{{memory}}\n\n{{if observation}}\nCurrent observation:\n\
{{observation}}\n\n{{end}}\n{{if date}}\nToday is {{date}}.\n{{end}}\nQuestion: {{question}}\nAnswer:\n"
        )
    }

    /// The built-in template (what [`crate::reader::reader_messages`] asks).
    pub fn builtin() -> Self {
        let text = |t: &str| Piece::Text(t.to_string());
        ReaderTemplate {
            id: PromptId::of(BUILTIN, Self::builtin_text().as_bytes()),
            system: Some(READER_SYSTEM.to_string()),
            user: vec![
                text(MEMORY_INTRO),
                Piece::Slot(Slot::Memory),
                text("\n\n"),
                Piece::Optional(
                    Slot::Observation,
                    vec![
                        text("Current observation:\n"),
                        Piece::Slot(Slot::Observation),
                        text("\n\n"),
                    ],
                ),
                Piece::Optional(
                    Slot::Date,
                    vec![text("Today is "), Piece::Slot(Slot::Date), text(".\n")],
                ),
                text("Question: "),
                Piece::Slot(Slot::Question),
                text("\nAnswer:"),
            ],
        }
    }

    /// The template in the file at `path`, recorded under its path.
    pub fn from_file(path: &Path) -> Result<Self> {
        let (text, id) = read_template(path, READER_FORMAT)?;
        Self::parse(&text, id).map_err(|reason| BenchError::format(path, READER_FORMAT, reason))
    }

    /// `text` as a template recorded under `name` (what [`Self::from_file`]
    /// does with a file's text).
    pub fn from_text(name: &str, text: &str) -> Result<Self> {
        let id = text_id(name, text, READER_FORMAT)?;
        Self::parse(&text.replace("\r\n", "\n"), id)
            .map_err(|reason| BenchError::format(name, READER_FORMAT, reason))
    }

    /// `text` (line breaks `\n`) as a reader template recorded as `id`.
    fn parse(text: &str, id: PromptId) -> std::result::Result<Self, String> {
        let separator = text
            .split_inclusive('\n')
            .scan(0, |at, line| {
                let start = *at;
                *at += line.len();
                Some((start, line))
            })
            .enumerate()
            .find(|(_, (_, line))| line.trim_end_matches('\n') == "---");
        let (system, user, first_line) = match separator {
            Some((n, (start, line))) => {
                let system = without_final_break(&text[..start]);
                if let Some(tag) = syntax::first_tag(system) {
                    return Err(format!(
                        "{tag} in the system message (above the `---` line): \
the system message is plain text; placeholders go below the line"
                    ));
                }
                let system = (!system.trim().is_empty()).then(|| system.to_string());
                (system, &text[start + line.len()..], n + 2)
            }
            None => (Some(READER_SYSTEM.to_string()), text, 1),
        };
        let user = syntax::parse(without_final_break(user), first_line, &READER_GRAMMAR)?;
        let (memories, memory_at) = syntax::occurrences(&user, Slot::Memory);
        let (questions, question_at) = syntax::occurrences(&user, Slot::Question);
        match memories {
            0 => {
                return Err(
                    "{memory} is missing: the template must say where the memory block goes".into(),
                )
            }
            1 => {}
            n => {
                return Err(format!(
                    "{{memory}} appears {n} times: it must appear once \
(the budget leaves room for one memory block)"
                ))
            }
        }
        match questions {
            0 => return Err("{question} is missing".into()),
            1 => {}
            n => {
                return Err(format!(
                    "{{question}} appears {n} times: it must appear once"
                ))
            }
        }
        let substrates = "so that the substrates serving their own reader (M9, M11) can be built for this prompt";
        if question_at < memory_at {
            return Err(format!(
                "{{question}} comes before {{memory}}: the memory block must come first, {substrates}"
            ));
        }
        if user[..memory_at.unwrap_or(0)]
            .iter()
            .any(|p| matches!(p, Piece::Optional(..)))
        {
            return Err(format!(
                "an {{if …}} block comes before {{memory}}: the text before the memory block must be \
the same for every question, {substrates}"
            ));
        }
        Ok(ReaderTemplate { id, system, user })
    }

    /// The template's name and hash.
    pub fn id(&self) -> &PromptId {
        &self.id
    }

    /// The reader's messages for `question` over `memory`: the system message
    /// (if any), then the user message.
    pub fn messages(&self, question: &Question, memory: &str) -> Vec<ChatMessage> {
        let mut user = String::with_capacity(memory.len() + 256);
        let fill = Fill {
            memory,
            question: &question.text,
            date: question.date.as_deref(),
            observation: question.newest.as_deref(),
            ..Fill::default()
        };
        syntax::render(&self.user, &fill, &mut user);
        let mut out = Vec::with_capacity(2);
        if let Some(s) = &self.system {
            out.push(ChatMessage::system(s.clone()));
        }
        out.push(ChatMessage::user(user));
        out
    }

    /// The template as the build context's [`ReaderPrompt`] (for a question
    /// with no date and no observation): the system message, the text before
    /// `{memory}`, between it and `{question}`, and after.
    pub fn reader_prompt(&self) -> ReaderPrompt {
        let mut parts = [String::new(), String::new(), String::new()];
        let mut part = 0;
        for p in &self.user {
            match p {
                Piece::Text(t) => parts[part].push_str(t),
                Piece::Slot(Slot::Memory) => part = 1,
                Piece::Slot(_) => part = 2,
                Piece::Optional(..) => {}
            }
        }
        let [memory_intro, question_intro, answer_cue] = parts;
        ReaderPrompt {
            system: self.system.clone(),
            memory_intro,
            question_intro,
            answer_cue,
        }
    }
}

/// The judge's prompt: the built-in rubrics, or one template for every
/// question. [`JudgeTemplate::default`] is the built-in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeTemplate {
    id: PromptId,
    custom: Option<Vec<Piece>>,
}

impl Default for JudgeTemplate {
    fn default() -> Self {
        JudgeTemplate::builtin()
    }
}

/// The built-in rubrics, in the order [`JudgeTemplate::builtin_text`] lists them.
const RUBRICS: [Rubric; 5] = [
    Rubric::Mem0,
    Rubric::LmeStandard,
    Rubric::LmeTemporal,
    Rubric::LmeKnowledgeUpdate,
    Rubric::LmeAbstention,
];

impl JudgeTemplate {
    /// The built-in rubrics' text: each rubric's prompt with the placeholders
    /// in place of the values, joined by lines `---` (what the built-in
    /// judge's hash is taken of).
    pub fn builtin_text() -> String {
        RUBRICS
            .iter()
            .map(|r| judge_prompt(*r, "{question}", "{gold}", "{answer}"))
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// The built-in judge: the rubric of each question's dataset and type.
    pub fn builtin() -> Self {
        JudgeTemplate {
            id: PromptId::of(BUILTIN, Self::builtin_text().as_bytes()),
            custom: None,
        }
    }

    /// The template in the file at `path`, recorded under its path.
    pub fn from_file(path: &Path) -> Result<Self> {
        let (text, id) = read_template(path, JUDGE_FORMAT)?;
        Self::parse(&text, id).map_err(|reason| BenchError::format(path, JUDGE_FORMAT, reason))
    }

    /// `text` as a template recorded under `name` (what [`Self::from_file`]
    /// does with a file's text).
    pub fn from_text(name: &str, text: &str) -> Result<Self> {
        let id = text_id(name, text, JUDGE_FORMAT)?;
        Self::parse(&text.replace("\r\n", "\n"), id)
            .map_err(|reason| BenchError::format(name, JUDGE_FORMAT, reason))
    }

    fn parse(text: &str, id: PromptId) -> std::result::Result<Self, String> {
        let pieces = syntax::parse(without_final_break(text), 1, &JUDGE_GRAMMAR)?;
        for slot in [Slot::Question, Slot::Gold, Slot::Answer] {
            if syntax::occurrences(&pieces, slot).0 == 0 {
                return Err(format!("{} is missing", slot.placeholder()));
            }
        }
        Ok(JudgeTemplate {
            id,
            custom: Some(pieces),
        })
    }

    /// The template's name and hash.
    pub fn id(&self) -> &PromptId {
        &self.id
    }

    /// The judge prompt for an answer to a question judged by `rubric`.
    pub fn prompt(&self, rubric: Rubric, question: &str, gold: &str, answer: &str) -> String {
        match &self.custom {
            None => judge_prompt(rubric, question, gold, answer),
            Some(pieces) => {
                let mut out = String::with_capacity(256 + question.len() + answer.len());
                let fill = Fill {
                    question,
                    gold,
                    answer,
                    ..Fill::default()
                };
                syntax::render(pieces, &fill, &mut out);
                out
            }
        }
    }

    /// The verdict in a judge's `reply` (see [`parse_verdict`] and
    /// [`parse_custom_verdict`]).
    pub fn verdict(&self, rubric: Rubric, reply: &str) -> Option<bool> {
        match self.custom {
            None => parse_verdict(rubric, reply),
            Some(_) => parse_custom_verdict(reply),
        }
    }
}

/// Reads a custom judge template's reply: a first word `yes` / `no`; else
/// the last `CORRECT` / `WRONG` / `INCORRECT` label; else a lone `yes` or
/// `no` anywhere; else `None`.
pub fn parse_custom_verdict(reply: &str) -> Option<bool> {
    builtin::first_word_yes_no(reply)
        .or_else(|| parse_verdict(Rubric::Mem0, reply))
        .or_else(|| parse_verdict(Rubric::LmeStandard, reply))
}

#[cfg(test)]
mod tests;
