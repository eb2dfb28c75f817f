//! Writing a unit's record `s` and retrieval fields `f` (Section 3.1) with one
//! LLM call asking for JSON, repaired leniently
//! ([`submem_kit::json_repair`]); the fixed-rule writer (no LLM,
//! [`submem_kit::record::rule_record`]) is used when no LLM is configured or
//! when the model fails or writes hopeless JSON. Also the merged-record
//! writer of the timeline (Section 3.2): one LLM call asking for at most 120
//! words, cut at 150; without an LLM the records are concatenated and cut at
//! 120 words.

use submem_core::{ChatRequest, Event, Llm, ServiceError};
use submem_kit::json_repair::{field, parse_lenient_object, string_list, value_text};
use submem_kit::record::{cut_words, echoes_prompt, Fields, Writer, WrittenRecord};

/// What the unit is, for the prompt and the rule writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// Conversation turns.
    Conversation,
    /// Agent steps.
    Agent,
}

impl UnitKind {
    /// The kind of unit `event` belongs in, with its session and speaker
    /// (a turn's; a step has neither).
    pub fn of(event: &Event) -> (UnitKind, Option<&str>, Option<&str>) {
        match event {
            Event::Turn(t) => (
                UnitKind::Conversation,
                Some(t.session_id.as_str()),
                Some(t.speaker.as_str()),
            ),
            Event::Step(_) => (UnitKind::Agent, None, None),
        }
    }
}

/// Outcome of parsing a model reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Strict JSON.
    Clean(WrittenRecord),
    /// Needed repair.
    Repaired(WrittenRecord),
    /// Hopeless.
    Hopeless,
}

/// Parses a record-writer reply, cutting the record to `max_words`.
pub fn parse_record_reply(reply: &str, max_words: usize) -> Parsed {
    let strict = serde_json::from_str::<serde_json::Value>(reply.trim())
        .ok()
        .and_then(|v| v.as_object().cloned());
    let (map, clean) = match strict {
        Some(m) => (m, true),
        None => match parse_lenient_object(reply) {
            Some(m) => (m, false),
            None => return Parsed::Hopeless,
        },
    };
    let get = |names: &[&str]| field(&map, names);
    let record = get(&["record", "summary", "note", "gist"])
        .map(value_text)
        .unwrap_or_default();
    let record = cut_words(&record, max_words);
    if record.is_empty() {
        return Parsed::Hopeless;
    }
    let fields = Fields {
        keywords: string_list(get(&["keywords", "keyword"])),
        tags: string_list(get(&["tags", "tag"])),
        description: get(&["description", "context", "desc"])
            .map(value_text)
            .map(|d| cut_words(&d, 40))
            .unwrap_or_default(),
    };
    let w = WrittenRecord {
        record,
        fields,
        writer: Writer::Llm,
    };
    if clean {
        Parsed::Clean(w)
    } else {
        Parsed::Repaired(w)
    }
}

/// The record-writing prompt for one unit (its raw text already cut to fit).
pub fn record_request(
    kind: UnitKind,
    raw: &str,
    max_words: usize,
    max_tokens: usize,
) -> ChatRequest {
    let what = match kind {
        UnitKind::Conversation => "part of a conversation",
        UnitKind::Agent => "steps an agent took and what it saw",
    };
    ChatRequest::instructed(
        "You write compact memory records. Reply with one JSON object and nothing else.",
        format!(
            "Below is {what}. Write a JSON object with the keys \"record\" (what happened, \
             with names, numbers and exact strings, at most {max_words} words), \"keywords\" \
             (a list of up to 8 words), \"tags\" (a list of up to 5 short tags) and \
             \"description\" (one short sentence).\n\n{raw}"
        ),
    )
    .with_json(true)
    .with_max_tokens(max_tokens)
}

/// The merged-record prompt.
pub fn merge_request(records: &[String], words: usize) -> ChatRequest {
    let list = records
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{}. {r}", i + 1))
        .collect::<Vec<_>>()
        .join("\n");
    ChatRequest::instructed(
        "You merge memory records. Reply with the merged record only.",
        format!(
            "Merge these consecutive records into one record of at most {words} words, in time \
             order, keeping names, numbers and exact strings.\n\n{list}"
        ),
    )
    .with_max_tokens(words * 2 + 32)
}

/// The rule merge: records concatenated and cut at `words`.
pub fn rule_merge(records: &[String], words: usize) -> String {
    cut_words(&records.join(" "), words)
}

/// Writes a merged record with `llm` (cut at `cut_words`), or `None` when the
/// model fails or answers nothing.
pub async fn llm_merge(
    llm: &dyn Llm,
    records: &[String],
    words: usize,
    cut: usize,
) -> Result<String, ServiceError> {
    let reply = llm.complete(&merge_request(records, words)).await?;
    let text = cut_words(reply.text.trim(), cut);
    if text.is_empty() || echoes_prompt(&text, MERGE_INSTRUCTION, &records.join(" ")) {
        return Err(ServiceError::Malformed {
            service: llm.name().to_string(),
            reason: "empty merged record, or the instructions echoed back".into(),
        });
    }
    Ok(text)
}

/// The instruction sentence of the merge prompt.
const MERGE_INSTRUCTION: &str = "Merge these consecutive records into one record, in time \
     order, keeping names, numbers and exact strings.";

/// The instruction sentence of the record prompt.
pub const RECORD_INSTRUCTION: &str = "Write a JSON object with the keys record (what happened, \
     with names, numbers and exact strings), keywords (a list of words), tags (a list of short \
     tags) and description (one short sentence). Below is part of a conversation, or steps an \
     agent took and what it saw.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_sloppy_replies() {
        type Want<'a> = Option<(&'a str, &'a [&'a str])>;
        let table: &[(&str, Want<'_>)] = &[
            (
                r#"{"record": "Ana met Ben.", "keywords": ["Ana", "Ben"], "tags": ["meeting"], "description": "A meeting."}"#,
                Some(("Ana met Ben.", &["Ana", "Ben"])),
            ),
            (
                "```json\n{\"record\": \"Opened drawer 1.\", \"keywords\": [\"drawer\"],}\n```",
                Some(("Opened drawer 1.", &["drawer"])),
            ),
            (
                "{'record': 'Ben's bike broke', 'keywords': 'bike, chain'}",
                Some(("Ben's bike broke", &["bike", "chain"])),
            ),
            (
                "Here is the JSON: {\"summary\": \"Soup for dinner\", \"keywords\": \"['soup', 'lentil']\"",
                Some(("Soup for dinner", &["soup", "lentil"])),
            ),
            ("I cannot help with that.", None),
            (r#"{"keywords": ["x"]}"#, None),
        ];
        for (reply, want) in table {
            match (parse_record_reply(reply, 80), want) {
                (Parsed::Clean(w) | Parsed::Repaired(w), Some((rec, kws))) => {
                    assert_eq!(w.record, *rec, "{reply}");
                    assert_eq!(w.fields.keywords, *kws, "{reply}");
                }
                (Parsed::Hopeless, None) => {}
                (got, _) => panic!("{reply}: unexpected {got:?}"),
            }
        }
        assert!(matches!(
            parse_record_reply(r#"{"record": "x"}"#, 80),
            Parsed::Clean(_)
        ));
        assert!(matches!(
            parse_record_reply(r#"{"record": "x",}"#, 80),
            Parsed::Repaired(_)
        ));
    }

    #[test]
    fn records_are_cut_at_the_word_limit() {
        let long = format!("{{\"record\": \"{}\"}}", vec!["w"; 200].join(" "));
        match parse_record_reply(&long, 80) {
            Parsed::Clean(w) => assert_eq!(w.record.split_whitespace().count(), 80),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rule_merge_cuts() {
        let m = rule_merge(&["a b c".into(), "d e f".into()], 4);
        assert_eq!(m, "a b c d");
    }
}
