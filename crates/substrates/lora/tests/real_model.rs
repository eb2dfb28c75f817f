#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The one test with the real SmolLM2 weights (resolved, and fetched if
//! missing, through `submem-models`' normal chain): the f32 llama with LoRA
//! support reproduces the greedy output of candle's `quantized_llama` (the
//! implementation `LocalLlm` runs) loaded with the same weights in f32, a
//! fresh adapter changes nothing, and one training step moves the adapter.
//!
//! `LocalLlm` itself (Q4_1 or Q8_0 matmuls, which quantise activations to
//! 8 bits) diverges from f32 at the first token on this prompt ("L'Étoile…"
//! against "The capital of France is Paris."), so exact parity is checked
//! against the unquantised reference and the quantised output is only
//! logged.

use submem_core::{ChatMessage, ChatRequest, Llm};
use submem_lora::train::train;
use submem_lora::{Adapter, Example, LoraConfig, LoraModel, TrainConfig};
use submem_models::{Config, LocalLlm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f32_forward_matches_local_llm_and_trains() {
    let cfg = Config::load(None).expect("config");
    let gguf = submem_models::resolve_llm_gguf(&cfg.models).expect("SmolLM2 GGUF");
    // The shipped Q4_1 weights are exactly what the f32 model dequantises.
    let local = submem_models::shared_local_llm(
        &gguf,
        submem_models::LocalLlmOptions {
            weights: submem_models::LlmWeights::AsShipped,
            ..Default::default()
        },
    )
    .expect("LocalLlm");
    let model = LoraModel::shared(&gguf, 1024).expect("f32 model");
    assert_eq!(model.base().config().num_layers, 30);

    let messages = vec![ChatMessage::user("What is the capital of France?")];
    let req = ChatRequest::new(messages.clone()).with_max_tokens(12);
    let expected = local.complete(&req).await.unwrap().text;
    let prompt = LocalLlm::chat_prompt(&messages);
    let (ours, usage, ours_ids) = model
        .generate_tokens(None, &model.codec().encode(&prompt).unwrap(), 12, &[])
        .unwrap();
    eprintln!("LocalLlm (Q4_1): {expected:?}; f32 llama: {ours:?}");
    let reference = candle_f32_greedy(
        &gguf,
        &model.codec().encode(&prompt).unwrap(),
        ours_ids.len(),
    );
    assert_eq!(
        ours_ids, reference,
        "f32 llama vs quantized_llama on f32 weights"
    );
    assert!(usage.input_tokens > 10);

    // A fresh adapter (B = 0) leaves the output unchanged; one step moves it.
    let lc = LoraConfig::default();
    let adapter = Adapter::new(model.base().config(), lc.rank, lc.alpha, 1).unwrap();
    assert_eq!(
        adapter.parameter_count(),
        30 * (8 * 576 * 2 + 576 * 8 + 192 * 8)
    );
    let (same, _) = model.generate(Some(&adapter), &prompt, 12, &[]).unwrap();
    assert_eq!(same, ours);
    let e = Example::new(
        model.codec(),
        &lc.prompt,
        "Where does Ana live?",
        "Oslo",
        256,
    )
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

/// Greedy ids from candle's `quantized_llama` over the GGUF with every
/// tensor dequantised to f32 (plain matmuls, no activation quantisation).
fn candle_f32_greedy(gguf: &std::path::Path, prompt: &[u32], n: usize) -> Vec<u32> {
    use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
    use candle_core::{Device, Tensor};
    use std::io::{Cursor, Seek};
    let mut f = std::fs::File::open(gguf).unwrap();
    let ct = gguf_file::Content::read(&mut f).unwrap();
    let mut tensors = Vec::new();
    for name in ct.tensor_infos.keys() {
        let t = ct.tensor(&mut f, name, &Device::Cpu).unwrap();
        let dense = t.dequantize(&Device::Cpu).unwrap();
        tensors.push((
            name.clone(),
            QTensor::quantize(&dense, GgmlDType::F32).unwrap(),
        ));
    }
    let md: Vec<(&str, &gguf_file::Value)> = ct
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("tokenizer."))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut buf = Cursor::new(Vec::new());
    gguf_file::write(&mut buf, &md, &refs).unwrap();
    buf.rewind().unwrap();
    let ct = gguf_file::Content::read(&mut buf).unwrap();
    let mut m = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(
        ct,
        &mut buf,
        &Device::Cpu,
    )
    .unwrap();
    let mut out = Vec::new();
    let input = Tensor::new(prompt, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let mut logits = m.forward(&input, 0).unwrap().squeeze(0).unwrap();
    for i in 0..n {
        let next = logits.argmax(0).unwrap().to_scalar::<u32>().unwrap();
        out.push(next);
        let input = Tensor::new(&[next], &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        logits = m
            .forward(&input, prompt.len() + i)
            .unwrap()
            .squeeze(0)
            .unwrap();
    }
    out
}
