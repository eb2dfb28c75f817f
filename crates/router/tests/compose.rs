#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property: a composed recall never exceeds its allowance, shows no line
//! twice and reports each source once.

use proptest::prelude::*;
use std::collections::HashSet;

use submem_core::test_utils::WhitespaceCounter;
use submem_core::{Recall, Resolution, SourceHit, TokenCounter};
use submem_router::compose::{first_share, join_recalls, second_share};

/// A member's recall: lines of words from a small vocabulary (so the two
/// parts overlap often), truncated to fit `allowance` like a member would.
fn member_recall(lines: &[(u8, u8, u8)], allowance: usize) -> Recall {
    let mut kept: Vec<String> = Vec::new();
    let mut sources = Vec::new();
    for (id, words, res) in lines {
        let line = format!(
            "turn{id} {}",
            vec![format!("w{}", id % 5); *words as usize].join(" ")
        );
        let candidate = if kept.is_empty() {
            line.clone()
        } else {
            format!("{}\n{line}", kept.join("\n"))
        };
        if WhitespaceCounter.count(&candidate) > allowance {
            break;
        }
        kept.push(line);
        sources.push(SourceHit {
            source_id: format!("D{id}"),
            score: f32::from(*id),
            resolution: match res % 3 {
                0 => Resolution::Record,
                1 => Resolution::Excerpt,
                _ => Resolution::Raw,
            },
        });
    }
    let mut seen = HashSet::new();
    sources.retain(|s| seen.insert(s.source_id.clone()));
    let text = kept.join("\n");
    Recall {
        tokens: WhitespaceCounter.count(&text),
        text,
        sources,
        reader: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn joined_recall_stays_within_the_allowance(
        allowance in 0usize..200,
        share in 0.05f64..0.95,
        a in prop::collection::vec((0u8..12, 0u8..12, 0u8..3), 0..20),
        b in prop::collection::vec((0u8..12, 0u8..12, 0u8..3), 0..20),
        overshoot in 0usize..3,
    ) {
        let first = member_recall(&a, first_share(allowance, share) + overshoot * 50);
        let rest = second_share(allowance, first.tokens, &WhitespaceCounter);
        let second = member_recall(&b, rest + overshoot * 20);
        let first_ids: HashSet<String> = first.sources.iter().map(|s| s.source_id.clone()).collect();
        let joined = join_recalls(first.clone(), second, allowance, &WhitespaceCounter);
        prop_assert!(joined.tokens <= allowance, "{} > {allowance}", joined.tokens);
        prop_assert_eq!(joined.tokens, WhitespaceCounter.count(&joined.text));
        let mut ids = HashSet::new();
        for s in &joined.sources {
            prop_assert!(ids.insert(s.source_id.clone()), "{} twice", s.source_id);
        }
        // When the first part fits, it is kept whole and its sources survive.
        if first.tokens <= allowance {
            prop_assert!(joined.text.starts_with(&first.text));
            prop_assert!(first_ids.iter().all(|i| ids.contains(i)));
            // Lines of the second part never repeat a line already shown.
            let second_part = &joined.text[first.text.len()..];
            let first_lines: HashSet<&str> = first.text.lines().collect();
            let mut seen = HashSet::new();
            for l in second_part.lines().filter(|l| !l.trim().is_empty()) {
                prop_assert!(!first_lines.contains(l), "{l} shown twice");
                prop_assert!(seen.insert(l), "{l} repeated");
            }
        }
    }
}
