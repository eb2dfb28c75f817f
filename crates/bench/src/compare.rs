//! Paired comparison of two substrates from an existing run directory
//! (`submem compare`): items are paired on (dataset, conversation, question,
//! budget, k); the score is the LLM judge (P4) when both sides were judged,
//! else SubEM (P12) when both were answered, else Recall@k (P6, an item
//! counting as a success for McNemar only when all its gold evidence is
//! shown).

use serde::Serialize;
use std::collections::HashMap;
use std::fmt;

use crate::items::ItemRecord;
use crate::metrics::{mcnemar_paired, paired_bootstrap, BootstrapCi, McNemar};
use crate::{BenchError, Result};

/// Bootstrap resamples.
pub const RESAMPLES: usize = 10_000;
/// Bootstrap seed (fixed so reports are reproducible).
pub const SEED: u64 = 20_240_601;

/// The outcome of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// First substrate.
    pub a: String,
    /// Second substrate.
    pub b: String,
    /// The metric compared (`P4`, `P12` or `P6`).
    pub metric: &'static str,
    /// Paired items.
    pub pairs: usize,
    /// Mean score of A.
    pub mean_a: f64,
    /// Mean score of B.
    pub mean_b: f64,
    /// Exact McNemar test on binary outcomes.
    pub mcnemar: McNemar,
    /// 95 % paired bootstrap interval of mean(A) − mean(B).
    pub bootstrap: BootstrapCi,
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} vs {} on {} paired items, metric {}",
            self.a, self.b, self.pairs, self.metric
        )?;
        writeln!(
            f,
            "  mean {}: {:.4}   mean {}: {:.4}",
            self.a, self.mean_a, self.b, self.mean_b
        )?;
        writeln!(
            f,
            "  McNemar exact: b = {} (only {} right), c = {} (only {} right), two-sided p = {:.4}",
            self.mcnemar.b, self.a, self.mcnemar.c, self.b, self.mcnemar.p_value
        )?;
        write!(
            f,
            "  paired bootstrap ({} resamples, seed {SEED}): difference {:+.4}, 95% CI [{:+.4}, {:+.4}]",
            self.bootstrap.resamples, self.bootstrap.difference, self.bootstrap.low, self.bootstrap.high
        )
    }
}

type PairKey = (String, String, String, usize, usize);

fn key(i: &ItemRecord) -> PairKey {
    (
        i.key.dataset.clone(),
        i.key.conversation.clone(),
        i.key.question_id.clone(),
        i.key.budget,
        i.key.k,
    )
}

/// A per-item score (`None` where undefined).
pub type Scorer = fn(&ItemRecord) -> Option<f64>;

type Pairs<'a> = Vec<(&'a ItemRecord, &'a ItemRecord)>;

fn pair_items<'a>(items: &'a [ItemRecord], a: &str, b: &str) -> Result<Pairs<'a>> {
    let side = |name: &str| -> HashMap<PairKey, &ItemRecord> {
        items
            .iter()
            .filter(|i| i.key.substrate == name)
            .map(|i| (key(i), i))
            .collect()
    };
    let (sa, sb) = (side(a), side(b));
    let known = || {
        let mut names: Vec<&str> = items.iter().map(|i| i.key.substrate.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(", ")
    };
    for (name, s) in [(a, &sa), (b, &sb)] {
        if s.is_empty() {
            return Err(BenchError::InvalidOption(format!(
                "no items for substrate {name:?} in this run; it has: {}",
                known()
            )));
        }
    }
    let mut pairs: Pairs<'a> = sa
        .iter()
        .filter_map(|(k, x)| sb.get(k).map(|y| (*x, *y)))
        .collect();
    pairs.sort_by_key(|(x, _)| key(x));
    if pairs.is_empty() {
        return Err(BenchError::InvalidOption(format!(
            "{a} and {b} share no items (same questions, budget and k)"
        )));
    }
    Ok(pairs)
}

/// Compares substrates `a` and `b` over `items`.
pub fn compare(items: &[ItemRecord], a: &str, b: &str) -> Result<Comparison> {
    let pairs = pair_items(items, a, b)?;
    let judge: Scorer = |i| i.judge.map(|j| f64::from(u8::from(j)));
    let subem: Scorer = |i| i.sub_em;
    let recall: Scorer = |i| i.recall_at_k;
    let (metric, score): (&'static str, Scorer) = [("P4", judge), ("P12", subem), ("P6", recall)]
        .into_iter()
        .find(|(_, f)| {
            pairs
                .iter()
                .filter(|(x, y)| f(x).is_some() && f(y).is_some())
                .count()
                > 0
        })
        .ok_or_else(|| BenchError::InvalidOption("no metric is defined on both sides".into()))?;
    finish(a, b, metric, score, &pairs)
}

/// Compares `a` and `b` on a given per-item score named `metric` (e.g.
/// evidence coverage, which P6 overstates for record-listing substrates);
/// an item counts as a success for McNemar when its score is 1.
pub fn compare_on(
    items: &[ItemRecord],
    a: &str,
    b: &str,
    metric: &'static str,
    score: Scorer,
) -> Result<Comparison> {
    let pairs = pair_items(items, a, b)?;
    finish(a, b, metric, score, &pairs)
}

fn finish(
    a: &str,
    b: &str,
    metric: &'static str,
    score: Scorer,
    pairs: &Pairs<'_>,
) -> Result<Comparison> {
    let scored: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|(x, y)| Some((score(x)?, score(y)?)))
        .collect();
    if scored.is_empty() {
        return Err(BenchError::InvalidOption(format!(
            "{metric} is not defined on both sides of any pair"
        )));
    }
    let xa: Vec<f64> = scored.iter().map(|p| p.0).collect();
    let xb: Vec<f64> = scored.iter().map(|p| p.1).collect();
    let ba: Vec<bool> = xa.iter().map(|v| *v >= 1.0 - 1e-9).collect();
    let bb: Vec<bool> = xb.iter().map(|v| *v >= 1.0 - 1e-9).collect();
    let n = scored.len();
    let bootstrap = paired_bootstrap(&xa, &xb, RESAMPLES, 0.95, SEED)
        .ok_or_else(|| BenchError::InvalidOption("nothing to resample".into()))?;
    Ok(Comparison {
        a: a.into(),
        b: b.into(),
        metric,
        pairs: n,
        mean_a: xa.iter().sum::<f64>() / n as f64,
        mean_b: xb.iter().sum::<f64>() / n as f64,
        mcnemar: mcnemar_paired(&ba, &bb),
        bootstrap,
    })
}
