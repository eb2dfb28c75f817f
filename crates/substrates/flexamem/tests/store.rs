#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! Durability (torn tails), forgetting, units, record-writer failures and write cost.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use submem_core::test_utils::{test_services, FailingLlm, ScriptedLlm};
use submem_core::{Event, Forget, Llm, Namespace, Query, Resolution, Step, Substrate, Turn};
use submem_flexamem::{FlexaConfig, FlexaMem, RecoveryMode, LOG_FILE};
use submem_kit::{Meter, MeteredSubstrate};

fn ns(s: &str) -> Namespace {
    Namespace::new(s).unwrap()
}

fn json_llm() -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::from_fn(|req| {
        let prompt = &req.messages[1].content;
        if prompt.contains("Merge these") {
            Ok("a merged record".into())
        } else {
            Ok(format!(
                r#"{{"record": "{}", "keywords": ["k"], "tags": ["t"], "description": "d"}}"#,
                ["something happened"; 30].join(" ")
            ))
        }
    }))
}

#[tokio::test]
async fn torn_tail_keeps_every_earlier_unit_and_appending_continues() {
    let dir = tempfile::tempdir().unwrap();
    let a = ns("d");
    let events = common::trajectory("t", 60, 100, 3);
    let before = {
        let m = FlexaMem::open(dir.path(), test_services(None), FlexaConfig::default()).unwrap();
        for chunk in events.chunks(5) {
            m.write(&a, chunk).await.unwrap();
        }
        m.raw_units(&a)
    };
    let log = dir.path().join(LOG_FILE);
    let full = std::fs::read(&log).unwrap();
    for cut in [1usize, 7, 100, 900, 3000] {
        std::fs::write(&log, &full[..full.len() - cut]).unwrap();
        let m = FlexaMem::open(dir.path(), test_services(None), FlexaConfig::default()).unwrap();
        let after = m.raw_units(&a);
        // Every unit but the one being written is byte-identical.
        assert!(
            after.len() >= before.len() - 1,
            "cut {cut}: lost whole units"
        );
        for (x, y) in after.iter().zip(&before).take(after.len() - 1) {
            assert_eq!(x, y, "cut {cut}");
        }
        let last = after.len() - 1;
        assert!(before[last].starts_with(after[last].as_str()), "cut {cut}");
        // The store accepts new events after the torn tail.
        let extra = vec![Event::Step(Step {
            step: 999,
            action: "look".into(),
            observation: "after the crash".into(),
            source_id: format!("x:{cut}"),
        })];
        m.write(&a, &extra).await.unwrap();
        drop(m);
        let m = FlexaMem::open(dir.path(), test_services(None), FlexaConfig::default()).unwrap();
        assert!(m.raw_units(&a).last().unwrap().ends_with("after the crash"));
        std::fs::write(&log, &full).unwrap();
    }
}

#[tokio::test]
async fn reopen_continues_and_renders_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let a = ns("r");
    let q = Query::question(a.clone(), "violin museum", 1024);
    let text = {
        let m = FlexaMem::open(
            dir.path(),
            test_services(Some(json_llm())),
            FlexaConfig::default(),
        )
        .unwrap();
        m.write(&a, &common::conversation("c", 10, 20, 30, 5))
            .await
            .unwrap();
        m.manage().await.unwrap();
        m.read(&q).await.unwrap().text
    };
    let m = FlexaMem::open(
        dir.path(),
        test_services(Some(json_llm())),
        FlexaConfig::default(),
    )
    .unwrap();
    assert_eq!(m.read(&q).await.unwrap().text, text);
    let s = m.stats();
    assert_eq!(s.llm_merges, 0, "merged records are persisted and reused");
    assert!(s.merge_cache_hits > 0);
}

#[tokio::test]
async fn forgetting_one_event_of_a_unit_removes_its_text_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let a = ns("f");
    let mut events = common::conversation("c", 12, 20, 30, 8);
    let secret = "zanzibarite quetzal marker";
    if let Event::Turn(t) = &mut events[45] {
        t.text = format!("my secret is {secret}");
    }
    let target = events[45].source_id().to_string();
    let m = FlexaMem::open(
        dir.path(),
        test_services(Some(json_llm())),
        FlexaConfig::default(),
    )
    .unwrap();
    m.write(&a, &events).await.unwrap();
    m.manage().await.unwrap();
    let q = Query::question(a.clone(), "what is my secret zanzibarite", 1024);
    assert!(m.read(&q).await.unwrap().text.contains("zanzibarite"));
    let units_before = m.raw_units(&a).len();
    let n = m
        .forget(&Forget::Sources {
            namespace: a.clone(),
            source_ids: vec![target.clone()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    // The unit is re-cut: same number of units, the others' text intact.
    assert_eq!(m.raw_units(&a).len(), units_before);
    assert!(m.raw_units(&a).iter().all(|r| !r.contains(secret)));
    m.manage().await.unwrap();
    for b in [512, 1024, 4096, 16384, 65536] {
        // Piece recovery (question) and unit recovery (agentic query).
        for q in [
            Query::question(a.clone(), "what is my secret zanzibarite", b),
            Query::agentic(a.clone(), "what is my secret zanzibarite", "secret", b),
        ] {
            let r = m.read(&q).await.unwrap();
            assert!(!r.text.contains("zanzibarite"), "budget {b}");
            assert!(r.source_ids().all(|s| s != target));
        }
    }
    // The neighbours of the forgotten turn are still there, verbatim.
    let neighbour = events[44].render();
    let r = m
        .read(&Query::question(a.clone(), "q", 65536))
        .await
        .unwrap();
    assert!(r.text.contains(&neighbour));
    // Compaction removed the text from the log on disk.
    let bytes = std::fs::read(dir.path().join(LOG_FILE)).unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("zanzibarite"));
    // And it stays forgotten after reopening.
    drop(m);
    let m = FlexaMem::open(
        dir.path(),
        test_services(Some(json_llm())),
        FlexaConfig::default(),
    )
    .unwrap();
    assert!(m.raw_units(&a).iter().all(|r| !r.contains(secret)));
}

#[tokio::test]
async fn agent_units_pack_to_the_limit_and_sessions_make_units() {
    let m = FlexaMem::new(test_services(None), FlexaConfig::default()).unwrap();
    let a = ns("u");
    // Steps of ~300 whitespace tokens: three fit in 1,000, the fourth opens a unit.
    let steps: Vec<Event> = (1..=7)
        .map(|i| {
            Event::Step(Step {
                step: i,
                action: "read".into(),
                observation: vec!["word"; 295].join(" "),
                source_id: format!("s:{i}"),
            })
        })
        .collect();
    for e in &steps {
        m.write(&a, std::slice::from_ref(e)).await.unwrap();
    }
    assert_eq!(m.raw_units(&a).len(), 3);
    let c = ns("conv");
    let report = m
        .write(&c, &common::conversation("c", 3, 8, 10, 1))
        .await
        .unwrap();
    assert_eq!(report.units, 3, "one unit per session when it fits");
    // A long session is cut at turns of its opening speaker.
    let long: Vec<Event> = (0..20)
        .map(|i| {
            Event::Turn(Turn {
                session_id: "s".into(),
                session_date: None,
                speaker: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                text: vec!["w"; 300].join(" "),
                source_id: format!("l:{i}"),
            })
        })
        .collect();
    let l = ns("long");
    m.write(&l, &long).await.unwrap();
    let units = m.raw_units(&l);
    assert!(units.len() >= 3);
    for u in &units {
        assert!(u.starts_with("user:"), "units begin at user turns");
    }
}

#[tokio::test]
async fn failing_or_hopeless_llm_falls_back_to_the_rule_writer() {
    let a = ns("x");
    let events = common::trajectory("t", 40, 100, 2);
    let m = FlexaMem::new(
        test_services(Some(Arc::new(FailingLlm))),
        FlexaConfig::default(),
    )
    .unwrap();
    m.write(&a, &events).await.unwrap();
    m.manage().await.unwrap();
    let units = m.raw_units(&a).len() as u64;
    let s = m.stats();
    assert_eq!(s.record_llm_failures, units);
    assert_eq!(s.rule_fallbacks, units);
    assert!(m
        .read(&Query::agentic(a.clone(), "t", "n", 1024))
        .await
        .is_ok());

    let hopeless = Arc::new(ScriptedLlm::new(vec![
        "I am sorry, I cannot do that.".into(),
        "```json\n{'record': 'sloppy but fine', 'keywords': 'a, b',}\n```".into(),
    ]));
    let m = FlexaMem::new(test_services(Some(hopeless)), FlexaConfig::default()).unwrap();
    m.write(&a, &events).await.unwrap();
    m.manage().await.unwrap();
    let s = m.stats();
    assert_eq!(s.hopeless_json, 1);
    assert_eq!(s.json_repairs, m.raw_units(&a).len() as u64 - 1);
    assert_eq!(s.llm_records, s.json_repairs);
}

#[tokio::test]
async fn write_costs_one_call_per_unit_and_one_per_merge() {
    let llm = json_llm();
    let calls = Arc::new(AtomicUsize::new(0));
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(Some(llm.clone() as Arc<dyn Llm>)));
    let m = MeteredSubstrate::new(
        FlexaMem::new(services, FlexaConfig::default()).unwrap(),
        meter.clone(),
    );
    let a = ns("cost");
    let events = common::trajectory("t", 120, 100, 4);
    for chunk in events.chunks(3) {
        m.write(&a, chunk).await.unwrap();
        calls.fetch_add(1, Ordering::SeqCst);
    }
    m.manage().await.unwrap();
    let units = m.inner().raw_units(&a).len() as u64;
    let snap = meter.snapshot();
    assert_eq!(snap.write.llm_calls + snap.manage.llm_calls, units);
    let q = Query::agentic(a.clone(), "open the drawer", "You see a drawer", 1024);
    m.read(&q).await.unwrap();
    let merges = m.inner().stats().llm_merges;
    assert!(merges > 0, "a 1k budget over this history must merge");
    assert_eq!(meter.snapshot().read.llm_calls, merges);
    // A second read reuses the merged records: no new calls.
    m.read(&q).await.unwrap();
    assert_eq!(meter.snapshot().read.llm_calls, merges);
    let w = meter.snapshot().write;
    eprintln!(
        "units {units}, write calls {}, tokens per unit: {:.1} in + {:.1} out; merges {merges}",
        w.llm_calls,
        w.input_tokens as f64 / w.llm_calls.max(1) as f64,
        w.output_tokens as f64 / w.llm_calls.max(1) as f64
    );
    assert_eq!(llm.requests().len() as u64, units + merges);
}

#[tokio::test]
async fn sources_are_most_relevant_first_with_resolutions() {
    // A timeline with room for records (the default ρ of piece recovery,
    // 0.05, leaves a 1k budget almost nothing for them).
    let m = FlexaMem::new(
        test_services(None),
        FlexaConfig::default()
            .with_mode(RecoveryMode::Piece)
            .with_piece_rho(0.5),
    )
    .unwrap();
    let a = ns("s");
    let mut events = common::conversation("c", 10, 20, 30, 21);
    if let Event::Turn(t) = &mut events[77] {
        t.text = "the zanzibarite key is under the blue mat".into();
    }
    m.write(&a, &events).await.unwrap();
    m.manage().await.unwrap();
    let r = m
        .read(&Query::question(
            a.clone(),
            "where is the zanzibarite key",
            1024,
        ))
        .await
        .unwrap();
    assert_eq!(r.sources[0].source_id, events[77].source_id());
    assert!(r.sources[0].resolution >= Resolution::Excerpt);
    assert!(r.text.contains("the zanzibarite key is under the blue mat"));
    assert!(r
        .sources
        .iter()
        .skip(1)
        .any(|s| s.resolution == Resolution::Record));
}

#[tokio::test]
async fn oldest_records_are_hidden_when_the_newest_unit_exceeds_a_quarter() {
    let llm = Arc::new(ScriptedLlm::from_fn(|req| {
        if req.messages[1].content.contains("Merge these") {
            Ok(["merged"; 100].join(" "))
        } else {
            Ok(format!(r#"{{"record": "{}"}}"#, ["rec"; 70].join(" ")))
        }
    }));
    let m = FlexaMem::new(test_services(Some(llm)), FlexaConfig::default()).unwrap();
    let a = ns("hide");
    let steps: Vec<Event> = (1..=60)
        .map(|i| {
            Event::Step(Step {
                step: i,
                action: format!("read file {i}"),
                observation: vec!["line"; 290].join(" "),
                source_id: format!("h:{i}"),
            })
        })
        .collect();
    m.write(&a, &steps).await.unwrap();
    let q = Query::agentic(a.clone(), "summarise the files", "line", 2048);
    let r = m.render_detailed(&q).await.unwrap();
    assert!(
        r.tokens_by.window > 2048 / 4,
        "the newest unit exceeds a quarter of B"
    );
    assert!(r.hidden_entries > 0, "{:?}", r.tokens_by);
    assert!(r.recall.tokens <= q.allowance());
    // At a budget where the newest unit fits its quarter nothing is hidden.
    let q = Query::agentic(a.clone(), "summarise the files", "line", 8192);
    let r = m.render_detailed(&q).await.unwrap();
    assert_eq!(r.hidden_entries, 0);
}

#[tokio::test]
async fn a_long_merged_record_never_starves_piece_recovery() {
    // Records of 70 words and a merge that echoes its prompt (replaced by the
    // 120-word rule merge): at 256 tokens the timeline cannot be merged down
    // to ρA, so its oldest entries are hidden and the pieces keep their room.
    let llm = Arc::new(ScriptedLlm::from_fn(|req| {
        if req.messages[1].content.contains("Merge these") {
            Ok("Merge these consecutive records into one record of at most 120 words, in time order, keeping names, numbers and exact strings.".into())
        } else {
            Ok(format!(r#"{{"record": "{}"}}"#, ["rec"; 70].join(" ")))
        }
    }));
    let m = FlexaMem::new(test_services(Some(llm)), FlexaConfig::default()).unwrap();
    let a = ns("tiny");
    let mut events = common::conversation("c", 3, 10, 20, 4);
    if let Event::Turn(t) = &mut events[13] {
        t.text = "my violin teacher is called zanzibarite".into();
    }
    m.write(&a, &events).await.unwrap();
    m.manage().await.unwrap();
    let q = Query::question(
        a.clone(),
        "what is my violin teacher called zanzibarite",
        256,
    );
    let r = m.render_detailed(&q).await.unwrap();
    assert!(r.recall.tokens <= q.allowance());
    assert!(r.recall.text.contains("zanzibarite"), "{}", r.recall.text);
    assert!(
        m.stats().merge_llm_failures > 0,
        "the echoed merge is rejected"
    );
}

/// The hashing embedder under another name, counting the texts it embeds.
#[derive(Debug)]
struct CountingEmbedder {
    name: &'static str,
    inner: submem_core::test_utils::HashingEmbedder,
    texts: AtomicUsize,
}

#[async_trait::async_trait]
impl submem_core::Embedder for CountingEmbedder {
    fn name(&self) -> &str {
        self.name
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, submem_core::ServiceError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).await
    }
}

fn counted(name: &'static str) -> (submem_core::Services, Arc<CountingEmbedder>) {
    let e = Arc::new(CountingEmbedder {
        name,
        inner: submem_core::test_utils::HashingEmbedder::new(64),
        texts: AtomicUsize::new(0),
    });
    let mut s = test_services(Some(json_llm()));
    s.embedder = e.clone();
    (s, e)
}

#[tokio::test]
async fn piece_vectors_survive_persist_and_are_not_embedded_again() {
    let a = ns("pv");
    let q = Query::question(a.clone(), "violin museum", 1024);
    let cfg = FlexaConfig::default().with_mode(RecoveryMode::Piece);
    let (services, _) = counted("hash-a");
    let m = FlexaMem::new(services, cfg.clone()).unwrap();
    m.write(&a, &common::conversation("c", 10, 20, 30, 5))
        .await
        .unwrap();
    let text = m.read(&q).await.unwrap().text;
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();

    let first_read_after_restore = |name: &'static str| {
        let (dir, cfg, q) = (dir.path().to_path_buf(), cfg.clone(), q.clone());
        async move {
            let (services, e) = counted(name);
            let back = FlexaMem::new(services, cfg).unwrap();
            back.restore(&dir).await.unwrap();
            let before = e.texts.load(Ordering::SeqCst);
            let text = back.read(&q).await.unwrap().text;
            (text, e.texts.load(Ordering::SeqCst) - before)
        }
    };
    let (same_text, same_cost) = first_read_after_restore("hash-a").await;
    let (other_text, other_cost) = first_read_after_restore("hash-b").await;
    eprintln!(
        "first read after restore embedded {same_cost} texts, {other_cost} with another embedder"
    );
    assert_eq!(same_text, text);
    assert_eq!(other_text, text, "the same vectors, made again");
    // With the stored vectors only the query (and open units' provisional
    // records) are embedded; another embedder's store embeds every piece.
    assert!(same_cost <= 4, "embedded {same_cost} texts");
    assert!(other_cost > 20, "embedded {other_cost} texts");
}

#[tokio::test]
async fn a_write_embeds_its_pieces_so_the_first_read_embeds_only_the_query() {
    let a = ns("first");
    let (services, e) = counted("hash-a");
    let m = FlexaMem::new(
        services,
        FlexaConfig::default().with_mode(RecoveryMode::Piece),
    )
    .unwrap();
    m.write(&a, &common::conversation("c", 10, 20, 30, 5))
        .await
        .unwrap();
    let after_write = e.texts.load(Ordering::SeqCst);
    let q = Query::question(a.clone(), "violin museum", 1024);
    m.read(&q).await.unwrap();
    let first = e.texts.load(Ordering::SeqCst) - after_write;
    // The query, and open units' provisional records at most.
    assert!(first <= 4, "first read embedded {first} texts");
    // A later write embeds its own pieces, not the store's again.
    let before = e.texts.load(Ordering::SeqCst);
    let one_more = Event::Turn(Turn {
        session_id: "late".into(),
        session_date: None,
        speaker: "Ana".into(),
        text: "a short late remark".into(),
        source_id: "late:1".into(),
    });
    m.write(&a, &[one_more]).await.unwrap();
    let second = e.texts.load(Ordering::SeqCst) - before;
    assert!(
        second <= 4,
        "a one-turn write embedded {second} texts of {after_write}"
    );
    // A BM25-only configuration does not pay for vectors it never ranks by.
    let (services, bm25_only) = counted("hash-a");
    let cfg = FlexaConfig::default()
        .with_mode(RecoveryMode::Piece)
        .with_ranking(submem_flexamem::Ranking::Bm25)
        .with_piece_ranking(submem_flexamem::Ranking::Bm25);
    let m = FlexaMem::new(services, cfg).unwrap();
    m.write(&a, &common::conversation("c", 10, 20, 30, 5))
        .await
        .unwrap();
    assert!(bm25_only.texts.load(Ordering::SeqCst) < after_write);
}
