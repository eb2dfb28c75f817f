//! The baselines every comparison needs. [`NoMemory`] (`nomem`, its own
//! module) shows nothing: the paper's *NoMem* row.
//!
//! The other baseline, the recency window (`recent`, the newest events that
//! fit the allowance), is its own crate, `submem-recent` (cargo feature
//! `recent`), and the template to copy for a new substrate.
//!
//! A design that renders memory under a budget is only worth its complexity
//! if it shows more evidence than packing ranked turns into the same budget.
//! [`with_packing_baselines`] adds those packings ([`PACKING_BASELINES`]:
//! whole turns and pieces of κ tokens, each ranked by BM25, dense similarity
//! and their fusion and filling the budget) to a run that has
//! anything else to compare with them, so every report shows the comparison.

use submem_core::Family;

pub use crate::nomem::{factories, NoMemory};
use crate::registry::{Registry, SubstrateSpec};

/// The packing baselines: turns, and pieces of κ tokens (*FlexA-Mem*'s piece
/// retrieval), ranked by BM25, by dense similarity and by their
/// reciprocal-rank fusion, each packed until the budget is spent.
pub const PACKING_BASELINES: [&str; 6] = [
    "m2-fill",
    "m1-fill",
    "hybrid-fill",
    "m2-pieces",
    "m1-pieces",
    "hybrid-pieces",
];

/// Whether `name` (a name or alias) is one of the [`PACKING_BASELINES`].
pub fn is_packing_baseline(registry: &Registry, name: &str) -> bool {
    registry
        .resolve(name)
        .is_some_and(|f| PACKING_BASELINES.contains(&f.name()))
}

/// `specs` followed by every packing baseline the registry holds and `specs`
/// lack, when `specs` has a substrate to compare with them (one that is
/// neither a packing baseline nor a harness baseline such as `nomem`).
pub fn with_packing_baselines(specs: &[SubstrateSpec], registry: &Registry) -> Vec<SubstrateSpec> {
    let mut out = specs.to_vec();
    let compared = specs.iter().any(|s| {
        registry.resolve(&s.name).is_some_and(|f| {
            !PACKING_BASELINES.contains(&f.name()) && f.family() != &Family::BASELINE
        })
    });
    if !compared {
        return out;
    }
    for name in PACKING_BASELINES {
        let present = specs
            .iter()
            .any(|s| registry.resolve(&s.name).is_some_and(|f| f.name() == name));
        if !present && registry.resolve(name).is_some() {
            out.push(SubstrateSpec {
                name: name.to_string(),
                settings: Vec::new(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[cfg(feature = "flat")]
    #[test]
    fn packing_baselines_join_a_run_with_a_design_to_compare() {
        let registry = Registry::default();
        let names = |specs: &[SubstrateSpec]| {
            with_packing_baselines(specs, &registry)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        let list = SubstrateSpec::parse_list("m2,bm25-fill:candidates=64,nomem").unwrap();
        assert_eq!(
            names(&list),
            vec![
                "m2",
                "bm25-fill:candidates=64",
                "nomem",
                "m1-fill",
                "hybrid-fill",
                "m2-pieces",
                "m1-pieces",
                "hybrid-pieces"
            ]
        );
        // Nothing to compare with: the list stays as it is.
        let only = SubstrateSpec::parse_list("m1-fill,nomem").unwrap();
        assert_eq!(names(&only), vec!["m1-fill", "nomem"]);
        assert!(is_packing_baseline(&registry, "rrf-fill"));
        assert!(is_packing_baseline(&registry, "bm25-pieces"));
        assert!(!is_packing_baseline(&registry, "m2"));
        assert!(!is_packing_baseline(&registry, "no-such"));
    }
}
