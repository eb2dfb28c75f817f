//! Paired comparison of two substrates on the same items: the exact McNemar
//! test on discordant pairs and a seeded paired bootstrap confidence interval
//! of the difference in means; the Wilson score interval of a proportion;
//! Cohen's kappa of two raters' binary verdicts.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Result of an exact McNemar test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    /// Pairs where A is right and B wrong.
    pub b: u64,
    /// Pairs where A is wrong and B right.
    pub c: u64,
    /// Two-sided exact p-value: `min(1, 2·P[X ≤ min(b, c)])`, `X ~ Bin(b + c, ½)`.
    pub p_value: f64,
}

/// Exact (binomial) McNemar test on `b` and `c` discordant pairs. With no
/// discordant pairs the p-value is 1.
pub fn mcnemar_exact(b: u64, c: u64) -> McNemar {
    let n = b + c;
    let k = b.min(c);
    if n == 0 {
        return McNemar { b, c, p_value: 1.0 };
    }
    // Sum of C(n, i) / 2^n for i <= k, in log space to survive large n.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_c + ln_half_n).exp();
    }
    McNemar {
        b,
        c,
        p_value: (2.0 * tail).min(1.0),
    }
}

/// McNemar on paired binary outcomes (`true` = correct).
pub fn mcnemar_paired(a: &[bool], b: &[bool]) -> McNemar {
    let (mut only_a, mut only_b) = (0u64, 0u64);
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (true, false) => only_a += 1,
            (false, true) => only_b += 1,
            _ => {}
        }
    }
    mcnemar_exact(only_a, only_b)
}

/// A paired bootstrap interval of `mean(a) − mean(b)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapCi {
    /// Observed difference of means.
    pub difference: f64,
    /// Lower bound (2.5th percentile of resampled differences for a 95 % interval).
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Resamples drawn.
    pub resamples: usize,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
}

/// Paired bootstrap: resample item indices with replacement `resamples`
/// times (ChaCha8 seeded with `seed`, so the interval is reproducible) and
/// take percentile bounds of the resampled differences. Returns `None` when
/// the slices are empty or of different lengths.
pub fn paired_bootstrap(
    a: &[f64],
    b: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<BootstrapCi> {
    if a.is_empty() || a.len() != b.len() || resamples == 0 || !(0.0..1.0).contains(&level) {
        return None;
    }
    let n = a.len();
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let difference = diffs.iter().sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| diffs[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = (1.0 - level) / 2.0;
    let at = |q: f64| {
        let idx = ((q * resamples as f64).floor() as usize).min(resamples - 1);
        means[idx]
    };
    Some(BootstrapCi {
        difference,
        low: at(alpha),
        high: at(1.0 - alpha),
        resamples,
        level,
    })
}

/// Wilson score interval at 95 % of `successes` out of `n`; `(0, 0)` when
/// `n` is 0.
pub fn wilson(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let (z, n, p) = (1.959_964, n as f64, successes as f64 / n as f64);
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Cohen's kappa of two raters' binary verdicts on the same items:
/// `(p_o − p_e) / (1 − p_e)`, with `p_o` the share of items they agree on
/// and `p_e` the agreement expected by chance from each rater's own share of
/// `true`. `None` with no items, or when chance agreement is already 1 (both
/// raters gave one and the same verdict throughout: kappa is undefined).
pub fn cohen_kappa(pairs: &[(bool, bool)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let agree = pairs.iter().filter(|(a, b)| a == b).count() as f64;
    let a_yes = pairs.iter().filter(|(a, _)| *a).count() as f64 / n;
    let b_yes = pairs.iter().filter(|(_, b)| *b).count() as f64 / n;
    let p_o = agree / n;
    let p_e = a_yes * b_yes + (1.0 - a_yes) * (1.0 - b_yes);
    if (1.0 - p_e).abs() < 1e-12 {
        return None;
    }
    Some((p_o - p_e) / (1.0 - p_e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` pairs of `(a, b)`.
    fn pairs(counts: &[((bool, bool), usize)]) -> Vec<(bool, bool)> {
        counts
            .iter()
            .flat_map(|&(p, n)| std::iter::repeat_n(p, n))
            .collect()
    }

    #[test]
    fn kappa_matches_hand_computed_values() {
        // 50 items: both yes 20, a only 5, b only 10, both no 15.
        // p_o = 35/50 = 0.7; a says yes 25/50, b 30/50;
        // p_e = 0.5·0.6 + 0.5·0.4 = 0.5; κ = (0.7 − 0.5)/(1 − 0.5) = 0.4.
        let k = cohen_kappa(&pairs(&[
            ((true, true), 20),
            ((true, false), 5),
            ((false, true), 10),
            ((false, false), 15),
        ]))
        .unwrap();
        assert!((k - 0.4).abs() < 1e-12, "{k}");
        // Perfect agreement with both verdicts present: κ = 1.
        let k = cohen_kappa(&pairs(&[((true, true), 3), ((false, false), 2)])).unwrap();
        assert!((k - 1.0).abs() < 1e-12);
        // Always opposite, half yes each: p_o = 0, p_e = 0.5, κ = −1.
        let k = cohen_kappa(&pairs(&[((true, false), 4), ((false, true), 4)])).unwrap();
        assert!((k + 1.0).abs() < 1e-12);
        // One accepts all, the other rejects all: p_o = 0, p_e = 0, κ = 0.
        assert_eq!(cohen_kappa(&pairs(&[((true, false), 6)])), Some(0.0));
        // 10 items: both yes 6, a only 2, b only 1, both no 1: p_o = 0.7,
        // a yes 0.8, b yes 0.7, p_e = 0.56 + 0.06 = 0.62, κ = 0.08/0.38.
        let k = cohen_kappa(&pairs(&[
            ((true, true), 6),
            ((true, false), 2),
            ((false, true), 1),
            ((false, false), 1),
        ]))
        .unwrap();
        assert!((k - 0.08 / 0.38).abs() < 1e-12, "{k}");
        // Undefined: no items, or both always say yes.
        assert_eq!(cohen_kappa(&[]), None);
        assert_eq!(cohen_kappa(&pairs(&[((true, true), 5)])), None);
    }

    #[test]
    fn wilson_interval_known_values() {
        // 5 of 10: centre 0.5, half-width 1.96·sqrt(0.25/10 + 1.96²/400)/(1 + 1.96²/10).
        let (lo, hi) = wilson(5, 10);
        assert!(
            (lo - 0.2366).abs() < 1e-4 && (hi - 0.7634).abs() < 1e-4,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(0, 20);
        assert!(lo.abs() < 1e-12, "{lo}");
        assert!((hi - 0.1611).abs() < 1e-4, "{hi}");
        assert_eq!(wilson(0, 0), (0.0, 0.0));
    }

    #[test]
    fn mcnemar_known_values() {
        // b=10, c=2: 2 * (1 + 12 + 66) / 4096 = 0.03857
        let m = mcnemar_exact(10, 2);
        assert!((m.p_value - 158.0 / 4096.0).abs() < 1e-12);
        assert!((m.p_value - 0.0386).abs() < 5e-5);
        // symmetric
        assert_eq!(mcnemar_exact(2, 10).p_value, m.p_value);
        // b=c -> p = 1 (capped)
        assert_eq!(mcnemar_exact(5, 5).p_value, 1.0);
        assert_eq!(mcnemar_exact(0, 0).p_value, 1.0);
        // b=6, c=0: 2 / 64 = 0.03125
        assert!((mcnemar_exact(6, 0).p_value - 0.03125).abs() < 1e-12);
        // large n stays finite: b=600, c=400 -> p far below 1e-9
        let big = mcnemar_exact(600, 400).p_value;
        assert!(big > 0.0 && big < 1e-9, "{big}");
    }

    #[test]
    fn mcnemar_from_pairs() {
        let a = [true, true, false, false, true];
        let b = [false, true, true, false, false];
        let m = mcnemar_paired(&a, &b);
        assert_eq!((m.b, m.c), (2, 1));
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_difference() {
        let a: Vec<f64> = (0..50).map(|i| f64::from(u8::from(i % 3 != 0))).collect();
        let b: Vec<f64> = (0..50).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let x = paired_bootstrap(&a, &b, 10_000, 0.95, 7).unwrap();
        let y = paired_bootstrap(&a, &b, 10_000, 0.95, 7).unwrap();
        assert_eq!(x, y);
        assert!(x.low <= x.difference && x.difference <= x.high);
        assert!(x.high - x.low > 0.0);
        // identical inputs give a degenerate interval at 0
        let z = paired_bootstrap(&a, &a, 1000, 0.95, 1).unwrap();
        assert_eq!((z.low, z.high, z.difference), (0.0, 0.0, 0.0));
        assert!(paired_bootstrap(&a, &b[..3], 10, 0.95, 1).is_none());
    }
}
