#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Building services from a configuration, and the `models check` report.

mod common;

use submem_core::{ChatMessage, ChatRequest};
use submem_models::{check_models, fetch_models, LlmKind};

#[test]
fn services_share_one_copy_of_each_model() {
    let cfg = common::config();
    let a = cfg.local_embedder().unwrap();
    let b = cfg.local_embedder().unwrap();
    assert!(a.shares_model_with(&b));
    let l1 = cfg.local_llm().unwrap();
    let l2 = cfg.local_llm().unwrap();
    assert!(l1.shares_model_with(&l2));

    let services = cfg.services().unwrap();
    assert_eq!(services.embedder.dimension(), 384);
    assert!(services.llm.is_some());
    assert_eq!(services.tokens.count("hello world"), 2);

    let mut no_llm = cfg.clone();
    no_llm.services.memory_llm = LlmKind::None;
    assert!(no_llm.services().unwrap().llm.is_none());
}

#[test]
fn fetch_models_returns_existing_paths() {
    let paths = fetch_models(&common::config()).unwrap();
    assert_eq!(paths.len(), 2);
    assert!(paths[0].join("model.safetensors").is_file());
    assert!(paths[1].is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_working_models() {
    let cfg = common::config();
    let report = check_models(&cfg).await.unwrap();
    eprintln!("{report}");
    assert_eq!(report.embedder_dimension, 384);
    assert!(report.embedder_sentences_per_sec > 0.0);
    assert!(report.prefill_tok_s > 0.0 && report.decode_tok_s > 0.0);
    assert!(!report.sample.trim().is_empty());
    let text = report.to_string();
    assert!(text.contains("tok/s") && text.contains(&report.llm));

    // The memory LLM from the services answers through the trait object.
    let llm = cfg.memory_llm().unwrap().unwrap();
    let out = llm
        .complete(&ChatRequest::new(vec![ChatMessage::user("Say yes.")]).with_max_tokens(4))
        .await
        .unwrap();
    assert!(out.usage.output_tokens >= 1);
}
