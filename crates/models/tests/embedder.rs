#![allow(clippy::unwrap_used, clippy::expect_used)]
//! all-MiniLM-L6-v2 against known similarities and an independent float64
//! NumPy reference (`tests/reference/minilm_reference.py`).

mod common;

use serde::Deserialize;
use submem_core::{cosine, Embedder};

#[derive(Deserialize)]
struct Reference {
    items: Vec<RefItem>,
}
#[derive(Deserialize)]
struct RefItem {
    text: String,
    vector: Vec<f64>,
}

fn s(x: &str) -> String {
    x.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_similarities() {
    let e = common::embedder();
    assert_eq!(e.dimension(), 384);
    let v = e
        .embed(&[
            s("The cat sits on the mat"),
            s("A cat is sitting on a mat"),
            s("Stock markets fell sharply"),
        ])
        .await
        .unwrap();
    for x in &v {
        assert_eq!(x.len(), 384);
        assert!((cosine(x, x) - 1.0).abs() < 1e-5);
    }
    let close = cosine(&v[0], &v[1]);
    let far = cosine(&v[0], &v[2]);
    eprintln!("cos(cat, cat') = {close:.4}, cos(cat, stocks) = {far:.4}");
    assert!((close - 0.9726).abs() < 0.005, "{close}");
    assert!((far - 0.0447).abs() < 0.01, "{far}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_numpy_float64_reference() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm_reference.json"
    ))
    .unwrap();
    let reference: Reference = serde_json::from_str(&text).unwrap();
    let e = common::embedder();
    let texts: Vec<String> = reference.items.iter().map(|i| i.text.clone()).collect();
    // Batched together, so padding and masking are exercised too.
    let got = e.embed(&texts).await.unwrap();
    let mut worst = 0f64;
    for (item, v) in reference.items.iter().zip(&got) {
        assert_eq!(v.len(), item.vector.len());
        for (a, b) in v.iter().zip(&item.vector) {
            worst = worst.max((f64::from(*a) - b).abs());
        }
    }
    eprintln!("max |candle - numpy| = {worst:.2e}");
    assert!(worst < 1e-3, "{worst}");

    // Alone, each text is short enough for the sharded encoder that serves
    // queries: it must match the reference as well.
    assert!(e.short_input_shards().is_some(), "no sharded encoder");
    let mut worst_alone = 0f64;
    for item in &reference.items {
        let alone = e.embed(std::slice::from_ref(&item.text)).await.unwrap();
        for (a, b) in alone[0].iter().zip(&item.vector) {
            worst_alone = worst_alone.max((f64::from(*a) - b).abs());
        }
    }
    eprintln!("max |candle sharded - numpy| = {worst_alone:.2e}");
    assert!(worst_alone < 1e-3, "{worst_alone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_and_order_do_not_change_vectors() {
    let e = common::embedder();
    let texts: Vec<String> = (0..40)
        .map(|i| "word ".repeat(1 + (i * 7) % 23) + &format!("item {i}"))
        .collect();
    let batched = e.embed(&texts).await.unwrap();
    assert_eq!(batched.len(), texts.len());
    for i in [0usize, 13, 39] {
        let alone = e.embed(&texts[i..=i]).await.unwrap();
        let d = batched[i]
            .iter()
            .zip(&alone[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-4, "item {i} differs by {d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_and_empty_inputs() {
    let e = common::embedder();
    assert!(e.embed(&[]).await.unwrap().is_empty());
    let long = "memory ".repeat(2000);
    let v = e.embed(&[long, String::new()]).await.unwrap();
    assert_eq!(v.len(), 2);
    assert!(v
        .iter()
        .all(|x| x.len() == 384 && x.iter().all(|f| f.is_finite())));
}
