#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Render latency at an 8k budget over 1,000 and 10,000 units with merged
//! records cached. Budgets are counted as users count them (o200k_base);
//! vectors are 384-dimensional like MiniLM's but come from the hashing
//! embedder, so the query embedding, which the target excludes, costs
//! nothing. Each bench first checks that the render is a real memory render
//! (memory active, merged records shown, within the allowance).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::sync::Arc;
use std::time::Duration;
use submem_core::test_utils::HashingEmbedder;
use submem_core::{Event, Namespace, Query, Services, Substrate, Turn};
use submem_models::O200kCounter;

// The allocator of the `submem` binary and the Python extension, so the bench
// measures the program users run.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use submem_flexamem::{FlexaConfig, FlexaMem, RecoveryMode};

const WORDS: &[&str] = &[
    "drawer", "kitchen", "apple", "window", "river", "garden", "laptop", "ticket", "violin",
    "museum", "coffee", "train", "bridge", "pillow", "letter", "candle", "forest", "mirror",
    "basket", "engine", "planet", "silver", "doctor", "market", "winter", "summer", "pencil",
    "camera", "guitar", "island",
];

/// `units` sessions of five turns of ~25 words: one unit per session.
fn history(units: usize) -> Vec<Event> {
    let mut x: u64 = 42;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut out = Vec::with_capacity(units * 5);
    for s in 0..units {
        for t in 0..5 {
            let text = (0..25)
                .map(|_| WORDS[next() % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ");
            out.push(Event::Turn(Turn {
                session_id: format!("s{s}"),
                session_date: None,
                speaker: if t % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text,
                source_id: format!("{s}:{t}"),
            }));
        }
    }
    out
}

fn bench_render(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("render_8k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    for units in [1_000usize, 10_000] {
        let ns = Namespace::new("bench").unwrap();
        let services = Services {
            llm: None,
            embedder: Arc::new(HashingEmbedder::new(384)),
            tokens: Arc::new(O200kCounter::new().unwrap()),
        };
        let m = FlexaMem::new(services, FlexaConfig::default()).unwrap();
        rt.block_on(async {
            m.write(&ns, &history(units)).await.unwrap();
            m.manage().await.unwrap();
        });
        assert_eq!(m.raw_units(&ns).len(), units);
        for (name, q, mode) in [
            (
                "unit",
                Query::agentic(
                    ns.clone(),
                    "find the violin in the museum",
                    "You see a violin",
                    8192,
                ),
                RecoveryMode::Unit,
            ),
            (
                "piece",
                Query::question(
                    ns.clone(),
                    "when did Ben take the violin to the museum",
                    8192,
                ),
                RecoveryMode::Piece,
            ),
        ] {
            // Warm the merge cache, then check the render is what we measure.
            let first = rt.block_on(m.render_detailed(&q)).unwrap();
            let r = rt.block_on(m.render_detailed(&q)).unwrap();
            assert_eq!(r.recall.text, first.recall.text);
            assert_eq!(r.mode, Some(mode));
            assert!(r.recall.tokens <= q.allowance());
            assert!(
                r.merged_records > 0,
                "{name}/{units}: merged records expected"
            );
            assert!(
                r.recall.tokens > q.allowance() / 2,
                "{name}/{units}: memory should be filled"
            );
            group.bench_with_input(BenchmarkId::new(name, units), &q, |b, q| {
                b.iter(|| rt.block_on(m.render_detailed(q)).unwrap().recall.tokens)
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
