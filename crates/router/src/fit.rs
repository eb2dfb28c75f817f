//! Fitting a [`PolicyFile`] from measured observations (one per substrate ×
//! question × budget × k, as `submem bench` writes them to `items.jsonl`).
//!
//! Per cell and candidate (bench spec × k) the quality is the mean of the
//! file's [`QualityMetric`] over the cell's **paired** questions — those every
//! candidate of the cell answered with that metric defined — so that no
//! candidate wins by being measured on easier questions. A candidate is
//! eligible when its spec names a routable substrate built with default
//! settings (the router builds its members with defaults), it has at least
//! `min_items` paired items, and its median read latency is within
//! `latency_cap_ms`. The choice is the eligible candidate of highest
//! quality; candidates within `quality_margin` of it are decided by the lower
//! median latency, then by name. Questions held out by `holdout` are never
//! fitted on.
//!
//! `QualityMetric` is chosen automatically per regime, unless the settings
//! fix one for both: for conversational cells the first of
//! [`QualityMetric::PREFERENCE`], for agentic cells the first of
//! [`QualityMetric::AGENTIC_PREFERENCE`] (task success first, when episodes
//! were played), that every routable spec measured in that regime has on at
//! least one training item. So QA runs and agentic runs fit one policy: its
//! agentic cells (and their `k`) come from measured task success.

use std::collections::{BTreeMap, BTreeSet};

use submem_core::Regime;
use submem_kit::LatencyStats;

use crate::fitted::{
    one_per_method, Cell, CellKey, Choice, Evidence, FitSettings, PolicyFile, QualityMetric,
    POLICY_FORMAT, POLICY_VERSION,
};
use crate::names::RouteNames;
use crate::policy::Depth;
use crate::RouterError;

/// Per candidate (substrate, k): each question's (quality, read seconds).
type Candidates<'a> = BTreeMap<(&'a str, usize), BTreeMap<Question, (f64, f64)>>;

/// Per-item quality values (`None` where undefined).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scores {
    /// P4 verdict as 1/0.
    pub judge: Option<f64>,
    /// P2.
    pub f1: Option<f64>,
    /// Gold turns shown whole / gold turns.
    pub coverage: Option<f64>,
    /// P6 verbatim.
    pub recall_verbatim: Option<f64>,
    /// P6.
    pub recall: Option<f64>,
    /// P8 task success of an episode as 1/0.
    pub task_success: Option<f64>,
}

impl Scores {
    /// The value of `metric`.
    pub fn get(&self, metric: QualityMetric) -> Option<f64> {
        match metric {
            QualityMetric::Judge => self.judge,
            QualityMetric::F1 => self.f1,
            QualityMetric::Coverage => self.coverage,
            QualityMetric::RecallVerbatim => self.recall_verbatim,
            QualityMetric::Recall => self.recall,
            QualityMetric::TaskSuccess => self.task_success,
        }
    }
}

/// One measured item.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Dataset name.
    pub dataset: String,
    /// Conversation id.
    pub conversation: String,
    /// Question id.
    pub question_id: String,
    /// Bench spec as written.
    pub spec: String,
    /// Who asked.
    pub regime: Regime,
    /// Tokens of the conversation's history.
    pub history_tokens: u64,
    /// Budget `B`.
    pub budget: usize,
    /// Top-k.
    pub k: usize,
    /// Quality values.
    pub scores: Scores,
    /// Read latency, seconds.
    pub read_seconds: f64,
}

/// Whether a spec can be a router member: a routable name without settings.
fn routable(spec: &str, names: &RouteNames) -> Result<(), String> {
    let (name, settings) = spec.split_once(':').unwrap_or((spec, ""));
    if names.parse_method(name).is_none() {
        return Err(format!("{name:?} is not a routable substrate"));
    }
    if !settings.trim().is_empty() {
        return Err("built with settings; router members use defaults".into());
    }
    Ok(())
}

type Question = (String, String, String);

/// Fits a policy on `observations` (held-out questions are skipped), among
/// the substrates `names` calls routable.
pub fn fit(
    observations: &[Observation],
    settings: &FitSettings,
    sources: Vec<String>,
    names: &RouteNames,
) -> Result<PolicyFile, RouterError> {
    settings.validate()?;
    settings.check_names(names)?;
    let train: Vec<&Observation> = observations
        .iter()
        .filter(|o| {
            !settings
                .holdout
                .is_some_and(|h| h.is_held_out(&o.dataset, &o.conversation, &o.question_id))
        })
        .collect();
    let is_member = |spec: &str| {
        settings.members.as_ref().is_none_or(|m| {
            names
                .canonical_name(spec)
                .is_some_and(|c| m.iter().any(|x| x == c))
        })
    };
    let specs: BTreeSet<&str> = train
        .iter()
        .map(|o| o.spec.as_str())
        .filter(|s| routable(s, names).is_ok() && is_member(s))
        .collect();
    one_per_method(specs.iter().copied(), names)?;
    if specs.is_empty() {
        return Err(RouterError::BadPolicy(
            "no training items of a routable substrate (m1, m2, m10, flexa...)".into(),
        ));
    }
    let metric_for = |regime: Regime, preference: &[QualityMetric]| -> Option<QualityMetric> {
        let in_regime: BTreeSet<&str> = specs
            .iter()
            .copied()
            .filter(|s| train.iter().any(|o| o.spec == *s && o.regime == regime))
            .collect();
        if in_regime.is_empty() {
            return None;
        }
        preference.iter().copied().find(|m| {
            in_regime.iter().all(|s| {
                train
                    .iter()
                    .any(|o| o.spec == *s && o.regime == regime && o.scores.get(*m).is_some())
            })
        })
    };
    let no_metric = |regime: &str| {
        RouterError::BadPolicy(format!(
            "no quality metric is defined for every substrate of the {regime} runs"
        ))
    };
    let has = |regime: Regime| train.iter().any(|o| o.regime == regime);
    let (metric, agentic_metric) = match settings.metric {
        Some(m) => (m, None),
        None => {
            let conversational = if has(Regime::Conversational) {
                Some(
                    metric_for(Regime::Conversational, &QualityMetric::PREFERENCE)
                        .ok_or_else(|| no_metric("conversational"))?,
                )
            } else {
                None
            };
            let agentic = if has(Regime::Agentic) {
                Some(
                    metric_for(Regime::Agentic, &QualityMetric::AGENTIC_PREFERENCE)
                        .ok_or_else(|| no_metric("agentic"))?,
                )
            } else {
                None
            };
            match (conversational, agentic) {
                (Some(c), Some(a)) if a != c => (c, Some(a)),
                (Some(c), _) => (c, None),
                (None, Some(a)) => (a, None),
                (None, None) => return Err(no_metric("training")),
            }
        }
    };
    // cell -> candidate (spec, k) -> question -> (quality, latency)
    type Candidates<'a> = BTreeMap<(&'a str, usize), BTreeMap<Question, (f64, f64)>>;
    type CellData<'a> = (CellKey, BTreeSet<usize>, Candidates<'a>);
    let mut cells: BTreeMap<(u8, Depth, usize), CellData> = BTreeMap::new();
    for o in &train {
        let name = o.spec.split(':').next().unwrap_or("");
        if names.parse_method(name).is_none() || !is_member(name) {
            continue; // the router's own items, baselines, non-members
        }
        let m = match (o.regime, agentic_metric) {
            (Regime::Agentic, Some(a)) => a,
            _ => metric,
        };
        let Some(q) = o.scores.get(m) else {
            continue;
        };
        let key = settings.key_for(o.regime, o.history_tokens, o.budget);
        let (_, budgets, cands) = cells
            .entry(key.sort_key())
            .or_insert_with(|| (key, BTreeSet::new(), BTreeMap::new()));
        budgets.insert(o.budget);
        cands.entry((o.spec.as_str(), o.k)).or_default().insert(
            (
                o.dataset.clone(),
                o.conversation.clone(),
                o.question_id.clone(),
            ),
            (q, o.read_seconds),
        );
    }
    let cells = cells
        .into_values()
        .map(|(key, budgets, cands)| fit_cell(key, budgets, &cands, settings, names))
        .collect();
    let file = PolicyFile {
        format: POLICY_FORMAT.into(),
        version: POLICY_VERSION,
        quality_metric: metric,
        agentic_quality_metric: agentic_metric,
        settings: settings.clone(),
        sources,
        cells,
    };
    file.validate()?;
    Ok(file)
}

fn fit_cell(
    key: CellKey,
    budgets: BTreeSet<usize>,
    cands: &Candidates<'_>,
    settings: &FitSettings,
    names: &RouteNames,
) -> Cell {
    // Pair on the questions every candidate has.
    let mut common: Option<BTreeSet<&Question>> = None;
    for items in cands.values() {
        let qs: BTreeSet<&Question> = items.keys().collect();
        common = Some(match common {
            None => qs,
            Some(c) => c.intersection(&qs).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    let mut evidence: Vec<Evidence> = cands
        .iter()
        .map(|((spec, k), items)| {
            let paired: Vec<(f64, f64)> = common
                .iter()
                .filter_map(|q| items.get(*q))
                .copied()
                .collect();
            let n = paired.len();
            let quality = if n == 0 {
                0.0
            } else {
                paired.iter().map(|p| p.0).sum::<f64>() / n as f64
            };
            let lat: Vec<f64> = paired.iter().map(|p| p.1).collect();
            let p50_ms = if lat.is_empty() {
                0.0
            } else {
                LatencyStats::from_samples(&lat).p50 * 1000.0
            };
            let excluded = routable(spec, names).err().or_else(|| {
                if n < settings.min_items {
                    Some(format!(
                        "{n} paired items < min_items {}",
                        settings.min_items
                    ))
                } else {
                    settings
                        .latency_cap_ms
                        .filter(|cap| p50_ms > *cap)
                        .map(|cap| format!("p50 {p50_ms:.2} ms > cap {cap} ms"))
                }
            });
            Evidence {
                spec: (*spec).to_string(),
                k: *k,
                n,
                quality,
                p50_ms,
                excluded,
            }
        })
        .collect();
    let rank = |a: &Evidence, b: &Evidence| {
        a.excluded
            .is_some()
            .cmp(&b.excluded.is_some())
            .then(b.quality.total_cmp(&a.quality))
            .then(a.p50_ms.total_cmp(&b.p50_ms))
            .then(a.spec.cmp(&b.spec))
            .then(a.k.cmp(&b.k))
    };
    evidence.sort_by(rank);
    let choice = evidence
        .first()
        .filter(|e| e.excluded.is_none())
        .map(|best| {
            let fastest_close = evidence
                .iter()
                .filter(|e| {
                    e.excluded.is_none() && best.quality - e.quality <= settings.quality_margin
                })
                .min_by(|a, b| a.p50_ms.total_cmp(&b.p50_ms).then(rank(a, b)))
                .unwrap_or(best);
            let name = fastest_close.spec.split(':').next().unwrap_or("");
            Choice {
                substrate: names.canonical_name(name).unwrap_or(name).to_string(),
                top_k: fastest_close.k,
                compose: None,
            }
        });
    Cell {
        regime: key.regime,
        depth: key.depth,
        budget_bucket: key.budget_bucket,
        budgets: budgets.into_iter().collect(),
        choice,
        evidence,
    }
}
