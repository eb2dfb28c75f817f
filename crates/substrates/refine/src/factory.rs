//! The refinement family's plugins: `m7` (alias
//! `reasoningbank`) and `m8` (alias `memskill`) as
//! [`SubstrateFactory`] values a registry lists and builds by name. Both run
//! without a memory LLM (rule strategies and skills).

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

const PAPER: &str = "Harness the Memory";

submem_core::settings_checked_by_validate!(StrategyConfig, SkillConfig);

/// `m7`: ReasoningBank's distilled strategies, judged and distilled per
/// episode; rule strategies without a memory LLM.
pub fn strategy_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m7", crate::M7, Family::REFINEMENT)
        .aliases(&["reasoningbank"])
        .paper(format!("{PAPER}, M7"))
        .summary("distilled strategies (ReasoningBank): episodes judged and distilled, dense top-k; rule strategies without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: StrategyConfig| {
            Ok(Arc::new(StrategyBank::new(ctx.services.clone(), config)?))
        })
}

/// `m8`: MemSkill's skill bundles, experiences clustered into bundles with
/// one skill each; rule skills without a memory LLM.
pub fn skill_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m8", crate::M8, Family::REFINEMENT)
        .aliases(&["memskill"])
        .paper(format!("{PAPER}, M8"))
        .summary("skill bundles (MemSkill): clustered experiences, one skill per bundle; rule skills without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: SkillConfig| {
            Ok(Arc::new(SkillBundles::new(ctx.services.clone(), config)?))
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

    fn parsed<S: submem_core::plugin::SubstrateSettings>(
        f: &SubstrateFactory,
        pairs: &[(&str, &str)],
    ) -> S {
        f.typed(&f.settings_from_strs(pairs).unwrap()).unwrap()
    }

    #[test]
    fn settings_parse_and_bad_ones_are_refused() {
        let (m7, m8) = (strategy_factory(), skill_factory());
        m7.validate().unwrap();
        m8.validate().unwrap();
        assert_eq!(
            parsed::<StrategyConfig>(&m7, &[]),
            StrategyConfig::default()
        );
        assert_eq!(parsed::<SkillConfig>(&m8, &[]), SkillConfig::default());
        // A list setting takes its items between `|`.
        let c = parsed::<StrategyConfig>(&m7, &[("success_markers", "You won!|Task done")]);
        assert_eq!(c.episodes().success_markers, ["You won!", "Task done"]);

        let c = parsed::<StrategyConfig>(&m7, &[("top_k", "2"), ("merge_threshold", "0.8")]);
        assert_eq!(c.top_k, 2);
        assert!((c.merge_threshold - 0.8).abs() < 1e-6);
        let c = parsed::<StrategyConfig>(
            &m7,
            &[
                ("max_strategies", "2"),
                ("rule_tokens", "64"),
                ("trajectory_tokens", "600"),
            ],
        );
        assert_eq!(
            (
                c.max_strategies,
                c.rule_content_tokens,
                c.episodes().prompt_trajectory_tokens
            ),
            (2, 64, 600)
        );
        assert!(m7.settings_from_strs(&[("top_k", "0")]).is_err());
        assert!(m7.settings_from_strs(&[("bundle_size", "3")]).is_err());
        assert!(m7
            .settings_from_strs(&[("trajectory_tokens", "16")])
            .is_err());

        let c = parsed::<SkillConfig>(&m8, &[("bundle_size", "4"), ("max_bundles", "6")]);
        assert_eq!((c.bundle_size, c.max_bundles), (4, 6));
        let c = parsed::<SkillConfig>(
            &m8,
            &[
                ("join_threshold", "0.5"),
                ("merge_threshold", "0.4"),
                ("rule_tokens", "32"),
            ],
        );
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
