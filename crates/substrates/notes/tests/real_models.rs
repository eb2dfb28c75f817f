#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M4 with the real models: SmolLM2-135M writes the notes (its JSON repaired
//! or replaced by the rule writer) and decides evolutions, MiniLM embeds,
//! tiktoken o200k counts. Tiny input; skipped (with a message) when the
//! models cannot be resolved.

use submem_core::testing::{fixture_conversation, MARKER_A};
use submem_core::{Namespace, Query, Services, Substrate};
use submem_notes::{EvolvingNotes, NotesConfig};

fn services() -> Option<Services> {
    submem_models::Config::load(None)
        .and_then(|cfg| cfg.local_services())
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_write_evolve_and_read_within_budget() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let counter = services.tokens.clone();
    // Shorter generations keep this test to about a minute on 2 cores (the
    // defaults allow 160 tokens per note and 256 per evolution); four turns
    // are the smallest fixture that holds the planted fact.
    let config = NotesConfig {
        note_max_tokens: 96,
        evolve_max_tokens: 96,
        ..NotesConfig::default()
    };
    let m = EvolvingNotes::new(services, config).unwrap();
    let ns = Namespace::new("real").unwrap();
    let turns = fixture_conversation("a", MARKER_A, 4);
    m.write(&ns, &turns).await.unwrap();
    m.manage().await.unwrap();
    let s = m.stats();
    eprintln!("stats {s:?}");
    assert_eq!(s.llm_notes + s.rule_notes, 4);
    assert_eq!(m.pending_evolutions(), 0);
    for (note, e) in m.notes(&ns).iter().zip(&turns) {
        assert_eq!(note.raw, e.render());
    }
    for b in [128, 512, 4096] {
        let q = Query::question(ns.clone(), "What is the name of my violin teacher?", b)
            .with_fixed_prompt_tokens(30);
        let r = m.read(&q).await.unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(counter.count(&r.text), r.tokens);
        if b == 4096 {
            assert!(r.text.contains(MARKER_A), "{}", r.text);
        }
    }
}
