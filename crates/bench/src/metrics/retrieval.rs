//! LLM-free retrieval metrics: P6 Recall@k of gold evidence ids and FlexA-Mem's
//! evidence coverage (whole / partial verbatim presence of gold turns in the
//! rendered memory).

use std::collections::HashSet;

pub use submem_core::evidence::{coverage_of, normalize_ws, Coverage, PARTIAL_RUN_WORDS};

/// P6: share of gold evidence ids among the recall's sources; `None` when
/// there is no gold evidence (such items are excluded, as in the paper).
pub fn recall_at_k<'a>(gold: &[String], shown: impl IntoIterator<Item = &'a str>) -> Option<f64> {
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    if gold.is_empty() {
        return None;
    }
    let shown: HashSet<&str> = shown.into_iter().collect();
    let hit = gold.iter().filter(|g| shown.contains(*g)).count();
    Some(hit as f64 / gold.len() as f64)
}

/// Counts of gold turns by coverage for one item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CoverageCounts {
    /// Gold turns whose text is known.
    pub gold: u32,
    /// Shown whole.
    pub whole: u32,
    /// Shown in part (not whole).
    pub part: u32,
}

/// Evidence coverage of `gold_texts` in `memory`.
pub fn evidence_coverage<'a>(
    gold_texts: impl IntoIterator<Item = &'a str>,
    memory: &str,
) -> CoverageCounts {
    let mem = normalize_ws(memory);
    let mut c = CoverageCounts::default();
    for t in gold_texts {
        c.gold += 1;
        match coverage_of(t, &mem) {
            Coverage::Whole => c.whole += 1,
            Coverage::Part => c.part += 1,
            Coverage::Absent => {}
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_hand_computed() {
        let gold = vec!["D1:3".to_string(), "D2:1".to_string()];
        assert_eq!(recall_at_k(&gold, ["D1:3", "D5:5"]), Some(0.5));
        assert_eq!(recall_at_k(&gold, ["D2:1", "D1:3"]), Some(1.0));
        assert_eq!(recall_at_k(&gold, []), Some(0.0));
        assert_eq!(recall_at_k(&[], ["D1:1"]), None);
        // duplicates in gold count once
        let dup = vec!["a".to_string(), "a".to_string()];
        assert_eq!(recall_at_k(&dup, ["a"]), Some(1.0));
    }

    #[test]
    fn coverage_whole_part_absent() {
        let memory = "[1 May] Ana: I adopted a  grey cat\nnamed Pixel last week and she loves the sofa.\nBen: nice";
        let c = evidence_coverage(
            [
                "I adopted a grey cat named Pixel last week and she loves the sofa.",
                "Yesterday I adopted a grey cat named Pixel last week, said my neighbour",
                "Completely different words that never appear anywhere at all here",
                "nice",
            ],
            memory,
        );
        assert_eq!(
            c,
            CoverageCounts {
                gold: 4,
                whole: 2,
                part: 1
            }
        );
    }
}
