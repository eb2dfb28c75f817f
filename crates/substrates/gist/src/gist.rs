//! Writing a page's gist: one LLM call per page (ReadAgent's "gisting"
//! prompt, shortened for a small model), its reply cut at the first sentence
//! and at [`crate::GistConfig::gist_words`] words because SmolLM2 ignores
//! "one sentence"; and the rule writer used without an LLM, when the call
//! fails, when the reply is empty, and for pages that lost events until the
//! next `manage`.
//!
//! **Rule gist** (no LLM): `<date>, <speakers>: <sentence>` for turns, where
//! the sentence is the first sentence of the page's *most informative* turn
//! (the one with the most distinct content words; ties go to the earlier
//! turn), and `Steps a–b: <sentence>` for agent steps. It keeps a verbatim
//! fragment of the page, which is what BM25 and a reader can use; the date
//! and speakers give temporal and "who" anchors that a summary would carry.

use submem_core::ChatRequest;

use crate::page::Entry;
use crate::text::{content_words, first_sentence};

/// The gist-writing request for a page's raw text.
pub fn gist_request(page_text: &str, is_agent: bool, max_new_tokens: usize) -> ChatRequest {
    let what = if is_agent {
        "part of an agent's log of actions and observations"
    } else {
        "part of a conversation"
    };
    ChatRequest::instructed(
        "You shorten texts into a gist: one short sentence that keeps who, what and when.",
        format!("Here is {what}:\n\n{page_text}\n\nWrite the gist of this page in one sentence."),
    )
    .with_max_tokens(max_new_tokens)
}

/// Labels small models put before the answer, stripped from a reply.
const LABELS: &[&str] = &[
    "gist:",
    "summary:",
    "the gist:",
    "one sentence:",
    "sentence:",
];

/// Cleans a gist-writer reply: drops a leading label, quotes and markdown,
/// keeps the first sentence, cuts at `max_words`. `None` when nothing usable
/// (fewer than two words) is left.
pub fn clean_gist(reply: &str, max_words: usize) -> Option<String> {
    let decoration = |c: char| c == '"' || c == '*' || c == '`' || c == '#' || c.is_whitespace();
    let mut text = reply.trim_matches(decoration);
    loop {
        let lower = text.to_lowercase();
        match LABELS.iter().find(|l| lower.starts_with(*l)) {
            Some(l) => text = text[l.len()..].trim_matches(decoration),
            None => break,
        }
    }
    let sentence = first_sentence(text, max_words);
    let sentence = sentence.trim_matches(|c: char| c == '"' || c == '*');
    (sentence.split_whitespace().count() >= 2).then(|| sentence.to_string())
}

fn join_names(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The rule gist of a page (see the module docs), at most `max_words` words.
pub fn rule_gist(entries: &[Entry], max_words: usize) -> String {
    let Some(best) = entries
        .iter()
        .enumerate()
        .max_by_key(|(i, e)| {
            let mut w = content_words(e.body());
            w.sort();
            w.dedup();
            (w.len(), std::cmp::Reverse(*i))
        })
        .map(|(_, e)| e)
    else {
        return String::new();
    };
    let header = if entries.iter().all(|e| e.step.is_some()) {
        let first = entries.first().and_then(|e| e.step).unwrap_or(0);
        let last = entries.last().and_then(|e| e.step).unwrap_or(0);
        if first == last {
            format!("Step {first}:")
        } else {
            format!("Steps {first}–{last}:")
        }
    } else {
        let mut speakers: Vec<&str> = Vec::new();
        for s in entries.iter().filter_map(|e| e.speaker.as_deref()) {
            if !speakers.contains(&s) && speakers.len() < 3 {
                speakers.push(s);
            }
        }
        let who = join_names(&speakers);
        match entries.iter().find_map(|e| e.date.as_deref()) {
            Some(d) if who.is_empty() => format!("{d}:"),
            Some(d) => format!("{d}, {who}:"),
            None if who.is_empty() => String::new(),
            None => format!("{who}:"),
        }
    };
    let header_words = header.split_whitespace().count();
    let body = best.body();
    // A best turn is quoted with its speaker when several people speak.
    let lead = match &best.speaker {
        Some(s) if entries.iter().any(|e| e.speaker.as_ref() != Some(s)) => format!("{s} said "),
        _ => String::new(),
    };
    let room = max_words
        .saturating_sub(header_words + lead.split_whitespace().count())
        .max(1);
    // A step is its action line and the first sentence of its observation.
    let sentence = match (best.step, body.split_once('\n')) {
        (Some(_), Some((action, observation))) => {
            let action = first_sentence(action, room);
            let left = room.saturating_sub(action.split_whitespace().count());
            match first_sentence(observation, left) {
                obs if obs.is_empty() => action,
                obs => format!("{action} → {obs}"),
            }
        }
        _ => first_sentence(body, room),
    };
    // The header alone may exceed a tiny word limit: the limit wins.
    [header, lead + &sentence]
        .iter()
        .flat_map(|s| s.split_whitespace())
        .take(max_words)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::{Event, Step, Turn};

    fn turn(id: &str, speaker: &str, text: &str) -> Entry {
        let e = Event::Turn(Turn {
            session_id: "s1".into(),
            session_date: Some("8 May 2023".into()),
            speaker: speaker.into(),
            text: text.into(),
            source_id: id.into(),
        });
        Entry::new(&e, "s1".into(), 10)
    }

    #[test]
    fn replies_are_cut_at_the_first_sentence_and_word_limit() {
        assert_eq!(
            clean_gist(
                "Gist: \"Ana tells Ben about her violin teacher.\" Then...",
                40
            )
            .as_deref(),
            Some("Ana tells Ben about her violin teacher.")
        );
        assert_eq!(
            clean_gist("**Summary:** Ana and Ben talk", 40).as_deref(),
            Some("Ana and Ben talk")
        );
        assert_eq!(clean_gist("a b c d e f", 4).as_deref(), Some("a b c d"));
        assert_eq!(clean_gist("  ", 40), None);
        assert_eq!(clean_gist("Yes", 40), None);
    }

    #[test]
    fn rule_gist_quotes_the_most_informative_turn_with_date_and_speakers() {
        let entries = vec![
            turn("1", "Ana", "Hi!"),
            turn(
                "2",
                "Ben",
                "My violin teacher Zanzibarite moved to Oslo last spring. She is great.",
            ),
            turn("3", "Ana", "Nice."),
        ];
        let g = rule_gist(&entries, 40);
        assert_eq!(
            g,
            "8 May 2023, Ana and Ben: Ben said My violin teacher Zanzibarite moved to Oslo last spring."
        );
        assert!(rule_gist(&entries, 8).split_whitespace().count() <= 8);
        assert_eq!(rule_gist(&[], 40), "");
    }

    #[test]
    fn rule_gist_of_steps_names_the_step_range() {
        let entries: Vec<Entry> = (1..=3)
            .map(|i| {
                let e = Event::Step(Step {
                    step: i,
                    action: format!("open drawer {i}"),
                    observation: if i == 2 {
                        "You open drawer 2. Inside is a red key and a map.".into()
                    } else {
                        "Nothing.".into()
                    },
                    source_id: format!("r:{i}"),
                });
                Entry::new(&e, "episode-0".into(), 10)
            })
            .collect();
        let g = rule_gist(&entries, 40);
        assert_eq!(g, "Steps 1–3: > open drawer 2 → You open drawer 2.");
    }
}
