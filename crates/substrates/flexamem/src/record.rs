//! Writing a unit's record `s` and retrieval fields `f` (Section 3.1) with one
//! LLM call asking for JSON, repaired leniently, and the fixed-rule writer (no
//! LLM) used when no LLM is configured or when the model fails or writes
//! hopeless JSON. Also the merged-record writer of the timeline (Section 3.2):
//! one LLM call asking for at most 120 words, cut at 150; without an LLM the
//! records are concatenated and cut at 120 words.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_core::{ChatMessage, ChatRequest, Llm, ServiceError};

use crate::bm25::content_words;
use crate::json_repair::{parse_lenient_object, string_list, value_text};

/// Retrieval fields of a note.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fields {
    /// Keywords.
    pub keywords: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// A short description.
    pub description: String,
}

impl Fields {
    /// The text embedded after the record (`s‖f`).
    pub fn joined(&self) -> String {
        format!(
            "keywords: {}\ntags: {}\ndescription: {}",
            self.keywords.join(", "),
            self.tags.join(", "),
            self.description
        )
    }
}

/// Who wrote a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// The LLM, with valid or repaired JSON.
    Llm,
    /// The fixed-rule writer.
    Rule,
}

/// A record and its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenRecord {
    /// The record `s`.
    pub record: String,
    /// The fields `f`.
    pub fields: Fields,
    /// Who wrote it.
    pub writer: Writer,
}

/// What the unit is, for the prompt and the rule writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// Conversation turns.
    Conversation,
    /// Agent steps.
    Agent,
}

/// The first `n` words of `text` (white space normalised).
pub fn cut_words(text: &str, n: usize) -> String {
    text.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
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
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)))
            .map(|(_, v)| v)
    };
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
    ChatRequest::new(vec![
        ChatMessage::system(
            "You write compact memory records. Reply with one JSON object and nothing else.",
        ),
        ChatMessage::user(format!(
            "Below is {what}. Write a JSON object with the keys \"record\" (what happened, \
             with names, numbers and exact strings, at most {max_words} words), \"keywords\" \
             (a list of up to 8 words), \"tags\" (a list of up to 5 short tags) and \
             \"description\" (one short sentence).\n\n{raw}"
        )),
    ])
    .with_json(true)
    .with_max_tokens(max_tokens)
}

/// Keywords by frequency (ties by first occurrence), at most `n`.
pub fn top_keywords(text: &str, n: usize) -> Vec<String> {
    let words = content_words(text);
    let mut count: HashMap<&str, (usize, usize)> = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        if w.len() < 3 || w.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let e = count.entry(w.as_str()).or_insert((0, i));
        e.0 += 1;
    }
    let mut v: Vec<(&str, (usize, usize))> = count.into_iter().collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    v.into_iter().take(n).map(|(w, _)| w.to_string()).collect()
}

/// One line of a unit, as the rule writer sees it.
#[derive(Debug, Clone)]
pub enum RuleLine<'a> {
    /// A turn: date, speaker, text.
    Turn {
        /// Session date.
        date: Option<&'a str>,
        /// Speaker.
        speaker: &'a str,
        /// Text.
        text: &'a str,
    },
    /// A step: number and command.
    Step {
        /// Step number.
        step: u32,
        /// Command.
        action: &'a str,
    },
}

/// The fixed-rule record writer (no LLM). For steps it writes the trace of
/// the agent's actions (`step 3: open drawer 1; step 4: …`); for turns the
/// session date, the speakers and the opening words of each turn. Cut at
/// `max_words`.
pub fn rule_record(lines: &[RuleLine<'_>], raw: &str, max_words: usize) -> WrittenRecord {
    let mut parts: Vec<String> = Vec::new();
    let mut speakers: Vec<String> = Vec::new();
    let mut date: Option<&str> = None;
    let n = lines.len().max(1);
    // Spread the word budget over the lines so every line leaves a trace.
    let per_line = (max_words / n).clamp(3, 24);
    for l in lines {
        match l {
            RuleLine::Step { step, action } => {
                let first = action.lines().next().unwrap_or("").trim();
                parts.push(format!("step {step}: {}", cut_words(first, per_line)));
            }
            RuleLine::Turn {
                date: d,
                speaker,
                text,
            } => {
                if date.is_none() {
                    date = *d;
                }
                if !speakers.iter().any(|s| s == speaker) {
                    speakers.push(speaker.to_string());
                }
                parts.push(format!("{speaker}: {}", cut_words(text, per_line)));
            }
        }
    }
    let head = match date {
        Some(d) => format!("[{d}] "),
        None => String::new(),
    };
    let record = cut_words(&format!("{head}{}", parts.join("; ")), max_words);
    let record = if record.is_empty() {
        cut_words(raw, max_words)
    } else {
        record
    };
    let description = raw
        .lines()
        .next()
        .map(|l| cut_words(l, 20))
        .unwrap_or_default();
    let mut tags = speakers;
    if lines.iter().any(|l| matches!(l, RuleLine::Step { .. })) {
        tags.push("agent steps".into());
    }
    WrittenRecord {
        record,
        fields: Fields {
            keywords: top_keywords(raw, 8),
            tags,
            description,
        },
        writer: Writer::Rule,
    }
}

/// The merged-record prompt.
pub fn merge_request(records: &[String], words: usize) -> ChatRequest {
    let list = records
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{}. {r}", i + 1))
        .collect::<Vec<_>>()
        .join("\n");
    ChatRequest::new(vec![
        ChatMessage::system("You merge memory records. Reply with the merged record only."),
        ChatMessage::user(format!(
            "Merge these consecutive records into one record of at most {words} words, in time \
             order, keeping names, numbers and exact strings.\n\n{list}"
        )),
    ])
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

/// Whether `output` repeats the prompt's instructions instead of the content
/// (small models do): most of its content words come from the instructions
/// and few from the content.
pub fn echoes_prompt(output: &str, instructions: &str, content: &str) -> bool {
    let words = content_words(output);
    if words.is_empty() {
        return true;
    }
    let instr: std::collections::HashSet<String> =
        content_words(instructions).into_iter().collect();
    let body: std::collections::HashSet<String> = content_words(content).into_iter().collect();
    let from_instr = words
        .iter()
        .filter(|w| instr.contains(*w) && !body.contains(*w))
        .count();
    let from_body = words.iter().filter(|w| body.contains(*w)).count();
    from_instr * 2 > words.len() && from_body * 4 < words.len()
}

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
    fn rule_writer_traces_actions() {
        let lines = [
            RuleLine::Step {
                step: 1,
                action: "look",
            },
            RuleLine::Step {
                step: 2,
                action: "open drawer 1\nmore",
            },
        ];
        let w = rule_record(&lines, "look\nopen drawer 1", 80);
        assert_eq!(w.record, "step 1: look; step 2: open drawer 1");
        assert_eq!(w.writer, Writer::Rule);
        assert!(w.fields.keywords.contains(&"drawer".to_string()));
    }

    #[test]
    fn prompt_echoes_are_detected() {
        let inputs = "Ana met Ben at the museum. Ben bought a violin.";
        assert!(echoes_prompt(
            "Merge these consecutive records into one record of at most 120 words, in time order, keeping names, numbers, and exact strings.",
            MERGE_INSTRUCTION,
            inputs
        ));
        assert!(!echoes_prompt(
            "Ana met Ben at the museum, where Ben bought a violin.",
            MERGE_INSTRUCTION,
            inputs
        ));
        assert!(echoes_prompt("", MERGE_INSTRUCTION, inputs));
    }

    #[test]
    fn rule_merge_cuts() {
        let m = rule_merge(&["a b c".into(), "d e f".into()], 4);
        assert_eq!(m, "a b c d");
    }
}
