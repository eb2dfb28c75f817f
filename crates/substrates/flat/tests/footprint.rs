#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The fixed cost of a flat instance stays out: a server builds one instance
//! per namespace, so an instance that holds a thread (or a tantivy writer,
//! which holds six) between calls multiplies that by the tenants. This binary
//! holds one test on purpose: it counts the process's threads, which tests
//! running beside it would change.
//!
//! No RSS threshold here (resident memory is too noisy for a test); the
//! figures are in the crate docs and come from
//! `cargo run --release -p submem-flat --example instance_footprint`.

use std::time::{Duration, Instant};
use submem_core::plugin::{BuildContext, Settings};
use submem_core::test_utils::test_services;
use submem_core::{Event, Namespace, Query, Substrate, Turn};

/// Threads of this process (Linux).
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn turns() -> Vec<Event> {
    (0..20)
        .map(|i| {
            Event::Turn(Turn {
                session_id: "s1".into(),
                session_date: None,
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text: format!("turn {i}: my sister visited Oslo and we walked the dog in the park"),
                source_id: format!("D1:{i}"),
            })
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn idle_instances_hold_no_threads() {
    const INSTANCES: usize = 50;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ctx = BuildContext::new(test_services(None));
    let before = threads();

    let mut built = Vec::new();
    for factory in submem_flat::factories() {
        for _ in 0..INSTANCES {
            let m = factory.build(&ctx, &Settings::new()).unwrap();
            built.push((factory.name().to_string(), m));
        }
    }
    // Building spawns nothing.
    assert_eq!(
        threads(),
        before,
        "threads after building {} instances",
        built.len()
    );

    for (i, (_, m)) in built.iter().enumerate() {
        let ns = Namespace::new(format!("tenant-{i}")).unwrap();
        rt.block_on(m.write(&ns, &turns())).unwrap();
        let recall = rt
            .block_on(m.read(&Query::question(ns, "where is Oslo?", 4096)))
            .unwrap();
        assert!(!recall.sources.is_empty());
    }
    // A write may run threads (tantivy's writer); none may outlive it. Pools
    // that a write drops end their threads on their own, so give them time:
    // a writer kept per instance would hold hundreds here for good.
    let deadline = Instant::now() + Duration::from_secs(60);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let names: Vec<&str> = built
        .iter()
        .map(|(n, _)| n.as_str())
        .step_by(INSTANCES)
        .collect();
    assert_eq!(
        threads(),
        before,
        "threads held by {} idle written instances of {names:?}",
        built.len()
    );
}
