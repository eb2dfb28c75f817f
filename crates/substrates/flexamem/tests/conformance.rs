#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! The core conformance suite, with the rule writer and with a scripted LLM,
//! also through `Box<dyn Substrate>`, ephemeral and durable.

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::{Llm, Substrate};
use submem_flexamem::{FlexaConfig, FlexaMem, RecoveryMode};

fn scripted() -> Arc<dyn Llm> {
    Arc::new(ScriptedLlm::from_fn(|req| {
        let prompt = &req.messages[1].content;
        if prompt.contains("Merge these") {
            Ok("merged record of earlier events".into())
        } else {
            // Echo the first words of the unit so the record mentions its facts.
            let body = prompt.rsplit("\n\n").next().unwrap_or("");
            let words: Vec<&str> = body.split_whitespace().take(30).collect();
            Ok(format!(
                "{{\"record\": \"{}\", \"keywords\": [\"k\"], \"tags\": [\"t\"], \"description\": \"d\"}}",
                words.join(" ").replace('"', "'")
            ))
        }
    }))
}

#[tokio::test]
async fn conformance_rule_writer() {
    let services = test_services(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || {
            Box::new(FlexaMem::new(services.clone(), FlexaConfig::default()).unwrap())
                as Box<dyn Substrate>
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

#[tokio::test]
async fn conformance_scripted_llm_unit_mode() {
    let services = test_services(Some(scripted()));
    let tokens = services.tokens.clone();
    run_conformance(
        move || {
            Box::new(
                FlexaMem::new(
                    services.clone(),
                    FlexaConfig::default().with_mode(RecoveryMode::Unit),
                )
                .unwrap(),
            ) as Box<dyn Substrate>
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

#[tokio::test]
async fn conformance_durable_through_arc() {
    let services = test_services(Some(scripted()));
    let tokens = services.tokens.clone();
    let root = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    let root_path = root.path().to_path_buf();
    run_conformance(
        move || {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let m = FlexaMem::open(
                root_path.join(format!("s{i}")),
                services.clone(),
                FlexaConfig::default(),
            )
            .unwrap();
            Box::new(Arc::new(m)) as Box<dyn Substrate>
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
