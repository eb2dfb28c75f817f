//! `report.md`'s tables: best and worst marked, n/a, the pictures linked,
//! substrate counters.

use super::*;
use serde_json::{json, Map};

fn run(name: &str, p6: f64, e15: f64) -> RunSummary {
    let mut m = Map::new();
    m.insert("P6".into(), json!(p6));
    m.insert("E15".into(), json!(e15));
    m.insert("E4".into(), json!({"mean": e15 / 10.0, "p50": e15 / 20.0}));
    m.insert("P4".into(), serde_json::Value::Null);
    m.insert("questions".into(), json!(10));
    m.insert("answered".into(), json!(0));
    RunSummary {
        substrate: name.into(),
        family: "Flat".into(),
        dataset: "synthetic".into(),
        budget: 1024,
        k: 10,
        metrics: m,
        per_category: Default::default(),
    }
}

#[test]
fn table_marks_best_and_worst_and_na() {
    let s = Summary {
        runs: vec![
            run("m1", 0.9, 0.5),
            run("m2", 0.5, 0.1),
            run("nomem", 0.0, 0.01),
        ],
        ..Summary::default()
    };
    let md = markdown(&s, &["note".into()]);
    assert!(
        md.contains("| m1 | Flat | n/a | 0.500 ▼ | 0.900 ▲ |"),
        "{md}"
    );
    assert!(
        md.contains("| nomem | Flat | n/a | 0.010 ▲ | 0.000 ▼ |"),
        "{md}"
    );
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &s, &[]).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("scatter.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.lines().any(|l| l.trim() == "m2"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    for f in ["coverage.svg", "fates.svg"] {
        assert!(dir.path().join(f).exists(), "{f}");
        assert!(md.contains(&format!("]({f})")), "{md}");
    }
    assert!(md.contains("![Quality against read latency](scatter.svg)"));
    let back: Summary =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(back, s);
}

#[test]
fn substrate_counters_are_listed_when_kept() {
    let mut m3 = run("m3", 0.2, 0.5);
    m3.metrics.insert(
        "diagnostics".into(),
        serde_json::json!({"write": {"llm_gists": 9}, "read": {"selection_fallbacks": 4}}),
    );
    let s = Summary {
        runs: vec![m3, run("m2", 0.5, 0.1)],
        ..Summary::default()
    };
    let md = markdown(&s, &[]);
    assert!(
        md.contains("- m3: write: llm_gists 9; read: selection_fallbacks 4"),
        "{md}"
    );
    assert!(!md.contains("- m2:"), "{md}");
}
