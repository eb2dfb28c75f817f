#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Forget-by-source repairs merged descriptions: a forgotten fact is gone
//! from every node and edge description and from every index; nodes and
//! edges left without a source are removed; merged descriptions are rebuilt
//! from the remaining sources, without an LLM call.

use std::sync::Arc;
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{Event, Forget, Namespace, Query, Substrate, Turn};
use submem_graph::{GraphConfig, GraphMemory};

const MARKER: &str = "zanzibarite";

fn turn(session: &str, id: &str, speaker: &str, text: &str) -> Event {
    Event::Turn(Turn {
        session_id: session.into(),
        session_date: Some("1 May 2023".into()),
        speaker: speaker.into(),
        text: text.into(),
        source_id: id.into(),
    })
}

/// Three sessions (one chunk each): Ana's tea (s1), her violin teacher
/// named by the marker (s2), Ana and Ben's walk (s3).
fn history() -> Vec<Vec<Event>> {
    vec![
        vec![turn(
            "s1",
            "D1:1",
            "Ana",
            "I drink green tea every morning.",
        )],
        vec![
            turn(
                "s2",
                "D2:1",
                "Ana",
                &format!("My violin teacher {MARKER} moved to Oslo."),
            ),
            turn("s2", "D2:2", "Ben", "Oslo is cold in winter."),
        ],
        vec![turn("s3", "D3:1", "Ben", "Ana and I walked by the river.")],
    ]
}

fn extraction_llm() -> (Arc<ScriptedLlm>, Arc<dyn submem_core::Llm>) {
    let llm = Arc::new(ScriptedLlm::from_fn(|req| {
        let p = &req.messages.last().unwrap().content;
        let text = p.rsplit("Text:\n").next().unwrap_or("");
        if p.contains("high_level_keywords") {
            return Ok(
                "{\"high_level_keywords\": [\"music\"], \"low_level_keywords\": [\"Ana\"]}".into(),
            );
        }
        let mut out = Vec::new();
        if text.contains("green tea") {
            out.push("entity | Ana | person | Ana drinks green tea.".to_string());
        }
        if text.contains(MARKER) {
            out.push(format!(
                "entity | Ana | person | Ana learns violin from {MARKER}."
            ));
            out.push(format!(
                "entity | {MARKER} | person | {MARKER} teaches violin in Oslo."
            ));
            out.push(format!(
                "relation | Ana | {MARKER} | music, lessons | {MARKER} teaches Ana."
            ));
            out.push(format!(
                "relation | {MARKER} | Oslo | home | {MARKER} moved to Oslo."
            ));
        }
        if text.contains("Oslo is cold") {
            out.push("entity | Oslo | place | Oslo is cold in winter.".to_string());
            out.push("relation | Ben | Oslo | weather | Ben finds Oslo cold.".to_string());
        }
        if text.contains("river") {
            out.push("entity | Ana | person | Ana walked by the river.".to_string());
            out.push("relation | Ana | Ben | walk | Ana and Ben walked.".to_string());
        }
        Ok(out.join("\n"))
    }));
    let dyn_llm: Arc<dyn submem_core::Llm> = llm.clone();
    (llm, dyn_llm)
}

async fn assert_gone(m: &GraphMemory, ns: &Namespace) {
    for t in m.stored_texts(ns).await {
        assert!(!t.contains(MARKER), "forgotten fact still stored: {t}");
    }
    m.check_consistency(ns).await.unwrap();
}

#[tokio::test]
async fn forgetting_repairs_descriptions_and_removes_orphans() {
    let (llm, dyn_llm) = extraction_llm();
    let m = GraphMemory::new(test_services(Some(dyn_llm)), GraphConfig::default()).unwrap();
    let ns = Namespace::new("u").unwrap();
    for batch in history() {
        m.write(&ns, &batch).await.unwrap();
    }
    m.manage().await.unwrap();
    m.check_consistency(&ns).await.unwrap();
    let before = m.counts(&ns).await;
    assert_eq!(
        (before.chunks, before.entities, before.relations),
        (3, 4, 4)
    );
    assert_eq!(before.pending, 0);
    let texts = m.stored_texts(&ns).await;
    assert!(texts
        .iter()
        .any(|t| t.contains(&format!("Ana learns violin from {MARKER}"))));

    let calls_before = llm.requests().len();
    let n = m
        .forget(&Forget::Sources {
            namespace: ns.clone(),
            source_ids: vec!["D2:1".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        llm.requests().len(),
        calls_before,
        "forget must not call the LLM"
    );
    // Right after forgetting, before any re-extraction: the chunk's
    // contributions are gone, the marker node and its edges are removed,
    // Ana's description is rebuilt from the chunks that remain.
    assert_gone(&m, &ns).await;
    let after = m.counts(&ns).await;
    assert_eq!((after.entities, after.relations), (2, 1), "{after:?}");
    let texts = m.stored_texts(&ns).await;
    assert!(
        texts
            .contains(&"Ana (person): Ana drinks green tea.; Ana walked by the river.".to_string()),
        "{texts:#?}"
    );

    // manage re-extracts what is left of the chunk (Ben's remark).
    m.manage().await.unwrap();
    assert_gone(&m, &ns).await;
    let after = m.counts(&ns).await;
    assert_eq!(
        (after.entities, after.relations, after.pending),
        (3, 2, 0),
        "{after:?}"
    );
    let r = m
        .read(&Query::question(
            ns.clone(),
            "Who teaches Ana violin?",
            4096,
        ))
        .await
        .unwrap();
    assert!(!r.text.contains(MARKER), "{}", r.text);
    assert!(r.text.contains("Oslo is cold"), "{}", r.text);
    assert!(r.source_ids().all(|id| id != "D2:1"));
}

#[tokio::test]
async fn forgetting_every_source_leaves_an_empty_graph() {
    let m = GraphMemory::new(test_services(None), GraphConfig::default()).unwrap();
    let ns = Namespace::new("u").unwrap();
    let all: Vec<String> = history()
        .iter()
        .flatten()
        .map(|e| e.source_id().to_string())
        .collect();
    for batch in history() {
        m.write(&ns, &batch).await.unwrap();
    }
    m.manage().await.unwrap();
    assert!(m.counts(&ns).await.entities > 0);
    assert!(m.stored_texts(&ns).await.iter().any(|t| t.contains(MARKER)));
    m.forget(&Forget::Sources {
        namespace: ns.clone(),
        source_ids: vec!["D2:1".into()],
    })
    .await
    .unwrap();
    assert_gone(&m, &ns).await;
    m.manage().await.unwrap();
    assert_gone(&m, &ns).await;
    let n = m
        .forget(&Forget::Sources {
            namespace: ns.clone(),
            source_ids: all,
        })
        .await
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(m.counts(&ns).await, submem_graph::GraphCounts::default());
    let r = m.read(&Query::question(ns, "tea", 1024)).await.unwrap();
    assert!(r.sources.is_empty());
}
