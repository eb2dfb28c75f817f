#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Fitting a policy from hand-made observations, the file round trip and
//! its validation errors.

use submem_core::Regime;
use submem_router::{
    fit, Depth, FitSettings, HoldoutSplit, Observation, PolicyFile, QualityMetric, RouteNames,
    Scores,
};

fn obs(spec: &str, q: usize, budget: usize, k: usize, coverage: f64, ms: f64) -> Observation {
    Observation {
        dataset: "locomo".into(),
        conversation: "c1".into(),
        question_id: format!("q{q}"),
        spec: spec.into(),
        regime: Regime::Conversational,
        history_tokens: 20_000,
        budget,
        k,
        scores: Scores {
            coverage: Some(coverage),
            recall: Some(1.0),
            ..Scores::default()
        },
        read_seconds: ms / 1000.0,
    }
}

/// Ten questions at two budgets: at 2048 BM25 covers most, full context
/// little; at 8192 full context covers most; FlexA-Mem is best everywhere
/// but slow.
fn sample() -> Vec<Observation> {
    let mut v = Vec::new();
    for q in 0..10 {
        v.push(obs("m2", q, 2048, 10, if q < 8 { 1.0 } else { 0.0 }, 1.0));
        v.push(obs("m10", q, 2048, 10, if q < 3 { 1.0 } else { 0.0 }, 0.5));
        v.push(obs("flexa", q, 2048, 10, 1.0, 40.0));
        v.push(obs("m2", q, 8192, 10, if q < 6 { 1.0 } else { 0.0 }, 1.2));
        v.push(obs("m10", q, 8192, 10, if q < 9 { 1.0 } else { 0.0 }, 0.6));
        v.push(obs("flexa", q, 8192, 10, 1.0, 45.0));
        // Not routable as a member: settings, or the router's own rows.
        v.push(obs("flexa:kappa=32", q, 2048, 10, 1.0, 1.0));
        v.push(obs("router", q, 2048, 10, 1.0, 0.1));
    }
    v
}

fn choice(p: &PolicyFile, budget: usize) -> (String, usize) {
    let key = p.key_for(Regime::Conversational, 20_000, budget);
    let c = p.cell(&key).unwrap().choice.as_ref().unwrap();
    (c.substrate.clone(), c.top_k)
}

#[test]
fn picks_the_best_under_the_latency_cap_per_cell() {
    let settings = FitSettings {
        latency_cap_ms: Some(10.0),
        ..FitSettings::default()
    };
    let p = fit(
        &sample(),
        &settings,
        vec!["fixture".into()],
        &RouteNames::papers(),
    )
    .unwrap();
    // Recall is defined for all but the metric order puts coverage first.
    assert_eq!(p.quality_metric, QualityMetric::Coverage);
    assert_eq!(p.cells.len(), 2);
    assert_eq!(choice(&p, 2048), ("m2".into(), 10));
    assert_eq!(choice(&p, 8192), ("m10".into(), 10));
    let cell = p
        .cell(&p.key_for(Regime::Conversational, 20_000, 2048))
        .unwrap();
    assert_eq!(cell.depth, Depth::Moderate);
    assert_eq!(cell.budgets, vec![2048]);
    let flexa = cell.evidence.iter().find(|e| e.spec == "flexa").unwrap();
    assert_eq!((flexa.n, flexa.quality), (10, 1.0));
    assert!(
        flexa.excluded.as_deref().unwrap().contains("cap"),
        "{flexa:?}"
    );
    let kappa = cell
        .evidence
        .iter()
        .find(|e| e.spec == "flexa:kappa=32")
        .unwrap();
    assert!(kappa.excluded.as_deref().unwrap().contains("settings"));
    assert!(cell.evidence.iter().all(|e| e.spec != "router"));
    let m2 = cell.evidence.iter().find(|e| e.spec == "m2").unwrap();
    assert!((m2.quality - 0.8).abs() < 1e-9 && (m2.p50_ms - 1.0).abs() < 1e-9);

    // Without the cap, FlexA-Mem's better coverage wins.
    let p = fit(
        &sample(),
        &FitSettings::default(),
        vec![],
        &RouteNames::papers(),
    )
    .unwrap();
    assert_eq!(choice(&p, 2048).0, "flexa");
}

#[test]
fn a_quality_margin_prefers_the_faster_candidate() {
    let settings = FitSettings {
        latency_cap_ms: Some(10.0),
        quality_margin: 0.5,
        ..FitSettings::default()
    };
    let p = fit(&sample(), &settings, vec![], &RouteNames::papers()).unwrap();
    // m10 (0.3, 0.5 ms) is within 0.5 of m2 (0.8, 1.0 ms).
    assert_eq!(choice(&p, 2048).0, "m10");
}

#[test]
fn held_out_questions_never_shape_the_policy() {
    let split = HoldoutSplit {
        seed: 11,
        share: 0.5,
    };
    let mut v = sample();
    // On held-out questions full context is perfect at 2048; were they used,
    // it would win the cell.
    for o in v.iter_mut() {
        if o.spec == "m10" && split.is_held_out(&o.dataset, &o.conversation, &o.question_id) {
            o.scores.coverage = Some(1.0);
        }
    }
    let settings = FitSettings {
        latency_cap_ms: Some(10.0),
        min_items: 1,
        holdout: Some(split),
        ..FitSettings::default()
    };
    let p = fit(&v, &settings, vec![], &RouteNames::papers()).unwrap();
    let cell = p
        .cell(&p.key_for(Regime::Conversational, 20_000, 2048))
        .unwrap();
    let train = (0..10)
        .filter(|q| !split.is_held_out("locomo", "c1", &format!("q{q}")))
        .count();
    assert!(train > 0 && train < 10);
    assert!(
        cell.evidence.iter().all(|e| e.n == train),
        "{:?}",
        cell.evidence
    );
    let m10 = cell.evidence.iter().find(|e| e.spec == "m10").unwrap();
    assert!(m10.quality < 1.0);
    assert_eq!(p.settings.holdout, Some(split));
}

#[test]
fn too_few_items_leave_the_cell_to_the_rules() {
    let settings = FitSettings {
        min_items: 50,
        ..FitSettings::default()
    };
    let p = fit(&sample(), &settings, vec![], &RouteNames::papers()).unwrap();
    assert!(p.cells.iter().all(|c| c.choice.is_none()));
}

#[test]
fn the_judge_is_preferred_when_every_substrate_has_it() {
    let mut v = sample();
    for o in v.iter_mut() {
        o.scores.judge = Some(if o.spec == "m10" { 1.0 } else { 0.0 });
    }
    let p = fit(&v, &FitSettings::default(), vec![], &RouteNames::papers()).unwrap();
    assert_eq!(p.quality_metric, QualityMetric::Judge);
    assert_eq!(choice(&p, 2048).0, "m10");
    // Forcing a metric overrides the preference.
    let forced = FitSettings {
        metric: Some(QualityMetric::Recall),
        ..FitSettings::default()
    };
    assert_eq!(
        fit(&v, &forced, vec![], &RouteNames::papers())
            .unwrap()
            .quality_metric,
        QualityMetric::Recall
    );
}

#[test]
fn the_file_round_trips_and_bad_files_are_refused_clearly() {
    let p = fit(
        &sample(),
        &FitSettings::default(),
        vec!["runs/a".into()],
        &RouteNames::papers(),
    )
    .unwrap();
    let json = p.to_json().unwrap();
    assert_eq!(PolicyFile::from_json(&json).unwrap(), p);
    let dir = std::env::temp_dir().join(format!("submem-router-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.json");
    std::fs::write(&path, &json).unwrap();
    assert_eq!(PolicyFile::load(&path).unwrap(), p);

    let err = |text: &str| PolicyFile::from_json(text).unwrap_err().to_string();
    assert!(err("{not json").contains("malformed routing policy JSON"));
    assert!(err(r#"{"format":"other","version":1}"#).contains("not a routing policy file"));
    let v2 = json.replacen("\"version\": 1", "\"version\": 2", 1);
    assert!(
        err(&v2).contains("version 2 is not supported"),
        "{}",
        err(&v2)
    );
    let unknown = json.replacen("\"substrate\": \"flexa\"", "\"substrate\": \"m99\"", 1);
    // A name no registry knows is structurally fine, and refused by name.
    let e = PolicyFile::from_json(&unknown)
        .unwrap()
        .check_names(&RouteNames::papers())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"m99\"") && e.contains("cell 0") && e.contains("flexa"),
        "{e}"
    );
    let extra = json.replacen("\"cells\"", "\"colour\": 1, \"cells\"", 1);
    assert!(err(&extra).contains("colour"), "{}", err(&extra));
    let unsorted = json.replacen("3072,", "9000,", 1);
    assert!(err(&unsorted).contains("ascending"), "{}", err(&unsorted));
    let missing = PolicyFile::load(&dir.join("nope.json"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nope.json"), "{missing}");
    std::fs::write(&path, "[]").unwrap();
    let bad = PolicyFile::load(&path).unwrap_err().to_string();
    assert!(
        bad.contains("policy.json") && bad.contains("not a routing policy"),
        "{bad}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn variants_of_one_method_need_a_member_list_and_keep_their_names() {
    let mut v = sample();
    for q in 0..10 {
        v.push(obs("m2-fill", q, 2048, 10, 1.0, 1.5));
        v.push(obs("m2-fill", q, 8192, 10, 1.0, 1.5));
    }
    let err = fit(&v, &FitSettings::default(), vec![], &RouteNames::papers())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("m2 and m2-fill") && err.contains("--members"),
        "{err}"
    );

    let settings = FitSettings {
        latency_cap_ms: Some(10.0),
        members: Some(vec!["m2-fill".into(), "m10".into(), "flexa".into()]),
        ..FitSettings::default()
    };
    let p = fit(&v, &settings, vec![], &RouteNames::papers()).unwrap();
    assert_eq!(choice(&p, 2048), ("m2-fill".into(), 10));
    let cell = p
        .cell(&p.key_for(Regime::Conversational, 20_000, 2048))
        .unwrap();
    assert!(
        cell.evidence.iter().all(|e| e.spec != "m2"),
        "non-members are no candidates"
    );
    let back = PolicyFile::from_json(&p.to_json().unwrap()).unwrap();
    assert_eq!(back.settings.members, settings.members);

    let bad = FitSettings {
        members: Some(vec!["bm25".into()]),
        ..FitSettings::default()
    };
    assert!(bad.validate().is_ok());
    assert!(bad
        .check_names(&RouteNames::papers())
        .unwrap_err()
        .to_string()
        .contains("canonical"));
}

/// An episode of a game as an observation (as `submem route fit` reads
/// `episodes.jsonl`): task success is its quality.
fn episode(spec: &str, game: usize, k: usize, won: bool, ms: f64) -> Observation {
    Observation {
        dataset: "alfworld-agentic".into(),
        conversation: format!("game{game}"),
        question_id: "within".into(),
        spec: spec.into(),
        regime: Regime::Agentic,
        history_tokens: 900,
        budget: 1024,
        k,
        scores: Scores {
            task_success: Some(if won { 1.0 } else { 0.0 }),
            ..Scores::default()
        },
        read_seconds: ms / 1000.0,
    }
}

#[test]
fn qa_runs_and_agentic_runs_fit_one_policy_each_regime_on_its_own_metric() {
    let mut obs = sample();
    for g in 0..6 {
        // m2 wins more games at k 1 than at k 5; m7 wins most at k 1.
        obs.push(episode("m2", g, 1, g < 3, 1.0));
        obs.push(episode("m2", g, 5, g < 1, 1.0));
        obs.push(episode("m7", g, 1, g < 4, 2.0));
        obs.push(episode("m7", g, 5, g < 2, 2.0));
    }
    let p = fit(&obs, &FitSettings::default(), vec![], &RouteNames::papers()).unwrap();
    assert_eq!(p.quality_metric, QualityMetric::Coverage);
    assert_eq!(p.agentic_quality_metric, Some(QualityMetric::TaskSuccess));
    let key = p.key_for(Regime::Agentic, 900, 1024);
    let c = p.cell(&key).unwrap().choice.as_ref().unwrap();
    assert_eq!((c.substrate.as_str(), c.top_k), ("m7", 1));
    let m2 = p
        .cell(&key)
        .unwrap()
        .evidence
        .iter()
        .find(|e| e.spec == "m2" && e.k == 1)
        .unwrap();
    assert!((m2.quality - 0.5).abs() < 1e-9);
    // The conversational cells are as without the episodes.
    assert_eq!(choice(&p, 2048), ("flexa".into(), 10));
    // The file round-trips with its second metric.
    let back = PolicyFile::from_json(&p.to_json().unwrap()).unwrap();
    assert_eq!(back, p);
    // Agentic runs alone: task success is the file's metric.
    let only: Vec<Observation> = obs
        .into_iter()
        .filter(|o| o.regime == Regime::Agentic)
        .collect();
    let p = fit(
        &only,
        &FitSettings::default(),
        vec![],
        &RouteNames::papers(),
    )
    .unwrap();
    assert_eq!(
        (p.quality_metric, p.agentic_quality_metric),
        (QualityMetric::TaskSuccess, None)
    );
}
