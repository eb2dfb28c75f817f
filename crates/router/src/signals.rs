//! Cheap runtime signals that may refine a read's choice: how clearly BM25
//! separates its best hit from the next (top-score margin), and how much
//! dense and sparse retrieval agree (overlap of their top-k source ids).
//!
//! Computing them costs one BM25 read and, for the agreement, one dense read
//! (a query embedding and an index search) before the chosen member's read.
//! The rule they drive is deliberately simple: when both retrievers agree on
//! at least `min_agreement` of their top-k and BM25's margin is at least
//! `min_margin`, the lexical evidence is unambiguous and the read goes to
//! `confident` (BM25 by default: the cheapest member that keeps raw text).
//! The signals are off unless configured; `submem route eval` measures
//! whether they help on held-out questions (see the crate docs).

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

use crate::paper;
use submem_core::{MethodId, Recall};

/// Settings of the signal rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalSettings {
    /// Top-k of the probe reads.
    pub k: usize,
    /// Least Jaccard overlap of dense and sparse top-k for a confident read.
    pub min_agreement: f64,
    /// Least relative BM25 margin `(s1 − s2) / s1` for a confident read.
    pub min_margin: f64,
    /// Where confident reads go.
    pub confident: MethodId,
}

impl Default for SignalSettings {
    fn default() -> Self {
        SignalSettings {
            k: 5,
            min_agreement: 0.4,
            min_margin: 0.1,
            confident: paper::M2,
        }
    }
}

submem_core::setters!(SignalSettings {
    with_k => k: usize,
    with_min_agreement => min_agreement: f64,
    with_min_margin => min_margin: f64,
});

/// Signals measured for one query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// `(s1 − s2) / s1` of BM25's two best scores (`None`: fewer than two hits or no BM25 member).
    pub bm25_margin: Option<f64>,
    /// Jaccard overlap of dense and sparse top-k source ids (`None`: a member missing or both empty).
    pub agreement: Option<f64>,
}

impl Signals {
    /// Computes the signals from BM25's and the dense member's probe recalls.
    pub fn measure(sparse: Option<&Recall>, dense: Option<&Recall>, k: usize) -> Self {
        let bm25_margin = sparse.and_then(|r| {
            let mut scores: Vec<f64> = r.sources.iter().map(|s| f64::from(s.score)).collect();
            scores.sort_by(|a, b| b.total_cmp(a));
            match scores.as_slice() {
                [s1, s2, ..] if *s1 > 0.0 => Some((s1 - s2) / s1),
                _ => None,
            }
        });
        let top = |r: &Recall| -> HashSet<String> {
            let mut hits = r.sources.clone();
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            hits.into_iter().take(k).map(|s| s.source_id).collect()
        };
        let agreement = match (sparse, dense) {
            (Some(s), Some(d)) => {
                let (a, b) = (top(s), top(d));
                let union = a.union(&b).count();
                (union > 0).then(|| a.intersection(&b).count() as f64 / union as f64)
            }
            _ => None,
        };
        Signals {
            bm25_margin,
            agreement,
        }
    }

    /// Whether the signals call for a confident read under `settings`.
    pub fn confident(&self, settings: &SignalSettings) -> bool {
        matches!((self.agreement, self.bm25_margin), (Some(a), Some(m))
            if a >= settings.min_agreement && m >= settings.min_margin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::{Resolution, SourceHit};

    fn r(hits: &[(&str, f32)]) -> Recall {
        Recall {
            sources: hits
                .iter()
                .map(|(id, s)| SourceHit {
                    source_id: (*id).into(),
                    score: *s,
                    resolution: Resolution::Raw,
                })
                .collect(),
            ..Recall::default()
        }
    }

    #[test]
    fn margin_and_agreement() {
        let sparse = r(&[("a", 2.0), ("b", 1.0), ("c", 0.5)]);
        let dense = r(&[("a", 0.9), ("c", 0.8), ("d", 0.1)]);
        let s = Signals::measure(Some(&sparse), Some(&dense), 2);
        assert_eq!(s.bm25_margin, Some(0.5));
        // top-2: {a, b} vs {a, c}: 1 of 3.
        assert!((s.agreement.unwrap() - 1.0 / 3.0).abs() < 1e-9);
        assert!(!s.confident(&SignalSettings::default()));
        assert!(s.confident(&SignalSettings::default().with_min_agreement(0.3)));
        let none = Signals::measure(None, Some(&dense), 2);
        assert_eq!(none, Signals::default());
    }
}
