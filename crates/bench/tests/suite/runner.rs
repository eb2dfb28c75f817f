#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The run loop end to end with the built-in baselines and test doubles:
//! metering, the budget/k sweep, the reader sample, judging, resume.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::items::{read_jsonl, ItemRecord, WriteRecord};
use submem_bench::runner::{run, Judge, Models, RunOptions, TRAINING_BANK};
use submem_bench::summary::summarize;
use submem_bench::{BenchError, Dataset, DatasetKind};
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{Llm, ServiceError};

fn dataset() -> Arc<Dataset> {
    Arc::new(
        SyntheticSpec {
            conversations: 2,
            units: 120,
            questions: 6,
            session_size: 20,
            ..SyntheticSpec::default()
        }
        .dataset()
        .unwrap(),
    )
}

fn opts(out: &Path) -> RunOptions {
    RunOptions {
        budgets: vec![256, 1024],
        ks: vec![3, 10],
        out: out.to_path_buf(),
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    }
}

fn models(reader: bool) -> Arc<Models> {
    let r: Option<Arc<dyn Llm>> =
        reader.then(|| Arc::new(ScriptedLlm::new(vec!["I don't know".into()])) as Arc<dyn Llm>);
    let j: Option<Arc<dyn Llm>> =
        reader.then(|| Arc::new(ScriptedLlm::new(vec!["WRONG, no".into()])) as Arc<dyn Llm>);
    Arc::new(Models {
        services: test_services(None),
        reader: r,
        judges: j.map(|j| Judge::new("judge", j)).into_iter().collect(),
    })
}

/// A run at k 10 over `budgets`, into `out`.
fn at_budgets(out: &Path, budgets: Vec<usize>) -> RunOptions {
    RunOptions {
        budgets,
        ks: vec![10],
        out: out.to_path_buf(),
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    }
}

/// Models with `llm` as the memory LLM (and `reader`, if any).
fn with_memory_llm(llm: Arc<dyn Llm>, reader: Option<Arc<dyn Llm>>) -> Arc<Models> {
    Arc::new(Models {
        services: test_services(Some(llm)),
        reader,
        judges: vec![],
    })
}

#[tokio::test]
async fn sweep_writes_once_and_reads_every_budget_and_k() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("nomem,recent").unwrap();
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        opts(dir.path()),
    )
    .await
    .unwrap();
    // 2 substrates x 2 conversations x 6 questions x 2 budgets x 2 k
    assert_eq!(out.new_items, 96);
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert!(
        out.items.iter().all(|i| i.shown.is_none()),
        "the memory shown is kept only with --trace"
    );
    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    assert_eq!(writes.len(), 4, "one write per substrate x conversation");
    assert!(writes.iter().all(|w| w.events == 120));
    let s = summarize(&out.items, &out.writes);
    assert_eq!(s.runs.len(), 8);
    let recent_big = s
        .runs
        .iter()
        .find(|r| r.substrate == "recent" && r.budget == 1024)
        .unwrap();
    let recent_small = s
        .runs
        .iter()
        .find(|r| r.substrate == "recent" && r.budget == 256)
        .unwrap();
    let nomem = s.runs.iter().find(|r| r.substrate == "nomem").unwrap();
    assert_eq!(nomem.number("P6"), Some(0.0));
    assert!(recent_big.number("E7").unwrap() > recent_small.number("E7").unwrap());
    assert!(recent_big.number("E7").unwrap() <= 1024.0 * 0.95);
    assert_eq!(
        recent_big.metrics["P4"],
        serde_json::Value::Null,
        "no reader: P4 is n/a"
    );
    assert_eq!(recent_big.metrics["E2"], serde_json::Value::Null);
}

#[tokio::test]
async fn a_library_run_adds_the_packing_baselines_as_the_cli_does() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("m2").unwrap();
    let o = RunOptions {
        packing_baselines: true,
        ks: vec![10],
        ..opts(dir.path())
    };
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        o,
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let mut ran: Vec<String> = out.writes.iter().map(|w| w.substrate.clone()).collect();
    ran.sort();
    ran.dedup();
    let mut expected: Vec<String> = std::iter::once("m2")
        .chain(submem::baselines::PACKING_BASELINES)
        .map(String::from)
        .collect();
    expected.sort();
    assert_eq!(ran, expected);
}

#[tokio::test]
async fn reader_sample_and_judge() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    let o = RunOptions {
        reader_sample: Some(4),
        budgets: vec![512],
        ks: vec![5],
        ..opts(dir.path())
    };
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(true),
        o,
    )
    .await
    .unwrap();
    let answered: Vec<&ItemRecord> = out.items.iter().filter(|i| i.answered).collect();
    assert_eq!(answered.len(), 4);
    assert!(answered
        .iter()
        .all(|i| i.judge == Some(false) && i.em == Some(0.0)));
    let s = summarize(&out.items, &out.writes);
    assert_eq!(s.runs[0].number("P4"), Some(0.0));
    assert_eq!(s.runs[0].number("answered"), Some(4.0));
    // The judge was also checked on known answers, over every question the
    // run asks (not only the reader's sample), and rejected them all.
    let probed: HashSet<&str> = out
        .judge_checks
        .iter()
        .map(|r| r.probe.question_id.as_str())
        .collect();
    assert!(probed.len() > 4, "{probed:?}");
    assert!(out
        .judge_checks
        .iter()
        .all(|r| r.judge == "judge" && r.accepted == Some(false)));
    assert!(dir.path().join("judge_checks.jsonl").is_file());
}

/// Test services and `reader`, no judge.
fn reader_only(reader: Arc<dyn Llm>) -> Arc<Models> {
    Arc::new(Models {
        services: test_services(None),
        reader: Some(reader),
        judges: vec![],
    })
}

/// A reader that refuses prompts over `limit` characters, as the local model
/// refuses prompts over its context.
fn refusing_reader(limit: usize) -> Arc<dyn Llm> {
    Arc::new(ScriptedLlm::from_fn(move |r| {
        let chars: usize = r.messages.iter().map(|m| m.content.len()).sum();
        if chars > limit {
            Err(ServiceError::InvalidRequest(format!(
                "prompt of {chars} chars exceeds the context"
            )))
        } else {
            Ok("I don't know".into())
        }
    }))
}

#[tokio::test]
async fn a_refused_reader_request_fails_its_item_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("nomem,recent").unwrap();
    let o = RunOptions {
        budgets: vec![1024],
        ks: vec![5],
        ..opts(dir.path())
    };
    // nomem's prompt is the question alone; recent's carries ~1k tokens of
    // history, far over 2,000 characters.
    let m = reader_only(refusing_reader(2_000));
    let out = run(dataset(), specs, Arc::new(Registry::default()), m, o)
        .await
        .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(out.new_items, 24, "every item is logged");
    let (refused, fine): (Vec<&ItemRecord>, Vec<&ItemRecord>) = out
        .items
        .iter()
        .filter(|i| i.gold.is_some())
        .partition(|i| i.reader_error.is_some());
    assert!(!refused.is_empty() && !fine.is_empty());
    assert!(refused
        .iter()
        .all(|i| i.key.substrate == "recent" && !i.answered && i.answer.is_none()));
    assert!(fine.iter().all(|i| i.answered));
    let s = summarize(&out.items, &out.writes);
    let recent = s.runs.iter().find(|r| r.substrate == "recent").unwrap();
    assert_eq!(recent.number("reader_rejected"), Some(refused.len() as f64));
    let logged: Vec<ItemRecord> = read_jsonl(&dir.path().join("items.jsonl")).unwrap();
    assert_eq!(
        logged.iter().filter(|i| i.reader_error.is_some()).count(),
        refused.len(),
        "the refusal survives in the log"
    );
}

#[tokio::test]
async fn a_broken_reader_stops_the_task_so_a_resume_retries_it() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    let o = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        ..opts(dir.path())
    };
    let m = reader_only(Arc::new(submem_core::test_utils::FailingLlm));
    let out = run(dataset(), specs, Arc::new(Registry::default()), m, o).await;
    let failed = match out {
        Ok(o) => !o.failures.is_empty(),
        Err(_) => true,
    };
    assert!(
        failed,
        "an unreachable reader must not be recorded as answered items"
    );
    let logged: Vec<ItemRecord> = read_jsonl(&dir.path().join("items.jsonl")).unwrap_or_default();
    assert!(logged.iter().all(|i| i.reader_error.is_none()));
}

#[tokio::test]
async fn aborted_run_resumes_without_duplicates_or_losses() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("nomem,recent").unwrap();
    let o = RunOptions {
        abort_after: Some(17),
        ..opts(dir.path())
    };
    let err = run(
        dataset(),
        specs.clone(),
        Arc::new(Registry::default()),
        models(false),
        o,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BenchError::Aborted(17)), "{err}");
    let partial: Vec<ItemRecord> = read_jsonl(&dir.path().join("items.jsonl")).unwrap();
    assert_eq!(partial.len(), 17);
    // simulate a kill mid-line
    let p = dir.path().join("items.jsonl");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("{\"substrate\":\"rec");
    std::fs::write(&p, text).unwrap();
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        opts(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(out.resumed, 17);
    assert_eq!(out.new_items, 96 - 17);
    let all: Vec<ItemRecord> = read_jsonl(&p).unwrap();
    assert_eq!(all.len(), 96);
    let keys: HashSet<_> = all.iter().map(|i| i.key.clone()).collect();
    assert_eq!(keys.len(), 96, "no duplicates");
    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    assert_eq!(writes.len(), 4);
}

#[tokio::test]
async fn unknown_substrate_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("recent,m42").unwrap();
    let err = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        opts(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("m42") && err.to_string().contains("known substrates"),
        "{err}"
    );
    assert!(!dir.path().join("items.jsonl").exists());
}

#[test]
fn fixtures_load_through_the_dataset_entry_point() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    assert!(Dataset::load(DatasetKind::Locomo, &root.join("locomo-mini.json")).is_ok());
    assert!(Dataset::load(
        DatasetKind::LongMemEval,
        &root.join("longmemeval-mini.json")
    )
    .is_ok());
    assert!(Dataset::load(DatasetKind::Alfworld, &root.join("alfworld-mini.json")).is_ok());
    assert!(Dataset::load(DatasetKind::Probes, &root.join("probes-mini.jsonl")).is_ok());
    let e = Dataset::load(DatasetKind::Locomo, &root.join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.json"), "{e}");
}

#[tokio::test]
async fn compare_two_substrates_from_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let specs = SubstrateSpec::parse_list("nomem,recent").unwrap();
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        opts(dir.path()),
    )
    .await
    .unwrap();
    let c = submem_bench::compare::compare(&out.items, "recent", "nomem").unwrap();
    assert_eq!(c.metric, "P6");
    assert_eq!(c.pairs, 48);
    assert_eq!(c.mean_b, 0.0);
    assert_eq!(c.mcnemar.c, 0);
    assert!(
        c.bootstrap.low <= c.bootstrap.difference && c.bootstrap.difference <= c.bootstrap.high
    );
    assert!(submem_bench::compare::compare(&out.items, "recent", "m9")
        .unwrap_err()
        .to_string()
        .contains("nomem"));
}

#[tokio::test]
async fn traced_run_reports_where_gold_evidence_went() {
    let dir = tempfile::tempdir().unwrap();
    // FlexA-Mem (rule writer) traces its piece ranking, M2 its BM25 ranking
    // (a top-k read: what ranked below k is said so).
    let specs = SubstrateSpec::parse_list("flexa:mode=piece,ranking=bm25,m2").unwrap();
    let o = RunOptions {
        budgets: vec![256],
        ks: vec![5],
        trace: true,
        ..opts(dir.path())
    };
    let out = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(false),
        o,
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let mut beyond_k = 0;
    for name in ["flexa", "m2"] {
        let items: Vec<&ItemRecord> = out
            .items
            .iter()
            .filter(|i| i.key.substrate.starts_with(name))
            .collect();
        let gold: u32 = items.iter().map(|i| i.fates.gold).sum();
        let traced: u32 = items.iter().map(|i| i.fates.traced).sum();
        assert!(gold > 0, "{name}");
        assert_eq!(traced, gold, "{name}: every gold turn is traced");
        for i in &items {
            let f = i.fates;
            // The plain buckets partition the gold turns; the traced ones
            // explain exactly the turns not shown whole.
            assert_eq!(f.whole + f.part_only + f.record_only + f.absent, f.gold);
            assert_eq!(
                f.not_ranked + f.ranked_too_low + f.crowded_out + f.fit_not_whole + f.beyond_top_k,
                f.traced - f.whole,
                "{name}: {f:?}"
            );
            assert_eq!(f.whole, i.coverage.whole);
            if name == "flexa" {
                assert_eq!(f.beyond_top_k, 0, "FlexA-Mem fills its room");
            }
            beyond_k += f.beyond_top_k;
        }
    }
    assert!(beyond_k > 0, "some gold turn ranked below M2's k = 5");
    // Every item keeps what its substrate showed, for the inspector.
    for i in &out.items {
        let shown = i
            .shown
            .as_ref()
            .expect("a traced run keeps the memory shown");
        assert!(!shown.question.is_empty());
        assert_eq!(shown.evidence.len(), i.gold_evidence);
        assert_eq!(
            shown.evidence_text.len(),
            i.gold_evidence,
            "the synthetic set gives every gold turn's text"
        );
        assert_eq!(
            shown.text.is_empty(),
            i.retrieved_tokens == 0,
            "{}: the text is the rendered memory",
            i.key.substrate
        );
        let named: Vec<&str> = shown.sources.iter().map(|(id, _)| id.as_str()).collect();
        if i.coverage.whole > 0 {
            assert!(
                shown.evidence.iter().any(|e| named.contains(&e.as_str())),
                "a gold turn shown whole is among the sources: {named:?}"
            );
        }
    }
    let s = summarize(&out.items, &out.writes);
    let report = submem_bench::report::markdown(&s, &[]);
    assert!(
        report.contains("Where gold evidence turns went"),
        "{report}"
    );
    assert!(report.contains("crowded out"), "{report}");
}

#[tokio::test]
async fn a_prefix_caching_memory_llm_reaches_m11_through_the_harness() {
    use submem_core::test_utils::CachingLlm;
    let dir = tempfile::tempdir().unwrap();
    let llm = CachingLlm::from_fn(|_| Ok("an answer".into()));
    run(
        dataset(),
        SubstrateSpec::parse_list("m11").unwrap(),
        Arc::new(Registry::default()),
        with_memory_llm(Arc::new(llm.clone()), Some(Arc::new(llm.clone()))),
        at_budgets(dir.path(), vec![1024]),
    )
    .await
    .unwrap();
    assert!(
        llm.prefills() > 0,
        "M11 built no episode cache: the harness hid the LLM's prefix caching"
    );
}

/// Cross-episode regime: the training bank is written once per substrate,
/// persisted, and restored into every test episode; its cost is logged once
/// and every memory-LLM call of the run is accounted for.
#[tokio::test]
async fn the_training_bank_is_built_once_and_restored_per_episode() {
    let dir = tempfile::tempdir().unwrap();
    let data = Arc::new(
        SyntheticSpec {
            conversations: 4,
            units: 40,
            questions: 3,
            session_size: 10,
            regime: submem_core::Regime::Agentic,
            ..SyntheticSpec::default()
        }
        .dataset()
        .unwrap(),
    );
    let llm = Arc::new(ScriptedLlm::new(vec![
        "SUCCESS. Strategy: check the nearest container first.".into(),
    ]));
    let m = Arc::new(Models {
        services: test_services(Some(llm.clone() as Arc<dyn Llm>)),
        reader: None,
        judges: vec![],
    });
    let o = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        train_episodes: Some(2),
        ..opts(dir.path())
    };
    let specs = SubstrateSpec::parse_list("m7,m1").unwrap();
    let out = run(
        data.clone(),
        specs.clone(),
        Arc::new(Registry::default()),
        m.clone(),
        o.clone(),
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(
        out.new_items,
        2 * 2 * 3,
        "2 substrates x 2 test episodes x 3 questions"
    );

    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    let bank = |s: &str| {
        let b: Vec<&WriteRecord> = writes
            .iter()
            .filter(|w| w.substrate == s && w.conversation == TRAINING_BANK)
            .collect();
        assert_eq!(b.len(), 1, "{s}: one bank record");
        b[0]
    };
    let episodes = |s: &str| -> Vec<&WriteRecord> {
        writes
            .iter()
            .filter(|w| w.substrate == s && w.conversation != TRAINING_BANK)
            .collect()
    };
    let train_events: usize = data.conversations[..2]
        .iter()
        .map(|c| c.history.len())
        .sum();
    for s in ["m7", "m1"] {
        assert_eq!(bank(s).events, train_events);
        assert!(dir.path().join("banks").join(s).is_dir());
        for (e, conv) in episodes(s).iter().zip(&data.conversations[2..]) {
            assert_eq!(
                e.events,
                conv.history.len(),
                "{s}: only the episode is written"
            );
        }
    }
    // The restored bank is in every episode's memory.
    for e in episodes("m1") {
        assert!(e.memory_bytes > bank("m1").memory_bytes);
    }
    // m7 distils per trajectory: the bank pays for two, an episode for one.
    let (b7, e7) = (bank("m7"), episodes("m7"));
    assert!(b7.write.llm_calls > 0);
    assert!(e7.iter().all(|e| e.write.llm_calls < b7.write.llm_calls));
    // Every request the memory LLM saw is in exactly one record.
    let logged: u64 = writes
        .iter()
        .map(|w| w.write.llm_calls + w.manage.llm_calls)
        .sum::<u64>()
        + out.items.iter().map(|i| i.read_llm_calls).sum::<u64>();
    assert_eq!(llm.requests().len() as u64, logged);
    let s = summarize(&out.items, &out.writes);
    let r7 = s.runs.iter().find(|r| r.substrate == "m7").unwrap();
    let per_episode: u64 = e7.iter().map(|e| e.write.llm_calls).sum();
    assert_eq!(
        r7.number("E6"),
        Some((per_episode + b7.write.llm_calls) as f64),
        "the bank counts once in the run's totals"
    );
    assert_eq!(
        r7.metrics["training_bank"]["write"]["calls"],
        serde_json::json!(b7.write.llm_calls)
    );

    // A resume that needs reads again reuses the persisted bank.
    let items = dir.path().join("items.jsonl");
    let text = std::fs::read_to_string(&items).unwrap();
    let kept: Vec<&str> = text.lines().take(3).collect();
    std::fs::write(&items, kept.join("\n") + "\n").unwrap();
    let before = llm.requests().len();
    let again = run(data, specs, Arc::new(Registry::default()), m, o)
        .await
        .unwrap();
    assert!(again.failures.is_empty(), "{:?}", again.failures);
    assert_eq!(again.new_items, 12 - 3);
    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    assert_eq!(
        writes
            .iter()
            .filter(|w| w.conversation == TRAINING_BANK)
            .count(),
        2,
        "no bank rebuilt"
    );
    // Episodes are rewritten (their instances are gone), the bank is not.
    let episode_calls: u64 = e7
        .iter()
        .map(|e| e.write.llm_calls + e.manage.llm_calls)
        .sum();
    assert!(((llm.requests().len() - before) as u64) <= episode_calls);
}

/// A substrate's own counters reach the records: M3's gists in the write
/// record, and each read whose page choice fell back to BM25 (the scripted
/// memory LLM names no page) in that item.
#[tokio::test]
async fn substrate_counters_are_logged_with_writes_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let llm = ScriptedLlm::from_fn(|_| Ok("A talk about plans; I cannot tell which.".into()));
    let out = run(
        dataset(),
        SubstrateSpec::parse_list("m3").unwrap(),
        Arc::new(Registry::default()),
        with_memory_llm(Arc::new(llm), None),
        at_budgets(dir.path(), vec![1024]),
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    assert_eq!(writes.len(), 2);
    for w in &writes {
        let gists = w.diagnostics.get("llm_gists").copied().unwrap_or(0)
            + w.diagnostics.get("rule_gists").copied().unwrap_or(0);
        assert!(gists > 0, "no gist counted: {:?}", w.diagnostics);
        assert_eq!(w.diagnostics.get("selection_fallbacks"), Some(&0));
    }
    let items: Vec<ItemRecord> = read_jsonl(&dir.path().join("items.jsonl")).unwrap();
    assert_eq!(items.len(), 12);
    for i in &items {
        assert_eq!(
            i.read_diagnostics.get("selection_fallbacks"),
            Some(&1),
            "{:?}",
            i.read_diagnostics
        );
        assert!(!i.read_diagnostics.contains_key("llm_gists"));
    }
    let s = summarize(&out.items, &out.writes);
    assert_eq!(
        s.runs[0].metrics["diagnostics"]["read"]["selection_fallbacks"],
        serde_json::json!(12)
    );
}

/// A run extended with another budget restores each task's kept memory and
/// pays only the new reads: no gist is written again. A kept copy that does
/// not restore is written again, and the run still completes.
#[tokio::test]
async fn an_extended_run_restores_kept_memories_instead_of_writing_again() {
    let dir = tempfile::tempdir().unwrap();
    let llm = Arc::new(ScriptedLlm::from_fn(|_| Ok("A talk about plans.".into())));
    let at = |budgets| at_budgets(dir.path(), budgets);
    let models = || with_memory_llm(llm.clone(), None);
    let specs = SubstrateSpec::parse_list("m3").unwrap();
    let first = run(
        dataset(),
        specs.clone(),
        Arc::new(Registry::default()),
        models(),
        at(vec![1024]),
    )
    .await
    .unwrap();
    assert_eq!(first.new_items, 12);
    let first_calls = llm.requests().len();
    assert!(first_calls > 12, "gists and selections: {first_calls}");
    let kept = dir.path().join("memories").join("m3");
    assert!(kept.join("synth-0").is_dir() && kept.join("synth-1").is_dir());

    let second = run(
        dataset(),
        specs.clone(),
        Arc::new(Registry::default()),
        models(),
        at(vec![1024, 512]),
    )
    .await
    .unwrap();
    assert_eq!(second.new_items, 12);
    assert!(second.failures.is_empty(), "{:?}", second.failures);
    assert_eq!(
        llm.requests().len() - first_calls,
        12,
        "only the new reads' page selections: the memories were restored, not rewritten"
    );
    let writes: Vec<WriteRecord> = read_jsonl(&dir.path().join("writes.jsonl")).unwrap();
    assert_eq!(writes.len(), 2, "a restored task logs no second write");

    // A torn copy: the task writes its memory again.
    std::fs::remove_dir_all(kept.join("synth-0")).unwrap();
    std::fs::create_dir_all(kept.join("synth-0")).unwrap();
    std::fs::write(kept.join("synth-0").join("junk"), "x").unwrap();
    let before = llm.requests().len();
    let third = run(
        dataset(),
        specs,
        Arc::new(Registry::default()),
        models(),
        at(vec![1024, 512, 256]),
    )
    .await
    .unwrap();
    assert_eq!(third.new_items, 12);
    assert!(third.failures.is_empty(), "{:?}", third.failures);
    assert!(
        llm.requests().len() - before > 12,
        "the torn copy was written again"
    );
}
