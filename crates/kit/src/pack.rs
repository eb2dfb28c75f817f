//! Packing ranked units into a read's allowance by their cached token
//! counts: take them in rank order while they fit, skip those that do not,
//! and show the chosen ones in time order.
//!
//! A substrate that counts each unit once at write time decides what fits
//! without counting again at read time; [`fill_and_render`] then counts
//! only the joined text it shows (through
//! [`render_in_time_order`]), so the
//! recall's token count stays exact. The flat packing baselines (`m2-fill`,
//! `m1-fill`, `hybrid-fill`) read this way, and so can any plugin that
//! ranks units.
//!
//! ```
//! use submem_core::{Namespace, Query};
//! use submem_kit::RankedUnit;
//! use submem_core::test_utils::WhitespaceCounter;
//! use submem_kit::pack::fill_and_render;
//!
//! let unit = |position: u64, text: &str| RankedUnit {
//!     position,
//!     source_id: format!("t{position}"),
//!     text: text.into(),
//!     score: 1.0,
//! };
//! // Best first, each with the token count cached at write time.
//! let ranked = vec![(unit(7, "Ana drives a red Fiat."), 5), (unit(2, "Ana moved to Oslo."), 4)];
//! let query = Query::question(Namespace::new("ana")?, "What does Ana drive?", 1_000);
//! let recall = fill_and_render(ranked, &query, &WhitespaceCounter);
//! assert!(recall.text.find("Oslo") < recall.text.find("Fiat"), "time order");
//! # Ok::<(), submem_core::Error>(())
//! ```

use crate::render::{Fill, UNIT_SEPARATOR};
use crate::{render_in_time_order, PackPolicy, RankedUnit};
use submem_core::{Query, Recall, TokenCounter};

/// Keeps, in rank order, the units whose cached token counts (plus the
/// separator's tokens before every unit but the first) fit `allowance`; the
/// rest are skipped. `ranked` pairs each unit with its cached count.
pub fn fill_to_allowance(
    ranked: Vec<(RankedUnit, u32)>,
    allowance: usize,
    separator_tokens: usize,
) -> Vec<RankedUnit> {
    let mut fill = Fill::new(allowance, separator_tokens);
    ranked
        .into_iter()
        .filter(|(_, tokens)| fill.admit(*tokens as usize))
        .map(|(unit, _)| unit)
        .collect()
}

/// The recall of `ranked` (best first, with cached token counts) for
/// `query`: the units [`fill_to_allowance`] keeps under the query's
/// allowance, rendered in time order and counted exactly.
pub fn fill_and_render(
    ranked: Vec<(RankedUnit, u32)>,
    query: &Query,
    tokens: &dyn TokenCounter,
) -> Recall {
    let picked = fill_to_allowance(ranked, query.allowance(), tokens.count(UNIT_SEPARATOR));
    render_in_time_order(&picked, tokens, query.allowance(), PackPolicy::SkipUnfit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(position: u64) -> RankedUnit {
        RankedUnit {
            position,
            source_id: format!("u{position}"),
            text: String::new(),
            score: 1.0,
        }
    }

    #[test]
    fn takes_ranked_units_while_they_fit_and_skips_the_rest() {
        let ranked = vec![(unit(1), 5), (unit(2), 10), (unit(3), 3), (unit(4), 1)];
        let ids: Vec<u64> = fill_to_allowance(ranked, 10, 1)
            .iter()
            .map(|u| u.position)
            .collect();
        // 5, then 10+1 does not fit, then 3+1 fits (9), then 1+1 does not.
        assert_eq!(ids, vec![1, 3]);
    }
}
