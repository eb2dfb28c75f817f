//! The fitted policy file: per cell (regime × history-depth bucket × budget
//! bucket) the substrate and top-k that measured best, with the evidence, and
//! the [`FitSettings`] it was fitted with (which also cut the buckets).
//!
//! The file is written by `submem route fit` from `submem bench` outputs (see
//! [`crate::fit`]) and read by [`crate::RoutedSubstrate::with_fitted`]. Cells
//! without a choice, or whose choice is not a member, fall back to the
//! paper-derived rules of [`crate::RoutingPolicy`].
//!
//! **Buckets.** The history-depth bucket is the ratio of history tokens to the
//! query's budget `B` (`≤ depth_edges[0]` fits, `≤ depth_edges[1]` moderate,
//! longer is long). The rules measure depth against the allowance, but the
//! allowance depends on the reader's prompt, which bench outputs do not
//! record, so the fitted buckets use `B`, known both when fitting and when
//! routing. The budget bucket is the index of the first `budget_edges` entry
//! at or above `B` (`budget_edges.len()` above the last).
//!
//! **Format.** JSON with `"format": "submem-route-policy"` and `"version": 1`;
//! unknown fields, another version, unknown substrate names, unsorted edges,
//! a top-k of 0 or a composition share outside `(0, 1)` are refused with a
//! message naming the cell.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use submem_core::{MethodId, Regime};

use crate::names::RouteNames;
use crate::policy::Depth;
use crate::split::HoldoutSplit;
use crate::RouterError;

/// The `format` field of every policy file.
pub const POLICY_FORMAT: &str = "submem-route-policy";
/// The version this build writes and reads.
pub const POLICY_VERSION: u32 = 1;

/// Which cell a query falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellKey {
    /// Who asks.
    pub regime: Regime,
    /// History depth bucket (history tokens / budget).
    pub depth: Depth,
    /// Budget bucket index into `budget_edges`.
    pub budget_bucket: usize,
}

/// A second substrate sharing the budget with the choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compose {
    /// The second substrate's name.
    pub with: String,
    /// Share of the allowance the first (chosen) substrate renders under;
    /// the second gets what the first leaves.
    pub share: f64,
}

/// What a cell routes to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// Substrate name (`m2`, `flexa`).
    pub substrate: String,
    /// Top-k to ask it for.
    pub top_k: usize,
    /// Optional composition with a second substrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compose: Option<Compose>,
}

/// One candidate measured in a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The bench spec as written (`m2`, `flexa:kappa=32`).
    pub spec: String,
    /// The top-k of those items.
    pub k: usize,
    /// Paired items the quality is the mean over.
    pub n: usize,
    /// Mean quality (the file's `quality_metric`).
    pub quality: f64,
    /// Median read latency, milliseconds.
    pub p50_ms: f64,
    /// Why it could not be chosen (`None`: it could).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

/// One cell of the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// Regime.
    pub regime: Regime,
    /// Depth bucket.
    pub depth: Depth,
    /// Budget bucket index.
    pub budget_bucket: usize,
    /// The budgets seen in the cell (for readers of the file).
    #[serde(default)]
    pub budgets: Vec<usize>,
    /// The choice; `None` when no candidate was eligible.
    pub choice: Option<Choice>,
    /// Every candidate, best first.
    pub evidence: Vec<Evidence>,
}

impl CellKey {
    /// A total order for listing cells (conversational first, then by depth and budget).
    pub fn sort_key(&self) -> (u8, Depth, usize) {
        let regime = match self.regime {
            Regime::Conversational => 0,
            Regime::Agentic => 1,
        };
        (regime, self.depth, self.budget_bucket)
    }
}

impl Cell {
    /// The cell's key.
    pub fn key(&self) -> CellKey {
        CellKey {
            regime: self.regime,
            depth: self.depth,
            budget_bucket: self.budget_bucket,
        }
    }
}

/// Which per-item quality the fit compared, in order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityMetric {
    /// P4, the LLM judge's verdict (1/0).
    Judge,
    /// P2, token F1 of the reader's answer.
    F1,
    /// Evidence coverage: share of the item's gold turns shown whole.
    Coverage,
    /// P6 counting only sources shown verbatim.
    RecallVerbatim,
    /// P6, Recall@k of gold evidence ids at any resolution.
    Recall,
    /// P8, whether an agent's episode reached its goal (1/0): the quality
    /// of agentic runs (`submem bench --dataset textworld|alfworld|…`).
    TaskSuccess,
}

impl QualityMetric {
    /// Every metric, most preferred first: an answer judged by a judge beats
    /// token overlap, which beats whether the evidence was shown at all;
    /// coverage (text actually shown) beats id-based recall, which counts a
    /// turn listed only inside an LLM-written record as found.
    pub const PREFERENCE: [QualityMetric; 5] = [
        QualityMetric::Judge,
        QualityMetric::F1,
        QualityMetric::Coverage,
        QualityMetric::RecallVerbatim,
        QualityMetric::Recall,
    ];

    /// Every metric, for agentic cells, most preferred first: task success
    /// where episodes were played, else what probe questions measured.
    pub const AGENTIC_PREFERENCE: [QualityMetric; 6] = [
        QualityMetric::TaskSuccess,
        QualityMetric::Judge,
        QualityMetric::F1,
        QualityMetric::Coverage,
        QualityMetric::RecallVerbatim,
        QualityMetric::Recall,
    ];

    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            QualityMetric::TaskSuccess => "task_success",
            QualityMetric::Judge => "judge",
            QualityMetric::F1 => "f1",
            QualityMetric::Coverage => "coverage",
            QualityMetric::RecallVerbatim => "recall_verbatim",
            QualityMetric::Recall => "recall",
        }
    }

    /// Parses a name (`judge`, `f1`, `coverage`, `recall_verbatim`,
    /// `recall`, `task_success`).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().replace('-', "_").to_ascii_lowercase();
        Self::AGENTIC_PREFERENCE.into_iter().find(|m| m.name() == s)
    }
}

/// A fitted routing policy, as stored on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Always [`POLICY_FORMAT`].
    pub format: String,
    /// Always [`POLICY_VERSION`] for this build.
    pub version: u32,
    /// The quality compared (in conversational cells, and in agentic ones
    /// unless `agentic_quality_metric` says otherwise).
    pub quality_metric: QualityMetric,
    /// The quality compared in agentic cells, when it differs (task success
    /// from played episodes beside QA runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agentic_quality_metric: Option<QualityMetric>,
    /// The settings of the fit (buckets, cap, split...).
    pub settings: FitSettings,
    /// The bench output directories fitted on.
    #[serde(default)]
    pub sources: Vec<String>,
    /// The cells.
    pub cells: Vec<Cell>,
}

fn bad(msg: impl Into<String>) -> RouterError {
    RouterError::BadPolicy(msg.into())
}

impl PolicyFile {
    /// Parses and validates a policy file's text.
    pub fn from_json(text: &str) -> Result<Self, RouterError> {
        // Check format and version first so an old or foreign file gets the
        // right message rather than a field error.
        let raw: serde_json::Value = serde_json::from_str(text).map_err(RouterError::Json)?;
        match raw.get("format").and_then(serde_json::Value::as_str) {
            Some(POLICY_FORMAT) => {}
            other => {
                return Err(bad(format!(
                    "not a routing policy file (format {other:?}, expected {POLICY_FORMAT:?})"
                )))
            }
        }
        match raw.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(POLICY_VERSION) => {}
            other => {
                return Err(RouterError::UnsupportedVersion {
                    found: other.map_or("none".into(), |v| v.to_string()),
                    supported: POLICY_VERSION,
                })
            }
        }
        let file: PolicyFile = serde_json::from_value(raw).map_err(RouterError::Json)?;
        file.validate()?;
        Ok(file)
    }

    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Self, RouterError> {
        let text = std::fs::read_to_string(path).map_err(|source| RouterError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text).map_err(|e| RouterError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// The file as pretty JSON.
    pub fn to_json(&self) -> Result<String, RouterError> {
        serde_json::to_string_pretty(self).map_err(RouterError::Json)
    }

    /// Checks every invariant the router relies on.
    pub fn validate(&self) -> Result<(), RouterError> {
        self.settings.validate()?;
        let mut seen = std::collections::HashSet::new();
        for (i, cell) in self.cells.iter().enumerate() {
            let at = format!(
                "cell {i} ({} {:?} budget bucket {})",
                cell.regime, cell.depth, cell.budget_bucket
            );
            if !seen.insert(cell.key()) {
                return Err(bad(format!("{at} appears twice")));
            }
            if cell.budget_bucket > self.settings.budget_edges.len() {
                return Err(bad(format!(
                    "{at}: budget bucket out of range (there are {} edges)",
                    self.settings.budget_edges.len()
                )));
            }
            let Some(choice) = &cell.choice else { continue };
            if choice.top_k == 0 {
                return Err(bad(format!("{at}: top_k must be at least 1")));
            }
            if let Some(c) = &choice.compose {
                if !(c.share > 0.0 && c.share < 1.0) {
                    return Err(bad(format!(
                        "{at}: composition share must be in (0, 1), got {}",
                        c.share
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks that every substrate the file names is in `names` (the
    /// registry's routable names), and that its member list, if any, names
    /// canonical routable substrates, one per method.
    pub fn check_names(&self, names: &RouteNames) -> Result<(), RouterError> {
        self.settings.check_names(names)?;
        for (i, cell) in self.cells.iter().enumerate() {
            let Some(choice) = &cell.choice else { continue };
            let at = format!(
                "cell {i} ({} {:?} budget bucket {})",
                cell.regime, cell.depth, cell.budget_bucket
            );
            let unknown = |name: &str| RouterError::UnknownSubstrate {
                name: name.to_string(),
                at: at.clone(),
                known: names.known(),
            };
            names
                .parse_method(&choice.substrate)
                .ok_or_else(|| unknown(&choice.substrate))?;
            if let Some(c) = &choice.compose {
                names
                    .parse_method(&c.with)
                    .ok_or_else(|| unknown(&c.with))?;
            }
        }
        Ok(())
    }

    /// The cell a query falls in.
    pub fn key_for(&self, regime: Regime, history_tokens: u64, budget: usize) -> CellKey {
        self.settings.key_for(regime, history_tokens, budget)
    }

    /// The cell with `key`, if the file has one.
    pub fn cell(&self, key: &CellKey) -> Option<&Cell> {
        self.cells.iter().find(|c| c.key() == *key)
    }

    /// A human label for a budget bucket (`≤3072`, `3073–6144`, `>6144`).
    pub fn budget_label(&self, bucket: usize) -> String {
        self.settings.budget_label(bucket)
    }
}

/// The method and share of a validated composition.
pub(crate) fn compose_of(choice: &Choice, names: &RouteNames) -> Option<(MethodId, f64)> {
    let c = choice.compose.as_ref()?;
    Some((names.parse_method(&c.with)?, c.share))
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
pub(crate) fn one_per_method<'a>(
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
