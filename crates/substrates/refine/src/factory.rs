//! The refinement family's plugins: `m7` (alias
//! `reasoningbank`) and `m8` (alias `memskill`) as
//! [`SubstrateFactory`] values a registry lists and builds by name. Both run
//! without a memory LLM (rule strategies and skills).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

const PAPER: &str = "Harness the Memory";

/// Settings of `m7` (see [`StrategyConfig`] for each default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrategySettings {
    /// Strategies shown per read (dense top-k; a query's own top-k can lower it).
    pub top_k: usize,
    /// Most strategies kept from one distillation call.
    pub max_strategies: usize,
    /// Cosine at or above which manage merges two strategies, in (0, 1].
    pub merge_threshold: f32,
    /// Longest rule strategy (the no-LLM fallback), in tokens (at least 8).
    pub rule_tokens: usize,
    /// Most tokens of a trajectory shown to the LLM (at least 32).
    pub trajectory_tokens: usize,
}

impl Default for StrategySettings {
    fn default() -> Self {
        let c = StrategyConfig::default();
        StrategySettings {
            top_k: c.top_k,
            max_strategies: c.max_strategies,
            merge_threshold: c.merge_threshold,
            rule_tokens: c.rule_content_tokens,
            trajectory_tokens: c.episodes.prompt_trajectory_tokens,
        }
    }
}

impl StrategySettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> StrategyConfig {
        StrategyConfig::default()
            .with_top_k(self.top_k)
            .with_max_strategies(self.max_strategies)
            .with_merge_threshold(self.merge_threshold)
            .with_rule_content_tokens(self.rule_tokens)
            .with_prompt_trajectory_tokens(self.trajectory_tokens)
    }
}

impl SubstrateSettings for StrategySettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// Settings of `m8` (see [`SkillConfig`] for each default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillSettings {
    /// Experiences per new bundle (k-means makes ceil(n / bundle_size) bundles).
    pub bundle_size: usize,
    /// Cosine to a bundle's centroid at or above which a new experience joins it, in [-1, 1].
    pub join_threshold: f32,
    /// Most bundles kept; manage merges or prunes above it.
    pub max_bundles: usize,
    /// Over the cap, the closest pair merges when their centroids' cosine reaches this, in [-1, 1].
    pub merge_threshold: f32,
    /// Longest rule skill (the no-LLM fallback), in tokens (at least 8).
    pub rule_tokens: usize,
}

impl Default for SkillSettings {
    fn default() -> Self {
        let c = SkillConfig::default();
        SkillSettings {
            bundle_size: c.bundle_size,
            join_threshold: c.join_threshold,
            max_bundles: c.max_bundles,
            merge_threshold: c.merge_threshold,
            rule_tokens: c.rule_skill_tokens,
        }
    }
}

impl SkillSettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> SkillConfig {
        SkillConfig::default()
            .with_bundle_size(self.bundle_size)
            .with_join_threshold(self.join_threshold)
            .with_max_bundles(self.max_bundles)
            .with_merge_threshold(self.merge_threshold)
            .with_rule_skill_tokens(self.rule_tokens)
    }
}

impl SubstrateSettings for SkillSettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m7`: ReasoningBank's distilled strategies, judged and distilled per
/// episode; rule strategies without a memory LLM.
pub fn strategy_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m7", MethodId::M7, Family::REFINEMENT)
        .aliases(&["reasoningbank"])
        .paper(format!("{PAPER}, M7"))
        .summary("distilled strategies (ReasoningBank): episodes judged and distilled, dense top-k; rule strategies without an LLM")
        .llm(LlmUse::Optional)
        .settings(StrategySettings::default())
        .build(|ctx, s: StrategySettings| {
            Ok(Arc::new(StrategyBank::new(ctx.services.clone(), s.config())?))
        })
}

/// `m8`: MemSkill's skill bundles, experiences clustered into bundles with
/// one skill each; rule skills without a memory LLM.
pub fn skill_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m8", MethodId::M8, Family::REFINEMENT)
        .aliases(&["memskill"])
        .paper(format!("{PAPER}, M8"))
        .summary("skill bundles (MemSkill): clustered experiences, one skill per bundle; rule skills without an LLM")
        .llm(LlmUse::Optional)
        .settings(SkillSettings::default())
        .build(|ctx, s: SkillSettings| {
            Ok(Arc::new(SkillBundles::new(ctx.services.clone(), s.config())?))
        })
}

/// Every factory of the refinement family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![strategy_factory(), skill_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed<S: SubstrateSettings>(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> S {
        f.typed(&f.settings_from_strs(pairs).unwrap()).unwrap()
    }

    #[test]
    fn settings_parse_and_bad_ones_are_refused() {
        let (m7, m8) = (strategy_factory(), skill_factory());
        m7.validate().unwrap();
        m8.validate().unwrap();
        assert_eq!(
            StrategySettings::default().config(),
            StrategyConfig::default()
        );
        assert_eq!(SkillSettings::default().config(), SkillConfig::default());

        let c =
            parsed::<StrategySettings>(&m7, &[("top_k", "2"), ("merge_threshold", "0.8")]).config();
        assert_eq!(c.top_k, 2);
        assert!((c.merge_threshold - 0.8).abs() < 1e-6);
        let c = parsed::<StrategySettings>(
            &m7,
            &[
                ("max_strategies", "2"),
                ("rule_tokens", "64"),
                ("trajectory_tokens", "600"),
            ],
        )
        .config();
        assert_eq!(
            (
                c.max_strategies,
                c.rule_content_tokens,
                c.episodes.prompt_trajectory_tokens
            ),
            (2, 64, 600)
        );
        assert!(m7.settings_from_strs(&[("top_k", "0")]).is_err());
        assert!(m7.settings_from_strs(&[("bundle_size", "3")]).is_err());
        assert!(m7
            .settings_from_strs(&[("trajectory_tokens", "16")])
            .is_err());

        let c =
            parsed::<SkillSettings>(&m8, &[("bundle_size", "4"), ("max_bundles", "6")]).config();
        assert_eq!((c.bundle_size, c.max_bundles), (4, 6));
        let c = parsed::<SkillSettings>(
            &m8,
            &[
                ("join_threshold", "0.5"),
                ("merge_threshold", "0.4"),
                ("rule_tokens", "32"),
            ],
        )
        .config();
        assert!((c.join_threshold - 0.5).abs() < 1e-6 && (c.merge_threshold - 0.4).abs() < 1e-6);
        assert_eq!(c.rule_skill_tokens, 32);
        assert!(m8.settings_from_strs(&[("join_threshold", "3")]).is_err());
        assert!(m8.settings_from_strs(&[("top_k", "1")]).is_err());
    }

    #[test]
    fn both_answer_to_their_names_and_build_without_an_llm() {
        let (m7, m8) = (strategy_factory(), skill_factory());
        assert!(m7.answers_to("reasoningbank") && !m7.answers_to("strategies"));
        assert!(m8.answers_to("memskill") && !m8.answers_to("skills"));
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        for f in factories() {
            let s = f.build(&ctx, &Settings::new()).unwrap();
            assert_eq!(&s.info().method, f.method());
            assert!(!s.info().needs_llm);
        }
    }
}
