#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Shared doubles: a scripted LLM that writes notes and evolutions the way a
//! cooperative model would, and copies words of the new memory into the
//! neighbours' context (what evolution can do, and what forgetting must undo).

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{ChatRequest, Event, Services, Turn};

/// The text after `marker` in the last user message, up to the next blank line.
fn section<'a>(req: &'a ChatRequest, marker: &str) -> &'a str {
    let user = &req.messages.last().unwrap().content;
    let start = user.find(marker).map(|i| i + marker.len()).unwrap_or(0);
    let rest = &user[start..];
    rest.split("\n\n").next().unwrap_or("").trim()
}

/// Answers note requests with a JSON note (sloppy on every third call) and
/// evolution requests by copying the new memory's first line into memory 1's
/// context.
pub fn cooperative_llm() -> Arc<ScriptedLlm> {
    let n = std::sync::atomic::AtomicUsize::new(0);
    Arc::new(ScriptedLlm::from_fn(move |req| {
        let user = &req.messages.last().unwrap().content;
        if user.contains("New memory:") {
            let new = section(req, "New memory:\n");
            let first = new.lines().next().unwrap_or("").replace(['"', '\''], "");
            return Ok(format!(
                "{{\"evolve\": true, \"updates\": [{{\"memory\": 1, \"context\": \"related to {first}\", \"tags\": [\"evolved\"]}}]}}"
            ));
        }
        let memory = section(req, "Memory:\n").replace(['"', '\''], "");
        let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(if i % 3 == 2 {
            format!("Here you go: {{context: '{memory}', keywords: ['note',], tags: ['chat'")
        } else {
            format!("{{\"context\": \"{memory}\", \"keywords\": [\"note\"], \"tags\": [\"chat\"]}}")
        })
    }))
}

pub fn services_with(llm: Option<Arc<ScriptedLlm>>) -> Services {
    test_services(llm.map(|l| l as Arc<dyn submem_core::Llm>))
}

pub fn turn(id: &str, speaker: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: Some("1 May 2023".into()),
        speaker: speaker.into(),
        text: text.into(),
        source_id: id.into(),
    })
}
