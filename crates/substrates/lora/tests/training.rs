#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The model and trainer on the tiny random llama: a fresh adapter is a
//! no-op, the KV cache matches a full recompute, the loss scores answer
//! tokens only and padding never leaks, and training lowers the loss.

mod common;

use candle_core::{Device, IndexOp, Tensor};
use submem_lora::train::{batch_loss, train};
use submem_lora::{Adapter, Example, TrainConfig};

fn example(q: &str, a: &str) -> Example {
    let m = common::tiny();
    Example::new(m.codec(), &common::short_prompt(), q, a, 512)
        .unwrap()
        .unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

#[test]
fn fresh_adapter_changes_nothing() {
    let m = common::tiny();
    let adapter = Adapter::new(m.base().config(), 8, 16.0, 3).unwrap();
    assert_eq!(adapter.max_abs_b().unwrap(), 0.0);
    let e = example("Where does Ana live?", "Oslo");
    let ids = Tensor::new(e.ids.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let plain = m.base().hidden(&ids, 0, None, None).unwrap();
    let adapted = m.base().hidden(&ids, 0, Some(&adapter), None).unwrap();
    assert_eq!(max_diff(&plain, &adapted), 0.0);
}

#[test]
fn kv_cache_matches_full_recompute() {
    let m = common::tiny();
    let ids: Vec<u32> = "<|im_start|>user\nhello there"
        .bytes()
        .map(u32::from)
        .collect();
    let mut cache = submem_lora::llama::KvCache::default();
    let (head, tail) = ids.split_at(10);
    m.base().next_logits(head, 0, None, &mut cache).unwrap();
    let mut last = None;
    for (i, t) in tail.iter().enumerate() {
        last = Some(
            m.base()
                .next_logits(&[*t], 10 + i, None, &mut cache)
                .unwrap(),
        );
    }
    let full = Tensor::new(ids.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let h = m.base().hidden(&full, 0, None, None).unwrap();
    let expect = m
        .base()
        .logits(&h.i((0, ids.len() - 1)).unwrap().unsqueeze(0).unwrap())
        .unwrap();
    assert!(max_diff(&last.unwrap(), &expect.squeeze(0).unwrap()) < 1e-4);
}

/// Cross-entropy of the answer tokens computed by hand from full logits.
fn manual_loss_sum(e: &Example) -> (f32, usize) {
    let m = common::tiny();
    let ids = Tensor::new(e.ids.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let h = m
        .base()
        .hidden(&ids, 0, None, None)
        .unwrap()
        .squeeze(0)
        .unwrap();
    let logp = candle_nn::ops::log_softmax(&m.base().logits(&h).unwrap(), 1).unwrap();
    let logp: Vec<Vec<f32>> = logp.to_vec2().unwrap();
    let mut sum = 0.0;
    for p in e.answer_start - 1..e.ids.len() - 1 {
        sum -= logp[p][e.ids[p + 1] as usize];
    }
    (sum, e.ids.len() - e.answer_start)
}

#[test]
fn loss_scores_answer_tokens_only_and_padding_never_leaks() {
    let m = common::tiny();
    let short = example("Pet?", "a cat");
    let long = example(
        "Where did Ana move last spring, and why?",
        "to Oslo for work",
    );
    assert_eq!(
        short.answer_tokens(),
        "a cat<|im_end|>".len() - "<|im_end|>".len() + 1
    );
    let (s1, n1) = manual_loss_sum(&short);
    let (s2, n2) = manual_loss_sum(&long);
    let one = batch_loss(m.base(), None, &[&short])
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(
        (one - s1 / n1 as f32).abs() < 1e-4,
        "{one} vs {}",
        s1 / n1 as f32
    );
    // Batched with a longer sequence: the short one is right-padded.
    let both = batch_loss(m.base(), None, &[&short, &long])
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let expect = (s1 + s2) / (n1 + n2) as f32;
    assert!((both - expect).abs() < 1e-4, "{both} vs {expect}");
}

#[test]
fn training_lowers_the_loss_and_moves_b() {
    let m = common::tiny();
    let examples = vec![
        example("Where does Ana live?", "Oslo"),
        example("Who teaches violin?", "Ms Berg"),
    ];
    let adapter = Adapter::new(m.base().config(), 4, 8.0, 1).unwrap();
    let refs: Vec<&Example> = examples.iter().collect();
    let before = batch_loss(m.base(), Some(&adapter), &refs)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let cfg = TrainConfig {
        epochs: 30,
        batch_size: 2,
        learning_rate: 5e-2,
        ..TrainConfig::default()
    };
    let report = train(m.base(), &adapter, &examples, &cfg).unwrap();
    let after = batch_loss(m.base(), Some(&adapter), &refs)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert_eq!(report.steps, 30);
    assert!(after < before * 0.8, "loss {before} -> {after}");
    assert!(adapter.max_abs_b().unwrap() > 0.0);
}
