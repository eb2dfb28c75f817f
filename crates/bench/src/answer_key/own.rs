//! submem's own corrections format: one JSON object.
//!
//! ```json
//! {"description": "My review of conv-26", "dataset": "locomo",
//!  "corrections": [
//!    {"conversation": "conv-26", "question_id": "q5",
//!     "answer": "The Saturday before 25 May 2023", "reason": "D2:1 says last Saturday"},
//!    {"conversation": "conv-26", "question": "What is Caroline's identity?",
//!     "exclude": true, "reason": "the evidence does not say"},
//!    {"conversation": "conv-26", "question_id": "q2", "old_answer": "Psychology, counseling certification",
//!     "answer": "Counseling or mental health"}]}
//! ```
//!
//! `corrections` is required; `description` (shown in the report) and
//! `dataset` (the dataset's name in results: `locomo`, `longmemeval`,
//! `synthetic`…, checked against the run's) are optional. Each correction
//! names a `conversation` (its id: LoCoMo's `sample_id`, LongMemEval's
//! `question_id`) and a question by `question_id` (`q<J>` for LoCoMo's
//! `qa` entry `J`, from 0) or by its exact text `question` (white space
//! aside), or both, which must agree; then either `answer`, the corrected
//! gold answer (text or a number), or `"exclude": true`, which leaves the
//! question out under the corrected key; `reason` is optional, and
//! `old_answer`, when given, must be the dataset's gold answer (a guard
//! against a key written for other data). Any other field is an error.

use serde_json::{Map, Value};

use super::{Action, Entry, KeyFormat, Parsed, Target};
use crate::dataset::answer_string;

/// The fields of the file.
const TOP: [&str; 3] = ["corrections", "description", "dataset"];

/// The fields of a correction.
const FIELDS: [&str; 7] = [
    "conversation",
    "question_id",
    "question",
    "answer",
    "exclude",
    "reason",
    "old_answer",
];

/// Reads the object; every malformed entry is a problem naming it.
pub fn parse(o: &Map<String, Value>) -> Result<Parsed, Vec<String>> {
    let mut problems = Vec::new();
    if let Some(k) = o.keys().find(|k| !TOP.contains(&k.as_str())) {
        problems.push(format!(
            "unknown field {k:?} (a corrections file has {})",
            TOP.join(", ")
        ));
    }
    let optional = |key: &str, problems: &mut Vec<String>| match o.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Some(v) => {
            problems.push(format!("\"{key}\" must be text, not {v}"));
            None
        }
    };
    let description = optional("description", &mut problems);
    let dataset = optional("dataset", &mut problems);
    let list = match o.get("corrections") {
        Some(Value::Array(list)) => list.as_slice(),
        Some(v) => {
            problems.push(format!("\"corrections\" must be a list, not {v}"));
            &[]
        }
        None => {
            problems.push(
                "\"corrections\" is missing (the file is neither submem's corrections format \
nor the LoCoMo audit's list of errors)"
                    .into(),
            );
            &[]
        }
    };
    let mut entries = Vec::new();
    for (i, v) in list.iter().enumerate() {
        match entry(i + 1, v) {
            Ok(e) => entries.push(e),
            Err(why) => problems.push(why),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Parsed {
        format: KeyFormat::Submem,
        description,
        dataset,
        entries: list.len(),
        list: entries,
    })
}

fn entry(number: usize, v: &Value) -> Result<Entry, String> {
    let Some(o) = v.as_object() else {
        return Err(format!("entry {number}: not an object but {v}"));
    };
    let s = |key: &str| o.get(key).and_then(Value::as_str).map(str::trim);
    let id = format!(
        "{}/{}",
        s("conversation").unwrap_or("?"),
        match (s("question_id"), s("question")) {
            (Some(id), _) => id.to_string(),
            (None, Some(text)) => format!("{text:?}"),
            (None, None) => "?".into(),
        }
    );
    let label = format!("entry {number} ({id})");
    let bad = |why: String| format!("{label}: {why}");
    if let Some(k) = o.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown field {k:?} (a correction has {})",
            FIELDS.join(", ")
        )));
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(t)) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
            Some(Value::String(_)) => Err(bad(format!("\"{key}\" is empty"))),
            Some(v) => Err(bad(format!("\"{key}\" must be text, not {v}"))),
        }
    };
    let answer = |key: &str| -> Result<Option<String>, String> {
        match o.get(key) {
            Some(n @ Value::Number(_)) => Ok(answer_string(n)),
            _ => text(key),
        }
    };
    let Some(conversation) = text("conversation")? else {
        return Err(bad("\"conversation\" is missing".into()));
    };
    let question_id = text("question_id")?;
    let question = text("question")?;
    if question_id.is_none() && question.is_none() {
        return Err(bad(
            "name the question by \"question_id\" or by its text, \"question\"".into(),
        ));
    }
    let exclude = match o.get("exclude") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(v) => return Err(bad(format!("\"exclude\" must be true or false, not {v}"))),
    };
    let action = match (answer("answer")?, exclude) {
        (Some(a), false) => Action::Replace(a),
        (None, true) => Action::Exclude,
        (Some(_), true) => {
            return Err(bad(
                "give either \"answer\" or \"exclude\": true, not both".into()
            ))
        }
        (None, false) => {
            return Err(bad(
                "give the corrected \"answer\" or \"exclude\": true".into()
            ))
        }
    };
    Ok(Entry {
        number,
        id,
        target: Target::Named {
            conversation,
            question_id,
            question,
        },
        gold: answer("old_answer")?,
        category: None,
        action,
        reason: text("reason")?,
    })
}
