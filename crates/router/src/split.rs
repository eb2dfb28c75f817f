//! The seeded train / held-out split of benchmark questions, so that a policy
//! is never evaluated on the questions it was fitted on.
//!
//! A question is identified by `(dataset, conversation, question id)`; every
//! budget and k of that question falls on the same side, so no question leaks
//! from the fit into the evaluation through another budget. The side is
//! decided by a seeded 64-bit FNV-1a hash of the identity: the question is
//! held out when `hash mod 10_000 < share · 10_000`. The split is stored in
//! the policy file, and `submem route eval` evaluates only held-out items.

use serde::{Deserialize, Serialize};

/// Resolution of the held-out share (basis points).
const SPLIT_SCALE: u64 = 10_000;

/// Which questions are held out of fitting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HoldoutSplit {
    /// Hash seed.
    pub seed: u64,
    /// Share of questions held out, in `0.0..=1.0`.
    pub share: f64,
}

impl Default for HoldoutSplit {
    fn default() -> Self {
        HoldoutSplit {
            seed: 7,
            share: 0.5,
        }
    }
}

fn fnv1a(seed: u64, parts: &[&str]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET ^ seed.wrapping_mul(PRIME);
    for part in parts {
        for b in part.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
        // A separator byte that cannot occur in UTF-8 keeps ("ab","c") apart from ("a","bc").
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    h
}

impl HoldoutSplit {
    /// Whether a question is held out (evaluation side).
    pub fn is_held_out(&self, dataset: &str, conversation: &str, question_id: &str) -> bool {
        let threshold = (self.share.clamp(0.0, 1.0) * SPLIT_SCALE as f64).round() as u64;
        fnv1a(self.seed, &[dataset, conversation, question_id]) % SPLIT_SCALE < threshold
    }

    /// Whether the split is usable (`share` in `0..=1`, finite).
    pub fn is_valid(&self) -> bool {
        self.share.is_finite() && (0.0..=1.0).contains(&self.share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_deterministic_and_near_its_share() {
        let s = HoldoutSplit {
            seed: 3,
            share: 0.3,
        };
        let held: usize = (0..2000)
            .filter(|i| s.is_held_out("locomo", "conv-26", &format!("q{i}")))
            .count();
        assert!((500..700).contains(&held), "{held}");
        assert_eq!(
            s.is_held_out("d", "c", "q1"),
            HoldoutSplit {
                seed: 3,
                share: 0.3
            }
            .is_held_out("d", "c", "q1")
        );
        let other = HoldoutSplit {
            seed: 4,
            share: 0.3,
        };
        assert!((0..200).any(|i| {
            let q = format!("q{i}");
            s.is_held_out("d", "c", &q) != other.is_held_out("d", "c", &q)
        }));
        assert!(!HoldoutSplit {
            seed: 1,
            share: 0.0
        }
        .is_held_out("d", "c", "q"));
        assert!(HoldoutSplit {
            seed: 1,
            share: 1.0
        }
        .is_held_out("d", "c", "q"));
        assert!(!HoldoutSplit {
            seed: 1,
            share: 1.5
        }
        .is_valid());
    }
}
