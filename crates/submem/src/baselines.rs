//! The baselines every comparison needs. [`NoMemory`] (`nomem`) shows
//! nothing. It is the paper's *NoMem* row: the same reader
//! template with an empty memory block, so that gains are attributed to
//! retrieval rather than scaffolding. It also measures a harness's own
//! overhead per item (it costs next to nothing).
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

use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;

use submem_core::plugin::SubstrateFactory;

use crate::registry::{Registry, SubstrateSpec};
use submem_core::{
    Event, Family, Footprint, Forget, MethodId, Namespace, Query, Recall, Result, Substrate,
    SubstrateInfo, WriteReport,
};

/// This crate's own baselines' factories: `nomem`.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![
        SubstrateFactory::builder("nomem", MethodId::NO_MEMORY, Family::BASELINE)
            .aliases(&["no-memory"])
            .paper("Harness the Memory, the NoMem row")
            .summary("shows nothing: the reader template with an empty memory block")
            .build_without_settings(|_| Ok(Arc::new(NoMemory))),
    ]
}

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

/// The no-memory baseline.
#[derive(Debug, Default)]
pub struct NoMemory;

#[async_trait]
impl Substrate for NoMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: MethodId::NO_MEMORY,
            family: Family::BASELINE,
            name: "no-memory".into(),
            needs_llm: false,
            training_free: true,
        }
    }
    async fn write(&self, _namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        Ok(WriteReport {
            events: events.len(),
            units: 0,
        })
    }
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        Ok(Recall::empty())
    }
    fn footprint(&self) -> Footprint {
        Footprint::default()
    }
    async fn persist(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    async fn restore(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    async fn forget(&self, _target: &Forget) -> Result<usize> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use submem_core::Turn;

    #[tokio::test]
    async fn no_memory_shows_nothing_and_refuses_bad_queries() {
        let ns = Namespace::new("n").unwrap();
        let turn = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: "hello".into(),
            source_id: "t0".into(),
        });
        assert_eq!(NoMemory.write(&ns, &[turn]).await.unwrap().events, 1);
        let q = Query::question(ns.clone(), "q", 100);
        assert_eq!(NoMemory.read(&q).await.unwrap().tokens, 0);
        assert!(NoMemory.read(&Query::question(ns, "q", 0)).await.is_err());
        assert_eq!(factories().len(), 1);
    }

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
