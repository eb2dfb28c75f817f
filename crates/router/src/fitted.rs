//! The fitted policy file: per cell (regime × history-depth bucket × budget
//! bucket) the substrate and top-k that measured best, with the evidence.
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
use std::path::Path;

use submem_core::{MethodId, Regime};

use crate::fit::FitSettings;
use crate::names::RouteNames;
use crate::policy::Depth;
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

    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            QualityMetric::Judge => "judge",
            QualityMetric::F1 => "f1",
            QualityMetric::Coverage => "coverage",
            QualityMetric::RecallVerbatim => "recall_verbatim",
            QualityMetric::Recall => "recall",
        }
    }

    /// Parses a name (`judge`, `f1`, `coverage`, `recall_verbatim`, `recall`).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().replace('-', "_").to_ascii_lowercase();
        Self::PREFERENCE.into_iter().find(|m| m.name() == s)
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
    /// The quality compared.
    pub quality_metric: QualityMetric,
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
