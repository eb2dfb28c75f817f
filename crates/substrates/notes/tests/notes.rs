#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M4 behaviour beyond the shared suite: note writing and repair, evolution
//! metered as manage and never touching raw text, forgetting evolved words,
//! namespace isolation of links and evolution, persistence into a new
//! process, and the two renderers.

mod common;

use common::{cooperative_llm, services_with, turn};
use std::sync::Arc;
use submem_core::test_utils::{test_services, FailingLlm, ScriptedLlm};
use submem_core::{Event, Forget, Namespace, Query, Resolution, Substrate};
use submem_kit::{Meter, MeteredSubstrate};
use submem_notes::note::Writer;
use submem_notes::{EvolvingNotes, NotesConfig, RenderMode};

fn ns(s: &str) -> Namespace {
    Namespace::new(s).unwrap()
}

/// Turns on one topic (so evolution triggers) plus one unrelated turn.
fn garden_turns(tag: &str) -> Vec<Event> {
    vec![
        turn(
            &format!("{tag}1"),
            "Ana",
            &format!("I planted tomatoes in the garden today ({tag} side)."),
        ),
        turn(
            &format!("{tag}2"),
            "Ben",
            &format!("The garden tomatoes need water every day ({tag} side)."),
        ),
        turn(
            &format!("{tag}3"),
            "Ana",
            &format!("Our garden tomatoes got the secret fertiliser plumbago ({tag} side)."),
        ),
        turn(
            &format!("{tag}4"),
            "Ben",
            &format!("Stock markets fell sharply on Monday ({tag} side)."),
        ),
    ]
}

fn evolving(llm: Arc<ScriptedLlm>) -> EvolvingNotes {
    EvolvingNotes::new(
        services_with(Some(llm)),
        NotesConfig::default().with_evolve_threshold(0.3),
    )
    .unwrap()
}

#[tokio::test]
async fn notes_are_written_by_the_llm_with_repair_and_by_rule_without() {
    let m = evolving(cooperative_llm());
    let a = ns("a");
    m.write(&a, &garden_turns("g")).await.unwrap();
    let notes = m.notes(&a);
    assert_eq!(notes.len(), 4);
    // Every third reply is sloppy JSON: repaired, still an LLM note.
    assert!(notes.iter().all(|n| n.writer == Writer::Llm), "{notes:?}");
    assert_eq!(m.stats().llm_notes, 4);
    assert!(m.info().needs_llm);

    let failing = EvolvingNotes::new(
        test_services(Some(Arc::new(FailingLlm))),
        NotesConfig::default(),
    )
    .unwrap();
    failing.write(&a, &garden_turns("g")).await.unwrap();
    assert!(failing.notes(&a).iter().all(|n| n.writer == Writer::Rule));

    let garbage = EvolvingNotes::new(
        services_with(Some(Arc::new(ScriptedLlm::new(vec!["I can't.".into()])))),
        NotesConfig::default(),
    )
    .unwrap();
    garbage.write(&a, &garden_turns("g")).await.unwrap();
    assert_eq!(garbage.stats().rule_notes, 4);

    let none = EvolvingNotes::new(test_services(None), NotesConfig::default()).unwrap();
    assert!(!none.info().needs_llm);
    none.write(&a, &garden_turns("g")).await.unwrap();
    assert_eq!(none.pending_evolutions(), 0);
    assert_eq!(none.manage().await.unwrap().changed, 0);
    let n = &none.notes(&a)[2];
    assert!(n.own.context.contains("Ana"), "{n:?}");
}

#[tokio::test]
async fn evolution_runs_in_manage_and_never_rewrites_raw_text() {
    let llm = cooperative_llm();
    let services = services_with(Some(llm.clone()));
    let meter = Meter::new();
    let inner = EvolvingNotes::new(
        meter.wrap_services(&services),
        NotesConfig::default().with_evolve_threshold(0.3),
    )
    .unwrap();
    let m = MeteredSubstrate::new(inner, meter.clone());
    let a = ns("a");
    let turns = garden_turns("g");
    m.write(&a, &turns).await.unwrap();
    let queued = m.inner().pending_evolutions();
    assert!(queued >= 1, "close garden turns must queue evolution");
    let before = meter.snapshot();
    assert_eq!(before.write.llm_calls, 4, "one note call per unit");
    assert_eq!(before.manage.llm_calls, 0);
    let report = m.manage().await.unwrap();
    assert!(report.changed >= 1);
    let after = meter.snapshot();
    assert_eq!(after.manage.llm_calls as usize, queued);
    assert_eq!(after.write.llm_calls, 4);
    assert_eq!(m.inner().pending_evolutions(), 0);
    // The counters reach the harness through the metered wrapper.
    let d = m.diagnostics();
    assert_eq!(d["llm_notes"], 4);
    assert_eq!(d["evolution_calls"] as usize, queued);
    assert_eq!(d["rewrites"], m.inner().stats().rewrites);
    let notes = m.inner().notes(&a);
    for (n, e) in notes.iter().zip(&turns) {
        assert_eq!(n.raw, e.render(), "raw text rewritten");
    }
    let evolved: Vec<_> = notes.iter().filter(|n| !n.edits.is_empty()).collect();
    assert!(!evolved.is_empty());
    assert!(evolved.iter().all(|n| n.context().starts_with("related to")
        && n.tags() == ["evolved"]
        && n.own.context != n.context()));
}

#[tokio::test]
async fn forgetting_removes_evolved_words_from_every_neighbour() {
    let m = evolving(cooperative_llm());
    let a = ns("a");
    m.write(&a, &garden_turns("g")).await.unwrap();
    m.manage().await.unwrap();
    // A later note on the same topic evolves notes whose context already
    // holds the secret word: its edits derive from g3 transitively.
    m.write(
        &a,
        &[turn(
            "g5",
            "Ana",
            "The garden tomatoes are ripe and red now.",
        )],
    )
    .await
    .unwrap();
    m.manage().await.unwrap();
    let holders: Vec<String> = m
        .notes(&a)
        .iter()
        .filter(|n| n.source_id != "g3" && n.context().contains("plumbago"))
        .map(|n| n.source_id.clone())
        .collect();
    assert!(!holders.is_empty(), "evolution should have copied the word");
    let q = Query::question(a.clone(), "garden tomatoes fertiliser plumbago", 4096);
    assert!(m.read(&q).await.unwrap().text.contains("plumbago"));

    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec!["g3".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(m.stats().forget_repairs >= holders.len() as u64);
    for note in m.notes(&a) {
        assert!(
            !note.context().contains("plumbago")
                && !note.tags().iter().any(|t| t.contains("plumbago"))
                && note.edits.iter().all(|e| !e.context.contains("plumbago")),
            "forgotten word survives in {note:?}"
        );
    }
    let r = m.read(&q).await.unwrap();
    assert!(!r.text.contains("plumbago"), "{}", r.text);
    assert!(r.source_ids().all(|id| id != "g3"));
}

#[tokio::test]
async fn namespaces_never_link_or_evolve_across() {
    let llm = cooperative_llm();
    let m = evolving(llm.clone());
    let (a, b) = (ns("a"), ns("b"));
    m.write(&a, &garden_turns("a")).await.unwrap();
    m.write(&b, &garden_turns("b")).await.unwrap();
    m.manage().await.unwrap();
    for (space, other) in [(&a, "b"), (&b, "a")] {
        let notes = m.notes(space);
        let ids: std::collections::HashSet<u64> = notes.iter().map(|n| n.id).collect();
        for n in &notes {
            assert!(n.links.iter().all(|l| ids.contains(l)));
            assert!(!n.source_id.starts_with(other));
        }
    }
    // No evolution prompt mixes the two namespaces' source texts.
    for req in llm.requests() {
        let text = &req.messages.last().unwrap().content;
        assert!(
            !(text.contains("(a side)") && text.contains("(b side)")),
            "{text}"
        );
    }
    let r = m
        .read(&Query::question(
            b.clone(),
            "garden tomatoes plumbago",
            4096,
        ))
        .await
        .unwrap();
    assert!(r.source_ids().all(|id| id.starts_with('b')), "{r:?}");
    m.forget(&Forget::Namespace(a.clone())).await.unwrap();
    assert!(m.notes(&a).is_empty());
    assert_eq!(m.notes(&b).len(), 4);
}

#[tokio::test]
async fn fit_render_degrades_under_tight_budgets() {
    let services = test_services(None);
    let counter = services.tokens.clone();
    // Short note lines, so a note's record is much smaller than the note.
    let short = NotesConfig {
        context_words: 8,
        ..NotesConfig::default()
    };
    let m = EvolvingNotes::new(services, short.clone().with_render(RenderMode::Fit)).unwrap();
    let a = ns("a");
    let turns: Vec<Event> = (0..40)
        .map(|i| {
            turn(
                &format!("t{i}"),
                if i % 2 == 0 { "Ana" } else { "Ben" },
                &format!("On day {i} we talked about gardens. Tomatoes grew tall and the fence {i} was painted blue again."),
            )
        })
        .collect();
    m.write(&a, &turns).await.unwrap();
    let q = Query::question(a.clone(), "when was the fence painted blue", 200);
    let r = m.read(&q).await.unwrap();
    assert!(r.tokens <= q.allowance());
    assert_eq!(counter.count(&r.text), r.tokens);
    assert!(r.sources.iter().any(|s| s.resolution == Resolution::Raw));
    assert!(
        r.sources.iter().any(|s| s.resolution != Resolution::Raw),
        "a tight budget should degrade some notes: {r:?}"
    );
    // The fit pool shows more notes than top-k whole notes could at this budget.
    let topk = EvolvingNotes::new(test_services(None), short).unwrap();
    topk.write(&a, &turns).await.unwrap();
    let rt = topk.read(&q).await.unwrap();
    assert!(rt.sources.iter().all(|s| s.resolution == Resolution::Raw));
    assert!(
        r.sources.len() > rt.sources.len(),
        "{} vs {}",
        r.sources.len(),
        rt.sources.len()
    );
}

const CHILD_DIR: &str = "SUBMEM_NOTES_CHILD_DIR";

/// Persists evolved notes, then restores them in a new process (this test
/// binary run again, executing only `restore_in_child`) and compares recalls.
#[tokio::test]
async fn persistence_round_trips_into_a_new_process() {
    let m = evolving(cooperative_llm());
    let a = ns("a");
    m.write(&a, &garden_turns("g")).await.unwrap();
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    m.persist(&store).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
    let q = Query::question(a.clone(), "garden tomatoes", 4096);
    let expected = m.read(&q).await.unwrap().text;
    std::fs::write(dir.path().join("expected.txt"), &expected).unwrap();

    // A fresh instance in this process.
    let fresh = EvolvingNotes::new(services_with(None), NotesConfig::default()).unwrap();
    fresh.restore(&store).await.unwrap();
    assert_eq!(fresh.read(&q).await.unwrap().text, expected);
    assert_eq!(fresh.notes(&a), m.notes(&a));

    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restore_in_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{log}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        log.contains("1 passed"),
        "child did not run the restore: {log}"
    );
    assert!(dir.path().join("child-ok").exists());
}

#[tokio::test]
async fn restore_in_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // only meaningful when spawned by the test above
    };
    let dir = std::path::PathBuf::from(dir);
    let m = EvolvingNotes::new(services_with(None), NotesConfig::default()).unwrap();
    m.restore(&dir.join("store")).await.unwrap();
    let q = Query::question(ns("a"), "garden tomatoes", 4096);
    let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    assert_eq!(m.read(&q).await.unwrap().text, expected);
    assert!(m.notes(&ns("a")).iter().any(|n| !n.edits.is_empty()));
    std::fs::write(dir.join("child-ok"), "ok").unwrap();
}

#[tokio::test]
async fn footprint_counts_raw_and_note_tokens() {
    let m = EvolvingNotes::new(test_services(None), NotesConfig::default()).unwrap();
    let a = ns("a");
    assert_eq!(m.footprint().stored_tokens, 0);
    m.write(&a, &garden_turns("g")).await.unwrap();
    let f = m.footprint();
    let raw: u64 = garden_turns("g")
        .iter()
        .map(|e| e.render().split_whitespace().count() as u64)
        .sum();
    assert_eq!(f.input_tokens, raw);
    assert!(f.stored_tokens > f.input_tokens);
    assert!(f.memory_bytes > 4 * 64 * 4);
}
