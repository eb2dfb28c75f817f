#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Incremental insert vs full rebuild, at about 1k and 10k leaves.
//!
//! The LLM is a **counting scripted LLM** (it answers instantly with the
//! first words of its prompt and counts calls and prompt tokens), the
//! embedder the 64-bucket hashing embedder, the counter whitespace words:
//! so wall time is the tree's own work (clustering, bookkeeping), and LLM
//! calls/tokens are what a real model would be asked for.
//!
//! For each size: one full build of the history (timed, calls counted),
//! then criterion samples of (a) inserting one new 20-turn session and
//! bringing the tree up to date incrementally and (b) a full rebuild of the
//! same tree. Each insert runs on a copy of the built tree (restored from a
//! snapshot, untimed), so every sample measures the stated size. The ratio
//! of calls and of median wall time is printed. The insert is asserted to
//! stay incremental (no rebuild) and to cost fewer calls than a rebuild.

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use submem_core::test_utils::test_services;
use submem_core::testing::synthetic_turns;
use submem_core::{
    ChatRequest, Completion, Event, Llm, Namespace, ServiceError, Substrate, Turn, Usage,
};
use submem_raptor::{Raptor, RaptorConfig};

#[derive(Debug, Default)]
struct CountingLlm {
    calls: AtomicU64,
    input_words: AtomicU64,
}

#[async_trait]
impl Llm for CountingLlm {
    fn name(&self) -> &str {
        "counting"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, ServiceError> {
        let prompt = &request.messages.last().unwrap().content;
        let words = prompt.split_whitespace().count() as u64;
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.input_words.fetch_add(words, Ordering::Relaxed);
        let text: Vec<&str> = prompt.split_whitespace().skip(20).take(60).collect();
        Ok(Completion {
            text: text.join(" "),
            usage: Usage {
                input_tokens: words,
                output_tokens: 60,
            },
        })
    }
}

fn session(tag: usize, n: usize) -> Vec<Event> {
    synthetic_turns(n, 1000 + tag as u64)
        .into_iter()
        .enumerate()
        .map(|(i, e)| match e {
            Event::Turn(t) => Event::Turn(Turn {
                source_id: format!("new{tag}:{i}"),
                session_id: format!("new_{tag}"),
                ..t
            }),
            other => other,
        })
        .collect()
}

fn bench_sizes(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("m6_update");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200));
    for leaves in [1_000usize, 10_000] {
        let llm = Arc::new(CountingLlm::default());
        // Large enough that an insert never trips the rebuild rule: the
        // insert path is what is measured.
        let cfg = RaptorConfig::default()
            .with_rebuild_fraction(10.0)
            .with_drift_growth(1e6);
        let m = Raptor::new(
            test_services(Some(llm.clone() as Arc<dyn Llm>)),
            cfg.clone(),
        )
        .unwrap();
        let ns = Namespace::new("bench").unwrap();
        // Turns of 20–30 words pack three to a 100-token leaf.
        let events = synthetic_turns(leaves * 3, 7);
        for chunk in events.chunks(20) {
            rt.block_on(m.write(&ns, chunk)).unwrap();
        }
        let t = Instant::now();
        rt.block_on(m.manage()).unwrap();
        let full_secs = t.elapsed().as_secs_f64();
        let full_calls = llm.calls.swap(0, Ordering::Relaxed);
        let full_words = llm.input_words.swap(0, Ordering::Relaxed);
        let levels = rt.block_on(m.levels(&ns));
        eprintln!(
            "M6 full build: {} leaves, levels {levels:?}, {full_calls} LLM calls, \
             {full_words} prompt words, {full_secs:.2} s",
            levels[0]
        );
        assert_eq!(m.stats().full_builds, 1);

        // The rebuild is measured first, at the size built above: every
        // measured insert grows the tree (criterion runs hundreds).
        let mut rebuild_calls = Vec::new();
        group.bench_function(format!("full_rebuild_{leaves}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let before = llm.calls.load(Ordering::Relaxed);
                    let t = Instant::now();
                    rt.block_on(m.rebuild(&ns)).unwrap();
                    total += t.elapsed();
                    rebuild_calls.push(llm.calls.load(Ordering::Relaxed) - before);
                }
                total
            })
        });
        rebuild_calls.sort_unstable();
        let median_rebuild_calls = rebuild_calls[rebuild_calls.len() / 2];
        // Every measured insert starts from a copy of the tree as built
        // (restored from one snapshot, untimed), so the insert is measured at
        // the stated size however many samples criterion takes.
        let snapshot = tempfile::tempdir().unwrap();
        rt.block_on(m.persist(snapshot.path())).unwrap();
        let mut insert_calls = Vec::new();
        group.bench_function(format!("incremental_insert_20_turns_{leaves}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for tag in 0..iters as usize {
                    let copy = Raptor::new(
                        test_services(Some(llm.clone() as Arc<dyn Llm>)),
                        cfg.clone(),
                    )
                    .unwrap();
                    rt.block_on(copy.restore(snapshot.path())).unwrap();
                    let s = session(tag, 20);
                    let before = llm.calls.load(Ordering::Relaxed);
                    let t = Instant::now();
                    rt.block_on(copy.write(&ns, &s)).unwrap();
                    rt.block_on(copy.manage()).unwrap();
                    total += t.elapsed();
                    insert_calls.push(llm.calls.load(Ordering::Relaxed) - before);
                    assert_eq!(copy.stats().full_builds, 0, "the insert stayed incremental");
                }
                total
            })
        });
        insert_calls.sort_unstable();
        let median_insert_calls = insert_calls[insert_calls.len() / 2];
        assert!(median_insert_calls * 10 < full_calls);

        eprintln!(
            "M6 at {leaves} leaves: LLM calls per update, incremental {median_insert_calls} vs \
             rebuild {median_rebuild_calls} (ratio {:.1}x); see criterion medians for wall time",
            median_rebuild_calls as f64 / median_insert_calls.max(1) as f64
        );
    }
    group.finish();
}

criterion_group!(benches, bench_sizes);
criterion_main!(benches);
