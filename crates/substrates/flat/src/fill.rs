//! How many ranked units a flat read shows: the paper's top-k, or as many as
//! the budget holds ("fill", by [`submem_kit::pack`]).
//!
//! With top-k, M1 and M2 leave most of a large budget unused (ten LoCoMo
//! turns are about 500 tokens of an 8k budget). Fill mode ranks up to
//! [`ReadDepth::Fill::max_candidates`] units and takes them in rank order
//! while they fit the allowance, skipping any that do not, then renders the
//! chosen ones in time order like top-k does. The choice is made on each
//! unit's token count cached at write time, so a read counts only the text it
//! shows; [`submem_kit::render_in_time_order`] then counts the joined text
//! again and keeps the recall exact.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use submem_core::{EvidenceTrace, Query, ReadTrace, Recall, TokenCounter};
use submem_kit::pack::fill_to_allowance;
use submem_kit::{render::UNIT_SEPARATOR, render_in_time_order, PackPolicy, RankedUnit};

/// Default number of ranked units a fill read considers: LoCoMo turns average
/// about 30 tokens, so 2,048 candidates can fill a 32k budget.
pub const DEFAULT_FILL_CANDIDATES: usize = 2_048;

/// Ranked units a trace of a top-k M1 or M2 read looks through (the read
/// itself ranks k): deep enough to say how far below k an event ranked.
pub(crate) const TRACE_DEPTH: usize = 1_000;

/// How many ranked units a read takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadDepth {
    /// The query's top-k (*Harness the Memory*'s setting).
    #[default]
    TopK,
    /// Ranked units until the allowance is spent.
    Fill {
        /// Most units ranked per read (a bound on read cost).
        max_candidates: usize,
    },
}

impl ReadDepth {
    /// Fill mode with [`DEFAULT_FILL_CANDIDATES`].
    pub fn fill() -> Self {
        ReadDepth::Fill {
            max_candidates: DEFAULT_FILL_CANDIDATES,
        }
    }

    /// Whether this is fill mode.
    pub fn is_fill(&self) -> bool {
        matches!(self, ReadDepth::Fill { .. })
    }

    /// The units a read shows from `ranked` (best first, each with its
    /// cached token count): in fill mode those that fit `allowance`
    /// ([`fill_to_allowance`], `separator_tokens` asked for only then),
    /// otherwise all of them.
    pub(crate) fn pick(
        &self,
        ranked: impl Iterator<Item = (RankedUnit, u32)>,
        allowance: usize,
        separator_tokens: impl FnOnce() -> usize,
    ) -> Vec<RankedUnit> {
        if self.is_fill() {
            fill_to_allowance(ranked.collect(), allowance, separator_tokens())
        } else {
            ranked.map(|(u, _)| u).collect()
        }
    }

    /// The recall of `ranked` (best first, with cached token counts) for
    /// `query`: the units [`ReadDepth::pick`] keeps, rendered in time order
    /// under the allowance.
    pub(crate) fn show(
        &self,
        ranked: Vec<(RankedUnit, u32)>,
        query: &Query,
        tokens: &dyn TokenCounter,
    ) -> Recall {
        let picked = self.pick(ranked.into_iter(), query.allowance(), || {
            tokens.count(UNIT_SEPARATOR)
        });
        render_in_time_order(&picked, tokens, query.allowance(), PackPolicy::SkipUnfit)
    }

    /// How many ranked units to ask the index for.
    pub(crate) fn candidates(&self, top_k: usize) -> usize {
        match self {
            ReadDepth::TopK => top_k,
            ReadDepth::Fill { max_candidates } => (*max_candidates).max(top_k),
        }
    }

    /// What a read of `query` at this depth does with the events `ids`,
    /// given `ranked`, the ranking it packs (best first, each unit with its
    /// cached token count), as deep as the read ranks or deeper: each id's
    /// rank and the ranked tokens (with separators) up to and including it.
    /// Flat reads show nothing besides ranked units, so the room is the
    /// whole allowance; a top-k read also says its `k`.
    pub(crate) fn trace(
        &self,
        ranked: &[(RankedUnit, u32)],
        query: &Query,
        tokens: &dyn TokenCounter,
        ids: &[String],
    ) -> ReadTrace {
        let separator_tokens = tokens.count(UNIT_SEPARATOR);
        let mut first: HashMap<&str, (usize, usize)> = HashMap::new();
        let mut used = 0usize;
        for (rank, (unit, tokens)) in ranked.iter().enumerate() {
            used += *tokens as usize + if rank > 0 { separator_tokens } else { 0 };
            first.entry(unit.source_id.as_str()).or_insert((rank, used));
        }
        let allowance = query.allowance();
        ReadTrace {
            room: allowance,
            allowance,
            top_k: (!self.is_fill()).then_some(query.top_k),
            events: ids
                .iter()
                .map(|id| {
                    let found = first.get(id.as_str());
                    EvidenceTrace {
                        source_id: id.clone(),
                        rank: found.map(|f| f.0),
                        room_needed: found.map(|f| f.1),
                    }
                })
                .collect(),
        }
    }

    /// The recall [`ReadDepth::show`] makes of `ranked` with its trace of
    /// `ids`: a read that ranks once for both.
    pub(crate) fn show_traced(
        &self,
        ranked: Vec<(RankedUnit, u32)>,
        query: &Query,
        tokens: &dyn TokenCounter,
        ids: &[String],
    ) -> (Recall, Option<ReadTrace>) {
        let trace = self.trace(&ranked, query, tokens, ids);
        (self.show(ranked, query, tokens), Some(trace))
    }

    /// How many ranked units a trace looks through: a fill read's own
    /// candidates (an event beyond them was never ranked by the read), or
    /// [`TRACE_DEPTH`] for a top-k read (to say how far below k it ranked).
    pub(crate) fn trace_candidates(&self, top_k: usize) -> usize {
        match self {
            ReadDepth::TopK => TRACE_DEPTH.max(top_k),
            fill => fill.candidates(top_k),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        match self {
            ReadDepth::Fill { max_candidates: 0 } => {
                Err("a fill read needs at least one candidate".into())
            }
            _ => Ok(()),
        }
    }

    /// The depth a config's `fill` and `candidates` settings stand for:
    /// top-k unless `fill`, then `candidates` (unset:
    /// [`DEFAULT_FILL_CANDIDATES`]). Check them with
    /// [`ReadDepth::check_settings`] first.
    pub(crate) fn from_settings(fill: bool, candidates: Option<usize>) -> Self {
        match (fill, candidates) {
            (false, _) => ReadDepth::TopK,
            (true, None) => ReadDepth::fill(),
            (true, Some(max_candidates)) => ReadDepth::Fill { max_candidates },
        }
    }

    /// This depth as a config's `fill` and `candidates` settings.
    pub(crate) fn to_settings(self) -> (bool, Option<usize>) {
        match self {
            ReadDepth::TopK => (false, None),
            ReadDepth::Fill { max_candidates } => (true, Some(max_candidates)),
        }
    }

    /// Refuses `candidates` without `fill` and a fill read of no candidates.
    pub(crate) fn check_settings(fill: bool, candidates: Option<usize>) -> Result<(), String> {
        if !fill && candidates.is_some() {
            return Err(
                "candidates applies to fill reads only (fill=true or a *-fill name)".into(),
            );
        }
        Self::from_settings(fill, candidates).validate()
    }

    /// What a flat substrate reading at this depth calls itself: `name` for
    /// top-k, `name-fill` in fill mode.
    pub fn substrate_name(&self, name: &str) -> String {
        if self.is_fill() {
            format!("{name}-fill")
        } else {
            name.to_string()
        }
    }
}

/// `with_depth` and `depth` for a config whose `fill` and `candidates`
/// fields stand for a [`ReadDepth`].
macro_rules! depth_settings {
    ($config:ty) => {
        impl $config {
            /// Sets `fill` and `candidates` to read at `depth`.
            pub fn with_depth(mut self, depth: $crate::fill::ReadDepth) -> Self {
                (self.fill, self.candidates) = depth.to_settings();
                self
            }

            /// How many ranked units a read shows: the query's top-k (the
            /// paper's reading) or, with `fill`, as many as the budget holds.
            pub fn depth(&self) -> $crate::fill::ReadDepth {
                $crate::fill::ReadDepth::from_settings(self.fill, self.candidates)
            }
        }
    };
}
pub(crate) use depth_settings;

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
    fn pick_fills_only_in_fill_mode_and_asks_for_the_separator_only_then() {
        let ranked = || vec![(unit(1), 5), (unit(2), 10), (unit(3), 3)].into_iter();
        let ids = |units: Vec<RankedUnit>| units.iter().map(|u| u.position).collect::<Vec<_>>();
        let top = ReadDepth::TopK.pick(ranked(), 1, || panic!("not asked in top-k mode"));
        assert_eq!(ids(top), vec![1, 2, 3]);
        assert_eq!(ids(ReadDepth::fill().pick(ranked(), 10, || 1)), vec![1, 3]);
    }

    #[test]
    fn a_stored_unit_ranks_as_itself_with_its_token_count() {
        let stored = crate::unit::StoredUnit {
            source_id: "s1".into(),
            text: "hello".into(),
            position: 4,
            tokens: 2,
        };
        let (ranked, tokens) = stored.ranked(7, 0.5);
        assert_eq!((ranked.position, ranked.score, tokens), (7, 0.5, 2));
        assert_eq!(
            (ranked.source_id.as_str(), ranked.text.as_str()),
            ("s1", "hello")
        );
    }

    #[test]
    fn candidates_and_validation() {
        assert_eq!(ReadDepth::TopK.candidates(10), 10);
        assert_eq!(ReadDepth::fill().candidates(10), DEFAULT_FILL_CANDIDATES);
        assert_eq!(ReadDepth::Fill { max_candidates: 4 }.candidates(10), 10);
        assert!(ReadDepth::Fill { max_candidates: 0 }.validate().is_err());
        let json = serde_json::to_string(&ReadDepth::fill()).unwrap_or_default();
        assert_eq!(json, r#"{"fill":{"max_candidates":2048}}"#);
    }
}
