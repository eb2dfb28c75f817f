//! The conformance suite every substrate crate runs (feature `testing`).
//!
//! [`run_conformance`] builds fresh instances through a closure and checks the
//! contract of [`Substrate`]: write-then-read finds what was written, budgets
//! are never exceeded and token counts are exact, empty history and empty
//! queries behave, namespaces never leak, persistence round-trips, a foreign
//! directory is refused, duplicates are refused, and forgotten events never
//! come back. A plugin's test is one line: [`factory_conformance`] runs it
//! on what a [`SubstrateFactory`] builds from `key=value` settings.
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use submem_core::testing::{run_conformance, ConformanceOptions};
//! use submem_core::{test_utils::test_services, Substrate};
//! # fn my_substrate(_: submem_core::Services) -> Box<dyn Substrate> { unimplemented!() }
//! let services = test_services(None);
//! let tokens = services.tokens.clone();
//! run_conformance(move || my_substrate(services.clone()), tokens, ConformanceOptions::default()).await;
//! # }
//! ```

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

use crate::plugin::{BuildContext, SubstrateFactory};
use crate::{
    Event, Forget, Namespace, Query, Regime, Services, Step, Substrate, TokenCounter, Turn,
};

/// Knobs for substrates whose nature makes one check meaningless.
#[derive(Debug, Clone)]
pub struct ConformanceOptions {
    /// Check that a planted fact's words appear in the recall of a question
    /// about it, at a generous budget. Off only for substrates that cannot show
    /// stored text (M9 answers from weights).
    pub finds_written: bool,
    /// Budget for the "finds what was written" checks.
    pub generous_budget: usize,
}

impl Default for ConformanceOptions {
    fn default() -> Self {
        ConformanceOptions {
            finds_written: true,
            generous_budget: 4096,
        }
    }
}

/// A marker word planted in the fixtures; nothing else uses it. It is a
/// name (capitalised), as the fact it plants is about a person, so a
/// substrate that indexes names finds it.
pub const MARKER_A: &str = "Zanzibarite";
/// The marker of the second namespace.
pub const MARKER_B: &str = "Quetzalcoatlus";

/// The question the conformance suite asks about the planted fact: it names
/// the speaker (Ben, turn 3) and asks for the teacher's name, `MARKER_A`.
pub const FACT_QUESTION: &str = "What is the name of Ben's violin teacher?";

/// A small conversation of `n` turns (at least 4) in two sessions; turn 3,
/// spoken by Ben, carries `marker` as the name of his violin teacher.
pub fn fixture_conversation(tag: &str, marker: &str, n: usize) -> Vec<Event> {
    let topics = [
        "the weather was mild and we walked by the river",
        "I finished reading a long novel about sailors",
        "my brother repaired his bicycle chain yesterday",
        "we cooked a spicy lentil soup for dinner",
        "the library opened a new wing for children",
        "our neighbour adopted a small grey cat",
    ];
    (0..n.max(4))
        .map(|i| {
            let session = if i < n.max(4) / 2 { 1 } else { 2 };
            let text = if i == 3 {
                format!("My violin teacher is called {marker} and she lives in Oslo.")
            } else {
                format!("{} ({tag} {i})", topics[i % topics.len()])
            };
            Event::Turn(Turn {
                session_id: format!("session_{session}"),
                session_date: Some(format!("{session} May 2023")),
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.to_string(),
                text,
                source_id: format!("{tag}:D{session}:{i}"),
            })
        })
        .collect()
}

/// A small agent trajectory; step 2's observation carries `marker`.
pub fn fixture_trajectory(tag: &str, marker: &str) -> Vec<Event> {
    let steps = [
        (
            "look",
            "You are in a kitchen. You see a drawer 1 and a fridge 1.",
        ),
        (
            "open drawer 1",
            &*format!("You open drawer 1. Inside is a key labelled {marker}."),
        ),
        ("take key from drawer 1", "You pick up the key."),
        ("go to fridge 1", "The fridge 1 is closed."),
    ];
    steps
        .iter()
        .enumerate()
        .map(|(i, (a, o))| {
            Event::Step(Step {
                step: i as u32 + 1,
                action: a.to_string(),
                observation: o.to_string(),
                source_id: format!("{tag}:{}", i + 1),
            })
        })
        .collect()
}

/// A word of a 5,000-word vocabulary; squaring a uniform draw gives a heavy
/// head like real word frequencies.
fn synthetic_words(rng: &mut StdRng, lengths: std::ops::RangeInclusive<usize>) -> String {
    let n = rng.random_range(lengths);
    (0..n)
        .map(|_| {
            let r: f64 = rng.random();
            format!("w{}", (r * r * 5000.0) as usize)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` seeded conversational turns (`t0`, `t1`, …) of 20–30 words over a
/// Zipf-like 5,000-word vocabulary, 20 turns a session: the history the
/// substrate benches measure on.
pub fn synthetic_turns(n: usize, seed: u64) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            Event::Turn(Turn {
                session_id: format!("session_{}", i / 20),
                session_date: None,
                speaker: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
                text: synthetic_words(&mut rng, 20..=30),
                source_id: format!("t{i}"),
            })
        })
        .collect()
}

/// `n` seeded questions of 6–10 words over the vocabulary of
/// [`synthetic_turns`].
pub fn synthetic_questions(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| synthetic_words(&mut rng, 6..=10)).collect()
}

/// A fresh scratch directory path, unique within the machine for this run, so
/// several suites may run at once in one test binary.
fn scratch_dir(what: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "submem-conformance-{what}-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ))
}

fn ns(name: &str) -> Namespace {
    match Namespace::new(name) {
        Ok(n) => n,
        Err(e) => panic!("fixture namespace {name}: {e}"),
    }
}

async fn check_budget(s: &dyn Substrate, counter: &dyn TokenCounter, q: &Query) {
    let r = s
        .read(q)
        .await
        .unwrap_or_else(|e| panic!("read at budget {} failed: {e}", q.budget));
    assert!(
        r.tokens <= q.allowance(),
        "{}: recall of {} tokens exceeds allowance {} (budget {})",
        s.info().method,
        r.tokens,
        q.allowance(),
        q.budget
    );
    assert_eq!(
        counter.count(&r.text),
        r.tokens,
        "{}: Recall::tokens must equal the counter's count of Recall::text",
        s.info().method
    );
}

/// The whole suite on the substrate `factory` builds from `settings`
/// (`key=value` pairs, read and checked first) on
/// [`test_services`](crate::test_utils::test_services) without an LLM: a
/// plugin's conformance test in one line.
///
/// ```no_run
/// # fn my_factory() -> submem_core::plugin::SubstrateFactory { unimplemented!() }
/// # async fn conformance() {
/// submem_core::testing::factory_conformance(&my_factory(), &[("max_events", "32")]).await;
/// # }
/// ```
pub async fn factory_conformance(factory: &SubstrateFactory, settings: &[(&str, &str)]) {
    factory_conformance_with(
        factory,
        settings,
        crate::test_utils::test_services(None),
        ConformanceOptions::default(),
    )
    .await;
}

/// [`factory_conformance`] with the services (an LLM, a real embedder) and
/// options given.
pub async fn factory_conformance_with(
    factory: &SubstrateFactory,
    settings: &[(&str, &str)],
    services: Services,
    opts: ConformanceOptions,
) {
    let name = factory.name().to_string();
    let settings = factory
        .settings_from_strs(settings)
        .unwrap_or_else(|e| panic!("{name}: settings refused: {e}"));
    let factory = factory.clone();
    let counter = services.tokens.clone();
    run_conformance(
        move || -> Box<dyn Substrate> {
            let built = factory
                .build(&BuildContext::new(services.clone()), &settings)
                .unwrap_or_else(|e| panic!("{name}: the factory must build: {e}"));
            Box::new(built)
        },
        counter,
        opts,
    )
    .await;
}

/// [`run_conformance`] for substrates built on one set of services: `make`
/// gets a clone of `services` for each fresh instance, and budgets are
/// checked with the services' own token counter.
pub async fn run_conformance_on<F>(services: Services, make: F, opts: ConformanceOptions)
where
    F: Fn(Services) -> Box<dyn Substrate>,
{
    let counter = services.tokens.clone();
    run_conformance(move || make(services.clone()), counter, opts).await;
}

/// Runs every check on instances built by `make` (each call returns a fresh,
/// empty instance with the same settings). Panics with a message naming the
/// broken rule.
pub async fn run_conformance<F>(make: F, counter: Arc<dyn TokenCounter>, opts: ConformanceOptions)
where
    F: Fn() -> Box<dyn Substrate>,
{
    let a = ns("conformance-a");
    let b = ns("conformance-b");

    // Empty history: reads succeed, show nothing, and stay within budget.
    let s = make();
    let empty = s
        .read(&Query::question(
            a.clone(),
            "What is my violin teacher called?",
            1024,
        ))
        .await
        .unwrap_or_else(|e| panic!("read of an empty namespace must succeed: {e}"));
    assert!(empty.sources.is_empty(), "empty memory showed sources");
    assert!(
        s.write(&a, &[]).await.is_ok(),
        "writing no events must be a no-op"
    );

    // Write, then read finds what was written.
    let conv_a = fixture_conversation("a", MARKER_A, 24);
    let report = s
        .write(&a, &conv_a)
        .await
        .unwrap_or_else(|e| panic!("write failed: {e}"));
    assert_eq!(report.events, conv_a.len());
    let conv_b = fixture_conversation("b", MARKER_B, 12);
    s.write(&b, &conv_b)
        .await
        .unwrap_or_else(|e| panic!("write to second namespace failed: {e}"));
    s.manage()
        .await
        .unwrap_or_else(|e| panic!("manage failed: {e}"));

    let question = Query::question(a.clone(), FACT_QUESTION, opts.generous_budget).with_top_k(5);
    let r = s
        .read(&question)
        .await
        .unwrap_or_else(|e| panic!("read failed: {e}"));
    if opts.finds_written {
        assert!(
            r.text.contains(MARKER_A),
            "{}: asked {FACT_QUESTION:?} (top_k 5, budget {}) after writing turn 3 \
             ({:?}), the recall does not show the expected word {MARKER_A:?}; it shows:\n{}",
            s.info().method,
            opts.generous_budget,
            conv_a[3].content(),
            r.text
        );
    }

    // Namespaces never leak.
    let rb = s
        .read(&Query::question(
            b.clone(),
            format!("violin teacher {MARKER_A}"),
            opts.generous_budget,
        ))
        .await
        .unwrap_or_else(|e| panic!("read failed: {e}"));
    assert!(!rb.text.contains(MARKER_A), "namespace b sees a's marker");
    assert!(
        rb.source_ids().all(|id| !id.starts_with("a:")),
        "namespace b sees a's source ids"
    );
    if opts.finds_written {
        assert!(rb.text.contains(MARKER_B), "namespace b lost its own fact");
    }

    // Budgets are never exceeded, at every size, and token counts are exact.
    for budget in [64, 100, 256, 512, 1024, 4096] {
        check_budget(&*s, &*counter, &question.clone().with_top_k(3)).await;
        let q =
            Query::question(a.clone(), "violin teacher Oslo", budget).with_fixed_prompt_tokens(40);
        check_budget(&*s, &*counter, &q).await;
    }

    // Empty query text: no panic; either a recall within budget or a clear error.
    if let Ok(r) = s.read(&Query::question(a.clone(), "", 512)).await {
        assert!(r.tokens <= Query::question(a.clone(), "", 512).allowance());
    }

    // Invalid queries are refused.
    assert!(
        s.read(&Query::question(a.clone(), "q", 0)).await.is_err(),
        "budget 0 must be refused"
    );
    assert!(
        s.read(&Query::question(a.clone(), "q", 512).with_top_k(0))
            .await
            .is_err(),
        "top_k 0 must be refused"
    );

    // Duplicate source ids are refused and change nothing.
    let before = s.read(&question).await.map(|r| r.text).unwrap_or_default();
    assert!(
        s.write(&a, &conv_a[..2]).await.is_err(),
        "re-writing existing source ids must be refused"
    );
    let after = s.read(&question).await.map(|r| r.text).unwrap_or_default();
    assert_eq!(before, after, "a refused write changed the memory");

    // Persistence round-trips into a fresh instance.
    let dir = scratch_dir("store");
    let _ = std::fs::remove_dir_all(&dir);
    s.persist(&dir)
        .await
        .unwrap_or_else(|e| panic!("persist failed: {e}"));
    let fresh = make();
    fresh
        .restore(&dir)
        .await
        .unwrap_or_else(|e| panic!("restore failed: {e}"));
    let r1 = s.read(&question).await.unwrap_or_else(|e| panic!("{e}"));
    let r2 = fresh
        .read(&question)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r1.text, r2.text,
        "restored instance renders a different recall"
    );
    assert_eq!(
        r1.source_ids().collect::<Vec<_>>(),
        r2.source_ids().collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);

    // A missing or foreign directory is refused, never read as empty memory.
    let foreign = scratch_dir("foreign");
    let _ = std::fs::create_dir_all(&foreign);
    let _ = std::fs::write(foreign.join("README"), "not a store");
    assert!(
        fresh.restore(&foreign).await.is_err(),
        "foreign directory accepted"
    );
    assert!(
        fresh.restore(&foreign.join("missing")).await.is_err(),
        "missing directory accepted"
    );
    let _ = std::fs::remove_dir_all(&foreign);
    let r3 = fresh
        .read(&question)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r2.text, r3.text, "a failed restore changed the memory");

    // Forgetting by source id.
    let forgotten = conv_a[3].source_id().to_string();
    let n = s
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec![forgotten.clone()],
        })
        .await
        .unwrap_or_else(|e| panic!("forget failed: {e}"));
    assert_eq!(n, 1, "forget by source id should remove one event");
    s.manage()
        .await
        .unwrap_or_else(|e| panic!("manage failed: {e}"));
    let r = s.read(&question).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !r.text.contains(MARKER_A),
        "forgotten fact still shown:\n{}",
        r.text
    );
    assert!(
        r.source_ids().all(|id| id != forgotten),
        "forgotten id still shown"
    );

    // Forgetting a namespace leaves the other intact.
    let n = s
        .forget(&Forget::Namespace(a.clone()))
        .await
        .unwrap_or_else(|e| panic!("forget namespace failed: {e}"));
    assert_eq!(n, conv_a.len() - 1);
    let r = s.read(&question).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        r.sources.is_empty(),
        "forgotten namespace still shows sources"
    );
    if opts.finds_written {
        let rb = s
            .read(&Query::question(
                b.clone(),
                "violin teacher",
                opts.generous_budget,
            ))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            rb.text.contains(MARKER_B),
            "forgetting a removed b's memory"
        );
    }

    // Agentic queries work on trajectories.
    let c = ns("conformance-agent");
    s.write(&c, &fixture_trajectory("t", MARKER_A))
        .await
        .unwrap_or_else(|e| panic!("write of a trajectory failed: {e}"));
    let q = Query::agentic(
        c.clone(),
        "Find the key and put it in the fridge.",
        "The fridge 1 is closed.",
        2048,
    );
    assert_eq!(q.regime, Regime::Agentic);
    check_budget(&*s, &*counter, &q).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_history_is_seeded_and_shaped() {
        let a = synthetic_turns(50, 7);
        assert_eq!(a, synthetic_turns(50, 7));
        assert_ne!(a, synthetic_turns(50, 8));
        let text = |e: &Event| match e {
            Event::Turn(t) => t.text.clone(),
            Event::Step(_) => panic!("a step"),
        };
        for (i, e) in a.iter().enumerate() {
            let words = text(e).split_whitespace().count();
            assert!((20..=30).contains(&words), "{words} words");
            assert_eq!(e.source_id(), format!("t{i}"));
        }
        let q = synthetic_questions(20, 1);
        assert!(q
            .iter()
            .all(|q| (6..=10).contains(&q.split_whitespace().count())));
        // The head of the vocabulary is frequent: w0..w49 make up a fair share.
        let all: Vec<String> = a.iter().map(text).collect();
        let words: Vec<&str> = all.iter().flat_map(|t| t.split_whitespace()).collect();
        let head = words
            .iter()
            .filter(|w| w[1..].parse::<usize>().is_ok_and(|n| n < 50))
            .count();
        assert!(head * 20 > words.len(), "{head} of {}", words.len());
    }
}
