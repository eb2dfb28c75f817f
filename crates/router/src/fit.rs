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
//! `QualityMetric` is chosen automatically as the first of
//! [`QualityMetric::PREFERENCE`] that every routable spec has on at least one
//! training item, unless the settings fix it.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use submem_core::Regime;
use submem_kit::LatencyStats;

use crate::fitted::{
    Cell, CellKey, Choice, Evidence, PolicyFile, QualityMetric, POLICY_FORMAT, POLICY_VERSION,
};
use crate::names::RouteNames;
use crate::policy::Depth;
use crate::split::HoldoutSplit;
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

/// How to fit (stored in the policy file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitSettings {
    /// The metric to compare; `None` picks the first of
    /// [`QualityMetric::PREFERENCE`] every routable spec has.
    #[serde(default)]
    pub metric: Option<QualityMetric>,
    /// Candidates whose median read latency exceeds this are not chosen.
    #[serde(default)]
    pub latency_cap_ms: Option<f64>,
    /// Fewest paired items a candidate needs in a cell.
    pub min_items: usize,
    /// Candidates within this much quality of the best are decided by latency.
    pub quality_margin: f64,
    /// History tokens / budget edges between fits, moderate and long.
    pub depth_edges: [f64; 2],
    /// Budget bucket upper edges (tokens), ascending.
    pub budget_edges: Vec<usize>,
    /// Questions held out of the fit.
    #[serde(default)]
    pub holdout: Option<HoldoutSplit>,
    /// The router members the policy is fitted for (canonical names); only
    /// they are candidates. `None`: every routable substrate measured, which
    /// must then hold at most one per method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<String>>,
}

impl Default for FitSettings {
    fn default() -> Self {
        FitSettings {
            metric: None,
            latency_cap_ms: None,
            min_items: 5,
            quality_margin: 0.0,
            depth_edges: [1.0, 32.0],
            // Puts the usual sweep 2048 / 4096 / 8192 in three buckets.
            budget_edges: vec![3072, 6144],
            holdout: None,
            members: None,
        }
    }
}

impl FitSettings {
    /// Refuses settings no fit or lookup can use.
    pub fn validate(&self) -> Result<(), RouterError> {
        let bad = |m: String| Err(RouterError::BadPolicy(m));
        let [a, b] = self.depth_edges;
        if !(a.is_finite() && b.is_finite() && a > 0.0 && a < b) {
            return bad(format!(
                "depth edges must be positive and ascending, got {a}, {b}"
            ));
        }
        if self.budget_edges.windows(2).any(|w| w[0] >= w[1]) {
            return bad(format!(
                "budget edges must be strictly ascending, got {:?}",
                self.budget_edges
            ));
        }
        if self.min_items == 0 {
            return bad("min_items must be at least 1".into());
        }
        if !(self.quality_margin.is_finite() && self.quality_margin >= 0.0) {
            return bad(format!(
                "quality margin must be ≥ 0, got {}",
                self.quality_margin
            ));
        }
        if self
            .latency_cap_ms
            .is_some_and(|c| !(c.is_finite() && c > 0.0))
        {
            return bad("the latency cap must be a positive number of ms".into());
        }
        if self.holdout.is_some_and(|h| !h.is_valid()) {
            return bad("the held-out share must be in 0..=1".into());
        }
        if self.members.as_ref().is_some_and(Vec::is_empty) {
            return bad("the member list is empty".into());
        }
        Ok(())
    }

    /// Checks the member list against the routable `names`: canonical names,
    /// one per method.
    pub fn check_names(&self, names: &RouteNames) -> Result<(), RouterError> {
        if let Some(members) = &self.members {
            for m in members {
                if names.canonical_name(m) != Some(m.as_str()) {
                    return Err(RouterError::BadPolicy(format!(
                        "member {m:?} is not a canonical routable name ({})",
                        names.known()
                    )));
                }
            }
            one_per_method(members.iter().map(String::as_str), names)?;
        }
        Ok(())
    }

    /// The depth bucket of a history at a budget.
    pub fn depth(&self, history_tokens: u64, budget: usize) -> Depth {
        let ratio = history_tokens as f64 / budget.max(1) as f64;
        if ratio <= self.depth_edges[0] {
            Depth::Fits
        } else if ratio <= self.depth_edges[1] {
            Depth::Moderate
        } else {
            Depth::Long
        }
    }

    /// The budget bucket of a budget.
    pub fn budget_bucket(&self, budget: usize) -> usize {
        self.budget_edges
            .iter()
            .position(|e| budget <= *e)
            .unwrap_or(self.budget_edges.len())
    }

    /// The cell of a query.
    pub fn key_for(&self, regime: Regime, history_tokens: u64, budget: usize) -> CellKey {
        CellKey {
            regime,
            depth: self.depth(history_tokens, budget),
            budget_bucket: self.budget_bucket(budget),
        }
    }

    /// `≤3072`, `3073–6144`, `>6144`.
    pub fn budget_label(&self, bucket: usize) -> String {
        let e = &self.budget_edges;
        match (bucket.checked_sub(1).and_then(|i| e.get(i)), e.get(bucket)) {
            (None, Some(hi)) => format!("≤{hi}"),
            (Some(lo), Some(hi)) => format!("{}–{hi}", lo + 1),
            (Some(lo), None) => format!(">{lo}"),
            (None, None) => "any".into(),
        }
    }
}

/// Refuses two names standing for one method: a router holds one member per
/// method, so a policy choosing between them could not be followed.
fn one_per_method<'a>(
    specs: impl IntoIterator<Item = &'a str>,
    names: &'a RouteNames,
) -> Result<(), RouterError> {
    let mut by_method: BTreeMap<submem_core::MethodId, &str> = BTreeMap::new();
    for name in specs {
        let (Some(method), Some(canonical)) =
            (names.parse_method(name), names.canonical_name(name))
        else {
            continue;
        };
        if let Some(other) = by_method.insert(method.clone(), canonical) {
            if other != canonical {
                return Err(RouterError::BadPolicy(format!(
                    "{other} and {canonical} both implement {method}, and a router holds one member \
per method: name the members to fit for (`route fit --members {canonical},...`)"
                )));
            }
        }
    }
    Ok(())
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
    let metric = match settings.metric {
        Some(m) => m,
        None => QualityMetric::PREFERENCE
            .into_iter()
            .find(|m| {
                specs.iter().all(|s| {
                    train
                        .iter()
                        .any(|o| o.spec == *s && o.scores.get(*m).is_some())
                })
            })
            .ok_or_else(|| {
                RouterError::BadPolicy("no quality metric is defined for every substrate".into())
            })?,
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
        let Some(q) = o.scores.get(metric) else {
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
