//! Where gold evidence went: a per-turn loss breakdown of each read.
//!
//! Every gold turn of an item lands in one of four buckets measured on the
//! rendered memory and the recall's sources alone, for any substrate:
//! shown whole, shown only in part (a verbatim run of
//! [`super::retrieval::PARTIAL_RUN_WORDS`] words), named only as a source
//! summarised in an LLM- or rule-written record, or absent. With
//! `--trace`, a substrate that ranks items also says why a turn missed being
//! shown whole ([`submem_core::EvidenceFate`]): never ranked, ranked too low
//! for even the whole allowance, crowded out by what it shows besides ranked
//! text (records, a timeline), fitting the room yet not shown whole, or (a
//! top-k read) ranked below the k it shows.

use serde::{Deserialize, Serialize};
use submem_core::{explain_evidences, EvidenceFate, ReadTrace, Recall, Shown};

/// Counts of gold turns by where they went in one read (or summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFates {
    /// Gold turns whose text is known.
    pub gold: u32,
    /// Shown whole, verbatim.
    pub whole: u32,
    /// Shown in part (not whole).
    pub part_only: u32,
    /// Neither, but named among the recall's sources at record resolution.
    pub record_only: u32,
    /// None of the above.
    pub absent: u32,
    /// Gold turns a substrate trace explained (0 without `--trace`).
    #[serde(default)]
    pub traced: u32,
    /// Traced, not shown whole, and never ranked.
    #[serde(default)]
    pub not_ranked: u32,
    /// Traced and ranked below what even the whole allowance holds.
    #[serde(default)]
    pub ranked_too_low: u32,
    /// Traced and crowded out by non-ranked content (records, timeline).
    #[serde(default)]
    pub crowded_out: u32,
    /// Traced, fitting the room, yet not shown whole.
    #[serde(default)]
    pub fit_not_whole: u32,
    /// Traced and ranked below the `k` a top-k read shows.
    #[serde(default)]
    pub beyond_top_k: u32,
}

impl EvidenceFates {
    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.gold == 0
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &EvidenceFates) {
        self.gold += other.gold;
        self.whole += other.whole;
        self.part_only += other.part_only;
        self.record_only += other.record_only;
        self.absent += other.absent;
        self.traced += other.traced;
        self.not_ranked += other.not_ranked;
        self.ranked_too_low += other.ranked_too_low;
        self.crowded_out += other.crowded_out;
        self.fit_not_whole += other.fit_not_whole;
        self.beyond_top_k += other.beyond_top_k;
    }
}

/// Classifies each gold turn (`(source id, text)`) of one read.
pub fn evidence_fates<'a>(
    gold: impl IntoIterator<Item = (&'a str, &'a str)>,
    recall: &Recall,
    trace: Option<&ReadTrace>,
) -> EvidenceFates {
    // The same classification the server's explained reads give, counted.
    let mut f = EvidenceFates::default();
    for r in explain_evidences(gold.into_iter().map(|(id, t)| (id, Some(t))), recall, trace) {
        f.gold += 1;
        match r.shown {
            Shown::Whole => f.whole += 1,
            Shown::Part => f.part_only += 1,
            Shown::Record => f.record_only += 1,
            Shown::Absent => f.absent += 1,
        }
        let Some(fate) = r.fate else { continue };
        f.traced += 1;
        match fate {
            EvidenceFate::Shown => {}
            EvidenceFate::NotRanked => f.not_ranked += 1,
            EvidenceFate::RankedTooLow => f.ranked_too_low += 1,
            EvidenceFate::CrowdedOut => f.crowded_out += 1,
            EvidenceFate::FitNotWhole => f.fit_not_whole += 1,
            EvidenceFate::BeyondTopK => f.beyond_top_k += 1,
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::{EvidenceTrace, Resolution, SourceHit};

    #[test]
    fn buckets_with_and_without_a_trace() {
        let recall = Recall {
            text: "Ana: the violin teacher is Ingrid\n[record] Ben talked about boats".into(),
            tokens: 0,
            sources: vec![
                SourceHit {
                    source_id: "a".into(),
                    score: 1.0,
                    resolution: Resolution::Raw,
                },
                SourceHit {
                    source_id: "c".into(),
                    score: 0.5,
                    resolution: Resolution::Record,
                },
            ],
            reader: None,
        };
        let gold = [
            ("a", "the violin teacher is Ingrid"),
            (
                "b",
                "one two three four five six seven eight nine ten words here",
            ),
            ("c", "we sailed a small boat across the lake last summer"),
            ("d", "nothing of this turn is shown anywhere in memory"),
        ];
        let f = evidence_fates(gold, &recall, None);
        assert_eq!(
            (
                f.gold,
                f.whole,
                f.part_only,
                f.record_only,
                f.absent,
                f.traced
            ),
            (4, 1, 0, 1, 2, 0)
        );
        let trace = ReadTrace {
            top_k: None,
            room: 100,
            allowance: 200,
            events: vec![
                EvidenceTrace {
                    source_id: "a".into(),
                    rank: Some(0),
                    room_needed: Some(10),
                },
                EvidenceTrace {
                    source_id: "b".into(),
                    rank: None,
                    room_needed: None,
                },
                EvidenceTrace {
                    source_id: "c".into(),
                    rank: Some(7),
                    room_needed: Some(150),
                },
                EvidenceTrace {
                    source_id: "d".into(),
                    rank: Some(9),
                    room_needed: Some(90),
                },
            ],
        };
        let f = evidence_fates(gold, &recall, Some(&trace));
        assert_eq!(
            (
                f.traced,
                f.not_ranked,
                f.crowded_out,
                f.fit_not_whole,
                f.ranked_too_low
            ),
            (4, 1, 1, 1, 0)
        );
        let mut sum = f;
        sum.add(&f);
        assert_eq!((sum.gold, sum.crowded_out), (8, 2));
    }
}
