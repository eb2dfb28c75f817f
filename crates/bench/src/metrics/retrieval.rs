//! LLM-free retrieval metrics: P6 Recall@k of gold evidence ids and FlexA-Mem's
//! evidence coverage (whole / partial verbatim presence of gold turns in the
//! rendered memory).

use std::collections::HashSet;

/// Length of the verbatim run (in white-space words) that counts a gold turn
/// as "shown in part". Words rather than o200k tokens, so the measure does not
/// depend on a tokenizer; 8 words are ≈ 10 o200k tokens of English.
pub const PARTIAL_RUN_WORDS: usize = 8;

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

/// Collapses every run of white space to one space and trims.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How one gold turn appears in a rendered memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Its whole text (white space normalised) appears verbatim.
    Whole,
    /// Some run of [`PARTIAL_RUN_WORDS`] consecutive words appears verbatim.
    Part,
    /// Neither.
    Absent,
}

/// Classifies how `turn_text` appears in `memory_normalized` (which must
/// already be [`normalize_ws`]-normalised). A turn shorter than the run length
/// counts as `Part` only if it is whole.
pub fn coverage_of(turn_text: &str, memory_normalized: &str) -> Coverage {
    let turn = normalize_ws(turn_text);
    if turn.is_empty() {
        return Coverage::Absent;
    }
    if memory_normalized.contains(&turn) {
        return Coverage::Whole;
    }
    let words: Vec<&str> = turn.split(' ').collect();
    if words.len() >= PARTIAL_RUN_WORDS
        && words
            .windows(PARTIAL_RUN_WORDS)
            .any(|w| memory_normalized.contains(&w.join(" ")))
    {
        return Coverage::Part;
    }
    Coverage::Absent
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
