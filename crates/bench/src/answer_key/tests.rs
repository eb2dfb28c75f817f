//! Reading answer keys: both formats on the LoCoMo fixture, and every kind
//! of bad entry an error naming it.

use super::*;
use crate::dataset::synthetic::SyntheticSpec;
use crate::dataset::DatasetKind;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn locomo() -> Dataset {
    Dataset::load(DatasetKind::Locomo, &fixture("locomo-mini.json")).unwrap()
}

/// The key `text` checked against the LoCoMo fixture.
fn key(text: &str) -> Result<AnswerKey> {
    let parsed = parse("key.json", text.as_bytes())?;
    AnswerKey::resolve(KeyId::of("key.json", text.as_bytes()), parsed, &locomo())
}

fn err(text: &str) -> String {
    key(text).unwrap_err().to_string()
}

/// One correction of submem's format.
fn own(entry: &str) -> String {
    format!("{{\"corrections\": [{entry}]}}")
}

/// One entry in the audit's format for fixture question `q`, of `error_type`.
fn audit(id: &str, question: &str, error_type: &str, correct: &str) -> String {
    format!(
        r#"[{{"question_id": "{id}", "question": "{question}", "error_type": "{error_type}",
            "category": 2, "reasoning": "why", "correct_answer": "{correct}"}}]"#
    )
}

const Q1: &str = "When did Melanie paint a sunrise?";

#[test]
fn the_fixture_in_submem_format_replaces_one_answer_and_excludes_one_question() {
    let path = fixture("locomo-mini-answer-key.json");
    let k = AnswerKey::load(&path, &locomo()).unwrap();
    assert_eq!(k.format, KeyFormat::Submem);
    assert_eq!(k.dataset, "locomo");
    assert_eq!((k.entries, k.replaced(), k.excluded()), (2, 1, 1));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(k.id, KeyId::of(path.display().to_string(), &bytes));
    assert_eq!(k.id.sha256.len(), 64);
    let q1 = k.change("conv-26", "q1").unwrap();
    assert_eq!(
        (q1.entry, q1.id.as_str(), q1.gold.as_str()),
        (1, "conv-26/q1", "2022")
    );
    assert_eq!(q1.corrected.as_deref(), Some("the year before 2023"));
    assert_eq!(q1.category, "2:temporal");
    // Named by its text, found by it.
    let q2 = k.change("conv-26", "q2").unwrap();
    assert!(q2.excludes());
    assert_eq!(q2.reason.as_deref(), Some("too open to grade"));
    assert!(k.change("conv-26", "q0").is_none());
    // What a run keeps reads back the same.
    let dir = tempfile::tempdir().unwrap();
    k.write_applied(dir.path()).unwrap();
    assert_eq!(AnswerKey::read_applied(dir.path()).unwrap(), Some(k));
    assert_eq!(
        AnswerKey::read_applied(&dir.path().join("x")).unwrap(),
        None
    );
}

#[test]
fn the_audit_format_replaces_scoring_errors_and_sets_citations_aside() {
    let k = AnswerKey::load(&fixture("locomo-mini-audit.json"), &locomo()).unwrap();
    assert_eq!(k.format, KeyFormat::LocomoAudit);
    assert_eq!((k.entries, k.replaced(), k.excluded()), (2, 1, 0));
    assert_eq!(k.set_aside, BTreeMap::from([("WRONG_CITATION".into(), 1)]));
    let c = &k.changes[0];
    assert_eq!((c.entry, c.id.as_str()), (2, "locomo_0_qa1"));
    assert_eq!(
        (c.conversation.as_str(), c.question_id.as_str()),
        ("conv-26", "q1")
    );
    assert_eq!(c.corrected.as_deref(), Some("the year before 2023"));
    assert!(c
        .reason
        .as_deref()
        .unwrap()
        .starts_with("TEMPORAL_ERROR: Made up"));
    // A file of some samples: the question is found by its text.
    let k = key(&audit("locomo_3_qa1", Q1, "HALLUCINATION", "2021")).unwrap();
    assert_eq!(k.changes[0].conversation, "conv-26");
    assert_eq!(audit::question_id("locomo_12_qa0"), Some((12, 0)));
    for bad in [
        "locomo_1",
        "locomo__qa1",
        "locomo_1_qa",
        "conv-26_qa1",
        "locomo_1_qa2x",
    ] {
        assert_eq!(audit::question_id(bad), None, "{bad}");
    }
}

#[test]
fn an_unknown_question_is_an_error_naming_the_entry() {
    let e = err(&own(
        r#"{"conversation": "conv-99", "question_id": "q1", "exclude": true}"#,
    ));
    assert!(
        e.contains("key.json is not a valid answer key file")
            && e.contains(
                "entry 1 (conv-99/q1): unknown conversation \"conv-99\" (the dataset's: conv-26)"
            ),
        "{e}"
    );
    let e = err(&own(
        r#"{"conversation": "conv-26", "question_id": "q1", "exclude": true},
           {"conversation": "conv-26", "question_id": "q9", "answer": "x"}"#,
    ));
    assert!(
        e.contains(
            "entry 2 (conv-26/q9): unknown question id \"q9\" in conv-26 (its ids run q0 to q3)"
        ),
        "{e}"
    );
    let e = err(&own(
        r#"{"conversation": "conv-26", "question": "Who?", "answer": "x"}"#,
    ));
    assert!(
        e.contains("entry 1 (conv-26/\"Who?\"): conv-26 asks no question \"Who?\""),
        "{e}"
    );
    let e = err(&own(
        r#"{"conversation": "conv-26", "question_id": "q0", "question": "Who?", "answer": "x"}"#,
    ));
    assert!(e.contains("conv-26/q0 asks \"When did Caroline"), "{e}");
    let e = err(&audit("locomo_0_qa9", Q1, "HALLUCINATION", "2021"));
    assert!(
        e.contains(
            "entry 1 (locomo_0_qa9): no conversation of the dataset (1 of them) asks question q9"
        ),
        "{e}"
    );
    assert_eq!(
        e.matches("(the audit numbers the samples").count(),
        1,
        "{e}"
    );
    let e = err(&audit("locomo_0_qa0", Q1, "HALLUCINATION", "2021"));
    assert!(e.contains("entry 1 (locomo_0_qa0)"), "{e}");
}

#[test]
fn a_malformed_entry_is_an_error_naming_it() {
    for (text, needle) in [
        (
            own(r#"{"conversation": "conv-26", "question_id": "q1"}"#),
            "entry 1 (conv-26/q1): give the corrected \"answer\" or \"exclude\": true",
        ),
        (
            own(
                r#"{"conversation": "conv-26", "question_id": "q1", "answer": "x", "exclude": true}"#,
            ),
            "entry 1 (conv-26/q1): give either \"answer\" or \"exclude\": true, not both",
        ),
        (
            own(r#"{"conversation": "conv-26", "question_id": "q1", "answr": "x"}"#),
            "entry 1 (conv-26/q1): unknown field \"answr\"",
        ),
        (
            own(r#"{"conversation": "conv-26", "question_id": "q1", "answer": ["x"]}"#),
            "\"answer\" must be text, not [\"x\"]",
        ),
        (
            own(r#"{"conversation": "conv-26", "question_id": "q1", "answer": "  "}"#),
            "\"answer\" is empty",
        ),
        (
            own(r#"{"question_id": "q1", "answer": "x"}"#),
            "entry 1 (?/q1): \"conversation\" is missing",
        ),
        (
            own(r#"{"conversation": "conv-26", "answer": "x"}"#),
            "name the question by",
        ),
        (own(r#""q1""#), "entry 1: not an object but \"q1\""),
        (
            r#"{"corrections": [], "extra": 1}"#.into(),
            "unknown field \"extra\"",
        ),
        (r#"{"fixes": []}"#.into(), "\"corrections\" is missing"),
        ("3".into(), "expected the LoCoMo audit's list of errors"),
        ("{not json".into(), "invalid JSON"),
        (r#"{"corrections": []}"#.into(), "the file has no entries"),
        (
            audit("locomo_0_q1", Q1, "HALLUCINATION", "x"),
            "entry 1 (locomo_0_q1): \"question_id\" must be a string locomo_<N>_qa<J>",
        ),
        (
            audit("locomo_0_qa1", Q1, "TYPO", "x"),
            "entry 1 (locomo_0_qa1): unknown error_type \"TYPO\" (known: HALLUCINATION,",
        ),
        (
            r#"[{"question_id": "locomo_0_qa1", "question": "Q?", "error_type": "AMBIGUOUS"}]"#
                .into(),
            "entry 1 (locomo_0_qa1): \"correct_answer\" is missing",
        ),
        (
            r#"[{"question_id": "locomo_0_qa1", "error_type": "AMBIGUOUS"}]"#.into(),
            "entry 1 (locomo_0_qa1): \"question\" is missing",
        ),
    ] {
        let e = err(&text);
        assert!(e.contains(needle), "{text}\n{e}");
        assert!(e.contains("key.json"), "{e}");
    }
    // Every problem is listed, not just the first.
    let e = err(&own(
        r#"{"conversation": "a"}, 7, {"conversation": "b", "question": "Q?"}"#,
    ));
    assert!(
        e.contains("3 problems: entry 1") && e.contains("; entry 2") && e.contains("; entry 3"),
        "{e}"
    );
}

#[test]
fn a_key_that_does_not_fit_the_data_is_refused() {
    let one = |fields: &str| own(&format!(r#"{{"conversation": "conv-26", {fields}}}"#));
    for (text, needle) in [
        (
            own(r#"{"conversation": "conv-26", "question_id": "q1", "exclude": true},
                   {"conversation": "conv-26", "question": "When did Melanie paint a sunrise?", "answer": "x"}"#),
            "entry 2 (conv-26/\"When did Melanie paint a sunrise?\"): conv-26/q1 is corrected twice (entry 1 names it too)",
        ),
        (
            one(r#""question_id": "q1", "old_answer": "2021", "answer": "x""#),
            "the key's original answer \"2021\" is not the dataset's \"2022\"",
        ),
        (one(r#""question_id": "q1", "answer": 2022"#), "the corrected answer \"2022\" is the gold answer already"),
        (one(r#""question_id": "q3", "exclude": true"#), "question q3 (5:adversarial) has no gold answer to correct"),
        (
            r#"{"dataset": "longmemeval", "corrections": [{"conversation": "conv-26", "question_id": "q1", "exclude": true}]}"#.into(),
            "the key is for the dataset \"longmemeval\"; the run's is \"locomo\"",
        ),
        (
            audit("locomo_0_qa1", Q1, "HALLUCINATION", "x").replace("\"category\": 2", "\"category\": 4"),
            "the key says category 4, the dataset says 2:temporal",
        ),
        (
            audit("locomo_0_qa1", Q1, "HALLUCINATION", "x").replace("\"category\"", "\"golden_answer\": 2021, \"category\""),
            "the key's original answer \"2021\"",
        ),
    ] {
        let e = err(&text);
        assert!(e.contains(needle), "{text}\n{e}");
    }
    // The audit's format is for LoCoMo.
    let synthetic = SyntheticSpec {
        conversations: 1,
        units: 100,
        questions: 2,
        ..SyntheticSpec::default()
    }
    .dataset()
    .unwrap();
    let text = audit("locomo_0_qa1", Q1, "HALLUCINATION", "x");
    let parsed = parse("k.json", text.as_bytes()).unwrap();
    let e = AnswerKey::resolve(KeyId::of("k.json", b""), parsed, &synthetic)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the LoCoMo audit's format names LoCoMo questions; the dataset is synthetic"),
        "{e}"
    );
}

#[test]
fn a_directory_keeps_to_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let a = AnswerKey::load(&fixture("locomo-mini-answer-key.json"), &locomo()).unwrap();
    let b = AnswerKey::load(&fixture("locomo-mini-audit.json"), &locomo()).unwrap();
    // No items yet: any key, recorded.
    prepare_dir(dir.path(), Some(&a), "locomo", false).unwrap();
    prepare_dir(dir.path(), Some(&a), "locomo", true).unwrap();
    let e = prepare_dir(dir.path(), Some(&b), "locomo", true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("holds items scored with the answer key") && e.contains(&b.id.sha256),
        "{e}"
    );
    let e = prepare_dir(dir.path(), None, "locomo", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("this run has no answer key"), "{e}");
    let e = prepare_dir(dir.path(), Some(&a), "synthetic", false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("checked against the dataset locomo"), "{e}");
    let plain = tempfile::tempdir().unwrap();
    let e = prepare_dir(plain.path(), Some(&a), "locomo", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("scored with no answer key"), "{e}");
}
