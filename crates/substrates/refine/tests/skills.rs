#![allow(clippy::unwrap_used, clippy::expect_used)]
//! M8 logic with the scripted LLM: bundles from k-means with one skill call
//! each, joins and rewrites, the prefilled read, the cap (merge or prune),
//! forgetting, persistence in a new process.

mod common;

use common::*;
use std::path::Path;
use std::sync::Arc;
use submem_core::test_utils::test_services;
use submem_core::{Event, Forget, Query, Step, Substrate};
use submem_kit::{Meter, MeteredSubstrate};
use submem_refine::{SkillBundles, SkillConfig};

fn step(id: &str, n: u32, action: &str, observation: &str) -> Event {
    Event::Step(Step {
        step: n,
        action: action.into(),
        observation: observation.into(),
        source_id: format!("{id}:{n}"),
    })
}

/// `n` cabinet steps and `n` countertop steps, interleaved, from `first`.
fn two_kinds(id: &str, first: u32, n: u32) -> Vec<Event> {
    (0..n)
        .flat_map(|i| {
            let k = first + 2 * i;
            [
                step(
                    id,
                    k,
                    &format!("open cabinet {k}"),
                    &format!("You open the cabinet {k}. The cabinet {k} is open."),
                ),
                step(
                    id,
                    k + 1,
                    &format!("go to countertop {k}"),
                    &format!("On the countertop {k}, you see a spatula and a ladle."),
                ),
            ]
        })
        .collect()
}

fn skills(llm: bool, config: SkillConfig) -> SkillBundles {
    let llm = llm.then(|| scripted() as Arc<dyn submem_core::Llm>);
    SkillBundles::new(test_services(llm), config).unwrap()
}

fn query(text: &str, budget: usize) -> Query {
    Query::agentic(ns("agent"), text, "", budget)
}

#[tokio::test]
async fn experiences_cluster_into_bundles_with_one_skill_call_each() {
    let llm = scripted();
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(Some(llm.clone())));
    let m = MeteredSubstrate::new(
        SkillBundles::new(services, SkillConfig::default()).unwrap(),
        meter.clone(),
    );
    let r = m.write(&ns("agent"), &two_kinds("e", 1, 8)).await.unwrap();
    assert_eq!(r.units, 2, "16 experiences, bundles of 8");
    assert_eq!(meter.snapshot().write.llm_calls, 2);
    let inner: Vec<String> = llm.requests().iter().map(last_user).collect();
    let cabinet = inner.iter().find(|p| p.contains("cabinet")).unwrap();
    assert!(
        !cabinet.contains("countertop"),
        "a bundle holds one kind: {cabinet}"
    );
    // Four more cabinet steps join their bundle; 8 -> 12 is +50 %: rewritten.
    let more: Vec<Event> = (40..44)
        .map(|k| {
            step(
                "e",
                k,
                &format!("open cabinet {k}"),
                &format!("You open the cabinet {k}. The cabinet {k} is open."),
            )
        })
        .collect();
    let r = m.write(&ns("agent"), &more).await.unwrap();
    assert_eq!(r.units, 1);
    assert_eq!(meter.snapshot().write.llm_calls, 3);
    let sizes: Vec<usize> = llm_sizes(&m);
    assert_eq!(sizes, vec![8, 12]);
}

fn llm_sizes(m: &MeteredSubstrate<SkillBundles>) -> Vec<usize> {
    let mut v: Vec<usize> = m
        .inner()
        .skills(&ns("agent"))
        .into_iter()
        .map(|s| s.1)
        .collect();
    v.sort_unstable();
    v
}

#[tokio::test]
async fn read_prefills_every_skill_that_fits_most_relevant_first() {
    let m = skills(true, SkillConfig::default());
    m.write(&ns("agent"), &two_kinds("e", 1, 8)).await.unwrap();
    let r = m.read(&query("open the cabinet", 2048)).await.unwrap();
    let cab = r.text.find("skill open cabinet").unwrap();
    let cnt = r.text.find("skill go to countertop").unwrap();
    assert!(cab < cnt, "{}", r.text);
    assert_eq!(r.sources.len(), 16);
    let r = m.read(&query("go to the countertop", 2048)).await.unwrap();
    assert!(
        r.text.find("skill go to countertop").unwrap() < r.text.find("skill open cabinet").unwrap()
    );
    // A budget that fits one skill shows the most relevant one only.
    let q = fits_one(&m, "open the cabinet").await;
    let r = m.read(&q).await.unwrap();
    assert!(r.tokens <= q.allowance());
    assert!(
        r.text.contains("skill open cabinet") && !r.text.contains("countertop"),
        "{}",
        r.text
    );
}

/// A query on `text` whose allowance fits exactly its most relevant skill.
async fn fits_one(m: &SkillBundles, text: &str) -> Query {
    let all = m.read(&query(text, 2048)).await.unwrap();
    let first = all
        .text
        .split("\n\n")
        .next()
        .unwrap()
        .split_whitespace()
        .count();
    query(text, 200).with_fixed_prompt_tokens(190 - first)
}

#[tokio::test]
async fn over_the_cap_the_least_used_is_pruned_or_the_closest_merged() {
    let m = skills(
        true,
        SkillConfig::default()
            .with_max_bundles(1)
            .with_merge_threshold(0.99),
    );
    m.write(&ns("agent"), &two_kinds("e", 1, 8)).await.unwrap();
    // fits_one reads both once, then the cabinet bundle alone is shown twice.
    let q = fits_one(&m, "open the cabinet").await;
    m.read(&q).await.unwrap();
    m.read(&q).await.unwrap();
    let report = m.manage().await.unwrap();
    assert_eq!(report.changed, 1, "one prune, nothing to rewrite");
    let left = m.skills(&ns("agent"));
    assert_eq!(left.len(), 1);
    assert!(
        left[0].0.text.contains("cabinet"),
        "the more used bundle stays"
    );

    let llm = scripted();
    let meter = Meter::new();
    let services = meter.wrap_services(&test_services(Some(llm.clone())));
    let config = SkillConfig::default()
        .with_max_bundles(1)
        .with_merge_threshold(-1.0);
    let m = MeteredSubstrate::new(SkillBundles::new(services, config).unwrap(), meter.clone());
    m.write(&ns("agent"), &two_kinds("e", 1, 8)).await.unwrap();
    let report = m.manage().await.unwrap();
    assert_eq!(report.changed, 2, "one merge, one rewrite");
    assert_eq!(
        meter.snapshot().manage.llm_calls,
        1,
        "the rewrite counts as manage"
    );
    assert_eq!(llm_sizes(&m), vec![16]);
}

#[tokio::test]
async fn forgetting_an_experience_removes_it_from_its_skill() {
    let llm = scripted();
    let m = SkillBundles::new(test_services(Some(llm.clone())), SkillConfig::default()).unwrap();
    let mut events = two_kinds("e", 1, 8);
    events.push(step(
        "e",
        99,
        "open cabinet 99",
        "The cabinet 99 is open. A note says secret-zanzibarite.",
    ));
    m.write(&ns("agent"), &events).await.unwrap();
    let q = query("open the cabinet", 2048);
    assert!(m
        .read(&q)
        .await
        .unwrap()
        .text
        .contains("secret-zanzibarite"));
    let n = m
        .forget(&Forget::Sources {
            namespace: ns("agent"),
            source_ids: vec!["e:99".into()],
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
    let r = m.read(&q).await.unwrap();
    assert!(!r.text.contains("zanzibarite"), "{}", r.text);
    assert!(r.source_ids().all(|s| s != "e:99"));
    let calls = llm.requests().len();
    let report = m.manage().await.unwrap();
    assert_eq!(report.changed, 1);
    assert_eq!(
        llm.requests().len(),
        calls + 1,
        "the touched skill is rewritten by the LLM"
    );
    assert!(!last_user(&llm.requests()[calls]).contains("zanzibarite"));
    assert!(!m.read(&q).await.unwrap().text.contains("zanzibarite"));
    let gone = m.forget(&Forget::Namespace(ns("agent"))).await.unwrap();
    assert_eq!(gone, 16);
    assert!(m.read(&q).await.unwrap().sources.is_empty());
}

const CHILD_ENV: &str = "SUBMEM_REFINE_M8_CHILD_DIR";
const CHILD_MARK: &str = "RECALL=";

/// Runs only as the child of `restore_in_a_new_process_gives_the_same_recall`.
#[tokio::test]
async fn child_process_restores_and_reads() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let m = skills(true, SkillConfig::default());
    m.restore(Path::new(&dir)).await.unwrap();
    let r = m.read(&query("open the cabinet", 1024)).await.unwrap();
    println!("{CHILD_MARK}{}", serde_json::to_string(&r).unwrap());
}

#[tokio::test]
async fn restore_in_a_new_process_gives_the_same_recall() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let m = skills(true, SkillConfig::default());
    m.write(&ns("agent"), &two_kinds("e", 1, 8)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    m.persist(dir.path()).await.unwrap();
    let expected =
        serde_json::to_string(&m.read(&query("open the cabinet", 1024)).await.unwrap()).unwrap();
    assert!(expected.contains("skill open cabinet"));
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
