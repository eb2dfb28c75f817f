#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A run with an answer key on the LoCoMo fixture: items scored and judged
//! under both keys (a second judge call only where the key replaces a gold
//! answer), the summary's metrics and ceilings, the report's section, and a
//! directory that keeps to its key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::answer_key::{self, AnswerKey, APPLIED_FILE};
use submem_bench::metrics::text::normalize_answer;
use submem_bench::runner::{run, Judge, Models, RunOptions};
use submem_bench::{results, Dataset, DatasetKind};
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{ChatRequest, Llm};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn locomo() -> Arc<Dataset> {
    Arc::new(Dataset::load(DatasetKind::Locomo, &fixture("locomo-mini.json")).unwrap())
}

/// The text after the last `label` of the request, to the end of its line.
fn after(req: &ChatRequest, label: &str) -> String {
    let text = &req.messages.last().unwrap().content;
    let at = text.rfind(label).unwrap() + label.len();
    text[at..].lines().next().unwrap_or("").to_string()
}

/// A reader that answers the fixture's questions with the corrected key's
/// answer to q1, and a judge that accepts an answer equal to the gold one.
fn models() -> (Arc<Models>, Arc<ScriptedLlm>) {
    let reader = ScriptedLlm::from_fn(|req| {
        let q = after(req, "Question: ");
        Ok(if q.contains("support group") {
            "7 May 2023"
        } else if q.contains("sunrise") {
            "the year before 2023"
        } else {
            "painting"
        }
        .to_string())
    });
    let judge = Arc::new(ScriptedLlm::from_fn(|req| {
        let same = normalize_answer(&after(req, "Gold answer: "))
            == normalize_answer(&after(req, "Generated answer: "));
        Ok(if same { "CORRECT" } else { "WRONG" }.to_string())
    }));
    let models = Models {
        services: test_services(None),
        reader: Some(Arc::new(reader) as Arc<dyn Llm>),
        judges: vec![Judge::new("judge", judge.clone() as Arc<dyn Llm>)],
    };
    (Arc::new(models), judge)
}

fn opts(out: &Path, key: Option<&str>) -> RunOptions {
    let key = key.map(|k| Arc::new(AnswerKey::load(&fixture(k), &locomo()).unwrap()));
    RunOptions {
        budgets: vec![512],
        ks: vec![5],
        out: out.to_path_buf(),
        progress: false,
        packing_baselines: false,
        judge_checks: 0,
        answer_key: key,
        ..RunOptions::default()
    }
}

async fn bench(
    out: &Path,
    key: Option<&str>,
) -> submem_bench::Result<submem_bench::runner::RunOutcome> {
    let (models, _) = models();
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    run(
        locomo(),
        specs,
        Arc::new(Registry::default()),
        models,
        opts(out, key),
    )
    .await
}

#[tokio::test]
async fn a_run_scores_under_both_keys_and_keeps_to_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (models, judge) = models();
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    let key = "locomo-mini-answer-key.json";
    let out = run(
        locomo(),
        specs.clone(),
        Arc::new(Registry::default()),
        models.clone(),
        opts(dir.path(), Some(key)),
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let item = |q: &str| out.items.iter().find(|i| i.key.question_id == q).unwrap();
    // q0: left alone.
    assert_eq!(item("q0").judge, Some(true));
    assert!(item("q0").corrected.is_none());
    // q1: wrong under the original key, right under the corrected one.
    let q1 = item("q1");
    assert_eq!((q1.judge, q1.em), (Some(false), Some(0.0)));
    let c = q1.corrected.as_ref().unwrap();
    assert_eq!(c.gold.as_deref(), Some("the year before 2023"));
    assert_eq!((c.judge, c.em, c.f1), (Some(true), Some(1.0), Some(1.0)));
    assert!(c.judge_tokens.unwrap() > 0);
    assert_eq!(c.answer_recall, Some(0.0));
    // q2: excluded, not judged again; q3 (adversarial) untouched.
    let q2 = item("q2").corrected.as_ref().unwrap();
    assert!(q2.excluded() && q2.judge.is_none() && q2.em.is_none());
    assert!(item("q3").corrected.is_none());
    assert_eq!(
        judge.requests().len(),
        3 + 1,
        "a second judging for q1 only"
    );

    let md = results::write_results(dir.path(), &out.items, &out.writes, &[], 0.2).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    let m = &summary["runs"][0]["metrics"];
    assert_eq!(m["P4"], 1.0 / 3.0);
    assert_eq!(m["answer_key"]["P4"], 1.0);
    assert_eq!(m["P1"], 1.0 / 3.0);
    assert_eq!(m["answer_key"]["P1"], 1.0);
    assert_eq!(m["answer_key"]["ceiling"], 1.0 / 3.0);
    // The second judging is metered, apart and in the run's judge tokens.
    let first: u64 = out.items.iter().filter_map(|i| i.judge_tokens).sum();
    assert_eq!(m["judge_tokens"], first + c.judge_tokens.unwrap());
    assert_eq!(m["answer_key"]["judge_tokens"], c.judge_tokens.unwrap());
    let per = &summary["runs"][0]["per_category"];
    assert_eq!(per["2:temporal"]["answer_key"]["ceiling"], 0.5);
    assert_eq!(per["2:temporal"]["answer_key"]["P4"], 1.0);
    assert_eq!(per["1:multi-hop"]["answer_key"]["ceiling"], 0.0);
    let k = &summary["answer_key"];
    assert_eq!(k["format"], "submem");
    assert_eq!(k["overall"]["ceiling"], 1.0 / 3.0);
    assert_eq!(k["changes"].as_array().unwrap().len(), 2);
    for needle in [
        "## Answer key",
        "| all | 3 | 1 | 1 | 0.333 |",
        "| locomo | 512 | 5 | recent | 0.333 / 1.000 | 0.333 / 1.000 |",
        "| recent · 512 · 5 | 0.000 / n/a | 0.500 / 1.000 |",
        "| 1 | conv-26/q1: When did Melanie paint a sunrise? | 2:temporal | 2022 | the year before 2023 |",
        "*excluded* | too open to grade |",
    ] {
        assert!(md.contains(needle), "{needle}\n{md}");
    }
    assert!(dir.path().join(APPLIED_FILE).is_file());

    // The same key resumes and judges nothing again; another key, or none,
    // is refused.
    let again = run(
        locomo(),
        specs,
        Arc::new(Registry::default()),
        models,
        opts(dir.path(), Some(key)),
    )
    .await
    .unwrap();
    assert_eq!(again.new_items, 0);
    assert_eq!(judge.requests().len(), 4);
    for other in [Some("locomo-mini-audit.json"), None] {
        let e = bench(dir.path(), other).await.unwrap_err().to_string();
        assert!(
            e.contains("holds items scored with the answer key")
                && e.contains("use a new output directory"),
            "{e}"
        );
    }

    // Shards with two keys do not merge; with one, the merge keeps it.
    let audit = tempfile::tempdir().unwrap();
    bench(audit.path(), Some("locomo-mini-audit.json"))
        .await
        .unwrap();
    let merged = tempfile::tempdir().unwrap();
    let e = answer_key::merge_applied(&[dir.path(), audit.path()], merged.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("applied different answer keys"), "{e}");
    answer_key::merge_applied(&[dir.path(), dir.path()], merged.path()).unwrap();
    assert_eq!(
        AnswerKey::read_applied(merged.path()).unwrap(),
        AnswerKey::read_applied(dir.path()).unwrap()
    );
}
