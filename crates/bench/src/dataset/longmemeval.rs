//! LongMemEval (`longmemeval_s.json`, `_m`, `_oracle`): a list of items, each
//! one question over its own haystack. `haystack_sessions` are lists of
//! `{role, content, has_answer}` turns with parallel `haystack_session_ids`
//! and `haystack_dates`; the question has `question_date`, `question_type`
//! and `answer`; ids ending in `_abs` are abstention questions.
//!
//! Every item becomes one [`Conversation`] (id = `question_id`); each session
//! is one write batch; turns get source id `<session id>:<turn index>` (0-based)
//! and the session's date; gold evidence = the turns marked `has_answer: true`.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use submem_core::{Event, Regime, Turn};

use super::{
    answer_string, read_file, Conversation, Dataset, DatasetKind, HistorySource, LoadWarnings,
    Question, QuestionKind,
};
use crate::{BenchError, Result};

const FORMAT: &str = "LongMemEval";

/// Loads a LongMemEval file.
pub fn load(path: &Path) -> Result<Dataset> {
    parse(&read_file(path)?, path)
}

/// Parses LongMemEval JSON text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<Dataset> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| BenchError::format(path, FORMAT, format!("invalid JSON: {e}")))?;
    let items = root
        .as_array()
        .ok_or_else(|| BenchError::format(path, FORMAT, "expected a list of question items"))?;
    let mut warnings = LoadWarnings::default();
    let mut conversations = Vec::new();
    for (i, item) in items.iter().enumerate() {
        conversations.push(parse_item(item, i, path, &mut warnings)?);
    }
    Dataset::loaded(
        DatasetKind::LongMemEval,
        conversations,
        warnings,
        path,
        FORMAT,
        "no items",
    )
}

fn str_field<'a>(item: &'a Value, key: &str, path: &Path, index: usize) -> Result<&'a str> {
    item.get(key).and_then(Value::as_str).ok_or_else(|| {
        BenchError::format(
            path,
            FORMAT,
            format!("item {index}: missing string field {key:?}"),
        )
    })
}

fn parse_item(
    item: &Value,
    index: usize,
    path: &Path,
    warnings: &mut LoadWarnings,
) -> Result<Conversation> {
    let id = str_field(item, "question_id", path, index)?.to_string();
    let question = str_field(item, "question", path, index)?.to_string();
    let qtype = item
        .get("question_type")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    let sessions = item
        .get("haystack_sessions")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            BenchError::format(
                path,
                FORMAT,
                format!("item {id}: missing \"haystack_sessions\" list"),
            )
        })?;
    let ids: Vec<String> = item
        .get("haystack_session_ids")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    let dates: Vec<Option<String>> = item
        .get("haystack_dates")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if ids.len() != sessions.len() {
        warnings.notes.push(format!(
            "{id}: {} sessions but {} session ids; missing ids are numbered",
            sessions.len(),
            ids.len()
        ));
    }
    let mut batches = Vec::new();
    let mut evidence = Vec::new();
    let mut evidence_text = HashMap::new();
    for (s, session) in sessions.iter().enumerate() {
        let sid = ids
            .get(s)
            .filter(|x| !x.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("session-{s}"));
        let date = dates.get(s).cloned().flatten();
        let turns = session.as_array().ok_or_else(|| {
            BenchError::format(
                path,
                FORMAT,
                format!("item {id}: session {s} is not a list"),
            )
        })?;
        let mut batch = Vec::new();
        for (t, turn) in turns.iter().enumerate() {
            let (Some(role), Some(content)) = (
                turn.get("role").and_then(Value::as_str),
                turn.get("content").and_then(Value::as_str),
            ) else {
                warnings.notes.push(format!(
                    "{id} session {sid} turn {t}: no role or content, skipped"
                ));
                continue;
            };
            let source_id = format!("{sid}:{t}");
            if turn
                .get("has_answer")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                evidence.push(source_id.clone());
                evidence_text.insert(source_id.clone(), content.to_string());
            }
            batch.push(Event::Turn(Turn {
                session_id: sid.clone(),
                session_date: date.clone(),
                speaker: role.to_string(),
                text: content.to_string(),
                source_id,
            }));
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
    }
    let kind = if id.ends_with("_abs") {
        QuestionKind::Abstention
    } else {
        match qtype.as_str() {
            "temporal-reasoning" => QuestionKind::Temporal,
            "knowledge-update" => QuestionKind::KnowledgeUpdate,
            _ => QuestionKind::Standard,
        }
    };
    let q = Question {
        id: id.clone(),
        text: question,
        answer: item.get("answer").and_then(answer_string),
        evidence,
        category: if kind == QuestionKind::Abstention {
            "abstention".into()
        } else {
            qtype
        },
        kind,
        regime: Regime::Conversational,
        newest: None,
        date: item
            .get("question_date")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    Ok(Conversation {
        id,
        history: HistorySource::Sessions(Arc::new(batches)),
        questions: vec![q],
        evidence_text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_items_as_conversations_with_has_answer_evidence() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/longmemeval-mini.json");
        let d = load(&path).unwrap();
        assert_eq!(d.conversations.len(), 2);
        let c = &d.conversations[0];
        assert_eq!(c.history.len(), 4);
        let q = &c.questions[0];
        assert_eq!(q.kind, QuestionKind::KnowledgeUpdate);
        assert_eq!(q.evidence, vec!["answer_1:0", "answer_2:0"]);
        assert_eq!(q.date.as_deref(), Some("2023/06/01 (Thu) 00:58"));
        let first = c.history.batches().next().unwrap();
        let Event::Turn(t) = &first[0] else {
            panic!("turn expected")
        };
        assert_eq!(t.session_date.as_deref(), Some("2023/05/25 (Thu) 20:21"));
        assert_eq!(t.speaker, "user");
        let abs = &d.conversations[1].questions[0];
        assert_eq!(abs.kind, QuestionKind::Abstention);
        assert_eq!(abs.category, "abstention");
        assert!(abs.evidence.is_empty());
    }

    #[test]
    fn wrong_shape_is_a_clear_error() {
        let e = parse("{\"a\":1}", Path::new("lme.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("LongMemEval") && e.contains("list"), "{e}");
        let e = parse(
            "[{\"question_id\":\"x\",\"question\":\"q\"}]",
            Path::new("lme.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("haystack_sessions"), "{e}");
    }
}
