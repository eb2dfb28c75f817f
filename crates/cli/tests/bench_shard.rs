#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `submem bench --shard I/N` and `submem bench merge`: the default synthetic
//! set run once whole and as three shards; the merge writes the same
//! items.jsonl, writes.jsonl, summary.json and report.md as the whole run,
//! timings aside. Bad shards, a resume with another shard and a merge of
//! what is not every shard of one run are clear errors.

mod common;
use common::{assert_clean_failure, submem, text};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// LLM-free substrates that need no model file (BM25, BM25 packing, the
/// recency window); `--no-baselines` keeps the dense packings out.
const SUBSTRATES: &str = "m2,m2-fill,recent";

fn bench(out: &Path, shard: Option<&str>) -> Output {
    let mut c = submem();
    c.args(["bench", "--substrates", SUBSTRATES, "--no-baselines", "-q"])
        .args(["--budget", "512,1024", "--k", "5,10", "--out"])
        .arg(out);
    if let Some(s) = shard {
        c.args(["--shard", s]);
    }
    c.output().unwrap()
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

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| untimed(serde_json::from_str(l).unwrap()))
        .collect()
}

fn json(path: &Path) -> Value {
    untimed(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

/// The report with the cells of its timing columns (E15, E4, E3) blanked.
/// Their best/worst marks go with them, which is all timing changes in it.
fn untimed_report(path: &Path) -> String {
    let md = std::fs::read_to_string(path).unwrap();
    let mut timing_columns: Vec<usize> = Vec::new();
    let mut out = String::new();
    for line in md.lines() {
        if line.starts_with("| Substrate |") {
            timing_columns = line
                .split('|')
                .enumerate()
                .filter(|(_, c)| {
                    ["E15 ", "E4 ", "E3 "]
                        .iter()
                        .any(|t| c.trim().starts_with(t))
                })
                .map(|(i, _)| i)
                .collect();
        }
        if line.starts_with("| ") && !timing_columns.is_empty() {
            let cells: Vec<&str> = line
                .split('|')
                .enumerate()
                .map(|(i, c)| {
                    if timing_columns.contains(&i) {
                        " T "
                    } else {
                        c
                    }
                })
                .collect();
            out.push_str(&cells.join("|"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[test]
fn three_shards_merged_equal_one_run_timings_aside() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let o = bench(&whole, None);
    assert!(o.status.success(), "{}", text(&o));
    let shards: Vec<_> = (1..=3)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    for (i, out) in shards.iter().enumerate() {
        let o = bench(out, Some(&format!("{}/3", i + 1)));
        assert!(o.status.success(), "{}", text(&o));
        assert!(out.join("shard.json").exists());
    }
    let sizes: Vec<usize> = shards
        .iter()
        .map(|s| jsonl(&s.join("items.jsonl")).len())
        .collect();
    let items = jsonl(&whole.join("items.jsonl"));
    assert_eq!(sizes.iter().sum::<usize>(), items.len(), "{sizes:?}");
    assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");

    let merged = dir.path().join("merged");
    // In another order than 1, 2, 3: the merge orders them.
    let o = submem()
        .args(["bench", "merge"])
        .args([&shards[2], &shards[0], &shards[1]])
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("# submem bench report"));

    assert_eq!(jsonl(&merged.join("items.jsonl")), items);
    assert_eq!(
        jsonl(&merged.join("writes.jsonl")),
        jsonl(&whole.join("writes.jsonl"))
    );
    assert_eq!(
        json(&merged.join("summary.json")),
        json(&whole.join("summary.json"))
    );
    let report = untimed_report(&whole.join("report.md"));
    assert!(
        report.contains("| m2 |") && report.contains(" T |"),
        "{report}"
    );
    assert_eq!(untimed_report(&merged.join("report.md")), report);
    assert!(merged.join("scatter.svg").exists());
    let mut info = json(&merged.join("run.json"));
    assert_eq!(info["merged_shards"], 3);
    info.as_object_mut().unwrap().remove("merged_shards");
    assert_eq!(info, json(&whole.join("run.json")));

    // A merge may replace an earlier merge, never a run.
    let again = |out: &Path| {
        submem()
            .args(["bench", "merge"])
            .args(&shards)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    assert!(again(&merged).status.success());
    assert_clean_failure(&again(&whole), "holds a run that is not a merge");
    assert_clean_failure(&again(&shards[0]), "is one of the shards");
}

#[test]
fn bad_shards_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, why) in [
        ("0/3", "must be in 1..=3"),
        ("4/3", "must be in 1..=3"),
        ("x/y", "\"x\" is not a whole number"),
        ("2", "expected I/N"),
    ] {
        let o = bench(dir.path(), Some(bad));
        assert_clean_failure(&o, why);
        assert_clean_failure(&o, "--shard");
    }
    assert!(!dir.path().join("items.jsonl").exists());
}

#[test]
fn a_shard_resumes_as_itself_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let o = bench(dir.path(), Some("2/3"));
    assert!(o.status.success(), "{}", text(&o));
    let items = std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap();
    assert_clean_failure(&bench(dir.path(), Some("1/3")), "shard = \"2/3\"");
    assert_clean_failure(&bench(dir.path(), None), "shard = \"2/3\"");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap(),
        items
    );
    let o = bench(dir.path(), Some("2/3"));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("resumed:"), "{}", text(&o));
}

#[test]
fn a_merge_names_what_is_missing_or_mismatched() {
    let dir = tempfile::tempdir().unwrap();
    let shard = |name: &str, shard: &str, seed: &str| {
        let out = dir.path().join(name);
        let o = submem()
            .args([
                "bench",
                "--substrates",
                "recent",
                "-q",
                "--synth-units",
                "120",
            ])
            .args(["--synth-questions", "3", "--seed", seed, "--shard", shard])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        out
    };
    let (a, b) = (shard("a", "1/2", "42"), shard("b", "2/2", "42"));
    let other = shard("other", "2/2", "7");
    let merge = |dirs: &[&Path]| {
        submem()
            .args(["bench", "merge"])
            .args(dirs)
            .arg("--out")
            .arg(dir.path().join("merged"))
            .output()
            .unwrap()
    };
    assert_clean_failure(&merge(&[&a]), "shard 2/2 missing");
    assert_clean_failure(&merge(&[&a, &a]), "shard 1/2 is given twice");
    let o = merge(&[&a, &other]);
    assert_clean_failure(&o, "not shards of one run");
    assert_clean_failure(&o, "seed");
    assert_clean_failure(&merge(&[&a, dir.path()]), "holds no shard.json");
    assert_clean_failure(&merge(&[]), "required");
    assert!(merge(&[&b, &a]).status.success());
}

/// An agentic run (seeded random commands on ALFWorld-format games; the
/// environments come from `scripts/agent-envs.sh install`), whole or a shard.
fn agentic(out: &Path, shard: Option<&str>) -> Output {
    let mut c = submem();
    c.args([
        "-q",
        "bench",
        "--dataset",
        "alfworld",
        "--games",
        "pick:seeds=1-3",
    ])
    .args([
        "--policy",
        "random",
        "--substrates",
        "nomem,m2",
        "--k",
        "1,3",
    ])
    .args(["--steps", "6", "--out"])
    .arg(out);
    if let Some(s) = shard {
        c.args(["--shard", s]);
    }
    c.output().unwrap()
}

#[test]
fn agentic_shards_merge_into_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let o = agentic(&whole, None);
    assert!(o.status.success(), "{}", text(&o));
    let mut shards = Vec::new();
    for s in ["1/2", "2/2"] {
        let d = dir.path().join(s.replace('/', "-of-"));
        let o = agentic(&d, Some(s));
        assert!(o.status.success(), "{}", text(&o));
        shards.push(d);
    }
    let lines = |p: &Path| -> Vec<Value> {
        std::fs::read_to_string(p.join("episodes.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(lines(&shards[0]).len() + lines(&shards[1]).len(), 12);
    // Only one shard given: refused, saying how many there are.
    let merged = dir.path().join("merged");
    let o = submem()
        .args(["bench", "merge"])
        .arg(&shards[0])
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        !o.status.success() && text(&o).contains("the sweep has 2 shards"),
        "{}",
        text(&o)
    );
    let o = submem()
        .args(["bench", "merge"])
        .args(&shards)
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // The same episodes as the whole run: same games, same commands.
    let key = |e: &Value| {
        (
            e["substrate"].to_string(),
            e["game"].to_string(),
            e["k"].to_string(),
            e["step_records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["command"].to_string())
                .collect::<Vec<_>>(),
        )
    };
    let mut a: Vec<_> = lines(&whole).iter().map(key).collect();
    let mut b: Vec<_> = lines(&merged).iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(report.contains("| m2 | within | 1024 | 3 |"), "{report}");
}
