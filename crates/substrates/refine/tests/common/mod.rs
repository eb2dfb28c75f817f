#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Fixtures shared by the M7/M8 tests: tiny ALFWorld-like episodes and a
//! scripted LLM that answers the judge, distill and skill prompts.

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{ChatRequest, Event, Llm, Namespace, Services, Step};

pub fn ns(name: &str) -> Namespace {
    Namespace::new(name).unwrap()
}

/// An episode `id` for `task`: its steps are `(action, observation)`.
pub fn episode(id: &str, task: &str, steps: &[(&str, &str)]) -> Vec<Event> {
    let mut out = vec![Event::Step(Step {
        step: 1,
        action: "[start]".into(),
        observation: format!("You are in the middle of a room.\nYour task is to: {task}"),
        source_id: format!("{id}:1"),
    })];
    for (i, (a, o)) in steps.iter().enumerate() {
        out.push(Event::Step(Step {
            step: i as u32 + 2,
            action: a.to_string(),
            observation: o.to_string(),
            source_id: format!("{id}:{}", i + 2),
        }));
    }
    out
}

pub fn mug_episode(id: &str) -> Vec<Event> {
    episode(
        id,
        "put a mug in the fridge.",
        &[
            (
                "go to countertop 1",
                "On the countertop 1, you see a mug 1.",
            ),
            (
                "take mug 1 from countertop 1",
                "You pick up the mug 1 from the countertop 1.",
            ),
            ("go to fridge 1", "The fridge 1 is closed."),
            ("open fridge 1", "You open the fridge 1."),
            (
                "put mug 1 in/on fridge 1",
                "You put the mug 1 in/on the fridge 1.",
            ),
        ],
    )
}

pub fn lamp_episode(id: &str) -> Vec<Event> {
    episode(
        id,
        "look at the book under the desklamp.",
        &[
            (
                "go to desk 1",
                "On the desk 1, you see a book 2 and a desklamp 1.",
            ),
            (
                "take book 2 from desk 1",
                "You pick up the book 2 from the desk 1.",
            ),
            ("use desklamp 1", "You turn on the desklamp 1."),
        ],
    )
}

pub fn last_user(r: &ChatRequest) -> String {
    r.messages
        .last()
        .map(|m| m.content.clone())
        .unwrap_or_default()
}

/// The task line of a prompt.
pub fn task_of(prompt: &str) -> String {
    prompt
        .lines()
        .find_map(|l| l.strip_prefix("Task: "))
        .unwrap_or("")
        .to_string()
}

/// Judge: SUCCESS unless the trajectory says "Nothing happens"; distill: one
/// strategy naming the task (and any `secret-*` word of the trajectory); skill:
/// one skill naming the first action it sees.
pub fn scripted() -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::from_fn(|r| {
        let system = r.messages[0].content.clone();
        let user = last_user(r);
        let secret = user
            .split_whitespace()
            .find(|w| w.starts_with("secret-"))
            .unwrap_or("")
            .trim_end_matches('.')
            .to_string();
        Ok(if system.contains("judge") {
            if user.contains("Nothing happens") {
                "FAILURE"
            } else {
                "SUCCESS"
            }
            .to_string()
        } else if system.contains("strategies") {
            let task = task_of(&user);
            format!(
                "{{\"strategies\": [{{\"title\": \"How to {task}\", \"description\": \"Plan for: {task}\", \"content\": \"Find the object first, then go to the target. {secret}\"}}]}}"
            )
        } else {
            let first = user
                .lines()
                .find_map(|l| l.strip_prefix("- > "))
                .and_then(|l| l.split(" -> ").next())
                .unwrap_or("act")
                .to_string();
            format!(
                "{{\"name\": \"skill {first}\", \"when_to_use\": \"when you need to {first}\", \"steps\": [\"{first}\", \"check the result {secret}\"], \"pitfalls\": [\"do not skip it\"]}}"
            )
        })
    }))
}

pub fn services_with(llm: Option<Arc<dyn Llm>>) -> Services {
    test_services(llm)
}
