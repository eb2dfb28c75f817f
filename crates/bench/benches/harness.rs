#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Harness overhead per item: a full run (write, manage, read, metrics,
//! JSONL append) with the no-memory substrate, whose own cost is nil, so the
//! time per item is the harness's. Also the metric functions on their own.
//! Each bench asserts its result is correct.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::metrics::{bleu1, evidence_coverage, recall_at_k, sub_em, token_f1};
use submem_bench::runner::{run, Models, RunOptions};
use submem_core::test_utils::test_services;

fn harness(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dataset = Arc::new(
        SyntheticSpec {
            conversations: 2,
            units: 400,
            questions: 50,
            session_size: 25,
            ..SyntheticSpec::default()
        }
        .dataset()
        .unwrap(),
    );
    let models = Arc::new(Models {
        services: test_services(None),
        reader: None,
        judges: vec![],
    });
    let items = 2 * 50 * 2 * 2; // conversations x questions x budgets x ks
    let mut group = c.benchmark_group("harness");
    group.sample_size(20);
    group.bench_function("nomem_run_200_items", |b| {
        b.iter(|| {
            let dir = tempfile::tempdir().unwrap();
            let opts = RunOptions {
                budgets: vec![1024, 2048],
                ks: vec![5, 10],
                out: dir.path().to_path_buf(),
                progress: false,
                packing_baselines: false,
                ..RunOptions::default()
            };
            let specs = SubstrateSpec::parse_list("nomem").unwrap();
            let out = rt
                .block_on(run(
                    dataset.clone(),
                    specs,
                    Arc::new(Registry::default()),
                    models.clone(),
                    opts,
                ))
                .unwrap();
            assert_eq!(out.new_items, items);
            black_box(out.items.len())
        })
    });
    group.finish();
}

fn metrics(c: &mut Criterion) {
    let memory = "[8 May, 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n".repeat(40);
    let gold = vec!["D1:3".to_string(), "D2:2".to_string()];
    c.bench_function("metrics/answer_scores", |b| {
        b.iter(|| {
            let f = token_f1(black_box("Paris, France"), "Paris");
            let u = bleu1("Paris", "Paris France");
            let s = sub_em("It was on 7 May 2023.", "7 May 2023");
            assert!(
                (f - 2.0 / 3.0).abs() < 1e-12 && (u - (-1.0f64).exp()).abs() < 1e-12 && s == 1.0
            );
        })
    });
    c.bench_function("metrics/coverage_and_recall", |b| {
        b.iter(|| {
            let cov = evidence_coverage(
                [
                    "I went to a LGBTQ support group yesterday and it was so powerful.",
                    "not there at all, not at all",
                ],
                black_box(&memory),
            );
            let r = recall_at_k(&gold, ["D1:3", "D9:9"]);
            assert_eq!((cov.whole, cov.part, r), (1, 0, Some(0.5)));
        })
    });
}

criterion_group!(benches, harness, metrics);
criterion_main!(benches);
