//! Composition: one budget split across two substrates, e.g. FlexA-Mem
//! records and excerpts first, BM25 turns after.
//!
//! The first substrate renders under `share · A` (it may use less); the
//! second under what the first left, minus the separator. The second's text
//! is then cleaned of lines whose (white-space normalised) text the first
//! already shows, so a turn both found is shown once; source hits are merged
//! by source id, keeping the higher resolution. If the joined text still
//! counts more than `A` (tokenisers need not be additive at the seam), the
//! second part is dropped whole rather than cut, so every source hit reported
//! is really shown. Neither paper composes substrates; this is the router's
//! own extension, measured in `submem route eval` like any other choice.

use std::collections::HashSet;

use submem_core::{Recall, SourceHit, TokenCounter};

/// Separator between the two parts.
pub const PART_SEPARATOR: &str = "\n";

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The allowance of the first part under `share` of `allowance`.
pub fn first_share(allowance: usize, share: f64) -> usize {
    ((allowance as f64) * share.clamp(0.0, 1.0)).floor() as usize
}

/// The allowance left for the second part once the first used `first_tokens`.
pub fn second_share(allowance: usize, first_tokens: usize, counter: &dyn TokenCounter) -> usize {
    if first_tokens == 0 {
        return allowance;
    }
    allowance.saturating_sub(first_tokens + counter.count(PART_SEPARATOR))
}

/// Joins two recalls under `allowance` tokens (see the module docs). The
/// result never counts more than `allowance`.
pub fn join_recalls(
    first: Recall,
    second: Recall,
    allowance: usize,
    counter: &dyn TokenCounter,
) -> Recall {
    let fits = |r: &Recall| counter.count(&r.text) <= allowance;
    if !fits(&first) {
        // A member broke its share; show the other part alone if it can be.
        return if fits(&second) {
            second
        } else {
            Recall::empty()
        };
    }
    let shown = normalize(&first.text);
    let mut seen: HashSet<String> = HashSet::new();
    let kept: Vec<&str> = second
        .text
        .lines()
        .filter(|line| {
            let n = normalize(line);
            // Blank lines carry nothing; repeated or already shown lines are dropped.
            !n.is_empty() && !shown.contains(&n) && seen.insert(n)
        })
        .collect();
    let rest = kept.join("\n");
    let text = match (first.text.is_empty(), rest.is_empty()) {
        (_, true) => first.text.clone(),
        (true, false) => rest,
        (false, false) => format!("{}{PART_SEPARATOR}{rest}", first.text),
    };
    let tokens = counter.count(&text);
    if tokens > allowance {
        let tokens = counter.count(&first.text);
        return Recall { tokens, ..first };
    }
    let mut sources: Vec<SourceHit> = first.sources;
    for hit in second.sources {
        match sources.iter_mut().find(|s| s.source_id == hit.source_id) {
            Some(s) => s.resolution = s.resolution.max(hit.resolution),
            None => sources.push(hit),
        }
    }
    Recall {
        text,
        tokens,
        sources,
        reader: first.reader.or(second.reader),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::Resolution;

    fn recall(text: &str, ids: &[(&str, Resolution)]) -> Recall {
        Recall {
            text: text.into(),
            tokens: WhitespaceCounter.count(text),
            sources: ids
                .iter()
                .map(|(id, r)| SourceHit {
                    source_id: (*id).into(),
                    score: 1.0,
                    resolution: *r,
                })
                .collect(),
            reader: None,
        }
    }

    #[test]
    fn duplicates_are_shown_once_and_hits_merged() {
        let a = recall(
            "[D1:1] Ana: the violin teacher is Zoe\n[D1:2] record: moved",
            &[("D1:1", Resolution::Raw), ("D1:2", Resolution::Record)],
        );
        let b = recall(
            "Ana: the violin teacher is Zoe\nBen: moved to Lyon",
            &[("D1:1", Resolution::Raw), ("D1:2", Resolution::Raw)],
        );
        let j = join_recalls(a, b, 100, &WhitespaceCounter);
        assert_eq!(j.text.matches("violin").count(), 1, "{}", j.text);
        assert!(j.text.ends_with("Ben: moved to Lyon"));
        assert_eq!(j.sources.len(), 2);
        assert_eq!(j.sources[1].resolution, Resolution::Raw);
        assert_eq!(j.tokens, WhitespaceCounter.count(&j.text));
    }

    #[test]
    fn an_overlong_join_keeps_the_first_part_only() {
        let a = recall("one two three", &[("a", Resolution::Raw)]);
        let b = recall("four five six", &[("b", Resolution::Raw)]);
        let j = join_recalls(a, b, 4, &WhitespaceCounter);
        assert_eq!(j.text, "one two three");
        assert_eq!(j.sources.len(), 1);
        assert_eq!(second_share(10, 3, &WhitespaceCounter), 7);
        assert_eq!(first_share(10, 0.55), 5);
    }
}
