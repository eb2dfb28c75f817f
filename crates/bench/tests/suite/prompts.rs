#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A run with its own reader and judge templates: the reader is asked with
//! the reader template, the judge with the judge template, its replies read
//! by the custom rule, and the memory gets the room the template leaves.

use std::sync::Arc;

use submem::registry::{Registry, SubstrateSpec};
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::prompt::{JudgeTemplate, ReaderTemplate};
use submem_bench::reader::ReaderSettings;
use submem_bench::runner::{run, Judge, Models, RunOptions};
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{Llm, Role};

#[tokio::test]
async fn the_reader_and_judge_are_asked_with_the_runs_templates() {
    let dataset = Arc::new(
        SyntheticSpec {
            conversations: 1,
            units: 120,
            questions: 3,
            session_size: 20,
            ..SyntheticSpec::default()
        }
        .dataset()
        .unwrap(),
    );
    let reader_llm = Arc::new(ScriptedLlm::new(vec!["a red Fiat".into()]));
    let judge_llm = Arc::new(ScriptedLlm::new(vec!["Yes, it is not WRONG".into()]));
    let models = Arc::new(Models {
        services: test_services(None),
        reader: Some(reader_llm.clone() as Arc<dyn Llm>),
        judges: vec![Judge::new("judge", judge_llm.clone() as Arc<dyn Llm>)],
    });
    let reader = ReaderTemplate::from_text(
        "short.txt",
        "\n---\n<notes>\n{memory}\n</notes>\n{if date}\n({date})\n{end}\nQ: {question}\nA:\n",
    )
    .unwrap();
    let judge = JudgeTemplate::from_text(
        "judge.txt",
        "Q: {question}\nGold: {gold}\nGot: {answer}\nSame?",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = |out: &std::path::Path, custom: bool| RunOptions {
        budgets: vec![256],
        ks: vec![10],
        out: out.to_path_buf(),
        progress: false,
        packing_baselines: false,
        reader: ReaderSettings {
            prompt: if custom {
                reader.clone()
            } else {
                ReaderTemplate::builtin()
            },
            ..ReaderSettings::default()
        },
        judge_prompt: if custom {
            judge.clone()
        } else {
            JudgeTemplate::builtin()
        },
        ..RunOptions::default()
    };
    let specs = SubstrateSpec::parse_list("recent").unwrap();
    let registry = Arc::new(Registry::default());
    let out = run(
        dataset.clone(),
        specs.clone(),
        registry.clone(),
        models.clone(),
        opts(&dir.path().join("custom"), true),
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    let asked = reader_llm.requests();
    assert!(!asked.is_empty());
    for req in &asked {
        assert_eq!(req.messages.len(), 1, "a blank system section sends none");
        assert_eq!(req.messages[0].role, Role::User);
        let user = &req.messages[0].content;
        assert!(
            user.starts_with("<notes>\n") && user.ends_with("\nA:"),
            "{user}"
        );
        assert!(
            user.contains("</notes>\nQ: ") || user.contains("</notes>\n("),
            "{user}"
        );
    }
    // Every answer was judged with the template, and so was every probe of
    // the judge checks.
    let judged = judge_llm.requests();
    assert_eq!(judged.len(), asked.len() + out.judge_checks.len());
    assert!(!out.judge_checks.is_empty());
    let answers = judged
        .iter()
        .filter(|r| r.messages[0].content.ends_with("\nGot: a red Fiat\nSame?"))
        .count();
    assert_eq!(answers, asked.len());
    for req in &judged {
        let prompt = &req.messages[0].content;
        assert!(
            prompt.starts_with("Q: ") && prompt.ends_with("\nSame?"),
            "{prompt}"
        );
    }
    for r in &out.judge_checks {
        assert!(judged.iter().any(|q| q.messages[0]
            .content
            .ends_with(&format!("\nGot: {}\nSame?", r.probe.answer))));
    }
    // The first word decides: "Yes" although the reply ends with WRONG.
    assert!(out
        .items
        .iter()
        .filter(|i| i.answered)
        .all(|i| i.judge == Some(true)));

    // The built-in prompt, longer by its system message, leaves the memory
    // less room.
    let builtin = run(
        dataset,
        specs,
        registry,
        models,
        opts(&dir.path().join("builtin"), false),
    )
    .await
    .unwrap();
    let shown = |items: &[submem_bench::items::ItemRecord]| -> usize {
        items.iter().map(|i| i.retrieved_tokens).sum()
    };
    assert!(shown(&out.items) > shown(&builtin.items));
    // ...and its judge reads the same reply by the Mem0 rubric where that is
    // the question's (the last label: WRONG).
    assert!(builtin.items.iter().any(|i| i.judge == Some(false)));
}
