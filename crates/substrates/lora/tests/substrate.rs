#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M9's behaviour on the tiny model: honest forgetting (pairs gone, adapter
//! withheld and marked stale, then retrained), persistence of adapters,
//! namespace isolation, LLM pairs with a fallback, footprint and budgets.

mod common;

use std::sync::Arc;

use submem_core::test_utils::ScriptedLlm;
use submem_core::{ChatMessage, ChatRequest, Forget, Llm, Namespace, Query, Substrate};
use submem_lora::qa::QaOrigin;
use submem_lora::ADAPTER_NOTE;

fn ns(n: &str) -> Namespace {
    Namespace::new(n).unwrap()
}

fn history() -> Vec<submem_core::Event> {
    vec![
        common::turn("D1:1", "I moved to Oslo last spring for a new job."),
        common::turn("D1:2", "My violin teacher is called Berg."),
        common::turn("D1:3", "We adopted a small grey cat named Pixel."),
    ]
}

async fn ask(recall: &submem_core::Recall, q: &str) -> String {
    let reader = recall.reader.clone().expect("M9 sets its reader");
    let req = ChatRequest::new(vec![ChatMessage::user(q)]).with_max_tokens(8);
    reader.complete(&req).await.unwrap().text
}

#[tokio::test]
async fn forget_drops_pairs_marks_stale_and_retrains() {
    let m = common::m9(None);
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    assert_eq!(m.pairs(&a).len(), 3, "one cloze pair per event");
    let q = Query::question(a.clone(), "Where did Ana move?", 1024);
    let r = m.read(&q).await.unwrap();
    assert!(r.text.contains("wait for the next manage"), "{}", r.text);

    m.manage().await.unwrap();
    assert_eq!(m.stats().trainings, 1);
    assert_eq!(m.last_training(&a).unwrap().examples, 3);
    let r = m.read(&q).await.unwrap();
    assert_eq!(r.text, ADAPTER_NOTE);
    assert!(r.sources.is_empty());
    assert!(!r.reader.as_ref().unwrap().name().contains("stale"));

    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec!["D1:2".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let pairs = m.pairs(&a);
    assert_eq!(pairs.len(), 2);
    assert!(pairs
        .iter()
        .all(|p| !p.sources.contains(&"D1:2".to_string())));
    assert!(pairs
        .iter()
        .all(|p| !p.answer.contains("Berg") && !p.question.contains("Berg")));
    assert!(m.is_stale(&a));
    let r = m.read(&q).await.unwrap();
    assert!(r.text.contains("stale"), "{}", r.text);
    let name = r.reader.as_ref().unwrap().name().to_string();
    assert!(name.contains("stale: withheld"), "{name}");
    // Withheld: the reader answers like the base model alone.
    let base = submem_lora::AdapterReader::new(common::tiny(), None, "base");
    let req = ChatRequest::new(vec![ChatMessage::user("Who teaches violin?")]).with_max_tokens(8);
    assert_eq!(
        ask(&r, "Who teaches violin?").await,
        base.complete(&req).await.unwrap().text
    );

    m.manage().await.unwrap();
    assert_eq!(m.stats().trainings, 2, "the adapter was retrained");
    assert_eq!(
        m.last_training(&a).unwrap().examples,
        2,
        "without the forgotten pair"
    );
    assert!(!m.is_stale(&a));
    assert_eq!(m.read(&q).await.unwrap().text, ADAPTER_NOTE);
}

#[tokio::test]
async fn serving_a_stale_adapter_is_marked() {
    let cfg = common::fast_config().with_serve_stale_adapter(true);
    let m = submem_lora::LoraMemory::new(common::services(None), cfg, common::tiny()).unwrap();
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    m.manage().await.unwrap();
    m.forget(&Forget::Sources {
        namespace: a.clone(),
        source_ids: vec!["D1:1".into()],
    })
    .await
    .unwrap();
    let r = m.read(&Query::question(a, "q", 1024)).await.unwrap();
    assert!(
        r.text.contains("still holds forgotten sources"),
        "{}",
        r.text
    );
    let name = r.reader.unwrap().name().to_string();
    assert!(name.ends_with(", stale)"), "{name}");
}

#[tokio::test]
async fn adapters_persist_and_namespaces_stay_apart() {
    let m = common::m9(None);
    let (a, b) = (ns("a"), ns("b"));
    m.write(&a, &history()).await.unwrap();
    m.write(
        &b,
        &[common::turn("E1:1", "The red kite nests near Aberdeen.")],
    )
    .await
    .unwrap();
    m.manage().await.unwrap();
    let (aa, ab) = (m.adapter(&a).unwrap(), m.adapter(&b).unwrap());
    assert!(!Arc::ptr_eq(&aa, &ab));
    assert!(m
        .pairs(&b)
        .iter()
        .all(|p| p.sources == vec!["E1:1".to_string()]));

    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    assert!(m.footprint().disk_bytes > 0);
    // Each namespace has its own weights.
    let w0 = std::fs::read(dir.path().join("adapter-0.safetensors")).unwrap();
    let w1 = std::fs::read(dir.path().join("adapter-1.safetensors")).unwrap();
    assert_ne!(w0, w1);
    let fresh = common::m9(None);
    fresh.restore(dir.path()).await.unwrap();
    assert_eq!(fresh.pairs(&a), m.pairs(&a));
    let q = Query::question(a.clone(), "Where did Ana move?", 1024);
    let (r1, r2) = (m.read(&q).await.unwrap(), fresh.read(&q).await.unwrap());
    assert_eq!(r1.text, r2.text);
    assert_eq!(
        ask(&r1, "Where did Ana move?").await,
        ask(&r2, "Where did Ana move?").await
    );
    assert_eq!(
        fresh.adapter(&a).unwrap().max_abs_b().unwrap(),
        aa.max_abs_b().unwrap()
    );

    // A store from another LoRA shape is refused and changes nothing.
    let other = submem_lora::LoraMemory::new(
        common::services(None),
        common::fast_config().with_rank(4),
        common::tiny(),
    )
    .unwrap();
    assert!(matches!(
        other.restore(dir.path()).await.unwrap_err(),
        submem_core::Error::Store { .. }
    ));

    let fp = m.footprint();
    let expect = aa.parameter_bytes() + ab.parameter_bytes();
    assert_eq!(fp.memory_bytes, expect, "E1 is the adapters' bytes");
    assert!(fp.input_tokens > 0 && fp.stored_tokens > 0);
}

#[tokio::test]
async fn llm_pairs_are_used_and_bad_replies_fall_back() {
    let llm = Arc::new(ScriptedLlm::new(vec![
        r#"{"qa": [{"q": "Where did Ana move?", "a": "Oslo"}, {"q": "Cat's name?", "a": "Pixel"}]}"#.into(),
        "I cannot help with that.".into(),
    ]));
    let m = common::m9(Some(llm.clone()));
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    let pairs = m.pairs(&a);
    assert_eq!(pairs.len(), 2);
    assert!(pairs
        .iter()
        .all(|p| p.origin == QaOrigin::Llm && p.sources.len() == 3));
    assert_eq!(llm.requests().len(), 1, "one call per chunk");
    m.write(&a, &[common::turn("D2:1", "Tomorrow I fly to Lisbon.")])
        .await
        .unwrap();
    let stats = m.stats();
    assert_eq!((stats.llm_chunks, stats.rule_chunks), (1, 1));
    assert_eq!(m.pairs(&a).last().unwrap().origin, QaOrigin::Rule);
    // Forgetting any event of an LLM chunk drops that chunk's pairs.
    m.forget(&Forget::Sources {
        namespace: a.clone(),
        source_ids: vec!["D1:3".into()],
    })
    .await
    .unwrap();
    assert!(m.pairs(&a).iter().all(|p| p.origin == QaOrigin::Rule));
}

#[tokio::test]
async fn tiny_budgets_give_empty_text() {
    let m = common::m9(None);
    let a = ns("a");
    m.write(&a, &history()).await.unwrap();
    let q = Query::question(a, "q", 64).with_fixed_prompt_tokens(60);
    let r = m.read(&q).await.unwrap();
    assert!(r.tokens <= q.allowance());
    assert!(r.reader.is_some());
}
