//! Memory evolution (A-Mem): when a new note lies close to earlier ones, one
//! LLM call sees the new note and those neighbours and decides whether the
//! neighbours' context descriptions and tags should change in its light; the
//! rewrites it returns become [`Edit`]s of the neighbours. Only context and
//! tags are ever rewritten: a unit's raw text and its own note fields stay
//! as written.
//!
//! Deviation: A-Mem evolves while it adds the note; here writes queue the
//! evolution and `manage()` runs it, so its calls and tokens are metered as
//! the manage phase (`docs/METHODS.md`). A-Mem's "strengthen" action (the LLM
//! choosing extra links for the new note) is left out: links come from
//! cosine alone.

use std::collections::BTreeSet;
use submem_core::ChatRequest;
use submem_kit::json_repair::{field, parse_lenient_object, string_list, value_text};
use submem_kit::record::{cut_words, echoes_prompt};

use crate::store::{Edit, Note};
use crate::NotesConfig;

/// The instruction sentence of the evolution prompt.
pub const EVOLVE_INSTRUCTION: &str = "A new memory was added. Decide whether the older memories \
     should be updated in its light. Reply with a JSON object {\"evolve\": true or false, \
     \"updates\": [{\"memory\": number, \"context\": \"new one-sentence context\", \"tags\": \
     [\"tag\"]}]}. Only update memories the new one really adds to.";

fn describe(n: &Note, words: usize) -> String {
    format!(
        "{}\ncontext: {}\ntags: {}",
        cut_words(&n.raw, words),
        n.context(),
        n.tags().join(", ")
    )
}

/// The evolution request for `new` and its close `neighbours` (numbered
/// from 1 in the prompt).
pub fn evolve_request(new: &Note, neighbours: &[&Note], config: &NotesConfig) -> ChatRequest {
    let list = neighbours
        .iter()
        .enumerate()
        .map(|(i, n)| format!("Memory {}:\n{}", i + 1, describe(n, config.prompt_words)))
        .collect::<Vec<_>>()
        .join("\n\n");
    ChatRequest::instructed(
        "You maintain a memory of notes. Reply with one JSON object only.",
        format!(
            "{EVOLVE_INSTRUCTION}\n\nNew memory:\n{}\n\nOlder memories:\n{list}",
            describe(new, config.prompt_words)
        ),
    )
    .with_json(true)
    .with_max_tokens(config.evolve_max_tokens)
}

/// One rewrite the model asked for: neighbour index (0-based) and the new
/// context and/or tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// Index into the neighbours of the request.
    pub neighbour: usize,
    /// New context, if given.
    pub context: Option<String>,
    /// New tags, if given.
    pub tags: Option<Vec<String>>,
}

/// Reads an evolution reply. `None` when unreadable; an empty list when the
/// model decided not to evolve.
pub fn parse_evolve_reply(
    reply: &str,
    neighbours: usize,
    content: &str,
    config: &NotesConfig,
) -> Option<Vec<Rewrite>> {
    let map = parse_lenient_object(reply)?;
    let get = |m, names: &[&str]| field(m, names).cloned();
    let evolve = get(&map, &["evolve", "should_evolve"]).map(|v| match v {
        serde_json::Value::Bool(b) => b,
        other => value_text(&other).trim().eq_ignore_ascii_case("true"),
    });
    if evolve == Some(false) {
        return Some(Vec::new());
    }
    let Some(serde_json::Value::Array(updates)) = get(&map, &["updates", "update"]) else {
        return Some(Vec::new());
    };
    let mut out: Vec<Rewrite> = Vec::new();
    for (pos, u) in updates.iter().enumerate() {
        let Some(m) = u.as_object() else { continue };
        let index = get(m, &["memory", "id", "index"])
            .and_then(|v| value_text(&v).trim().parse::<usize>().ok())
            .and_then(|i| i.checked_sub(1))
            .unwrap_or(pos);
        if index >= neighbours || out.iter().any(|r| r.neighbour == index) {
            continue;
        }
        let context = get(m, &["context"])
            .map(|v| cut_words(&value_text(&v), config.context_words))
            .filter(|c| !c.is_empty() && !echoes_prompt(c, EVOLVE_INSTRUCTION, content));
        let tags = get(m, &["tags"])
            .map(|v| {
                let mut t = string_list(Some(&v));
                t.truncate(config.max_keywords);
                t
            })
            .filter(|t| !t.is_empty());
        if context.is_some() || tags.is_some() {
            out.push(Rewrite {
                neighbour: index,
                context,
                tags,
            });
        }
    }
    Some(out)
}

/// The edit `rewrite` makes to `target`, with its provenance: every note
/// shown in the prompt and what their shown fields derived from. `None` when
/// it changes nothing.
pub fn edit_for(
    target: &Note,
    rewrite: &Rewrite,
    trigger: u64,
    shown: &BTreeSet<u64>,
) -> Option<Edit> {
    let context = rewrite
        .context
        .clone()
        .unwrap_or_else(|| target.context().to_string());
    let tags = rewrite
        .tags
        .clone()
        .unwrap_or_else(|| target.tags().to_vec());
    if context == target.context() && tags == target.tags() {
        return None;
    }
    Some(Edit {
        trigger,
        context,
        tags,
        derived_from: shown.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_updates_and_refusals() {
        let c = NotesConfig::default();
        let r = parse_evolve_reply(
            "{\"evolve\": true, \"updates\": [{\"memory\": 2, \"context\": \"Ana likes cats\", \"tags\": [\"pets\"]}, {\"memory\": 9, \"context\": \"x\"}]}",
            2,
            "Ana cats",
            &c,
        )
        .unwrap();
        assert_eq!(
            r,
            vec![Rewrite {
                neighbour: 1,
                context: Some("Ana likes cats".into()),
                tags: Some(vec!["pets".into()])
            }]
        );
        assert!(parse_evolve_reply("{evolve: false}", 2, "", &c)
            .unwrap()
            .is_empty());
        assert!(parse_evolve_reply("no idea", 2, "", &c).is_none());
        // Sloppy JSON with bare keys and a trailing comma.
        let r = parse_evolve_reply(
            "{evolve: true, updates: [{context: 'a walk by the river',},]",
            1,
            "river walk",
            &c,
        )
        .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].neighbour, 0);
    }
}
