#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The judges of a run: probes built from the LoCoMo fixture, every judge
//! checked on them with the run's template, a judge that accepts everything
//! flagged, several judges' verdicts and their agreement, and a resume that
//! judges no probe twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::items::read_jsonl;
use submem_bench::judges::probes::{self, ProbeKind};
use submem_bench::judges::{CheckRecord, CHECKS_FILE};
use submem_bench::prompt::JudgeTemplate;
use submem_bench::runner::{run, Judge, Models, RunOptions};
use submem_bench::{results, Dataset, DatasetKind, Question};
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::Llm;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn locomo() -> Arc<Dataset> {
    Arc::new(Dataset::load(DatasetKind::Locomo, &fixture("locomo-mini.json")).unwrap())
}

fn asked(d: &Dataset) -> Vec<(&str, &Question)> {
    d.conversations
        .iter()
        .flat_map(|c| c.questions.iter().map(move |q| (c.id.as_str(), q)))
        .collect()
}

#[test]
fn probes_are_built_deterministically_from_the_fixture() {
    let d = locomo();
    let built = probes::build(&asked(&d), 20, 42);
    assert_eq!(
        built,
        probes::build(&asked(&d), 20, 42),
        "same input, same probes"
    );
    let mut got: Vec<(String, ProbeKind, String, Option<String>)> = built
        .into_iter()
        .map(|p| (p.question_id, p.kind, p.answer, p.from))
        .collect();
    got.sort();
    let p = |q: &str, k, a: &str, from: Option<&str>| {
        (q.to_string(), k, a.to_string(), from.map(str::to_string))
    };
    use ProbeKind::*;
    // q0 and q1 (category 2, temporal) lend each other their gold answers;
    // q2 (category 1) has no other question of its category; q3
    // (adversarial, no gold answer) is not probed.
    assert_eq!(
        got,
        vec![
            p("q0", Gold, "7 May 2023", None),
            p("q0", SpecificWrong, "2022", Some("conv-26/q1")),
            p(
                "q0",
                VagueTopical,
                "At some point, in connection with Caroline, LGBTQ support group.",
                None
            ),
            p("q1", Gold, "2022", None),
            p("q1", SpecificWrong, "7 May 2023", Some("conv-26/q0")),
            p(
                "q1",
                VagueTopical,
                "At some point, in connection with Melanie paint, sunrise.",
                None
            ),
            p("q2", Gold, "support group, painting", None),
            p(
                "q2",
                VagueTopical,
                "Something to do with Caroline, Melanie.",
                None
            ),
        ]
    );
    // A sample of one is the first of the seeded order.
    let one = probes::build(&asked(&d), 1, 42);
    assert!(one.iter().all(|x| x.question_id == one[0].question_id));
}

fn opts(out: &Path) -> RunOptions {
    RunOptions {
        budgets: vec![512],
        ks: vec![5],
        out: out.to_path_buf(),
        progress: false,
        packing_baselines: false,
        seed: 42,
        ..RunOptions::default()
    }
}

fn scripted(reply: &str) -> Arc<ScriptedLlm> {
    Arc::new(ScriptedLlm::new(vec![reply.into()]))
}

#[tokio::test]
async fn a_judge_that_accepts_everything_is_flagged_and_two_judges_are_compared() {
    let dir = tempfile::tempdir().unwrap();
    let yes = scripted("Looks fine. CORRECT");
    let no = scripted("Not the same. WRONG");
    let models = Arc::new(Models {
        services: test_services(None),
        reader: Some(scripted("Caroline went in May") as Arc<dyn Llm>),
        judges: vec![
            Judge::new("yes", yes.clone() as Arc<dyn Llm>),
            Judge::new("no", no.clone() as Arc<dyn Llm>),
        ],
    });
    let specs = SubstrateSpec::parse_list("recent,nomem").unwrap();
    let out = run(
        locomo(),
        specs.clone(),
        Arc::new(Registry::default()),
        models.clone(),
        opts(dir.path()),
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    // Items: the first judge's verdict is `judge`; both are kept.
    let answered: Vec<_> = out.items.iter().filter(|i| i.answered).collect();
    assert_eq!(answered.len(), 6, "2 substrates × 3 answerable questions");
    for i in &answered {
        assert_eq!(i.judge, Some(true));
        assert_eq!(i.judges["yes"].correct, Some(true));
        assert_eq!(i.judges["no"].correct, Some(false));
        assert_eq!(
            i.judge_tokens,
            Some(i.judges["yes"].tokens + i.judges["no"].tokens)
        );
    }
    // Checks: 8 probes per judge, judged once each, logged.
    let log: Vec<CheckRecord> = read_jsonl(&dir.path().join(CHECKS_FILE)).unwrap();
    assert_eq!(log.len(), 16);
    assert_eq!(out.judge_checks, log);
    let item_calls = 6;
    assert_eq!(yes.requests().len(), item_calls + 8);
    assert_eq!(no.requests().len(), item_calls + 8);
    // The probes were asked with the run's template (the built-in rubric of
    // each question: Mem0's for LoCoMo) and the probe's answer.
    for r in &log {
        assert!(r.tokens > 0);
        let asked = yes.requests().into_iter().chain(no.requests()).any(|q| {
            q.messages[0]
                .content
                .contains(&format!("Generated answer: {}\n", r.probe.answer))
        });
        assert!(asked, "{r:?}");
    }

    let md = results::write_results(dir.path(), &out.items, &out.writes, &[], 0.2).unwrap();
    let first = md.lines().find(|l| l.starts_with("> ")).unwrap();
    assert!(
        first.contains("the judge `yes` is lenient")
            && first.contains("2 of 2 specific wrong answers (100 %)")
            && first.contains("3 of 3 vague wrong answers (100 %)")
            && first.contains("limit of 20 %"),
        "{md}"
    );
    assert!(!md.contains("judge `no` is lenient"), "{md}");
    assert!(md.contains("## Judge checks"), "{md}");
    assert!(
        md.contains("| yes | 3 | 0/3 = 0.00 [0.00, 0.56] | 2/2 = 1.00 [0.34, 1.00] | 3/3 = 1.00 [0.44, 1.00] | 0 |"),
        "{md}"
    );
    assert!(
        md.contains("| no | 3 | 3/3 = 1.00 [0.44, 1.00] | 0/2 = 0.00 [0.00, 0.66] | 0/3 = 0.00 [0.00, 0.56] | 0 |"),
        "{md}"
    );
    assert!(
        md.contains("## Several judges") && md.contains("| P4 no | P4 yes |"),
        "{md}"
    );
    assert!(
        md.contains("| locomo | 512 | 5 | recent | 0.000 | 1.000 |"),
        "{md}"
    );
    assert!(md.contains("| no · yes | 6 | 0 | 0.000 | 6 |"), "{md}");
    assert!(md.contains("no and yes disagree on 6 items"), "{md}");
    assert!(
        md.contains("- recent · conv-26 · q0 · 512 · 5: yes"),
        "{md}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    let yes_checks = &summary["judge_checks"]["judges"][0];
    assert_eq!(yes_checks["judge"], "yes");
    assert_eq!(yes_checks["lenient"], true);
    assert_eq!(yes_checks["leniency_vague"]["rate"], 1.0);
    assert_eq!(summary["judge_agreement"][0]["kappa"], 0.0);
    assert_eq!(
        summary["runs"][0]["metrics"]["P4_by_judge"],
        serde_json::json!({"no": 0.0, "yes": 1.0})
    );

    // A resume judges no probe again.
    let again = run(
        locomo(),
        specs,
        Arc::new(Registry::default()),
        models,
        opts(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(again.new_items, 0);
    assert_eq!(again.judge_checks.len(), 16);
    assert_eq!(yes.requests().len(), item_calls + 8, "nothing asked twice");
}

#[tokio::test]
async fn checks_follow_the_runs_judge_template_and_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let judge = scripted("yes");
    let models = Arc::new(Models::with_judge(
        test_services(None),
        Some(scripted("no idea") as Arc<dyn Llm>),
        Some(judge.clone() as Arc<dyn Llm>),
    ));
    let template =
        JudgeTemplate::from_text("j.txt", "Q: {question}\nGold: {gold}\nGot: {answer}\nSame?")
            .unwrap();
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    let out = run(
        locomo(),
        specs.clone(),
        Arc::new(Registry::default()),
        models.clone(),
        RunOptions {
            judge_prompt: template,
            judge_checks: 1,
            ..opts(&dir.path().join("one"))
        },
    )
    .await
    .unwrap();
    assert!(out.judge_checks.len() >= 2 && out.judge_checks.len() <= 3);
    assert!(out.judge_checks.iter().all(|r| r.judge == "judge"
        && r.accepted == Some(true)
        && r.probe.question_id == out.judge_checks[0].probe.question_id));
    let prompts: Vec<String> = judge
        .requests()
        .into_iter()
        .map(|r| r.messages[0].content.clone())
        .collect();
    assert!(prompts
        .iter()
        .all(|p| p.starts_with("Q: ") && p.ends_with("\nSame?")));
    for r in &out.judge_checks {
        assert!(prompts
            .iter()
            .any(|p| p.ends_with(&format!("Got: {}\nSame?", r.probe.answer))));
    }

    let off = run(
        locomo(),
        specs,
        Arc::new(Registry::default()),
        models,
        RunOptions {
            judge_checks: 0,
            ..opts(&dir.path().join("off"))
        },
    )
    .await
    .unwrap();
    assert!(off.judge_checks.is_empty());
    assert!(!dir.path().join("off").join(CHECKS_FILE).exists());
    let md =
        results::write_results(&dir.path().join("off"), &off.items, &off.writes, &[], 0.2).unwrap();
    assert!(
        !md.contains("Judge checks") && !md.contains("Several judges"),
        "{md}"
    );
}

/// The run's future is `Send` with judges and checks (the Python binding
/// runs it on a runtime's worker).
#[test]
fn a_judged_run_can_be_spawned() {
    fn send<T: Send>(_: &T) {}
    let models = Arc::new(Models::with_judge(
        test_services(None),
        Some(scripted("x") as Arc<dyn Llm>),
        Some(scripted("CORRECT") as Arc<dyn Llm>),
    ));
    let dir = tempfile::tempdir().unwrap();
    let fut = run(
        locomo(),
        SubstrateSpec::parse_list("recent").unwrap(),
        Arc::new(Registry::default()),
        models,
        opts(dir.path()),
    );
    send(&fut);
}

#[tokio::test]
async fn judges_must_be_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let j = scripted("CORRECT") as Arc<dyn Llm>;
    let models = Arc::new(Models {
        services: test_services(None),
        reader: None,
        judges: vec![Judge::new("a", j.clone()), Judge::new("a", j)],
    });
    let err = run(
        locomo(),
        SubstrateSpec::parse_list("recent").unwrap(),
        Arc::new(Registry::default()),
        models,
        opts(dir.path()),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("judge \"a\" is named twice"),
        "{err}"
    );
}
