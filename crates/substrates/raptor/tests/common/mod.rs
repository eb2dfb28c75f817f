//! Shared fixtures: a topical conversation, an echoing scripted LLM and a
//! small-tree configuration.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{Event, Llm, Services, Turn};
use submem_raptor::RaptorConfig;

const TOPICS: &[&[&str]] = &[
    &[
        "violin",
        "concert",
        "orchestra",
        "teacher",
        "bow",
        "strings",
        "rehearsal",
        "music",
    ],
    &[
        "garden", "tomatoes", "soil", "compost", "seeds", "watering", "harvest", "shed",
    ],
    &[
        "marathon", "running", "shoes", "training", "pace", "race", "miles", "coach",
    ],
    &[
        "kitchen", "recipe", "lentil", "soup", "oven", "spices", "dinner", "bread",
    ],
];

/// `sessions` sessions of `turns` turns; turn `t` of session `s` talks about
/// topic `(s + t) % 4` with 12–16 words; the turn `marker_at` (if any) holds
/// `marker`.
pub fn conversation(
    tag: &str,
    sessions: usize,
    turns: usize,
    marker: Option<(&str, usize)>,
) -> Vec<Event> {
    let mut out = Vec::new();
    let mut seed = 17u64;
    for s in 0..sessions {
        for t in 0..turns {
            let topic = TOPICS[(s + t) % TOPICS.len()];
            let n = 12 + (t % 5);
            let words: Vec<&str> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    topic[(seed >> 33) as usize % topic.len()]
                })
                .collect();
            let i = out.len();
            let text = match marker {
                Some((m, at)) if at == i => {
                    format!("{} {m} {}.", words[..4].join(" "), words[4..].join(" "))
                }
                _ => format!("{}.", words.join(" ")),
            };
            out.push(Event::Turn(Turn {
                session_id: format!("session_{s}"),
                session_date: Some(format!("{} May 2023", s + 1)),
                speaker: if t % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text,
                source_id: format!("{tag}:D{s}:{t}"),
            }));
        }
    }
    out
}

/// An LLM whose summary repeats the first 200 words of the text it was given
/// (so a fact in a cluster shows up in its summary, as with a real model).
pub fn echo_llm() -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::from_fn(|req| {
        let user = &req.messages.last().unwrap().content;
        let body = user
            .split_once("\n\n")
            .map(|(_, b)| b)
            .unwrap_or(user)
            .trim_end_matches("Summary:");
        Ok(format!(
            "Summary: {}",
            body.split_whitespace()
                .take(200)
                .collect::<Vec<_>>()
                .join(" ")
        ))
    }))
}

pub fn services_with(llm: Option<Arc<ScriptedLlm>>) -> Services {
    test_services(llm.map(|l| l as Arc<dyn Llm>))
}

/// Leaves of ~40 words and layers clustered from 4 nodes, so a few dozen
/// turns make a tree of several levels.
pub fn small_tree() -> RaptorConfig {
    RaptorConfig::default()
        .with_leaf_tokens(40)
        .with_min_layer_nodes(4)
        .with_reduce_dims(4)
        .with_max_cluster_tokens(400)
}
