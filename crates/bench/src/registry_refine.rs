//! Registry entries of the refinement family (`submem-refine`): M7 distilled
//! strategies and M8 skill bundles. Both run without a memory LLM (rule
//! strategies and skills), so neither returns [`BenchError::NeedsLlm`].

use std::sync::Arc;

use submem_core::{Services, Substrate};
use submem_refine::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

fn invalid(spec: &SubstrateSpec, e: impl std::fmt::Display) -> BenchError {
    BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    }
}

/// M7 settings: `top_k`, `max_strategies`, `merge_threshold`, `rule_tokens`,
/// `trajectory_tokens`.
pub(crate) fn strategy_config(spec: &SubstrateSpec) -> Result<StrategyConfig> {
    spec.only(&[
        "top_k",
        "max_strategies",
        "merge_threshold",
        "rule_tokens",
        "trajectory_tokens",
    ])?;
    let mut c = StrategyConfig::default();
    if let Some(v) = spec.parse_setting("top_k")? {
        c = c.with_top_k(v);
    }
    if let Some(v) = spec.parse_setting("max_strategies")? {
        c = c.with_max_strategies(v);
    }
    if let Some(v) = spec.parse_setting("merge_threshold")? {
        c = c.with_merge_threshold(v);
    }
    if let Some(v) = spec.parse_setting("rule_tokens")? {
        c = c.with_rule_content_tokens(v);
    }
    if let Some(v) = spec.parse_setting("trajectory_tokens")? {
        c = c.with_prompt_trajectory_tokens(v);
    }
    c.validate().map_err(|e| invalid(spec, e))?;
    Ok(c)
}

/// M8 settings: `bundle_size`, `join_threshold`, `max_bundles`,
/// `merge_threshold`, `rule_tokens`.
pub(crate) fn skill_config(spec: &SubstrateSpec) -> Result<SkillConfig> {
    spec.only(&[
        "bundle_size",
        "join_threshold",
        "max_bundles",
        "merge_threshold",
        "rule_tokens",
    ])?;
    let mut c = SkillConfig::default();
    if let Some(v) = spec.parse_setting("bundle_size")? {
        c = c.with_bundle_size(v);
    }
    if let Some(v) = spec.parse_setting("join_threshold")? {
        c = c.with_join_threshold(v);
    }
    if let Some(v) = spec.parse_setting("max_bundles")? {
        c = c.with_max_bundles(v);
    }
    if let Some(v) = spec.parse_setting("merge_threshold")? {
        c = c.with_merge_threshold(v);
    }
    if let Some(v) = spec.parse_setting("rule_tokens")? {
        c = c.with_rule_skill_tokens(v);
    }
    c.validate().map_err(|e| invalid(spec, e))?;
    Ok(c)
}

/// Builds M7 (`m7`) or M8 (`m8`).
pub(crate) fn build_refine(
    canonical: &str,
    spec: &SubstrateSpec,
    services: Services,
) -> Result<Arc<dyn Substrate>> {
    Ok(match canonical {
        "m7" => Arc::new(StrategyBank::new(services, strategy_config(spec)?)?),
        _ => Arc::new(SkillBundles::new(services, skill_config(spec)?)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_bad_ones_are_refused() {
        let s = SubstrateSpec::parse("m7:top_k=2,merge_threshold=0.8").unwrap();
        let c = strategy_config(&s).unwrap();
        assert_eq!(c.top_k, 2);
        assert!(strategy_config(&SubstrateSpec::parse("m7:top_k=0").unwrap()).is_err());
        assert!(strategy_config(&SubstrateSpec::parse("m7:bundle_size=3").unwrap()).is_err());
        let s = SubstrateSpec::parse("m8:bundle_size=4,max_bundles=6").unwrap();
        let c = skill_config(&s).unwrap();
        assert_eq!((c.bundle_size, c.max_bundles), (4, 6));
        assert!(skill_config(&SubstrateSpec::parse("m8:join_threshold=3").unwrap()).is_err());
    }
}
