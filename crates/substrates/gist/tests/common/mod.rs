//! Shared doubles and fixtures for the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::sync::Arc;
use submem_core::test_utils::ScriptedLlm;
use submem_core::{ChatRequest, Event, Namespace, Turn};

pub fn ns(s: &str) -> Namespace {
    Namespace::new(s).unwrap()
}

fn words(s: &str) -> HashSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_lowercase)
        .collect()
}

pub fn is_selection(r: &ChatRequest) -> bool {
    r.messages.iter().any(|m| m.content.contains("Which pages"))
}

/// A deterministic stand-in for the LLM: a gist request is answered with a
/// labelled two-sentence summary quoting the page's first utterance (so the
/// cut at the first sentence is exercised); a selection request with the
/// page whose gist line shares the most words (> 3 letters) with the
/// question, written as `Page N`, or `I am not sure.` when none shares any.
pub fn smart_llm() -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::from_fn(|r| {
        let user = &r.messages.last().unwrap().content;
        if is_selection(r) {
            let question = user
                .lines()
                .find_map(|l| l.strip_prefix("Question: "))
                .unwrap_or("");
            let q = words(question);
            let best = user
                .lines()
                .filter_map(|l| {
                    let rest = l.strip_prefix("<Page ")?;
                    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    Some((n, words(l).intersection(&q).count()))
                })
                .filter(|(_, shared)| *shared > 0)
                .max_by_key(|(n, shared)| {
                    (*shared, std::cmp::Reverse(n.parse::<usize>().unwrap_or(0)))
                });
            Ok(match best {
                Some((n, _)) => format!("Page {n}"),
                None => "I am not sure.".into(),
            })
        } else {
            let first = user
                .lines()
                .find_map(|l| l.split_once(": ").map(|(_, t)| t.to_string()))
                .unwrap_or_default();
            let short: Vec<&str> = first.split_whitespace().take(12).collect();
            Ok(format!(
                "Gist: {}. And a second sentence that must be cut.",
                short.join(" ").trim_end_matches('.')
            ))
        }
    }))
}

/// `sessions` sessions of `turns` turns of `words` words each; the turn
/// `secret_at` (global index) carries `secret`.
pub fn conversation(
    tag: &str,
    sessions: usize,
    turns: usize,
    words: usize,
    secret_at: Option<(usize, &str)>,
) -> Vec<Event> {
    const VOCAB: &[&str] = &[
        "garden", "river", "ticket", "museum", "coffee", "bridge", "pillow", "letter", "candle",
        "forest", "mirror", "basket", "engine", "planet", "silver", "market", "winter", "pencil",
        "camera", "guitar", "island", "kitchen", "window", "laptop",
    ];
    let mut i = 0usize;
    let mut out = Vec::new();
    for s in 0..sessions {
        for t in 0..turns {
            let text = match secret_at {
                Some((at, secret)) if at == i => {
                    format!("I must tell you that {secret} is my secret word.")
                }
                _ => (0..words)
                    .map(|w| VOCAB[(i * 7 + w * 3 + s) % VOCAB.len()])
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            out.push(Event::Turn(Turn {
                session_id: format!("session_{s}"),
                session_date: Some(format!("{} May 2023", s + 1)),
                speaker: if t % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text,
                source_id: format!("{tag}:{s}:{t}"),
            }));
            i += 1;
        }
    }
    out
}
