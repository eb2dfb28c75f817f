//! Why a query went where it went: the regime, the depth and budget buckets,
//! the fitted cell with its evidence, the runtime signals and the decision.
//! [`Explanation`] serialises to JSON (`submem route explain --json`) and
//! displays as a short human-readable report.

use serde::Serialize;
use std::fmt;

use submem_core::Regime;

use crate::fitted::{Cell, CellKey, QualityMetric};
use crate::policy::{Decision, Origin};
use crate::signals::Signals;

/// Where the query fell in a fitted policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellExplanation {
    /// The cell key.
    pub key: CellKey,
    /// The budget bucket as a range of tokens.
    pub budget_range: String,
    /// History tokens / budget (what the depth bucket is cut on).
    pub depth_ratio: f64,
    /// The quality the evidence reports.
    pub quality_metric: QualityMetric,
    /// The cell, `None` when the fit saw no data there.
    pub cell: Option<Cell>,
}

/// A routing decision with its reasons.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// Who asked.
    pub regime: Regime,
    /// Tokens of the namespace's history.
    pub history_tokens: u64,
    /// The query's budget `B`.
    pub budget: usize,
    /// The query's memory allowance.
    pub allowance: usize,
    /// The router's members.
    pub members: Vec<String>,
    /// The member the read goes to (`m1-fill`).
    pub route: String,
    /// The member composed with it, if any.
    pub composed_with: Option<String>,
    /// The fitted cell (`None`: no fitted policy).
    pub cell: Option<CellExplanation>,
    /// Signals measured for this query.
    pub signals: Option<Signals>,
    /// Whether signals may override the choice (else they are only shown).
    pub signals_act: bool,
    /// The decision.
    pub decision: Decision,
}

fn opt(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:.3}"))
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.decision;
        write!(f, "route: {} (top-k {})", self.route, d.top_k)?;
        if let (Some(with), Some((_, share))) = (&self.composed_with, &d.secondary) {
            write!(
                f,
                " + {with} (first part {:.0}% of the allowance)",
                share * 100.0
            )?;
        }
        writeln!(f)?;
        let origin = match d.origin {
            Origin::Rule => "paper-derived rule",
            Origin::Fitted => "fitted policy cell",
            Origin::Signal => "runtime signal",
            Origin::Forced => "fixed composition",
        };
        writeln!(f, "  by:        {origin}: {}", d.reason)?;
        writeln!(f, "  regime:    {}", self.regime)?;
        writeln!(
            f,
            "  budget:    B = {} tokens, memory allowance {} tokens",
            self.budget, self.allowance
        )?;
        writeln!(
            f,
            "  history:   {} tokens (rule depth: {:?})",
            self.history_tokens, d.depth
        )?;
        writeln!(f, "  members:   {}", self.members.join(", "))?;
        match &self.cell {
            None => writeln!(f, "  policy:    no fitted policy; paper-derived rules")?,
            Some(c) => {
                writeln!(
                    f,
                    "  cell:      {} · depth {:?} (history/B = {:.2}) · budget {}",
                    c.key.regime, c.key.depth, c.depth_ratio, c.budget_range
                )?;
                match &c.cell {
                    None => writeln!(f, "  evidence:  none in this cell; fell back to the rules")?,
                    Some(cell) => {
                        writeln!(
                            f,
                            "  evidence:  {} (budgets {:?}), best first:",
                            c.quality_metric.name(),
                            cell.budgets
                        )?;
                        for e in &cell.evidence {
                            write!(
                                f,
                                "    {:<24} k={:<3} n={:<4} quality {:.3}  p50 {:.2} ms",
                                e.spec, e.k, e.n, e.quality, e.p50_ms
                            )?;
                            match &e.excluded {
                                Some(why) => writeln!(f, "  (excluded: {why})")?,
                                None => writeln!(f)?,
                            }
                        }
                    }
                }
            }
        }
        match &self.signals {
            None => writeln!(f, "  signals:   none (no BM25 member)"),
            Some(s) => writeln!(
                f,
                "  signals:   BM25 margin {}, dense/sparse agreement {} ({})",
                opt(s.bm25_margin),
                opt(s.agreement),
                if self.signals_act {
                    "acting"
                } else {
                    "shown only"
                }
            ),
        }
    }
}
