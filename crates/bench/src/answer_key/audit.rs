//! The LoCoMo audit's error list: a JSON list, one entry per question whose
//! gold answer or evidence the audit found wrong.
//!
//! ```json
//! [{"question_id": "locomo_0_qa5", "question": "When did Melanie run a charity race?",
//!   "golden_answer": "The sunday before 25 May 2023", "category": 2,
//!   "error_type": "TEMPORAL_ERROR", "cited_evidence": ["D2:1"], "correct_evidence": ["D2:1"],
//!   "reasoning": "D2:1 says 'last Saturday' …", "correct_answer": "The Saturday before 25 May 2023"}]
//! ```
//!
//! `question_id` is `locomo_<N>_qa<J>`: sample `N` of `locomo10.json`
//! (from 0, in file order) and its `qa` entry `J` (from 0, adversarial
//! questions counted), which is the question submem's LoCoMo loader calls
//! `q<J>`. The entry's `question` must be that question's text, and
//! `golden_answer` and `category`, when given, the dataset's. Fields the
//! reader does not use (the evidence lists, new ones) are left alone.
//!
//! What each `error_type` does is [`ERROR_TYPES`]: the five score-corrupting
//! types replace the gold answer with `correct_answer` (the audit rescored
//! published runs against it), `WRONG_CITATION` (a right answer citing the
//! wrong evidence) changes no answer and is set aside. A type not listed is
//! an error; a new one is a line of [`ERROR_TYPES`].

use serde_json::{Map, Value};

use super::{Action, Entry, KeyFormat, Parsed, Target};
use crate::dataset::answer_string;

/// What an audit error type does to the gold answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The gold answer is wrong: `correct_answer` replaces it.
    Replace,
    /// The gold answer stands (only its evidence is wrong): set aside.
    SetAside,
}

/// The audit's error types and what each does.
pub const ERROR_TYPES: &[(&str, Effect)] = &[
    ("HALLUCINATION", Effect::Replace),
    ("TEMPORAL_ERROR", Effect::Replace),
    ("ATTRIBUTION_ERROR", Effect::Replace),
    ("AMBIGUOUS", Effect::Replace),
    ("INCOMPLETE", Effect::Replace),
    ("WRONG_CITATION", Effect::SetAside),
];

/// Reads the audit's list; every malformed entry is a problem naming it.
pub fn parse(list: &[Value]) -> Result<Parsed, Vec<String>> {
    let mut problems = Vec::new();
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
        format: KeyFormat::LocomoAudit,
        description: None,
        dataset: None,
        entries: list.len(),
        list: entries,
    })
}

/// `locomo_<N>_qa<J>` as (N, J).
pub fn question_id(id: &str) -> Option<(usize, usize)> {
    let (sample, qa) = id.strip_prefix("locomo_")?.split_once("_qa")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(sample) || !digits(qa) {
        return None;
    }
    Some((sample.parse().ok()?, qa.parse().ok()?))
}

fn entry(number: usize, v: &Value) -> Result<Entry, String> {
    let Some(o) = v.as_object() else {
        return Err(format!("entry {number}: not an object but {v}"));
    };
    let id = o.get("question_id").and_then(Value::as_str).unwrap_or("?");
    let label = format!("entry {number} ({id})");
    let bad = |why: String| format!("{label}: {why}");
    let Some((sample, qa)) = question_id(id) else {
        return Err(bad(
            "\"question_id\" must be a string locomo_<N>_qa<J>".into()
        ));
    };
    let question = text(o, "question").map_err(&bad)?;
    let error_type = text(o, "error_type").map_err(&bad)?;
    let Some((_, effect)) = ERROR_TYPES.iter().find(|(t, _)| *t == error_type) else {
        let known: Vec<&str> = ERROR_TYPES.iter().map(|(t, _)| *t).collect();
        return Err(bad(format!(
            "unknown error_type {error_type:?} (known: {})",
            known.join(", ")
        )));
    };
    let gold = match o.get("golden_answer") {
        None => None,
        Some(g @ (Value::String(_) | Value::Number(_))) => answer_string(g),
        Some(g) => return Err(bad(format!("\"golden_answer\" must be text, not {g}"))),
    };
    let category = match o.get("category") {
        None | Some(Value::Null) => None,
        Some(c) => Some(
            c.as_i64()
                .ok_or_else(|| bad(format!("\"category\" must be a number, not {c}")))?,
        ),
    };
    let reasoning = match o.get("reasoning") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Some(r) => return Err(bad(format!("\"reasoning\" must be text, not {r}"))),
    };
    let action = match effect {
        Effect::SetAside => Action::SetAside(error_type.clone()),
        Effect::Replace => Action::Replace(text(o, "correct_answer").map_err(&bad)?),
    };
    Ok(Entry {
        number,
        id: id.to_string(),
        target: Target::Indexed {
            sample,
            qa,
            question,
        },
        gold,
        category,
        action,
        reason: Some(match reasoning {
            Some(r) => format!("{error_type}: {r}"),
            None => error_type,
        }),
    })
}

/// The non-empty text of field `key`.
fn text(o: &Map<String, Value>, key: &str) -> Result<String, String> {
    match o.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) => Err(format!("\"{key}\" is empty")),
        None => Err(format!("\"{key}\" is missing")),
        Some(other) => Err(format!("\"{key}\" must be text, not {other}")),
    }
}
