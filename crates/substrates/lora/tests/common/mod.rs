//! Shared helpers: the tiny random model and fast settings.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use submem_core::{ChatMessage, Event, Llm, Services, Turn};
use submem_lora::{LoraConfig, LoraMemory, LoraModel, PromptFormat};

fn short_messages(q: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("Answer."),
        ChatMessage::user(q.to_string()),
    ]
}

/// A short prompt so byte-level sequences stay small.
pub fn short_prompt() -> PromptFormat {
    PromptFormat::new("test-short", short_messages)
}

pub fn tiny() -> LoraModel {
    static M: OnceLock<LoraModel> = OnceLock::new();
    M.get_or_init(|| LoraModel::tiny_random(1).unwrap()).clone()
}

pub fn fast_config() -> LoraConfig {
    LoraConfig::default()
        .with_prompt(short_prompt())
        .with_epochs(1)
        .with_batch_size(8)
        .with_max_seq_tokens(512)
        .with_learning_rate(1e-2)
}

pub fn services(llm: Option<Arc<dyn Llm>>) -> Services {
    submem_core::test_utils::test_services(llm)
}

pub fn m9(llm: Option<Arc<dyn Llm>>) -> LoraMemory {
    LoraMemory::new(services(llm), fast_config(), tiny()).unwrap()
}

pub fn turn(id: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: "s1".into(),
        session_date: Some("8 May 2023".into()),
        speaker: "Ana".into(),
        text: text.into(),
        source_id: id.into(),
    })
}
