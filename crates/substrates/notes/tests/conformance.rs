#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared conformance suite through `Box<dyn Substrate>`: without an LLM
//! (rule notes, top-k render), and with a scripted LLM whose evolutions copy
//! words between notes (fit render), so the forget checks also cover evolved
//! contexts.

mod common;

use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_notes::{EvolvingNotes, NotesConfig, RenderMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_notes_pass_conformance() {
    let services = common::services_with(None);
    let tokens = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(EvolvingNotes::new(services.clone(), NotesConfig::default()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolving_llm_notes_with_fit_render_pass_conformance() {
    let services = common::services_with(Some(common::cooperative_llm()));
    let tokens = services.tokens.clone();
    let config = NotesConfig::default()
        .with_render(RenderMode::Fit)
        .with_evolve_threshold(0.1);
    run_conformance(
        move || -> Box<dyn Substrate> {
            Box::new(EvolvingNotes::new(services.clone(), config.clone()).unwrap())
        },
        tokens,
        ConformanceOptions::default(),
    )
    .await;
}
