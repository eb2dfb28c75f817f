#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! The shared conformance suite, with the rule writer and with a scripted
//! LLM, also through `Box<dyn Substrate>`.

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::{Llm, Substrate};
use submem_graph::{GraphConfig, GraphMemory};

fn small() -> GraphConfig {
    GraphConfig::default().with_chunk_tokens(40)
}

#[tokio::test]
async fn conformance_with_rules() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || Box::new(GraphMemory::new(services.clone(), small()).unwrap()),
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

/// An LLM that answers extraction requests with one grounded entity per
/// capitalised word of the text and keyword requests with JSON.
fn scripted() -> Arc<dyn Llm> {
    Arc::new(ScriptedLlm::from_fn(|req| {
        let prompt = &req.messages.last().unwrap().content;
        if prompt.contains("high_level_keywords") {
            return Ok("{\"high_level_keywords\": [\"music\"], \"low_level_keywords\": [\"violin teacher\"]}".into());
        }
        let text = prompt.rsplit("Text:\n").next().unwrap_or("");
        let mut lines = Vec::new();
        for w in text.split_whitespace().filter(|w| w.len() > 3) {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            if w.chars().next().is_some_and(char::is_uppercase) {
                lines.push(format!("entity | {w} | thing | {w} is mentioned."));
            }
        }
        if text.contains("violin") {
            lines.push(
                "relation | Ana | Oslo | violin teacher | The teacher of Ana lives in Oslo.".into(),
            );
        }
        Ok(lines.join("\n"))
    }))
}

#[tokio::test]
async fn conformance_with_an_llm_through_box_dyn() {
    let services = test_services(Some(scripted()));
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            let boxed: Box<dyn Substrate> =
                Box::new(GraphMemory::new(services.clone(), small()).unwrap());
            Box::new(boxed)
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
