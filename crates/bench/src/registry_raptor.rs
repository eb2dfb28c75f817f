//! Building M6 ([`submem_raptor::Raptor`]) by name: `m6` (aliases `raptor`,
//! `tree`) with its settings (see [`crate::registry`]'s table). M6 runs
//! without a memory LLM (`--memory-llm none`): its summaries are then
//! extractive, so it never returns [`crate::BenchError::NeedsLlm`].

use std::sync::Arc;

use submem_core::{Services, Substrate};
use submem_raptor::{Raptor, RaptorConfig, SummarizerKind};

use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

/// The settings `m6` accepts.
pub const RAPTOR_SETTINGS: &[&str] = &[
    "leaf_tokens",
    "dims",
    "threshold",
    "max_clusters",
    "bic_sample",
    "cluster_tokens",
    "depth",
    "min_nodes",
    "summarizer",
    "summary_tokens",
    "summary_words",
    "rebuild_fraction",
    "drift_growth",
    "dedup",
    "fill",
];

/// Parses `spec`'s settings into a checked [`RaptorConfig`].
pub fn raptor_config(spec: &SubstrateSpec) -> Result<RaptorConfig> {
    spec.only(RAPTOR_SETTINGS)?;
    let mut c = RaptorConfig::default();
    macro_rules! set {
        ($key:literal, $setter:ident) => {
            if let Some(v) = spec.parse_setting($key)? {
                c = c.$setter(v);
            }
        };
    }
    set!("leaf_tokens", with_leaf_tokens);
    set!("dims", with_reduce_dims);
    set!("threshold", with_membership_threshold);
    set!("max_clusters", with_max_clusters);
    set!("bic_sample", with_bic_sample);
    set!("cluster_tokens", with_max_cluster_tokens);
    set!("depth", with_max_depth);
    set!("min_nodes", with_min_layer_nodes);
    set!("summary_tokens", with_summary_tokens);
    set!("summary_words", with_summary_words);
    set!("rebuild_fraction", with_rebuild_fraction);
    set!("drift_growth", with_drift_growth);
    set!("dedup", with_dedup_similarity);
    set!("fill", with_fill_budget);
    if let Some(v) = spec.get("summarizer") {
        c = c.with_summarizer(match v.to_ascii_lowercase().as_str() {
            "llm" => SummarizerKind::Llm,
            "extractive" | "rule" => SummarizerKind::Extractive,
            _ => {
                return Err(BenchError::BadSetting {
                    substrate: spec.name.clone(),
                    setting: format!("summarizer={v}"),
                    reason: "expected one of llm, extractive".into(),
                })
            }
        });
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

/// Builds `m6` from `spec`.
pub fn build_raptor(spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
    Ok(Arc::new(Raptor::new(services, raptor_config(spec)?)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Registry, SubstrateFactory};

    #[test]
    fn m6_parses_settings_and_builds_without_an_llm() {
        let s = SubstrateSpec::parse("tree:dims=8,threshold=0.2,summarizer=extractive,fill=false")
            .unwrap();
        let c = raptor_config(&s).unwrap();
        assert_eq!(
            (c.reduce_dims, c.summarizer, c.fill_budget),
            (8, SummarizerKind::Extractive, false)
        );
        assert!(Registry
            .check(&SubstrateSpec::parse("raptor:threshold=2").unwrap())
            .is_err());
        assert!(Registry
            .check(&SubstrateSpec::parse("m6:summarizer=poem").unwrap())
            .is_err());
        assert!(Registry
            .check(&SubstrateSpec::parse("m6:colour=red").unwrap())
            .is_err());
        let built = Registry
            .build(
                &SubstrateSpec::parse("m6").unwrap(),
                submem_core::test_utils::test_services(None),
            )
            .unwrap();
        assert!(!built.info().needs_llm);
    }
}
