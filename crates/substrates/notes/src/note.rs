//! Writing one note (A-Mem's note construction): one LLM call per unit asks
//! for a JSON object with a context description, keywords and tags. Small
//! models write sloppy JSON, so the reply is read with FlexA-Mem's lenient
//! reader ([`submem_kit::json_repair`]); when the model fails, writes
//! nothing usable, echoes the prompt, or when no LLM is configured, the
//! fixed-rule writer ([`submem_kit::record::rule_record`]) writes the
//! note instead. The unit's raw text is kept apart and never rewritten.

use serde::{Deserialize, Serialize};
use submem_core::{ChatRequest, Event, Llm};
use submem_kit::json_repair::{field, parse_lenient_object, string_list, value_text};
use submem_kit::record::{cut_words, echoes_prompt, rule_record, top_keywords, RuleLine};

use crate::NotesConfig;

/// The LLM-written (or rule-written) part of a note.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteFields {
    /// One-sentence context description.
    pub context: String,
    /// Keywords.
    pub keywords: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
}

/// Who wrote a note's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// The LLM (strict or repaired JSON).
    Llm,
    /// The fixed-rule writer.
    Rule,
}

/// The instruction sentence of the note prompt (also used to spot replies
/// that merely repeat it).
pub const NOTE_INSTRUCTION: &str = "Write a JSON object with the keys \"context\" (one sentence: \
     who, what, when, with names and numbers), \"keywords\" (a list of up to 8 important words) \
     and \"tags\" (a list of up to 5 short topic tags) for this memory.";

/// The note-writing request for one unit.
pub fn note_request(raw: &str, config: &NotesConfig) -> ChatRequest {
    ChatRequest::instructed(
        "You write memory notes. Reply with one JSON object and nothing else.",
        format!(
            "{NOTE_INSTRUCTION}\n\nMemory:\n{}",
            cut_words(raw, config.prompt_words)
        ),
    )
    .with_json(true)
    .with_max_tokens(config.note_max_tokens)
}

/// Reads a note-writer reply; `None` when it is unusable (no object, no
/// context and no keywords, or an echo of the instructions).
pub fn parse_note_reply(reply: &str, raw: &str, config: &NotesConfig) -> Option<NoteFields> {
    let map = parse_lenient_object(reply)?;
    let get = |names: &[&str]| field(&map, names);
    let context = get(&["context", "description", "summary", "note"])
        .map(value_text)
        .map(|c| cut_words(&c, config.context_words))
        .unwrap_or_default();
    let mut keywords = string_list(get(&["keywords", "keyword"]));
    keywords.truncate(config.max_keywords);
    let mut tags = string_list(get(&["tags", "tag"]));
    tags.truncate(config.max_keywords);
    if context.is_empty() && keywords.is_empty() {
        return None;
    }
    let all = format!("{context} {} {}", keywords.join(" "), tags.join(" "));
    if echoes_prompt(&all, NOTE_INSTRUCTION, raw) {
        return None;
    }
    Some(NoteFields {
        context,
        keywords,
        tags,
    })
}

/// The fixed-rule note of one event: FlexA-Mem's rule writer over a one-line
/// unit (date, speaker and opening words as context; frequent content words
/// as keywords; speaker or `agent steps` as tags).
pub fn rule_note(event: &Event, config: &NotesConfig) -> NoteFields {
    let raw = event.render();
    let r = rule_record(&[RuleLine::from(event)], &raw, config.context_words);
    let mut keywords = r.fields.keywords;
    if keywords.is_empty() {
        keywords = top_keywords(&raw, config.max_keywords);
    }
    keywords.truncate(config.max_keywords);
    NoteFields {
        context: r.record,
        keywords,
        tags: r.fields.tags,
    }
}

/// Writes the note of `event`: with `llm` when given (falling back to the
/// rule writer on a failed call or an unusable reply), else by rule.
pub async fn write_note(
    llm: Option<&dyn Llm>,
    event: &Event,
    config: &NotesConfig,
) -> (NoteFields, Writer) {
    let Some(llm) = llm else {
        return (rule_note(event, config), Writer::Rule);
    };
    let raw = event.render();
    match llm.complete(&note_request(&raw, config)).await {
        Ok(c) => match parse_note_reply(&c.text, &raw, config) {
            Some(f) => (f, Writer::Llm),
            None => {
                tracing::debug!(source = event.source_id(), "unusable note reply; rule note");
                (rule_note(event, config), Writer::Rule)
            }
        },
        Err(e) => {
            tracing::warn!(source = event.source_id(), error = %e, "note call failed; rule note");
            (rule_note(event, config), Writer::Rule)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::Turn;

    fn turn() -> Event {
        Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: Some("8 May 2023".into()),
            speaker: "Ana".into(),
            text: "I adopted a grey cat called Miso yesterday.".into(),
            source_id: "D1:1".into(),
        })
    }

    #[test]
    fn sloppy_json_is_repaired() {
        let c = NotesConfig::default();
        let reply = "Sure! ```json\n{context: 'Ana adopted a cat named Miso', keywords: ['cat', 'Miso',], tags: \"pets, adoption\"";
        let f = parse_note_reply(reply, &turn().render(), &c).unwrap();
        assert_eq!(f.context, "Ana adopted a cat named Miso");
        assert_eq!(f.keywords, vec!["cat", "Miso"]);
        assert_eq!(f.tags, vec!["pets", "adoption"]);
    }

    #[test]
    fn hopeless_replies_are_refused() {
        let c = NotesConfig::default();
        let raw = turn().render();
        assert!(parse_note_reply("I cannot do that.", &raw, &c).is_none());
        assert!(parse_note_reply("{\"tags\": []}", &raw, &c).is_none());
        let echo = format!("{{\"context\": \"{}\"}}", NOTE_INSTRUCTION.replace('"', ""));
        assert!(parse_note_reply(&echo, &raw, &c).is_none());
    }

    #[test]
    fn rule_note_keeps_date_speaker_and_words() {
        let f = rule_note(&turn(), &NotesConfig::default());
        assert!(f.context.contains("8 May 2023") && f.context.contains("Ana"));
        assert!(f.keywords.iter().any(|k| k == "miso"));
        assert_eq!(f.tags, vec!["Ana"]);
    }
}
