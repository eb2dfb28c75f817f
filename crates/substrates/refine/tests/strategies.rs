#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M7 logic with the scripted LLM: judge + distill per finished episode, the
//! environment's signal, failures, rule fallbacks, dense top-k reads across
//! episodes, merging, forgetting with re-derivation, persistence.

mod common;

use common::*;
use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::{test_services, FailingLlm, ScriptedLlm};
use submem_core::{Event, Forget, Query, Step, Substrate};
use submem_kit::{Meter, MeteredSubstrate};
use submem_refine::{Outcome, StrategyBank, StrategyConfig};

fn bank(llm: Option<Arc<dyn submem_core::Llm>>, config: StrategyConfig) -> StrategyBank {
    StrategyBank::new(test_services(llm), config).unwrap()
}

fn new_task_query(task: &str) -> Query {
    Query::agentic(ns("agent"), task, "You are in the middle of a room.", 2048)
}

#[tokio::test]
async fn one_judge_and_one_distill_call_per_finished_episode_counted_by_phase() {
    let llm = scripted();
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(Some(llm.clone())));
    let m = MeteredSubstrate::new(
        StrategyBank::new(services, StrategyConfig::default()).unwrap(),
        meter.clone(),
    );
    let mut events = mug_episode("e1");
    events.extend(lamp_episode("e2"));
    events.extend(mug_episode("e3"));
    // Batches of 4 cut episodes in the middle; an episode ends when the next begins.
    for batch in events.chunks(4) {
        m.write(&ns("agent"), batch).await.unwrap();
    }
    let snap = meter.snapshot();
    assert_eq!(snap.write.llm_calls, 4, "e1 and e2 finished during writes");
    m.manage().await.unwrap();
    let snap = meter.snapshot();
    assert_eq!(snap.manage.llm_calls, 2, "manage finishes e3");
    let prompts: Vec<String> = llm.requests().iter().map(last_user).collect();
    assert!(
        prompts[0].contains("Task: put a mug in the fridge."),
        "{}",
        prompts[0]
    );
    assert!(prompts[1].contains("Outcome: success"));
    let fp = m.footprint();
    assert!(fp.stored_tokens > fp.input_tokens && fp.memory_bytes > 0);
}

#[tokio::test]
async fn environment_signal_replaces_the_judge_and_failures_are_distilled() {
    let llm = scripted();
    let m = bank(Some(llm.clone()), StrategyConfig::default());
    let won = episode("w", "open the safe.", &[("open safe 1", "You won!")]);
    m.write(&ns("agent"), &won).await.unwrap();
    assert_eq!(
        llm.requests().len(),
        1,
        "only the distill call: the environment judged"
    );
    let failed = episode(
        "f",
        "turn on the lamp.",
        &[("use lamp 1", "Nothing happens.")],
    );
    m.write(&ns("agent"), &failed).await.unwrap();
    m.manage().await.unwrap();
    let distill_prompt = last_user(&llm.requests()[2]);
    assert!(
        distill_prompt.contains("Outcome: failure"),
        "{distill_prompt}"
    );
    let outcomes: Vec<Outcome> = m
        .strategies(&ns("agent"))
        .into_iter()
        .map(|s| s.1)
        .collect();
    assert_eq!(outcomes, vec![Outcome::Success, Outcome::Failure]);
}

#[tokio::test]
async fn bad_replies_and_failing_or_missing_llms_fall_back_to_the_rule_strategy() {
    for llm in [
        Some(Arc::new(ScriptedLlm::new(vec![
            "maybe".into(),
            "no json at all".into(),
        ])) as Arc<dyn submem_core::Llm>),
        Some(Arc::new(FailingLlm) as Arc<dyn submem_core::Llm>),
        None,
    ] {
        let with_llm = llm.is_some();
        let m = bank(llm, StrategyConfig::default());
        assert_eq!(m.info().needs_llm, with_llm);
        m.write(&ns("agent"), &mug_episode("e1")).await.unwrap();
        m.manage().await.unwrap();
        let s = m.strategies(&ns("agent"));
        assert_eq!(s.len(), 1);
        assert!(!s[0].0.by_llm);
        assert_eq!(s[0].0.title, "put a mug in the fridge.");
        assert!(
            s[0].0
                .content
                .contains("go to countertop 1 -> take mug 1 from countertop 1"),
            "{}",
            s[0].0.content
        );
    }
}

#[tokio::test]
async fn a_new_task_reads_the_top_strategy_from_training_episodes() {
    let m = bank(Some(scripted()), StrategyConfig::default());
    let mut training = mug_episode("train1");
    training.extend(lamp_episode("train2"));
    m.write(&ns("agent"), &training).await.unwrap();
    m.manage().await.unwrap();
    let r = m
        .read(&new_task_query("put a mug in the fridge."))
        .await
        .unwrap();
    assert!(
        r.text.contains("How to put a mug in the fridge."),
        "{}",
        r.text
    );
    assert!(
        !r.text.contains("desklamp"),
        "top-1 shows one strategy: {}",
        r.text
    );
    assert!(r.source_ids().all(|s| s.starts_with("train1:")));
    let r = m
        .read(&new_task_query("look at the book under the desklamp."))
        .await
        .unwrap();
    assert!(r.text.contains("desklamp"), "{}", r.text);
    // top_k = 2 shows both, most relevant first; a query's own k can lower it.
    let m2 = bank(Some(scripted()), StrategyConfig::default().with_top_k(2));
    m2.write(&ns("agent"), &training).await.unwrap();
    m2.manage().await.unwrap();
    let r = m2
        .read(&new_task_query("look at the book under the desklamp."))
        .await
        .unwrap();
    let lamp = r.text.find("desklamp").unwrap();
    let mug = r.text.find("mug").unwrap();
    assert!(lamp < mug, "{}", r.text);
    let r = m2
        .read(&new_task_query("look at the book under the desklamp.").with_top_k(1))
        .await
        .unwrap();
    assert!(!r.text.contains("mug"));
}

#[tokio::test]
async fn manage_merges_near_duplicates_and_keeps_every_source() {
    // Every episode gets the same strategy: a near-duplicate by construction.
    let llm = Arc::new(ScriptedLlm::from_fn(|r| {
        Ok(if r.messages[0].content.contains("judge") {
            "SUCCESS".to_string()
        } else {
            "{\"title\": \"Search first\", \"description\": \"d\", \"content\": \"Look everywhere.\"}"
                .to_string()
        })
    }));
    let m = bank(Some(llm), StrategyConfig::default());
    let mut events = mug_episode("e1");
    events.extend(lamp_episode("e2"));
    m.write(&ns("agent"), &events).await.unwrap();
    let report = m.manage().await.unwrap();
    assert_eq!(report.changed, 2, "one strategy distilled, one merge");
    assert_eq!(m.strategies(&ns("agent")).len(), 1);
    let r = m.read(&new_task_query("anything")).await.unwrap();
    let ids: Vec<&str> = r.source_ids().collect();
    assert!(ids.contains(&"e1:2") && ids.contains(&"e2:2"), "{ids:?}");
    // Forgetting a step of e2 splits the merged entry: e1's strategy stays,
    // e2's is re-derived by manage without the forgotten step.
    m.forget(&Forget::Sources {
        namespace: ns("agent"),
        source_ids: vec!["e2:3".into()],
    })
    .await
    .unwrap();
    let r = m.read(&new_task_query("anything")).await.unwrap();
    assert!(
        r.source_ids().all(|s| s.starts_with("e1:")),
        "{:?}",
        r.sources
    );
    m.manage().await.unwrap();
    assert_eq!(
        m.strategies(&ns("agent")).len(),
        1,
        "re-derived and merged again"
    );
    let r = m.read(&new_task_query("anything")).await.unwrap();
    assert!(r.source_ids().any(|s| s == "e2:2") && r.source_ids().all(|s| s != "e2:3"));
}

#[tokio::test]
async fn forgetting_a_step_drops_its_strategy_and_rederives_without_it() {
    let llm = scripted();
    let m = bank(Some(llm.clone()), StrategyConfig::default());
    let events = episode(
        "s",
        "put a mug in the fridge.",
        &[
            (
                "go to drawer 1",
                "Inside is a note saying secret-zanzibarite.",
            ),
            ("go to fridge 1", "ok"),
        ],
    );
    m.write(&ns("agent"), &events).await.unwrap();
    m.manage().await.unwrap();
    let q = new_task_query("put a mug in the fridge.");
    assert!(m
        .read(&q)
        .await
        .unwrap()
        .text
        .contains("secret-zanzibarite"));
    let n = m
        .forget(&Forget::Sources {
            namespace: ns("agent"),
            source_ids: vec!["s:2".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let r = m.read(&q).await.unwrap();
    assert!(
        r.text.is_empty(),
        "strategy of the touched episode dropped at once: {}",
        r.text
    );
    let calls = llm.requests().len();
    m.manage().await.unwrap();
    assert_eq!(
        llm.requests().len(),
        calls + 2,
        "re-judged and re-distilled"
    );
    assert!(llm
        .requests()
        .iter()
        .skip(calls)
        .all(|r| !last_user(r).contains("secret")));
    let r = m.read(&q).await.unwrap();
    assert!(r.text.contains("How to put a mug"), "{}", r.text);
    assert!(!r.text.contains("secret-zanzibarite"));
    assert!(r.source_ids().all(|s| s != "s:2"));
}

#[tokio::test]
async fn restore_refuses_another_embedder_and_keeps_state() {
    let m = bank(None, StrategyConfig::default());
    m.write(&ns("agent"), &mug_episode("e1")).await.unwrap();
    m.manage().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let mut other = test_services(None);
    other.embedder = Arc::new(submem_core::test_utils::HashingEmbedder::new(32));
    let o = StrategyBank::new(other, StrategyConfig::default()).unwrap();
    o.write(&ns("agent"), &lamp_episode("mine")).await.unwrap();
    let err = o.restore(dir.path()).await.unwrap_err();
    assert!(matches!(err, submem_core::Error::Store { .. }), "{err}");
    o.manage().await.unwrap();
    assert_eq!(o.strategies(&ns("agent")).len(), 1);
    assert!(m.footprint().disk_bytes > 0);
}

const CHILD_ENV: &str = "SUBMEM_REFINE_M7_CHILD_DIR";
const CHILD_MARK: &str = "RECALL=";

fn process_query() -> Query {
    new_task_query("put a mug in the fridge.")
}

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = bank(Some(scripted()), StrategyConfig::default());
    m.restore(Path::new(&dir)).await.unwrap();
    let r = m.read(&process_query()).await.unwrap();
    println!("{CHILD_MARK}{}", serde_json::to_string(&r).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = bank(Some(scripted()), StrategyConfig::default());
    let mut events = mug_episode("e1");
    events.extend(lamp_episode("e2"));
    events.push(Event::Step(Step {
        step: 1,
        action: "[start]".into(),
        observation: "open episode".into(),
        source_id: "e3:1".into(),
    }));
    m.write(&ns("agent"), &events).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let expected = serde_json::to_string(&m.read(&process_query()).await.unwrap()).unwrap();
    assert!(expected.contains("How to put a mug"));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_restores_and_reads",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = stdout
        .lines()
        .find_map(|l| l.split_once(CHILD_MARK).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("child printed no recall: {stdout}"));
    assert_eq!(got, expected);
}
