//! Evidence traces: what one read did with given history events, for loss
//! analyses ("where did the gold evidence go?").
//!
//! A substrate that ranks items (units, pieces) and shows them while they fit
//! can say, for any event, how high its items ranked and how much room showing
//! it whole would have needed. Compared with the room the read actually had
//! and with the whole allowance, that separates evidence that was never
//! ranked, ranked too low to fit even the whole allowance, crowded out by what
//! the substrate shows besides ranked text (records, a timeline), or ranked
//! high enough yet not shown whole. `submem bench --trace` asks for traces and
//! reports the breakdown. Substrates that do not rank return `None` from
//! [`crate::Substrate::trace`].

use serde::{Deserialize, Serialize};

/// What a read's ranking did with one history event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceTrace {
    /// The event's source id.
    pub source_id: String,
    /// 0-based rank of the event's best-ranked item; `None` when none of its
    /// items was ranked (no match, or the event is not stored).
    pub rank: Option<usize>,
    /// Tokens of every ranked item taken in rank order up to and including
    /// the last of the event's items: the room it needed to be shown whole.
    /// `None` when some of its items were not ranked.
    pub room_needed: Option<usize>,
}

/// A read's trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadTrace {
    /// Tokens the ranked items could fill in this read (the allowance less
    /// what the substrate showed besides them).
    pub room: usize,
    /// The most room ranked items could have had: the read's allowance
    /// ([`crate::Query::allowance`]) less fixed costs such as a header line,
    /// had nothing else (records, a timeline) been shown.
    pub allowance: usize,
    /// One entry per event asked about, in the order asked.
    pub events: Vec<EvidenceTrace>,
    /// The most ranked items the read shows, when it shows a fixed number
    /// (the paper's top-k reads of M1, M2 and the hybrid); `None` when it
    /// takes ranked items while they fit the room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<usize>,
}

impl ReadTrace {
    /// The fate of `event` (one of [`ReadTrace::events`]) in this read,
    /// given whether its whole text is shown: [`EvidenceTrace::fate`], except
    /// that in a top-k read an event ranked at or below `k` is
    /// [`EvidenceFate::BeyondTopK`] whatever room it needed.
    pub fn fate_of(&self, event: &EvidenceTrace, shown_whole: bool) -> EvidenceFate {
        match (self.top_k, event.rank) {
            (Some(k), Some(rank)) if !shown_whole && rank >= k => EvidenceFate::BeyondTopK,
            _ => event.fate(shown_whole, self.room, self.allowance),
        }
    }
}

/// Why an event was or was not shown whole, from a trace and whether its text
/// appears whole in the rendered memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceFate {
    /// Its whole text is shown.
    Shown,
    /// None of its items was ranked.
    NotRanked,
    /// Ranked, but showing it whole needed more than the whole allowance.
    RankedTooLow,
    /// Would have fit had the whole allowance gone to ranked items: the room
    /// went to what the substrate shows besides them.
    CrowdedOut,
    /// Fit the room the read had, yet its whole text is not shown (cut into
    /// pieces of which only some were taken, or rendered differently).
    FitNotWhole,
    /// Ranked below the `k` items a top-k read shows.
    BeyondTopK,
}

impl EvidenceTrace {
    /// Classifies the event, given whether its whole text is shown.
    pub fn fate(&self, shown_whole: bool, room: usize, allowance: usize) -> EvidenceFate {
        if shown_whole {
            return EvidenceFate::Shown;
        }
        match (self.rank, self.room_needed) {
            (None, _) => EvidenceFate::NotRanked,
            (Some(_), Some(n)) if n <= room => EvidenceFate::FitNotWhole,
            (Some(_), Some(n)) if n <= allowance => EvidenceFate::CrowdedOut,
            (Some(_), _) => EvidenceFate::RankedTooLow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fates() {
        let t = |rank, room_needed| EvidenceTrace {
            source_id: "x".into(),
            rank,
            room_needed,
        };
        assert_eq!(t(None, None).fate(true, 10, 20), EvidenceFate::Shown);
        assert_eq!(t(None, None).fate(false, 10, 20), EvidenceFate::NotRanked);
        assert_eq!(
            t(Some(0), Some(5)).fate(false, 10, 20),
            EvidenceFate::FitNotWhole
        );
        assert_eq!(
            t(Some(3), Some(15)).fate(false, 10, 20),
            EvidenceFate::CrowdedOut
        );
        assert_eq!(
            t(Some(9), Some(25)).fate(false, 10, 20),
            EvidenceFate::RankedTooLow
        );
        assert_eq!(
            t(Some(9), None).fate(false, 10, 20),
            EvidenceFate::RankedTooLow
        );
        let top3 = ReadTrace {
            room: 10,
            allowance: 20,
            events: Vec::new(),
            top_k: Some(3),
        };
        assert_eq!(
            top3.fate_of(&t(Some(3), Some(5)), false),
            EvidenceFate::BeyondTopK
        );
        assert_eq!(
            top3.fate_of(&t(Some(2), Some(5)), false),
            EvidenceFate::FitNotWhole
        );
        assert_eq!(
            top3.fate_of(&t(Some(7), Some(5)), true),
            EvidenceFate::Shown
        );
        assert_eq!(top3.fate_of(&t(None, None), false), EvidenceFate::NotRanked);
    }
}
