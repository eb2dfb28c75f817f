#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Sharded runs merged back: the same items, write records and summary as
//! the unsharded run (timings aside), in its order; a shard directory refuses
//! another shard; a merge refuses shards that are missing, doubled,
//! unfinished, from another run, or holding another shard's records.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use submem::baselines::NoMemory;
use submem::registry::{Registry, SubstrateSpec};
use submem_bench::dataset::synthetic::SyntheticSpec;
use submem_bench::items::{read_jsonl, ItemRecord, WriteRecord};
use submem_bench::runner::{run, Models, RunOptions, RunOutcome, TRAINING_BANK};
use submem_bench::shard::{merge, Shard, ShardDir, ShardRecord};
use submem_bench::summary::summarize;
use submem_bench::Dataset;
use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::test_utils::{test_services, ScriptedLlm};
use submem_core::{Family, Llm, MethodId};

fn dataset(conversations: usize, regime: submem_core::Regime) -> Arc<Dataset> {
    Arc::new(
        SyntheticSpec {
            conversations,
            units: 60,
            questions: 4,
            session_size: 15,
            regime,
            ..SyntheticSpec::default()
        }
        .dataset()
        .unwrap(),
    )
}

/// Test services; a scripted reader (so the question sample matters) unless
/// `memory_llm` is given, which then writes memory instead.
fn models(memory_llm: Option<Arc<dyn Llm>>) -> Arc<Models> {
    let reader: Option<Arc<dyn Llm>> = memory_llm
        .is_none()
        .then(|| Arc::new(ScriptedLlm::new(vec!["I don't know".into()])) as Arc<dyn Llm>);
    Arc::new(Models {
        services: test_services(memory_llm),
        reader,
        judges: vec![],
    })
}

/// A substrate that needs a memory LLM: a run without one skips it.
fn needy() -> SubstrateFactory {
    SubstrateFactory::builder(
        "needy",
        MethodId::from_static("Needy"),
        Family::from_static("test"),
    )
    .summary("needs a memory LLM")
    .llm(LlmUse::Required)
    .build_without_settings(|_| Ok(Arc::new(NoMemory)))
}

async fn run_into(
    data: &Arc<Dataset>,
    specs: &str,
    models: &Arc<Models>,
    opts: &RunOptions,
    out: &Path,
    shard: Option<Shard>,
) -> submem_bench::Result<RunOutcome> {
    run(
        data.clone(),
        SubstrateSpec::parse_list(specs).unwrap(),
        Arc::new(Registry::default().with(needy())),
        models.clone(),
        RunOptions {
            out: out.to_path_buf(),
            shard,
            ..opts.clone()
        },
    )
    .await
}

/// `value` with every timing (wall times, latencies) replaced by a marker.
fn untimed(value: Value) -> Value {
    match value {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| {
                    let timing = k.ends_with("seconds")
                        || k.contains("latency")
                        || ["E2", "E3", "E4", "E14", "E15"].contains(&k.as_str());
                    (k, if timing { "timing".into() } else { untimed(v) })
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(untimed).collect()),
        v => v,
    }
}

fn untimed_all<T: serde::Serialize>(records: &[T]) -> Vec<Value> {
    records
        .iter()
        .map(|r| untimed(serde_json::to_value(r).unwrap()))
        .collect()
}

/// Runs `specs` once whole into `whole` and as `n` shards into `parts/<i>`
/// (shards started in reverse order), and merges the shards.
async fn whole_and_merged(
    data: &Arc<Dataset>,
    specs: &str,
    models: &Arc<Models>,
    opts: &RunOptions,
    dir: &Path,
    n: usize,
) -> (RunOutcome, submem_bench::shard::Merged) {
    let whole = run_into(data, specs, models, opts, &dir.join("whole"), None)
        .await
        .unwrap();
    assert!(whole.failures.is_empty(), "{:?}", whole.failures);
    let mut shard_items = 0;
    for i in (1..=n).rev() {
        let shard = Shard::new(i, n).unwrap();
        let part = dir.join(format!("part{i}"));
        let out = run_into(data, specs, models, opts, &part, Some(shard))
            .await
            .unwrap();
        assert!(out.new_items > 0, "shard {shard} ran nothing");
        shard_items += out.new_items;
    }
    assert_eq!(shard_items, whole.items.len(), "every item in one shard");
    let shards = (1..=n)
        .map(|i| ShardDir::read(&dir.join(format!("part{i}"))).unwrap())
        .collect();
    (whole, merge(shards).unwrap())
}

#[tokio::test]
async fn three_shards_merge_into_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(4, submem_core::Regime::Conversational);
    let opts = RunOptions {
        budgets: vec![256, 1024],
        ks: vec![3, 10],
        // Over the whole run: the first five answerable questions, all in
        // the first two conversations, which land in different shards.
        reader_sample: Some(5),
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    };
    let models = models(None);
    let (whole, merged) =
        whole_and_merged(&data, "recent,m2,nomem", &models, &opts, dir.path(), 3).await;

    let items = merged.item_records();
    assert_eq!(untimed_all(&items), untimed_all(&whole.items));
    assert_eq!(
        untimed_all(&merged.write_records()),
        untimed_all(&whole.writes)
    );
    // 3 substrates x 5 sampled questions x 2 budgets x 2 k.
    assert_eq!(items.iter().filter(|i| i.answered).count(), 3 * 5 * 2 * 2);
    let (a, b) = (
        summarize(&items, &merged.write_records()),
        summarize(&whole.items, &whole.writes),
    );
    assert_eq!(
        untimed(serde_json::to_value(a).unwrap()),
        untimed(serde_json::to_value(b).unwrap())
    );
    assert!(merged.skipped.is_empty() && merged.failures.is_empty());

    // The logs come out as the whole run wrote them, timings aside.
    let out = dir.path().join("merged");
    std::fs::create_dir_all(&out).unwrap();
    merged.write_logs(&out).unwrap();
    let read = |d: &Path| read_jsonl::<ItemRecord>(&d.join("items.jsonl")).unwrap();
    assert_eq!(
        untimed_all(&read(&out)),
        untimed_all(&read(&dir.path().join("whole")))
    );
    let record = ShardRecord::read(&dir.path().join("part2"))
        .unwrap()
        .unwrap();
    assert!(record.finished && record.substrates == ["recent", "m2", "nomem"]);
    assert_eq!(record.conversations.len(), 4);
}

/// In the cross-episode regime every shard builds a substrate's training
/// bank; the merge keeps one, where the whole run logs it.
#[tokio::test]
async fn each_training_bank_is_merged_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(5, submem_core::Regime::Agentic);
    let llm = Arc::new(ScriptedLlm::new(vec![
        "SUCCESS. Strategy: check the nearest container first.".into(),
    ]));
    let opts = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        train_episodes: Some(2),
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    };
    let models = models(Some(llm as Arc<dyn Llm>));
    let (whole, merged) = whole_and_merged(&data, "m7,recent", &models, &opts, dir.path(), 2).await;
    let writes = merged.write_records();
    let banks: Vec<&WriteRecord> = writes
        .iter()
        .filter(|w| w.conversation == TRAINING_BANK)
        .collect();
    assert_eq!(banks.len(), 2, "one bank per substrate");
    assert_eq!(untimed_all(&writes), untimed_all(&whole.writes));
    assert_eq!(
        untimed_all(&merged.item_records()),
        untimed_all(&whole.items)
    );
}

/// A substrate every shard skips is noted once, as the whole run notes it.
#[tokio::test]
async fn a_skipped_substrate_is_noted_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(3, submem_core::Regime::Conversational);
    let opts = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    };
    let models = models(None);
    let (whole, merged) =
        whole_and_merged(&data, "recent,needy", &models, &opts, dir.path(), 2).await;
    assert_eq!(whole.skipped.len(), 1, "{:?}", whole.skipped);
    assert!(whole.skipped[0].contains("needy"), "{:?}", whole.skipped);
    assert_eq!(merged.task_notes(), whole.task_notes());
    for i in 1..=2 {
        let record = ShardRecord::read(&dir.path().join(format!("part{i}")))
            .unwrap()
            .unwrap();
        assert!(!record.skipped.is_empty(), "shard {i} ran a needy task");
    }
}

#[tokio::test]
async fn a_shard_directory_runs_only_its_own_shard() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(2, submem_core::Regime::Conversational);
    let opts = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    };
    let models = models(None);
    let one = Shard::new(1, 3).unwrap();
    let first = run_into(&data, "recent,nomem", &models, &opts, dir.path(), Some(one))
        .await
        .unwrap();
    let two = Shard::new(2, 3).unwrap();
    let err = run_into(&data, "recent,nomem", &models, &opts, dir.path(), Some(two))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds shard 1/3"), "{err}");
    let err = run_into(&data, "recent,nomem", &models, &opts, dir.path(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("the whole run"), "{err}");
    let again = run_into(&data, "recent,nomem", &models, &opts, dir.path(), Some(one))
        .await
        .unwrap();
    assert_eq!((again.resumed, again.new_items), (first.new_items, 0));
}

#[tokio::test]
async fn a_merge_refuses_what_is_not_every_shard_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(2, submem_core::Regime::Conversational);
    let opts = RunOptions {
        budgets: vec![512],
        ks: vec![5],
        progress: false,
        packing_baselines: false,
        ..RunOptions::default()
    };
    let models = models(None);
    let part = |i: usize| dir.path().join(format!("p{i}"));
    for i in 1..=3 {
        let shard = Shard::new(i, 3).unwrap();
        run_into(&data, "recent,nomem", &models, &opts, &part(i), Some(shard))
            .await
            .unwrap();
    }
    let other = dir.path().join("other");
    let shard = Shard::new(2, 3).unwrap();
    run_into(&data, "nomem,recent", &models, &opts, &other, Some(shard))
        .await
        .unwrap();
    let merged = |dirs: &[&Path]| {
        merge(dirs.iter().map(|d| ShardDir::read(d).unwrap()).collect())
            .map(|m| m.items.len())
            .map_err(|e| e.to_string())
    };
    let (p1, p2, p3) = (part(1), part(2), part(3));
    assert_eq!(merged(&[&p3, &p1, &p2]), Ok(2 * 2 * 4));

    let err = merged(&[&p1, &p3]).unwrap_err();
    assert!(err.contains("shard 2/3 missing"), "{err}");
    let err = merged(&[&p1, &p2, &p1]).unwrap_err();
    assert!(err.contains("shard 1/3 is given twice"), "{err}");
    let err = merged(&[&p1, &other, &p3]).unwrap_err();
    assert!(
        err.contains("not shards of one run: substrates recent,nomem against nomem,recent"),
        "{err}"
    );
    let err = ShardDir::read(dir.path()).unwrap_err().to_string();
    assert!(err.contains("holds no shard.json"), "{err}");

    // A shard's record of a task another shard runs (a directory written
    // into by hand, or by two runs) is refused, naming the owner.
    let stray = std::fs::read_to_string(p1.join("items.jsonl")).unwrap();
    let first_line = stray.lines().next().unwrap().to_string();
    let mut items = std::fs::read_to_string(p2.join("items.jsonl")).unwrap();
    items.push_str(&first_line);
    items.push('\n');
    std::fs::write(p2.join("items.jsonl"), items).unwrap();
    let err = merged(&[&p1, &p2, &p3]).unwrap_err();
    assert!(err.contains("which shard 1/3 runs"), "{err}");

    // A shard that was stopped is refused until it is run to the end.
    let mut record = ShardRecord::read(&p3).unwrap().unwrap();
    record.finished = false;
    record.write(&p3).unwrap();
    let err = merged(&[&p1, &p3, &other]).unwrap_err();
    assert!(err.contains("did not finish"), "{err}");
}
