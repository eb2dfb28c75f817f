//! Criterion: one epoch of M9 training on the tiny random llama (16 pairs,
//! batch 8): the cost of the trainer's own machinery (masking, batching,
//! AdamW), independent of the real model. Asserts the loss fell. The real
//! model's rate is measured by `examples/train_speed.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use submem_core::ChatMessage;
use submem_lora::train::{batch_loss, train};
use submem_lora::{Adapter, Example, LoraModel, PromptFormat, TrainConfig};

fn short(q: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::user(q.to_string())]
}

fn bench(c: &mut Criterion) {
    let model = LoraModel::tiny_random(1).unwrap();
    let format = PromptFormat::new("bench", short);
    let examples: Vec<Example> = (0..16)
        .map(|i| {
            Example::new(
                model.codec(),
                &format,
                &format!("Question number {i}?"),
                &format!("answer {i}"),
                512,
            )
            .unwrap()
            .unwrap()
        })
        .collect();
    let cfg = TrainConfig {
        epochs: 1,
        batch_size: 8,
        learning_rate: 1e-2,
        ..TrainConfig::default()
    };
    let refs: Vec<&Example> = examples.iter().collect();
    c.bench_function("m9_train_epoch_tiny_16_pairs", |b| {
        b.iter(|| {
            let adapter = Adapter::new(model.base().config(), 8, 16.0, 1).unwrap();
            let before = batch_loss(model.base(), Some(&adapter), &refs)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            train(model.base(), &adapter, &examples, &cfg).unwrap();
            let after = batch_loss(model.base(), Some(&adapter), &refs)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(after < before, "loss {before} -> {after}");
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
