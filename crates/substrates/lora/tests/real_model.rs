#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The one test with the real SmolLM2 weights (resolved, and fetched if
//! missing, through `submem-models`' normal chain): the f32 llama with LoRA
//! support reproduces `LocalLlm`'s greedy output, a fresh adapter changes
//! nothing, and one training step runs and moves the adapter.

use submem_core::{ChatMessage, ChatRequest, Llm};
use submem_lora::train::train;
use submem_lora::{Adapter, Example, LoraConfig, LoraModel, TrainConfig};
use submem_models::{Config, LocalLlm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f32_forward_matches_local_llm_and_trains() {
    let cfg = Config::load(None).expect("config");
    let gguf = submem_models::resolve_llm_gguf(&cfg.models).expect("SmolLM2 GGUF");
    let local = cfg.local_llm().expect("LocalLlm");
    let model = LoraModel::shared(&gguf, 1024).expect("f32 model");
    assert_eq!(model.base().config().num_layers, 30);

    let messages = vec![ChatMessage::user("What is the capital of France?")];
    let req = ChatRequest::new(messages.clone()).with_max_tokens(12);
    let expected = local.complete(&req).await.unwrap().text;
    let prompt = LocalLlm::chat_prompt(&messages);
    let (ours, usage) = model.generate(None, &prompt, 12, &[]).unwrap();
    assert_eq!(ours, expected, "f32 llama vs LocalLlm greedy output");
    assert!(usage.input_tokens > 10);

    // A fresh adapter (B = 0) leaves the output unchanged; one step moves it.
    let lc = LoraConfig::default();
    let adapter = Adapter::new(model.base().config(), lc.rank, lc.alpha, 1).unwrap();
    assert_eq!(adapter.parameter_count(), 30 * (8 * 576 * 2 + 576 * 8 + 192 * 8));
    let (same, _) = model.generate(Some(&adapter), &prompt, 12, &[]).unwrap();
    assert_eq!(same, expected);
    let e = Example::new(model.codec(), &lc.prompt, "Where does Ana live?", "Oslo", 256)
        .unwrap()
        .unwrap();
    let report = train(
        model.base(),
        &adapter,
        &[e],
        &TrainConfig {
            epochs: 1,
            ..TrainConfig::default()
        },
    )
    .unwrap();
    assert_eq!(report.steps, 1);
    assert!(report.first_epoch_loss.is_finite() && report.first_epoch_loss > 0.0);
    assert!(adapter.max_abs_b().unwrap() > 0.0);
}
