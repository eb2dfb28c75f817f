//! LoCoMo (`locomo10.json`): a list of samples, each with a `conversation`
//! (`speaker_a`, `speaker_b`, `session_N` turn lists with `session_N_date_time`)
//! and a `qa` list (`question`, `answer` — sometimes an integer —, `evidence`
//! dia ids, `category` 1–5; category 5 is adversarial and carries
//! `adversarial_answer` instead of `answer`).
//!
//! Turns become [`Event::Turn`] with source id = `dia_id`; a shared image's
//! `blip_caption` is appended to the text as `[shares a photo: …]`.
//! Malformed evidence strings (`"D8:6; D9:17"`, `"D"`) are split on `;`, `,`
//! and white space; pieces that are not `D<n>:<n>` are counted in
//! [`LoadWarnings::malformed_evidence`], ids naming no turn in
//! [`LoadWarnings::unknown_evidence`]. Categories follow Mem0's labels:
//! 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use submem_core::{Event, Regime, Turn};

use super::{
    answer_string, evidence_text, read_file, Conversation, Dataset, DatasetKind, HistorySource,
    LoadWarnings, Question, QuestionKind,
};
use crate::{BenchError, Result};

const FORMAT: &str = "LoCoMo";

/// Loads a LoCoMo file.
pub fn load(path: &Path) -> Result<Dataset> {
    parse(&read_file(path)?, path)
}

/// Parses LoCoMo JSON text; `path` is only used in messages.
pub fn parse(text: &str, path: &Path) -> Result<Dataset> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| BenchError::format(path, FORMAT, format!("invalid JSON: {e}")))?;
    let samples: Vec<&Value> = match &root {
        Value::Array(items) => items.iter().collect(),
        Value::Object(_) => vec![&root],
        _ => {
            return Err(BenchError::format(
                path,
                FORMAT,
                "expected a list of samples",
            ))
        }
    };
    let mut warnings = LoadWarnings::default();
    let mut conversations = Vec::new();
    for (i, sample) in samples.iter().enumerate() {
        conversations.push(parse_sample(sample, i, path, &mut warnings)?);
    }
    Dataset::loaded(
        DatasetKind::Locomo,
        conversations,
        warnings,
        path,
        FORMAT,
        "no samples",
    )
}

fn category_label(c: i64) -> String {
    match c {
        1 => "1:multi-hop".into(),
        2 => "2:temporal".into(),
        3 => "3:open-domain".into(),
        4 => "4:single-hop".into(),
        5 => "5:adversarial".into(),
        other => format!("{other}:unknown"),
    }
}

fn parse_sample(
    sample: &Value,
    index: usize,
    path: &Path,
    warnings: &mut LoadWarnings,
) -> Result<Conversation> {
    let id = sample
        .get("sample_id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("conv-{index}"));
    let conv = sample
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            BenchError::format(
                path,
                FORMAT,
                format!("sample {id}: missing \"conversation\" object"),
            )
        })?;

    let mut sessions: Vec<(u32, &Vec<Value>)> = conv
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("session_")?.parse::<u32>().ok()?;
            Some((n, v.as_array()?))
        })
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    if sessions.is_empty() {
        return Err(BenchError::format(
            path,
            FORMAT,
            format!("sample {id}: no session_N lists"),
        ));
    }

    let mut batches = Vec::new();
    let mut texts: HashMap<String, String> = HashMap::new();
    for (n, turns) in sessions {
        let date = conv
            .get(&format!("session_{n}_date_time"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut batch = Vec::new();
        for (t, turn) in turns.iter().enumerate() {
            let (Some(speaker), Some(dia_id)) = (
                turn.get("speaker").and_then(Value::as_str),
                turn.get("dia_id").and_then(Value::as_str),
            ) else {
                warnings.notes.push(format!(
                    "{id} session_{n} turn {t}: no speaker or dia_id, skipped"
                ));
                continue;
            };
            let mut text = turn
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(cap) = turn.get("blip_caption").and_then(Value::as_str) {
                text = format!("{text} [shares a photo: {cap}]");
            }
            if texts.contains_key(dia_id) {
                warnings
                    .notes
                    .push(format!("{id}: duplicate dia_id {dia_id}, skipped"));
                continue;
            }
            texts.insert(dia_id.to_string(), text.clone());
            batch.push(Event::Turn(Turn {
                session_id: format!("session_{n}"),
                session_date: date.clone(),
                speaker: speaker.to_string(),
                text,
                source_id: dia_id.to_string(),
            }));
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
    }

    let known: HashSet<&str> = texts.keys().map(String::as_str).collect();
    let mut questions = Vec::new();
    let qa = sample
        .get("qa")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (qi, item) in qa.iter().enumerate() {
        let Some(question) = item.get("question").and_then(Value::as_str) else {
            warnings
                .notes
                .push(format!("{id} qa {qi}: no question, skipped"));
            continue;
        };
        let category = item.get("category").and_then(Value::as_i64).unwrap_or(0);
        let kind = match category {
            2 => QuestionKind::Temporal,
            5 => QuestionKind::Adversarial,
            _ => QuestionKind::Standard,
        };
        let answer = if kind == QuestionKind::Adversarial {
            None
        } else {
            item.get("answer").and_then(answer_string)
        };
        let mut evidence = Vec::new();
        for raw in item
            .get("evidence")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let Some(s) = raw.as_str() else {
                warnings
                    .malformed_evidence
                    .push(format!("{id} q{qi}: {raw}"));
                continue;
            };
            for piece in s
                .split(|c: char| c == ';' || c == ',' || c.is_whitespace())
                .filter(|p| !p.is_empty())
            {
                if !is_dia_id(piece) {
                    warnings
                        .malformed_evidence
                        .push(format!("{id} q{qi}: {piece:?} in {s:?}"));
                } else if !known.contains(piece) {
                    warnings
                        .unknown_evidence
                        .push(format!("{id} q{qi}: {piece}"));
                } else if !evidence.iter().any(|e: &String| e == piece) {
                    evidence.push(piece.to_string());
                }
            }
        }
        questions.push(Question {
            id: format!("q{qi}"),
            text: question.to_string(),
            answer,
            evidence,
            category: category_label(category),
            kind,
            regime: Regime::Conversational,
            newest: None,
            date: None,
        });
    }
    let evidence_text = evidence_text(&questions, &texts);
    Ok(Conversation {
        id,
        history: HistorySource::Sessions(Arc::new(batches)),
        questions,
        evidence_text,
    })
}

/// Whether `s` looks like `D<digits>:<digits>`.
fn is_dia_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('D') else {
        return false;
    };
    let Some((a, b)) = rest.split_once(':') else {
        return false;
    };
    !a.is_empty()
        && !b.is_empty()
        && a.chars().all(|c| c.is_ascii_digit())
        && b.chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Dataset {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/locomo-mini.json");
        load(&path).unwrap()
    }

    #[test]
    fn loads_sessions_turns_and_dates() {
        let d = fixture();
        assert_eq!(d.conversations.len(), 1);
        let c = &d.conversations[0];
        assert_eq!(c.id, "conv-26");
        let batches: Vec<Vec<Event>> = c.history.batches().collect();
        assert_eq!(batches.len(), 2);
        let Event::Turn(t) = &batches[0][0] else {
            panic!("turn expected")
        };
        assert_eq!(t.source_id, "D1:1");
        assert_eq!(t.session_date.as_deref(), Some("1:56 pm on 8 May, 2023"));
        // the image caption is kept
        let Event::Turn(img) = &batches[1][1] else {
            panic!("turn expected")
        };
        assert!(
            img.text
                .ends_with("[shares a photo: a painting of a sunrise]"),
            "{}",
            img.text
        );
    }

    #[test]
    fn questions_answers_and_malformed_evidence() {
        let d = fixture();
        let qs = &d.conversations[0].questions;
        assert_eq!(qs.len(), 4);
        // integer answer becomes text
        assert_eq!(qs[1].answer.as_deref(), Some("2022"));
        assert_eq!(qs[1].kind, QuestionKind::Temporal);
        // "D1:3; D2:2" is split, "D" is malformed, "D9:9" unknown
        assert_eq!(qs[2].evidence, vec!["D1:3", "D2:2"]);
        assert_eq!(d.warnings.malformed_evidence.len(), 1);
        assert_eq!(d.warnings.unknown_evidence.len(), 1);
        // category 5: no gold answer
        assert_eq!(qs[3].kind, QuestionKind::Adversarial);
        assert_eq!(qs[3].answer, None);
        assert_eq!(qs[3].category, "5:adversarial");
        assert!(d.conversations[0].evidence_text.contains_key("D1:3"));
    }

    #[test]
    fn malformed_json_is_a_clear_error() {
        let err = parse("{not json", Path::new("x.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.json") && err.contains("LoCoMo"), "{err}");
        let err = parse("[{\"qa\": []}]", Path::new("y.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("conversation"), "{err}");
    }

    #[test]
    fn dia_id_shape() {
        assert!(is_dia_id("D12:3"));
        assert!(!is_dia_id("D"));
        assert!(!is_dia_id("D1:"));
        assert!(!is_dia_id("X1:2"));
    }
}
